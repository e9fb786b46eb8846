"""Fixes as text edits against the file a user edits.

A rule describes its fix as operations on the nodes of a document (``Replace`` a value,
``Rename`` a key, ``Delete`` an entry, ``Insert`` entries into a mapping, ``DeleteDocument``),
grouped in a ``FixPlan`` that is ``safe`` (applying it removes the problem and changes
nothing else the cluster does) or ``unsafe`` (it needs a human's judgment). Operations name
nodes by path, so they cost nothing until someone asks for the edits (``--fix``, ``--diff``,
JSON, SARIF); then ``resolve`` turns them into ``Edit`` spans of the source text, using the
positions the loader recorded and the file's own text, so that comments, key order,
quoting and indentation outside the edited span stay byte for byte as they were.

Every edit is checked against the text it replaces (the old value must read back as the
document's value, a deleted entry must start with its key): a file that changed since it
was read, a position that belongs to a template, or a node gpulint cannot delimit gives no
edit, and the fix stays prose. Documents rendered by kustomize or Helm get edits only where
their source map places the node in a file of the repository and the text there agrees.

The parts: ``operations`` (what a rule says), ``placing`` (an operation placed in the text),
``yamlspans`` (where a node's text ends, how a new entry is written), ``textedits`` (spans,
overlaps, applying, diffs). Rules and reports use them through this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import yaml

from gpulint.adoption.operations import (
    SAFE,
    UNSAFE,
    Delete,
    DeleteDocument,
    Extend,
    FixPlan,
    Insert,
    Op,
    Rename,
    Replace,
    Set,
    entries,
    safe,
    unsafe,
)
from gpulint.adoption.placing import resolve_op
from gpulint.adoption.textedits import (
    Edit,
    Sources,
    Unresolvable,
    apply,
    choose,
    diff_name,
    diff_names,
    line_ending,
    overlapping,
    unified_diff,
)
from gpulint.input.document import Path, dig
from gpulint.input.yamlparse import YMap


def resolve(plan: FixPlan, sources: Sources) -> list[Edit] | None:
    """The plan's edits, or None when any of its operations cannot be placed exactly."""
    edits: list[Edit] = []
    try:
        for op in _emptied_parents(plan.ops):
            edits.extend(resolve_op(op, sources))
    except (Unresolvable, yaml.YAMLError, IndexError, ValueError, RecursionError):
        return None
    edits = _joined_insertions(edits)
    if not edits or overlapping(edits):
        return None
    return [_line_endings(edit, sources) for edit in edits]


def _joined_insertions(edits: list[Edit]) -> list[Edit]:
    """Insertions of one plan at one point (items appended to a list that ends the file, then
    a new entry after it) as one insertion, in the order the plan gives them."""
    joined: list[Edit] = []
    at: dict[tuple[str, tuple[int, int]], int] = {}
    for edit in edits:
        key = (edit.file, edit.start)
        if edit.start == edit.end and key in at:
            first = joined[at[key]]
            joined[at[key]] = first._replace(text=first.text + edit.text)
            continue
        if edit.start == edit.end:
            at[key] = len(joined)
        joined.append(edit)
    return joined


def _line_endings(edit: Edit, sources: Sources) -> Edit:
    """New text in the line endings of its file (``line_ending``): a Windows file keeps
    CRLF, a file of bare carriage returns keeps them, so that no fix leaves a file of mixed
    line endings."""
    lines = sources.lines(edit.file)
    if not lines or "\n" not in edit.text:
        return edit
    ending = line_ending(lines)
    if ending == "\n":
        return edit
    return edit._replace(text=edit.text.replace("\r\n", "\n").replace("\n", ending))


def _emptied_parents(ops: tuple[Op, ...]) -> list[Op]:
    """Deletions that together empty a mapping delete the mapping instead."""
    result = list(ops)
    while True:
        groups: dict[tuple[int, Path], list[Delete]] = {}
        for op in result:
            if isinstance(op, Delete) and len(op.path) > 1:
                groups.setdefault((id(op.document), op.path[:-1]), []).append(op)
        merged = False
        for (_, parent), deletes in groups.items():
            document = deletes[0].document
            node = dig(document.data, parent)
            if (
                len(deletes) > 1
                and isinstance(node, YMap)
                and {d.path[-1] for d in deletes} == set(node)
            ):
                result = [op for op in result if op not in deletes]
                result.append(Delete(document, parent))
                merged = True
                break
        if not merged:
            return result


class Applied(NamedTuple):
    """What one round of fixing changes: each file's text before and after."""

    before: dict[str, list[str]]
    after: dict[str, str]
    fixed: list[Any]  # the findings whose fix is in ``after``
    plans: int  # distinct fixes in ``after`` (a group's shared plan counts once)
    waiting: int  # fixable findings left for the next round (their edits overlapped)
    refused: list[str]  # files a fix would edit that may not be written


def plan_edits(
    findings: Iterable[Any],
    sources: Sources,
    unsafe_too: bool = False,
    writable: Callable[[str], bool] | None = None,
) -> Applied:
    """One round: the edits of every fixable finding (safe ones, and unsafe ones when asked),
    skipping fixes that overlap one already taken or touch a file ``writable`` refuses;
    files are not written."""
    chosen: list[Edit] = []
    fixed: list[Any] = []
    waiting = 0
    refused: dict[str, None] = {}
    seen: set[tuple[Edit, ...]] = set()
    resolved: dict[int, list[Edit] | None] = {}  # the findings of a group share one plan
    for finding in findings:
        plan: FixPlan | None = finding.plan
        if plan is None or (plan.applicability != SAFE and not unsafe_too):
            continue
        if id(plan) not in resolved:
            resolved[id(plan)] = resolve(plan, sources)
        edits = resolved[id(plan)]
        if edits is None:
            continue
        if writable is not None:
            denied = [e.file for e in edits if not writable(e.file)]
            if denied:
                refused.update(dict.fromkeys(denied))
                continue
        key = tuple(sorted(edits))
        if key in seen:  # the same fix from another finding of the group
            fixed.append(finding)
            continue
        if overlapping([*chosen, *edits]):
            waiting += 1
            continue
        seen.add(key)
        chosen.extend(edits)
        fixed.append(finding)
    before: dict[str, list[str]] = {}
    after: dict[str, str] = {}
    for file in dict.fromkeys(edit.file for edit in chosen):
        lines = sources.lines(file)
        if lines is None:
            continue
        before[file] = lines
        after[file] = apply(lines, [e for e in chosen if e.file == file])
    return Applied(before, after, fixed, len(seen), waiting, list(refused))


__all__ = [
    "SAFE",
    "UNSAFE",
    "Applied",
    "Delete",
    "DeleteDocument",
    "Edit",
    "Extend",
    "FixPlan",
    "Insert",
    "Op",
    "Rename",
    "Replace",
    "Set",
    "Sources",
    "Unresolvable",
    "apply",
    "choose",
    "diff_name",
    "diff_names",
    "entries",
    "overlapping",
    "plan_edits",
    "resolve",
    "safe",
    "unified_diff",
    "unsafe",
]
