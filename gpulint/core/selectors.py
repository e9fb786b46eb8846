"""Label selectors as the API server and Prometheus Operator apply them.

A ``metav1.LabelSelector`` is ``matchLabels`` (every pair must be on the object) and
``matchExpressions`` (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``), all of them ANDed; an
empty selector matches everything (apimachinery pkg/apis/meta/v1/helpers.go
``LabelSelectorAsSelector``). A Service's ``spec.selector`` is a plain map of labels, matched
the same way as ``matchLabels``.

gpulint sometimes knows a label but not its value (a chart writes ``{{ .Release.Name }}``
and no wrapper says the release): such a value is ``None``, and a match that depends on it
is ``None`` too, so that rules report only what is certain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

# A label value as gpulint knows it: the text, or None when only the label's presence is known.
Labels = Mapping[str, str | None]


def label_value(value: Any) -> str | None:
    """A YAML scalar as the label value the API server stores; None for what is not one (a
    template, a mapping)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return None if "{{" in value else value
    return None


def labels_of(data: Any) -> dict[str, str | None]:
    """A ``labels:`` mapping with its values read as ``label_value``."""
    if not isinstance(data, dict):
        return {}
    return {str(k): label_value(v) for k, v in data.items() if isinstance(k, str)}


class Expression(NamedTuple):
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...]

    def matches(self, labels: Labels) -> bool | None:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        value = labels.get(self.key)
        if present and value is None:
            return None
        if self.operator == "In":
            return present and value in self.values
        return not present or value not in self.values  # NotIn

    def __str__(self) -> str:
        if self.operator == "Exists":
            return self.key
        if self.operator == "DoesNotExist":
            return f"!{self.key}"
        word = "in" if self.operator == "In" else "notin"
        return f"{self.key} {word} ({','.join(self.values)})"


class LabelSelector(NamedTuple):
    """``matchLabels`` and ``matchExpressions``; ``valid`` is False for a selector the API
    server would refuse (an unknown operator, values where none belong)."""

    match_labels: dict[str, str | None]
    expressions: tuple[Expression, ...] = ()
    valid: bool = True

    @classmethod
    def of(cls, data: Any) -> LabelSelector | None:
        """The selector written at a ``selector:`` key; None when it is not a mapping (absent
        or null)."""
        if not isinstance(data, dict):
            return None
        match_labels = labels_of(data.get("matchLabels"))
        valid = data.get("matchLabels") is None or isinstance(data.get("matchLabels"), dict)
        expressions = []
        raw = data.get("matchExpressions")
        if raw is not None and not isinstance(raw, list):
            valid = False
        for item in raw if isinstance(raw, list) else []:
            if not isinstance(item, dict) or not isinstance(item.get("key"), str):
                valid = False
                continue
            operator = item.get("operator")
            values = item.get("values") or []
            if not isinstance(values, list):
                valid = False
                continue
            texts = tuple(v for v in (label_value(x) for x in values) if v is not None)
            if operator in ("In", "NotIn") and texts:
                expressions.append(Expression(item["key"], str(operator), texts))
            elif operator in ("Exists", "DoesNotExist") and not values:
                expressions.append(Expression(item["key"], str(operator), ()))
            else:
                valid = False
        return cls(match_labels, tuple(expressions), valid)

    @classmethod
    def of_map(cls, data: Any) -> LabelSelector | None:
        """A Service's ``spec.selector`` (a plain map); None when absent."""
        if not isinstance(data, dict):
            return None
        return cls(labels_of(data))

    @property
    def is_empty(self) -> bool:
        return not self.match_labels and not self.expressions

    def matches(self, labels: Labels) -> bool | None:
        """Does an object with ``labels`` match? None when it depends on an unknown value
        (on either side)."""
        unknown = False
        for key, wanted in self.match_labels.items():
            if key not in labels:
                return False
            value = labels[key]
            if wanted is None or value is None:
                unknown = True
            elif value != wanted:
                return False
        for expression in self.expressions:
            answer = expression.matches(labels)
            if answer is False:
                return False
            if answer is None:
                unknown = True
        return None if unknown else True

    def missing(self, labels: Labels) -> dict[str, str | None]:
        """The ``matchLabels`` pairs ``labels`` lacks or holds with another value."""
        return {
            key: wanted
            for key, wanted in self.match_labels.items()
            if key not in labels
            or (wanted is not None and labels[key] is not None and labels[key] != wanted)
        }

    def __str__(self) -> str:
        parts = [f"{k}={'<?>' if v is None else v}" for k, v in sorted(self.match_labels.items())]
        parts.extend(str(e) for e in self.expressions)
        return ",".join(parts) if parts else "(everything)"


# --- the string form (``app=x,tier in (a,b),!canary``): kubectl, the HPA controller ---

_REQUIREMENT = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<absent>[\w./-]+)"
    r"|(?P<key>[\w./-]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[\w.-]*)"
    r"|\s+(?P<set>in|notin)\s*\((?P<values>[^)]*)\))?)\s*$"
)


class Requirement(NamedTuple):
    key: str
    op: str  # = != in notin exists !exists
    values: tuple[str, ...]

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # != and notin


def parse_label_selector(text: str) -> list[Requirement] | None:
    """The requirements of a label selector string, or None when it does not parse."""
    requirements: list[Requirement] = []
    for part in _split_requirements(text):
        if not part.strip():
            if text.strip():
                return None
            continue
        match = _REQUIREMENT.match(part)
        if match is None:
            return None
        if match.group("absent"):
            requirements.append(Requirement(match.group("absent"), "!exists", ()))
        elif match.group("op"):
            op = "=" if match.group("op") in ("=", "==") else "!="
            requirements.append(Requirement(match.group("key"), op, (match.group("value"),)))
        elif match.group("set"):
            values = tuple(v.strip() for v in match.group("values").split(",") if v.strip())
            requirements.append(Requirement(match.group("key"), match.group("set"), values))
        else:
            requirements.append(Requirement(match.group("key"), "exists", ()))
    return requirements


def _split_requirements(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def selector_matches(text: str, labels: dict[str, str]) -> bool:
    requirements = parse_label_selector(text)
    return requirements is not None and all(r.matches(labels) for r in requirements)


def selector_text(selector: Any) -> str | None:
    """A ``metav1.LabelSelector`` (matchLabels, matchExpressions) in its string form, as
    ``kubectl`` and the HPA controller send it; None when it is not a valid selector. An empty
    selector is ``""`` (everything)."""
    if selector is None:
        return ""
    if not isinstance(selector, dict):
        return None
    parts: list[str] = []
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, dict):
        return None
    for key, value in sorted(labels.items()):
        if not isinstance(key, str) or not isinstance(value, str | int | float | bool):
            return None
        parts.append(f"{key}={_label_value(value)}")
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        return None
    for expression in expressions:
        text = _expression_text(expression)
        if text is None:
            return None
        parts.append(text)
    return ",".join(parts)


def _expression_text(expression: Any) -> str | None:
    """One ``matchExpressions`` entry in the selector's string form; None when invalid."""
    if not isinstance(expression, dict) or not isinstance(expression.get("key"), str):
        return None
    key, op = expression["key"], expression.get("operator")
    values = expression.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    if op == "In" and values:
        return f"{key} in ({','.join(sorted(values))})"
    if op == "NotIn" and values:
        return f"{key} notin ({','.join(sorted(values))})"
    if op == "Exists" and not values:
        return str(key)
    if op == "DoesNotExist" and not values:
        return f"!{key}"
    return None


def _label_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
