"""What a lint run found, as every reporter and ``--fix`` read it: the findings, the units
linted, counts and timings, and each finding's fix as edits of the source."""

from __future__ import annotations

from typing import NamedTuple

from gpulint.adoption.edits import SAFE, Edit, Sources, resolve
from gpulint.core.model import Finding, NotChecked, Severity
from gpulint.engine.versions import Versions

# How a user changes the context units are judged with (reports print it with the contexts).
CONTEXT_CHANGE = (
    "declare clusters: in .gpulint.yaml (docs/context.md); `gpulint context` shows "
    "what each unit is judged with"
)
OWN_OBJECTS = "its own objects only"  # the context of a unit that takes nothing


class ClusterSummary(NamedTuple):
    """One cluster of a run, as reports list it (gpulint.engine.context)."""

    name: str
    why: str  # where the cluster comes from
    units: tuple[str, ...]
    # (category, lending unit, the units that take it)
    lends: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    # (category, the equally near units left, the units that took none of them)
    ambiguous: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()

    def describe(self) -> str:
        """One line: the cluster, its units, who lends what to how many."""
        count = len(self.units)
        text = f"{self.name} ({self.why}): {count} unit{'s' * (count != 1)}"
        by_lender: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for category, provider, takers in self.lends:
            by_lender.setdefault((provider, takers), []).append(category)
        for (provider, takers), categories in by_lender.items():
            text += f"; {provider} lends {_and(categories)} to {_some(takers, count)}"
        for category, providers, takers in self.ambiguous:
            shown = _and(list(providers)) if len(providers) <= 3 else f"{providers[0]} ..."
            text += (
                f"; {category} lent to none of {_some(takers, count)}: {len(providers)} units "
                f"holding one are equally near ({shown})"
            )
        if not self.lends and not self.ambiguous:
            text += f", each judged with {OWN_OBJECTS}"
        return text


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _some(names: tuple[str, ...], total: int) -> str:
    if len(names) <= 2:
        return _and(list(names))
    return f"{len(names)} of them"


class UnitSummary(NamedTuple):
    """One lint unit of a run, as reports list it."""

    name: str
    kind: str  # kustomize | helm | files | stdin | cluster
    root: str
    objects: int
    rendered_by: tuple[str, ...] = ()
    render_seconds: float = 0.0
    # What it was judged with besides its own objects (gpulint.engine.context); "" alone.
    context: str = ""


class Result:
    __slots__ = (
        "_edits",
        "baseline",
        "clusters",
        "config",
        "files",
        "findings",
        "inputs",
        "lint_seconds",
        "not_checked",
        "notes",
        "objects",
        "render_wall",
        "skipped",
        "sources",
        "suppressed",
        "units",
        "versions",
    )

    def __init__(
        self,
        findings: list[Finding],
        files: int,
        objects: int,
        skipped: list[tuple[str, str]] | None = None,
        notes: list[str] | None = None,
        units: list[UnitSummary] | None = None,
        config: str | None = None,
    ) -> None:
        self.findings = findings
        self.files = files
        self.objects = objects
        self.skipped: list[tuple[str, str]] = [] if skipped is None else skipped
        self.notes: list[str] = [] if notes is None else notes
        self.units: list[UnitSummary] = [] if units is None else units
        self.clusters: list[ClusterSummary] = []
        # Checks that could not run on an object (gpulint.engine.coverage.NotChecked).
        self.not_checked: list[NotChecked] = []
        self.config = config  # the .gpulint.yaml in use, if any
        # The releases judged for (gpulint.engine.versions); None: not said (a bare Result).
        self.versions: Versions | None = None
        self.suppressed: dict[str, int] = {}  # rule -> findings silenced by suppressions
        self.lint_seconds = 0.0
        self.render_wall: float | None = None
        # The files the run read (as given), or None where it read objects (cluster mode):
        # a baseline entry none of whose files was read was not evaluated.
        self.inputs: frozenset[str] | None = None
        # With --baseline: (findings it absorbed, its entries that matched nothing because
        # their findings were fixed, its entries whose files the run did not read).
        self.baseline: tuple[int, int, int] | None = None
        # The texts edits are placed in (files are read when first asked; stdin is given).
        self.sources = Sources()
        self._edits: dict[int, list[Edit] | None] = {}

    def edits_of(self, finding: Finding) -> list[Edit] | None:
        """The finding's fix as edits of the source, or None (no plan, or it cannot be placed
        exactly); resolved once, when a report or ``--fix`` asks."""
        if finding.plan is None:
            return None
        key = id(finding.plan)  # findings of one group share their plan: resolved once
        if key not in self._edits:
            self._edits[key] = resolve(finding.plan, self.sources)
        return self._edits[key]

    @property
    def render_seconds(self) -> float:
        """How long rendering took (the units render side by side)."""
        if self.render_wall is not None:
            return self.render_wall
        return sum(unit.render_seconds for unit in self.units)

    def __repr__(self) -> str:
        return f"Result(findings={self.findings!r}, files={self.files!r})"

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def fixable(self, unsafe: bool) -> tuple[int, int]:
        """How many findings ``--fix`` would fix, and how many more need ``--unsafe-fixes``
        (those not asked for)."""
        safe = more = 0
        for finding in self.findings:
            plan = finding.plan
            if plan is None or self.edits_of(finding) is None:
                continue
            if plan.applicability == SAFE or unsafe:
                safe += 1
            else:
                more += 1
        return safe, more
