"""Kubernetes resource quantities (``"60"``, ``600m``, ``16Gi``, ``1e3``).

Grammar and limits follow k8s.io/apimachinery pkg/api/resource/quantity.go: a signed decimal
number, then a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal suffix (n u m "" k M G T P E) or an
exponent (e3, E-2). ``K`` is not a suffix; ``m`` is milli and ``M`` is mega.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from gpulint.yamlparse import looks_templated

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


class Quantity(NamedTuple):
    text: str
    value: Decimal
    suffix: str

    def __float__(self) -> float:
        return float(self.value)

    @property
    def is_integer(self) -> bool:
        return self.value == self.value.to_integral_value()


class QuantityError(ValueError):
    pass


def is_unknown(value: Any) -> bool:
    """A value gpulint cannot judge: a template placeholder (``{{ .Values.x }}``, ``${n}``)."""
    return (isinstance(value, str) and looks_templated(value)) or is_unquoted_action(value)


def is_unquoted_action(value: Any) -> bool:
    """An unquoted Helm action (``maxReplicas: {{ .Values.max }}``), which YAML reads as a
    mapping whose only key is itself a mapping (kept as its text) with no value."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    key, item = next(iter(value.items()))
    return item is None and isinstance(key, str) and key.startswith("{")


def parse_quantity(value: Any) -> Quantity:
    """Parse a YAML value as a Quantity; raise QuantityError with a user-facing reason."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Quantity(str(value), Decimal(value), "")
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{value!r} is not a finite number")
        return Quantity(repr(value), Decimal(repr(value)), "")
    if not isinstance(value, str):
        raise QuantityError(f"{type(value).__name__} is not a quantity")
    text = value.strip()
    match = _QUANTITY.match(text)
    if not match:
        hint = ""
        if text.endswith("%"):
            hint = ' (a quantity has no "%": write the number, for example "70")'
        elif text.endswith("K"):
            hint = ' (kilo is a lower-case "k")'
        raise QuantityError(f"{value!r} is not a valid Kubernetes quantity{hint}")
    try:
        number = Decimal(match.group("number"))
    except InvalidOperation:  # pragma: no cover - the regex only admits decimals
        raise QuantityError(f"{value!r} is not a valid Kubernetes quantity") from None
    suffix = match.group("suffix") or ""
    if suffix in _BINARY:
        scaled = number * _BINARY[suffix]
    elif suffix[:1] in ("e", "E"):
        scaled = number.scaleb(int(suffix[1:]))
    else:
        scaled = number * _DECIMAL[suffix]
    return Quantity(text, scaled, suffix)


def try_quantity(value: Any) -> Quantity | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def format_number(value: Decimal | float) -> str:
    """A number the way a user would write it in YAML (no exponent, no trailing zeros)."""
    number = Decimal(str(value)) if isinstance(value, float) else value
    text = format(number.normalize(), "f")
    return text
