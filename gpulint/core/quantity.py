"""Kubernetes resource quantities (``"60"``, ``600m``, ``16Gi``, ``1e3``).

Grammar and limits follow k8s.io/apimachinery pkg/api/resource/quantity.go: a signed decimal
number, then a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal suffix (n u m "" k M G T P E) or an
exponent (e3, E-2). ``K`` is not a suffix; ``m`` is milli and ``M`` is mega.

Values are what Kubernetes makes of the text: ``ParseQuantity`` rounds every value up, away
from zero, to a whole number of nano units (``0.1n`` is ``1n``), and no quantity may exceed
2^63-1 in magnitude (the Quantity reference). A value beyond that is ``QuantityOutOfRange``,
worked out from the digits and the exponent without ever building the number, so
``1e3000000`` or a 4,301-digit count costs no more than ``1``.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_UP, Context, Decimal
from typing import Any, NamedTuple

from gpulint.input.yamlparse import OversizedNumber, looks_templated

_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>\d+(?:\.\d*)?|\.\d+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}  # powers of 2
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
MAX_QUANTITY = Decimal(2**63 - 1)
NANO = Decimal("1e-9")
# Digits kept below the nano place: 2**60 (Ei) moves at most 19 of them above it.
_GUARD_DIGITS = 19
# Exact for every value kept: at most 20 + 9 + 19 digits before the binary factor.
_EXACT = Context(prec=100)
# Characters of a written value a message shows (a hostile value can be megabytes).
SHOWN_CHARS = 40
# Kubernetes' integer fields of autoscalers (replicas, utilization, seconds) are int32.
INT32_MAX = 2**31 - 1


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


class QuantityOutOfRange(QuantityError):
    """A quantity that is well formed but larger than any Kubernetes quantity (2^63-1)."""


def abbreviated(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` cut to about ``limit`` characters for a message, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 8]}… ({len(text):,} characters)"


def shown_value(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr`` of a written value for a message, abbreviated; never fails on a huge int."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 300:
        return f"an integer of {value.bit_length():,} bits"
    if isinstance(value, str):
        return repr(abbreviated(str(value), limit))
    return abbreviated(repr(value), limit)


def int32_out_of_range(value: Any) -> bool:
    """A number where Kubernetes wants an int32 that no int32 holds: an integer beyond
    +-(2^31-1), or a number too long for gpulint to read (``OversizedNumber``)."""
    if isinstance(value, OversizedNumber):
        return True
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT32_MAX


_OUT_OF_RANGE = "is out of range: a Kubernetes quantity holds at most 2^63-1 (9223372036854775807)"


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
    """Parse a YAML value as a Quantity; raise QuantityError with a user-facing reason
    (QuantityOutOfRange for a value beyond 2^63-1)."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        if value.bit_length() > 63:
            raise QuantityOutOfRange(f"{shown_value(value)} {_OUT_OF_RANGE}")
        return Quantity(str(value), Decimal(value), "")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a finite number")
        if abs(value) > MAX_QUANTITY:
            raise QuantityOutOfRange(f"{value!r} {_OUT_OF_RANGE}")
        exact = Decimal(repr(value)).quantize(NANO, rounding=ROUND_UP, context=_EXACT)
        return Quantity(repr(value), exact.normalize(_EXACT), "")
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
        raise QuantityError(f"{shown_value(value)} is not a valid Kubernetes quantity{hint}")
    suffix = match.group("suffix") or ""
    scaled = _value(match.group("sign"), match.group("number"), suffix)
    if scaled is None:
        raise QuantityOutOfRange(f"{shown_value(value)} {_OUT_OF_RANGE}")
    return Quantity(str(text), scaled, suffix)


def _value(sign: str, number: str, suffix: str) -> Decimal | None:
    """The value Kubernetes reads from the parts of a quantity, None beyond 2^63-1.

    The position of the leading digit decides the magnitude before any arithmetic, and only
    the digits that can reach the nano place are converted (the rest only round up)."""
    whole, _, fraction = number.partition(".")
    binary = _BINARY.get(suffix, 0)
    exponent: int | None = 0
    if suffix in _DECIMAL:
        exponent = _DECIMAL[suffix]
    elif not binary:
        exponent = _exponent(suffix[1:])
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return Decimal(0)
    if exponent is None:  # an exponent of over seven digits
        if not suffix[1:].startswith("-"):
            return None
        return -NANO if sign == "-" else NANO
    # The value is 0.<digits> x 10^top: from 10^(top-1) up to 10^top (times 2^binary).
    top = len(digits) - len(fraction) + exponent
    if top > 19:  # at least 10^19 > 2^63-1
        return None
    guard = _GUARD_DIGITS if binary else 0
    if top + guard <= -9:  # below one nano unit: rounded up to it
        return -NANO if sign == "-" else NANO
    keep = top + 9 + guard
    kept, rest = digits[:keep], digits[keep:]
    if rest.strip("0"):
        kept += "1"  # stands for the dropped digits, so that rounding up still happens
    exact = Decimal(f"{sign}{kept}E{top - len(kept)}")
    if binary:
        exact = _EXACT.multiply(exact, Decimal(2**binary))
    rounded = exact.quantize(NANO, rounding=ROUND_UP, context=_EXACT)
    return None if abs(rounded) > MAX_QUANTITY else rounded.normalize(_EXACT)


def _exponent(text: str) -> int | None:
    """The exponent of ``e<text>``, None when it has more than seven digits."""
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) > 7:
        return None
    magnitude = int(digits or "0")
    return -magnitude if text.startswith("-") else magnitude


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


def paste_quantity(value: float) -> str:
    """A quantity a user can paste, the way the API server writes it back: ``0.6`` ->
    ``600m``, ``72.5`` -> ``72500m``, ``70``."""
    if value >= 10:
        return str(round(value))
    milli = round(value * 1000)
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m" if milli > 0 else format_number(value)


def ratio_target_fix(field: str, percent: float) -> str:
    """The target a percentage was meant as, on a 0-1 metric (GL107 and GL805 agree)."""
    return (
        f'{field}: "{paste_quantity(percent / 100)}"   # {format_number(percent)}% on the 0-1 scale'
    )
