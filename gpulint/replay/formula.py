"""KEDA's ``advanced.scalingModifiers.formula``, read and evaluated over the triggers' values.

KEDA compiles the formula with expr-lang/expr and runs it over a map of each named trigger's
metric value; the number it returns is the one ``composite-metric`` the HPA it makes reads
against ``scalingModifiers.target`` (keda-docs, concepts/scaling-deployments, "scalingModifiers";
kedacore/keda pkg/scaling/modifiers). This module reads the part of expr's language a formula
over numbers uses, and nothing else (no member access, strings, arrays, closures or other
builtins):

* numbers, the trigger names, ``true`` and ``false``;
* ``+ - * / %``, ``**`` and ``^`` (power), unary ``-``, ``+``, ``!``/``not``;
* ``== != < <= > >=``, ``&&``/``and``, ``||``/``or``, ``cond ? a : b``;
* parentheses and the numeric builtins ``min``, ``max``, ``abs``, ``ceil``, ``floor``,
  ``round``, ``float`` and ``int``.

Precedence and associativity are expr's (expr/parser/operator: ``or`` < ``and`` < comparisons
< ``+ -`` < ``* / %`` < ``** ^``, power right-associative, ``?:`` lowest). A formula outside
this is refused with the reason (``FormulaError``), and the ScaledObject is not replayed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Value = float | bool

_TOKEN = re.compile(
    r"\s*(?:(?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>\*\*|==|!=|<=|>=|&&|\|\||[-+*/%^<>!?:(),]))"
)

# Binary operators by precedence (expr: or 10, and 15, comparisons 20, + - 30, * / % 60,
# ** ^ 100); the power operators are right-associative.
_BINARY = {
    "||": 10,
    "or": 10,
    "&&": 15,
    "and": 15,
    "==": 20,
    "!=": 20,
    "<": 20,
    "<=": 20,
    ">": 20,
    ">=": 20,
    "+": 30,
    "-": 30,
    "*": 60,
    "/": 60,
    "%": 60,
    "**": 100,
    "^": 100,
}
_UNARY_PRECEDENCE = 90  # expr: not/!, unary - and + bind tighter than * but not than **

_FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "ceil": math.ceil,
    "floor": math.floor,
    "round": round,
    "float": float,
    "int": int,
}


class FormulaError(Exception):
    """A formula gpulint does not read (or that fails on the values it is given)."""


@dataclass(frozen=True)
class Node:
    op: str  # "num", "name", "call", "?:", a unary ("neg", "pos", "not") or a binary operator
    args: tuple[Node, ...] = ()
    value: float = 0.0
    name: str = ""


@dataclass(frozen=True)
class Formula:
    text: str
    tree: Node
    names: frozenset[str]

    def evaluate(self, values: Mapping[str, float]) -> float:
        """The formula's number over the triggers' ``values``; FormulaError when it is not a
        finite number (a division by zero, a comparison as the result)."""
        result = _evaluate(self.tree, values)
        if isinstance(result, bool):
            raise FormulaError("the formula gives true or false, not a number")
        number = float(result)
        if not math.isfinite(number):
            raise FormulaError("the formula gives no finite number")
        return number


def parse(text: str) -> Formula:
    """The formula ``text``, read; FormulaError with the reason when it cannot be."""
    tokens = _tokens(text)
    parser = _Parser(tokens)
    tree = parser.expression(0)
    if parser.position != len(tokens):
        raise FormulaError(f"unexpected {tokens[parser.position]!r} in the formula")
    names: set[str] = set()
    _collect(tree, names)
    return Formula(text, tree, frozenset(names))


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            where = text[position:].strip()[:20]
            raise FormulaError(f"gpulint does not read {where!r} in the formula")
        tokens.append(match.group(match.lastgroup or "op"))
        position = match.end()
    if not tokens:
        raise FormulaError("the formula is empty")
    return tokens


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise FormulaError(f"expected {expected or 'more'} in the formula")
        self.position += 1
        return token

    def expression(self, floor: int) -> Node:
        left = self.unary()
        while True:
            token = self.peek()
            if token == "?" and floor == 0:
                self.take("?")
                then = self.expression(0)
                self.take(":")
                otherwise = self.expression(0)
                left = Node("?:", (left, then, otherwise))
                continue
            precedence = _BINARY.get(token or "")
            if token is None or precedence is None or precedence < floor or precedence == 0:
                return left
            self.take()
            right_floor = precedence if token in ("**", "^") else precedence + 1
            left = Node(token, (left, self.expression(right_floor)))

    def unary(self) -> Node:
        token = self.take()
        if token in ("-", "+", "!", "not"):
            operand = self.expression(_UNARY_PRECEDENCE)
            return Node({"-": "neg", "+": "pos"}.get(token, "not"), (operand,))
        if token == "(":
            inner = self.expression(0)
            self.take(")")
            return inner
        if token[0].isdigit() or token[0] == ".":
            return Node("num", value=float(token))
        if token in ("true", "false"):
            return Node("num", value=1.0 if token == "true" else 0.0, name=token)
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token) and token not in _BINARY:
            if self.peek() == "(":
                if token not in _FUNCTIONS:
                    raise FormulaError(f"gpulint does not evaluate the function {token}()")
                self.take("(")
                args: list[Node] = []
                while self.peek() != ")":
                    args.append(self.expression(0))
                    if self.peek() == ",":
                        self.take(",")
                self.take(")")
                return Node("call", tuple(args), name=token)
            return Node("name", name=token)
        raise FormulaError(f"unexpected {token!r} in the formula")


def _collect(node: Node, names: set[str]) -> None:
    if node.op == "name":
        names.add(node.name)
    for arg in node.args:
        _collect(arg, names)


def _number(value: Value) -> float:
    if isinstance(value, bool):
        raise FormulaError("the formula does arithmetic on true or false")
    return value


def _evaluate(node: Node, values: Mapping[str, float]) -> Value:
    op, args = node.op, node.args
    if op == "num":
        return node.value if node.name not in ("true", "false") else node.name == "true"
    if op == "name":
        if node.name not in values:
            raise FormulaError(f"no trigger is named {node.name}")
        return values[node.name]
    if op == "?:":
        return _evaluate(args[1] if _truth(_evaluate(args[0], values)) else args[2], values)
    if op == "not":
        return not _truth(_evaluate(args[0], values))
    if op in ("neg", "pos"):
        number = _number(_evaluate(args[0], values))
        return -number if op == "neg" else number
    if op == "call":
        numbers = [_number(_evaluate(arg, values)) for arg in args]
        try:
            return float(_FUNCTIONS[node.name](*numbers))
        except (TypeError, ValueError, OverflowError) as error:
            raise FormulaError(f"{node.name}() fails: {error}") from None
    if op in ("&&", "and"):
        return _truth(_evaluate(args[0], values)) and _truth(_evaluate(args[1], values))
    if op in ("||", "or"):
        return _truth(_evaluate(args[0], values)) or _truth(_evaluate(args[1], values))
    left, right = (_number(_evaluate(arg, values)) for arg in args)
    return _binary(op, left, right)


def _binary(op: str, left: float, right: float) -> Value:
    comparisons: dict[str, Callable[[float, float], bool]] = {
        "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }
    if op in comparisons:
        return comparisons[op](left, right)
    try:
        if op == "+":
            return left + right
        if op == "-":
            return left - right
        if op == "*":
            return left * right
        if op == "/":
            return left / right
        if op == "%":
            return math.fmod(left, right)
        return float(left**right)
    except (ZeroDivisionError, OverflowError, ValueError) as error:
        raise FormulaError(f"{left:g} {op} {right:g} fails: {error}") from None


def _truth(value: Value) -> bool:
    if not isinstance(value, bool):
        raise FormulaError("a condition of the formula is a number, not true or false")
    return value
