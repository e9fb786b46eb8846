"""gpulint's rule pack: one module per rule, its documentation in its docstring.

Modules are discovered by name (``glNNN_<rule-name>.py``); see gpulint.engine.rule for the contract.
"""
