"""Which findings of a run follow from which: one problem reported once, with what follows
from it listed under it.

A finding B follows from a finding A when fixing A settles B:

* A's rule declares that it explains B's rule (``EXPLAINS``), and B is about A's item or
  names a node inside it: an adapter rule that maps the exporter's ``pod`` (GL403) explains
  the live findings that its series name the exporter (GL802) and that an HPA it serves gets
  no data (GL804, which names the rule);
* A prints B's fix: both carry one fix for one cause (``Finding.fix_printed_on``, set where
  ``gpulint.engine.fixes`` prints that fix once);
* A's printed fix deletes the object B is about: GL201's fix deletes the HPA that GL102 says
  has no behavior, and the finding goes with the HPA;
* A and B are one rule's findings at one place, found in different units with one fix (a
  base that two overlays build: the line is fixed once).

Each follower is given the finding at the top of its chain, which follows from none (its
root), so that a report shows every root with its followers under it. This module decides
it for every reporter; the findings themselves stay whole in the result (JSON and SARIF
list each one, naming its root).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpulint.core.model import Finding, Node, ObjectRef
from gpulint.engine.registry import explained_by

# An object as the cluster knows it (an HPA in autoscaling/v1 and in v2 is one object).
_Object = tuple[str, str, str | None, str]


def _object(ref: ObjectRef) -> _Object:
    return (ref.group, ref.kind, ref.namespace, ref.name)


def roots(findings: Sequence[Finding]) -> list[int | None]:
    """For each finding (by index), the index of the finding it follows from at the top of
    its chain, or None for a finding that follows from none."""
    lookup = _Lookup(findings)
    parent: list[int | None] = []
    for index in range(len(findings)):
        found = _causes_of(index, findings, lookup)
        parent.append(found[0] if found else None)
    return [_root(index, parent) for index in range(len(findings))]


class _Lookup:
    """What the findings of a run are indexed by, to find a finding's causes."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        explained = explained_by()
        self.explained = explained
        explaining = {rule for rules in explained.values() for rule in rules}
        self.by_key: dict[object, int] = {}
        self.explainers: dict[tuple[str, int, int], list[int]] = {}
        self.deleters: dict[_Object, list[int]] = {}
        self.places: dict[tuple[str, str, int, int, str], int] = {}
        for index, finding in enumerate(findings):
            self.by_key.setdefault(finding.key, index)
            about = finding.about
            if finding.rule in explaining and about is not None:
                self.explainers.setdefault((about.file, about.line, about.column), []).append(index)
            if finding.deletes and finding.fix and finding.fix_printed_on is None:
                for ref in finding.deletes:
                    self.deleters.setdefault(_object(ref), []).append(index)
            if finding.fix and finding.fix_printed_on is None:
                where = finding.location
                place = (finding.rule, where.file, where.line, where.column, finding.fix)
                self.places.setdefault(place, index)


def _causes_of(index: int, findings: Sequence[Finding], lookup: _Lookup) -> list[int]:
    """The findings ``findings[index]`` follows from directly, the most telling first."""
    finding = findings[index]
    found: list[int] = []
    by = lookup.explained.get(finding.rule)
    if by and lookup.explainers:
        for node in _nodes(finding):
            for other in lookup.explainers.get((node.file, node.line, node.column), ()):
                cause = findings[other]
                if (
                    other != index
                    and cause.rule in by
                    and cause.about is not None
                    and cause.about.holds(node)
                ):
                    found.append(other)
    if finding.fix_printed_on is not None:
        printer = lookup.by_key.get(finding.fix_printed_on)
        if printer is not None and printer != index:
            found.append(printer)
    if finding.object is not None:
        for other in lookup.deleters.get(_object(finding.object), ()):
            if other != index and _same_object(findings[other], finding):
                found.append(other)
    if finding.fix and finding.fix_printed_on is None:
        where = finding.location
        first = lookup.places.get((finding.rule, where.file, where.line, where.column, finding.fix))
        if first is not None and first != index:
            found.append(first)
    return found


def _nodes(finding: Finding) -> list[Node]:
    """What a finding is about and the nodes it names."""
    nodes = [finding.about] if finding.about is not None else []
    nodes.extend(r.node for r in finding.related if r.node is not None)
    return nodes


def _same_object(deleter: Finding, finding: Finding) -> bool:
    """Is the object ``deleter``'s fix deletes the one ``finding`` is about, not one of the
    same name in another unit? Both were found in the same units, and where no unit is named
    (each file read by one unit), ``deleter`` is in the finding's file or names it."""
    if deleter.units != finding.units:
        return False
    if finding.units:
        return True
    file = finding.location.file
    return deleter.location.file == file or any(
        r.location is not None and r.location.file == file for r in deleter.related
    )


def _root(index: int, parent: list[int | None]) -> int | None:
    """The top of ``index``'s chain; None when nothing is above it, or when the chain comes
    back to it (then it stands on its own)."""
    seen = {index}
    current = parent[index]
    top = None
    while current is not None:
        if current in seen:
            return None
        seen.add(current)
        top = current
        current = parent[current]
    return top


def followers(findings: Sequence[Finding]) -> dict[int, list[int]]:
    """Root index -> the indexes of the findings that follow from it, in report order."""
    grouped: dict[int, list[int]] = {}
    for index, root in enumerate(roots(findings)):
        if root is not None:
            grouped.setdefault(root, []).append(index)
    return grouped
