"""The small values every part of gpulint passes around: severities, references, findings."""

from __future__ import annotations

import enum
from typing import NamedTuple

from gpulint.adoption.operations import FixPlan
from gpulint.core.location import Location, Node, ObjectRef, SourceFile
from gpulint.core.message import split_message

__all__ = [
    "Finding",
    "FindingKey",
    "Location",
    "Node",
    "ObjectRef",
    "Related",
    "Severity",
    "SourceFile",
    "joined",
]


class Severity(enum.IntEnum):
    """Ordered so that ``finding.severity >= Severity.WARNING`` reads naturally."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (use error, warning or info)") from None

    def __str__(self) -> str:
        return self.name.lower()


class Related(NamedTuple):
    """Another object a cross-object finding names."""

    ref: ObjectRef
    location: Location | None
    role: str = ""
    # The files that produced the object when it was rendered (see Finding.made_from).
    made_from: tuple[SourceFile, ...] = ()
    # The node named, for telling which findings follow from which (gpulint.engine.causes).
    node: Node | None = None


class FindingKey(NamedTuple):
    """A finding of a run, told apart from every other: its rule, place and message (two
    overlays' findings on one base line differ by their messages)."""

    rule: str
    file: str
    line: int
    column: int
    message: str


class Finding(NamedTuple):
    rule: str
    name: str
    severity: Severity
    message: str
    location: Location
    fix: str = ""
    object: ObjectRef | None = None
    related: tuple[Related, ...] = ()
    # The lint units it was found in, when a run has several (overlays/prod, clusters/us).
    units: tuple[str, ...] = ()
    # The fix as edits of the source (gpulint.adoption.edits.FixPlan); None: the fix is prose only.
    plan: FixPlan | None = None
    # The offending node inside the object (("spec", "metrics", 0)): where it is, whatever
    # line it moves to; () for findings placed at a location without a document.
    path: tuple[str | int, ...] = ()
    # The files that produced its object and the objects it names when they were rendered (a
    # kustomize base, the patches and kustomizations that built it; a chart's template, its
    # helpers and values), in every unit it was found in: a change to any of them changes
    # the finding (--changed-since). () for objects read from their own files. One tuple
    # per object, shared by its findings: a large lint keeps no copy per finding.
    made_from: tuple[SourceFile, ...] = ()
    # What applying the fix does to objects (gpulint.engine.fixes): the objects it deletes
    # (or replaces with others), and those it changes and keeps.
    deletes: tuple[ObjectRef, ...] = ()
    writes: tuple[ObjectRef, ...] = ()
    # Whether the fix is written for the node at ``path`` (``type: AverageValue`` for one
    # metric), or for the whole objects it names, wherever the finding is (one fix that
    # several findings of a cause print: GL103's merge, the Knative HPA class).
    fix_at_path: bool = True
    # What the finding is about, as a node: the item of its rule's scope it was raised on
    # (an adapter rule, an HPA) when it is placed in that item's document, else its own node;
    # None for findings placed without a document (gpulint.engine.causes).
    about: Node | None = None
    # The finding that prints this one's fix, when both carry one fix for one cause
    # (gpulint.engine.fixes); None otherwise.
    fix_printed_on: FindingKey | None = None
    # The rule whose observed data settled this finding of a rule judged from the input
    # alone (gpulint.engine.settled: GL805's values for GL107's target); "" otherwise.
    settled_by: str = ""
    # A settled finding's severity from the input alone, before the observation raised it
    # (the webhook refuses no request on what Prometheus saw); None when not settled.
    input_severity: Severity | None = None

    @property
    def key(self) -> FindingKey:
        loc = self.location
        return FindingKey(self.rule, loc.file, loc.line, loc.column, self.message)

    @property
    def headline(self) -> str:
        """The message's first sentence: the problem, naming the objects (reporters show it
        on the finding's first line)."""
        return split_message(self.message)[0]

    @property
    def detail(self) -> str:
        """The rest of the message: why, and what follows from it ("" when none)."""
        return split_message(self.message)[1]

    def sort_key(self) -> tuple[str, int, int, str, str]:
        loc = self.location
        return (loc.file, loc.line, loc.column, self.rule, self.message)


class NotChecked(NamedTuple):
    """A check that did not run on an object, and what would let it."""

    checks: str  # the rules that could not judge it: "GL401"
    object: ObjectRef
    location: Location
    reason: str
    remedy: str
    units: tuple[str, ...] = ()

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.location.file, self.location.line, self.location.column, self.checks)


def joined(*groups: tuple[SourceFile, ...]) -> tuple[SourceFile, ...]:
    """The source files of several groups, each once, in the order first met; the first
    group itself when the others add nothing (no new tuple for the common case)."""
    if not groups:
        return ()
    first = groups[0]
    if all(not group or group == first for group in groups[1:]):
        return first
    return tuple(dict.fromkeys(source for group in groups for source in group))
