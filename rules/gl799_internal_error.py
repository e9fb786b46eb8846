"""gpulint failed on one object: a rule raised an error instead of judging it.

## What it checks
Nothing of the input: it reports that one rule could not finish on one object (the message
names the rule and the error). Every other rule still ran on that object, and the rule still
ran on every other object, so the rest of the report is complete; in the admission webhook,
the denials the other rules found still deny.

## Why is this bad?
That object was not judged by that rule. The input is usually unusual in a way gpulint did not
expect (a value of an odd type or size), and gpulint should have said so in a finding of its
own.

## Example
```text
deploy.yaml:1:1: GL799 [error] gpulint could not finish rule GL501 (gpu-resource-requests) on
this object: ValueError: ...
```

## Use instead
Report it with the input that causes it. Meanwhile the rule can be suppressed on that object
(``gpulint.dev/ignore: GL501``) or the input changed.

## References
- gpulint's promise: bad input gets a clear finding with a location, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Severity

ID = "GL799"
NAME = "internal-error"
SEVERITY = Severity.ERROR
SCOPE = "inventory"


def check(inventory: Inventory, _: Inventory, ctx: Context) -> Iterator[Finding]:
    # The engine reports GL799 for the object a rule failed on, as it happens.
    return iter(())
