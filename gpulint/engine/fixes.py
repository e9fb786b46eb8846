"""The fixes of one run weighed against each other, so that applying them all leaves nothing
for another rule to find.

Each finding says what its fix does to objects (``Finding.deletes``, ``Finding.writes``:
``gpulint.engine.rule.Context.finding``). Two things follow, here and nowhere else, for every
front door and for what ``--fix`` applies:

* one fix per cause: findings whose fixes are the same text doing the same to the same
  objects (the members of a GL103 group, GL201 and GL204 on one Knative Service) carry it
  once, text and edits, on the first of them; the others point at it
  (``Finding.fix_printed_on``: ``gpulint.engine.causes`` shows them with it);
* no fix on an object another fix deletes: a fix that changes an object that another
  finding's fix deletes or replaces (GL102's ``behavior`` for an HPA that GL201 says to
  delete), or that deletes an object another fix changes, is withheld, text and edits: its
  message says which fix it gives way to, and its fix points at that one. Fixes that delete
  are weighed first: removing what should not exist settles more than tuning it does.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from gpulint.core.model import Finding, ObjectRef
from gpulint.kinds.knative import KNATIVE_SERVING_GROUP

# An object as the cluster knows it: its API group, kind, namespace and name (an HPA written
# in autoscaling/v1 and in v2 is one object).
_Object = tuple[str, str, str | None, str]


class _Fix(NamedTuple):
    """What makes two findings' fixes one fix: the same text doing the same to the same
    objects, and, for a fix written for the node a finding is at, that node (for a finding
    about no object, such as a file that does not parse, its place in the file)."""

    text: str
    deletes: frozenset[_Object]
    writes: frozenset[_Object]
    at: tuple[_Object, tuple[str | int, ...]] | tuple[str, int, int] | None


def _object(ref: ObjectRef) -> _Object:
    return (ref.group, ref.kind, ref.namespace, ref.name)


def settle(findings: list[Finding]) -> list[Finding]:
    """``findings`` (sorted) with each fix printed once and no fix on an object another fix
    deletes; findings without a fix, and runs where no two fixes meet, come back as given."""
    groups: dict[_Fix, list[int]] = {}
    for index, finding in enumerate(findings):
        if finding.fix:
            at: tuple[_Object, tuple[str | int, ...]] | tuple[str, int, int] | None = None
            if finding.fix_at_path and finding.object is not None:
                at = (_object(finding.object), finding.path)
            elif finding.fix_at_path:
                # GL702's "fix the syntax at this line" in two files is two fixes.
                where = finding.location
                at = (where.file, where.line, where.column)
            key = _Fix(
                finding.fix,
                frozenset(map(_object, finding.deletes)),
                frozenset(map(_object, finding.writes)),
                at,
            )
            groups.setdefault(key, []).append(index)
    if len(groups) < 2 and all(len(members) < 2 for members in groups.values()):
        return findings
    settled = list(findings)
    withheld: set[int] = set()
    for members, blocker in _withheld(findings, list(groups.values())):
        for index in members:
            withheld.add(index)
            finding = settled[index]
            settled[index] = finding._replace(
                message=_with_note(finding.message, blocker, finding),
                fix=_pointer(blocker[0]),
                plan=None,
                deletes=(),
                writes=(),
            )
    for members in groups.values():
        first = settled[members[0]]
        for index in members[1:]:
            finding = settled[index]
            if index in withheld:  # its fix points at the one it gives way to
                settled[index] = finding._replace(fix_printed_on=first.key)
            else:
                settled[index] = finding._replace(
                    fix=_pointer(first), plan=None, fix_printed_on=first.key
                )
    return settled


def _withheld(
    findings: list[Finding], groups: list[list[int]]
) -> list[tuple[list[int], tuple[Finding, ObjectRef, bool]]]:
    """The groups whose fix gives way, each with the fix it gives way to, the object they
    meet on, and whether that fix deletes it (else it changes it)."""
    # Fixes that delete first, then in the order of the report.
    order = sorted(groups, key=lambda members: (not findings[members[0]].deletes, members[0]))
    deleted: dict[_Object, Finding] = {}
    written: dict[_Object, Finding] = {}
    given_way = []
    for members in order:
        finding = findings[members[0]]
        blocker: tuple[Finding, ObjectRef, bool] | None = None
        for ref in finding.writes:
            if _object(ref) in deleted:
                blocker = (deleted[_object(ref)], ref, True)
                break
        if blocker is None:
            for ref in finding.deletes:
                if _object(ref) in written:
                    blocker = (written[_object(ref)], ref, False)
                    break
        if blocker is not None:
            given_way.append((members, blocker))
            continue
        for ref in finding.deletes:
            deleted.setdefault(_object(ref), finding)
        for ref in finding.writes:
            written.setdefault(_object(ref), finding)
    return given_way


def _pointer(first: Finding) -> str:
    """The fix of a finding whose fix another finding prints: where that one is."""
    where = f"{os.path.basename(first.location.file)}:{first.location.line}"
    return f"{_fix_of(first)}, printed there ({where})"


def _fix_of(finding: Finding) -> str:
    ref = finding.object
    where = _named(ref) if ref is not None else f"line {finding.location.line}"
    return f"the fix of {finding.rule} on {where}"


def _named(ref: ObjectRef) -> str:
    """An object as a sentence names it (a Knative Service is not a core Service)."""
    if not ref.api_version:
        return ref.described  # a file, not an object: "prometheus-adapter config x.yaml"
    return f"Knative {ref}" if ref.group == KNATIVE_SERVING_GROUP else str(ref)


def _with_note(message: str, blocker: tuple[Finding, ObjectRef, bool], own: Finding) -> str:
    """The message, with why its fix is left out."""
    other, ref, deletes = blocker
    what = "deletes" if deletes else "changes"
    same = own.object is not None and _object(ref) == _object(own.object)
    subject = "it" if same else _named(ref)
    return f"{message} Its own fix is left out: {_fix_of(other)} {what} {subject}."
