"""The small values every part of gpulint passes around: severities, references, findings."""

from __future__ import annotations

import enum
from typing import NamedTuple

from gpulint.adoption.operations import FixPlan
from gpulint.core.location import Location, ObjectRef
from gpulint.core.message import split_message

__all__ = ["Finding", "Location", "ObjectRef", "Related", "Severity"]


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
