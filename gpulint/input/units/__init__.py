"""Lint units: the sets of objects one cluster (or one environment of it) will hold.

A run is a list of units, and every cross-object question (two autoscalers on one workload,
an HPA and the adapter rule serving its metric, KServe and Knative ownership ...) is answered
within one unit. Units come from the input's shape (``plan``):

* each kustomization directory is built by kustomize as one unit, unless it is only a base
  or component of other kustomizations of the input (it is judged through them);
* each Helm chart directory is rendered by ``helm template`` as one unit;
* the other files: one unit per directory that ``.gpulint.yaml`` declares (``units:``
  globs); else directories that each hold their own copy of the same object are separate
  units (``clusters/us``, ``clusters/eu``), so is each directory a Flux or Argo CD object
  of the input deploys (``clusters``), and the rest is cut into applications (``roots``);
* stdin is one unit.

A declared unit holds everything under its directory, kustomizations and charts included.
Which platform components of its cluster a unit is judged with is decided after building
(``gpulint.engine.context``).
``build`` renders a planned unit with the real tools (``render``) and loads its files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulint.input.loader import MAX_FILE_SIZE, IgnoreComment, LoadedFile, LoadProblem

if TYPE_CHECKING:
    from gpulint.input.units.tools import Limits, RenderBudget, Tool

KUSTOMIZE, HELM, FILES, STDIN = "kustomize", "helm", "files", "stdin"
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


class RenderProblem:
    """A unit that did not render: GL704 (the input is wrong) or GL705 (it cannot be
    rendered here), at the kustomization or chart file."""

    __slots__ = ("column", "file", "fix", "line", "message", "note", "rule")

    def __init__(
        self,
        rule: str,
        file: str,
        line: int,
        column: int,
        message: str,
        fix: str = "",
        note: str | None = None,
    ) -> None:
        self.rule = rule
        self.file = file
        self.line = line
        self.column = column
        self.message = message
        self.fix = fix
        self.note = note  # what else was judged in its place (the bases that build alone)

    def __repr__(self) -> str:
        return f"RenderProblem({self.rule}, {self.file}:{self.line}, {self.message!r})"


class Unit:
    """One built unit: its loaded files (rendered output included) and how it was made."""

    __slots__ = (
        "declared",
        "files",
        "ignore_comments",
        "judged",
        "kind",
        "loaded",
        "name",
        "notes",
        "origin",
        "parts",
        "problems",
        "render_problems",
        "render_seconds",
        "rendered_by",
        "root",
        "skipped",
    )

    def __init__(self, name: str, kind: str, root: str) -> None:
        self.name = name  # as reports show it: "overlays/prod", "clusters/us", "."
        self.kind = kind  # kustomize | helm | files | stdin
        self.root = root
        self.loaded: list[LoadedFile] = []
        self.files: set[str] = set()  # the source files it reads (for counts and comments)
        self.ignore_comments: list[IgnoreComment] = []  # of source files of rendered output
        self.problems: list[LoadProblem] = []  # files and directories that could not be read
        self.skipped: list[tuple[str, str]] = []
        self.render_problems: list[RenderProblem] = []
        self.notes: list[str] = []  # what rendering stood in or left out, for the summary
        self.rendered_by: list[str] = []  # "kubectl kustomize overlays/prod", "helm template ..."
        self.render_seconds = 0.0
        # Bases of a kustomization that did not build, built alone: judged as units of
        # their own unless a kustomization that built judges them (``judged``: the real
        # directories of every kustomization chain this unit built).
        self.parts: list[Unit] = []
        self.judged: set[str] = set()
        self.declared = False  # a ``units:`` entry of .gpulint.yaml: judged as declared
        self.origin = ""  # the path of the command line it was found under

    def __repr__(self) -> str:
        return f"Unit({self.name!r}, {self.kind})"


class RenderOptions:
    """How units are rendered: the tools, Helm values, size limit, piped input's name, and
    the run's render budget (seconds, shared by every unit) and per-process limits."""

    def __init__(
        self,
        kustomize: str | None = None,
        helm: str | None = None,
        helm_values: list[str] | None = None,
        max_file_size: int = MAX_FILE_SIZE,
        stdin_filename: str | None = None,
        render_budget: float | None = None,
        limits: Limits | None = None,
        timeout: float | None = None,
    ) -> None:
        self.kustomize_command = kustomize
        self.helm_command = helm
        self.helm_values = list(helm_values or [])
        self.max_file_size = max_file_size
        self.stdin_filename = stdin_filename
        # The budget, limits and timeout come from gpulint.input.units.tools on first use: a run
        # with nothing to render never imports the process machinery.
        self._render_budget = render_budget
        self._limits = limits
        self._timeout = timeout
        self._kustomize: Tool | bool | None = False
        self._helm: Tool | bool | None = False

    @property
    def budget(self) -> RenderBudget:
        """The run's render budget, shared by every unit (started when first asked for)."""
        budget: RenderBudget | None = self.__dict__.get("_budget")
        if budget is None:
            from gpulint.input.units.tools import RENDER_BUDGET, RenderBudget

            seconds = RENDER_BUDGET if self._render_budget is None else self._render_budget
            # setdefault is atomic: units rendered side by side all get the first one made
            budget = self.__dict__.setdefault("_budget", RenderBudget(seconds))
        return budget

    @property
    def limits(self) -> Limits:
        if self._limits is None:
            from gpulint.input.units.tools import Limits

            self._limits = Limits()
        return self._limits

    @property
    def timeout(self) -> float:
        if self._timeout is None:
            from gpulint.input.units.tools import RENDER_TIMEOUT

            self._timeout = RENDER_TIMEOUT
        return self._timeout

    @property
    def kustomize(self) -> Tool | None:
        from gpulint.input.units.tools import Tool, find_kustomize

        if self._kustomize is False:
            self._kustomize = find_kustomize(self.kustomize_command)
        return self._kustomize if isinstance(self._kustomize, Tool) else None

    @property
    def helm(self) -> Tool | None:
        from gpulint.input.units.tools import Tool, find_helm

        if self._helm is False:
            self._helm = find_helm(self.helm_command)
        return self._helm if isinstance(self._helm, Tool) else None
