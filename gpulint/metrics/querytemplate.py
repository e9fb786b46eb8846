"""prometheus-adapter's ``metricsQuery`` templates: Go text/template with ``<<`` ``>>`` delimiters.

The adapter fills these fields (pkg/naming/metrics_query.go, ``queryTemplateArgs``):

* ``.Series``: the series name;
* ``.LabelMatchers``: comma-joined matchers (the HPA selector, ``namespace="ns"``, and for
  custom rules ``<pod label>=~"pod-a|pod-b"``);
* ``.LabelValuesByName``: label -> ``|``-joined values;
* ``.GroupBy``: comma-joined resource labels (empty for external rules);
* ``.GroupBySlice``: the same as a list.

gpulint checks the syntax the way Go's parser would reject it, and renders the templates the
adapter's users actually write (field references, ``index .LabelValuesByName "pod"``). Control
structures (if/range/with) are accepted by the syntax check but not rendered.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

FIELDS = ("Series", "LabelMatchers", "GroupBy", "GroupBySlice", "LabelValuesByName")
_BLOCK_OPENERS = ("if", "range", "with", "block", "define")
_ACTION = re.compile(r"<<(-\s)?(.*?)(\s-)?>>", re.DOTALL)
_FIELD_REF = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)")
_INDEX = re.compile(r'^index\s+\.LabelValuesByName\s+"([^"]*)"$')


class TemplateError(ValueError):
    """A template the adapter would refuse ("unable to parse metrics query template").

    ``at_execution`` marks the mistakes Go's parser lets through and template execution
    refuses on every request (a field the arguments do not have: "can't evaluate field").
    """

    def __init__(self, message: str, offset: int = 0, *, at_execution: bool = False) -> None:
        super().__init__(message)
        self.offset = offset
        self.at_execution = at_execution


class RenderUnsupported(ValueError):
    """A valid template that uses constructs gpulint does not evaluate."""


class Action(NamedTuple):
    text: str
    start: int
    end: int


class ParsedTemplate(NamedTuple):
    source: str
    actions: tuple[Action, ...]

    @property
    def fields(self) -> set[str]:
        found: set[str] = set()
        for action in self.actions:
            found.update(_FIELD_REF.findall(action.text))
        return found

    def uses(self, field: str) -> bool:
        return field in self.fields


def parse(template: str) -> ParsedTemplate:
    """Parse and validate; raise TemplateError with the offset of the problem."""
    actions: list[Action] = []
    position = 0
    depth: list[tuple[str, int]] = []
    while True:
        opening = template.find("<<", position)
        if opening < 0:
            break
        end = template.find(">>", opening + 2)
        if end < 0:
            raise TemplateError("unclosed action: '<<' without a matching '>>'", opening)
        nested = template.find("<<", opening + 2)
        if 0 <= nested < end:
            raise TemplateError("'<<' inside another action (missing '>>'?)", nested)
        match = _ACTION.match(template, opening)
        inner = (match.group(2) if match else template[opening + 2 : end]).strip()
        if not inner:
            raise TemplateError("empty action '<<>>'", opening)
        if inner.startswith("/*"):
            position = end + 2
            continue
        word = inner.split()[0]
        if word in _BLOCK_OPENERS:
            depth.append((word, opening))
        elif word == "end":
            if not depth:
                raise TemplateError("'<<end>>' without an opening if/range/with", opening)
            depth.pop()
        elif word == "else":
            if not depth:
                raise TemplateError("'<<else>>' outside if/range/with", opening)
        else:
            for field in _FIELD_REF.findall(inner):
                if field not in FIELDS:
                    raise TemplateError(
                        f"unknown field .{field} (the adapter provides "
                        + ", ".join("." + f for f in FIELDS)
                        + ")",
                        opening,
                        at_execution=True,
                    )
        if inner.count('"') % 2:
            raise TemplateError("unterminated string in action", opening)
        actions.append(Action(inner, opening, end + 2))
        position = end + 2
    if depth:
        word, offset = depth[-1]
        raise TemplateError(f"'<<{word} ...>>' is never closed with '<<end>>'", offset)
    return ParsedTemplate(template, tuple(actions))


def render(
    template: str,
    series: str,
    label_matchers: Sequence[str],
    group_by: Sequence[str],
    label_values: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """Render a metricsQuery exactly as the adapter would for these arguments."""
    parsed = parse(template)
    values = {
        "Series": series,
        "LabelMatchers": ",".join(label_matchers),
        "GroupBy": ",".join(group_by),
        "GroupBySlice": "[" + " ".join(group_by) + "]",
    }
    by_name = {k: "|".join(v) for k, v in (label_values or {}).items()}
    out: list[str] = []
    position = 0
    for action in parsed.actions:
        text = template[position : action.start]
        raw = template[action.start : action.end]
        if raw.startswith("<<- "):
            text = text.rstrip()
        out.append(text)
        out.append(_evaluate(action.text, values, by_name))
        position = action.end
        if raw.endswith(" ->>"):
            rest = template[position:]
            position += len(rest) - len(rest.lstrip())
    out.append(template[position:])
    return "".join(out)


def _evaluate(action: str, values: Mapping[str, str], by_name: Mapping[str, str]) -> str:
    if action.startswith(".") and action[1:] in values:
        return values[action[1:]]
    if action == ".LabelValuesByName":
        return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(by_name.items())) + "]"
    index = _INDEX.match(action)
    if index:
        return by_name.get(index.group(1), "")
    raise RenderUnsupported(f"gpulint does not evaluate '<<{action}>>'")
