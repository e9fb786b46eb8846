"""The source files a run's rendered objects map to (read once, never outside the run's
boundaries), and the fallback when a unit is not rendered: its files linted one by one."""

from __future__ import annotations

import os

from gpulint.core.model import Location
from gpulint.input.loader import (
    MAX_FILE_SIZE,
    LoadedFile,
    load_file,
    read_bounded,
)
from gpulint.input.units import RenderOptions, RenderProblem, Unit
from gpulint.input.units.boundary import boundaries_of, inside, tree_problem
from gpulint.input.units.helm import TemplateText
from gpulint.input.units.kustomize import (
    KUSTOMIZATION_NAMES,
    Kustomization,
    kustomization_file,
)
from gpulint.input.units.scope import GENERATOR_FIELDS, generator_data_not_input
from gpulint.input.units.tools import ToolOutput
from gpulint.input.units.tracked import TrackedTree

RENDER_FAILED, RENDER_UNAVAILABLE = "GL704", "GL705"


class SourceFiles:
    """The source files a run's rendered objects map to, each read and parsed once."""

    def __init__(self, max_file_size: int = MAX_FILE_SIZE) -> None:
        self.max_file_size = max_file_size
        # The directories of the run that may be read (``gpulint.input.units.boundary``): a source
        # map never opens a file outside them, whatever an annotation or comment says.
        self.boundaries: dict[str, None] = {}
        self._loaded: dict[str, LoadedFile | None] = {}
        self._kustomizations: dict[str, Kustomization] = {}
        self._templates: dict[str, TemplateText | None] = {}
        self._parts: dict[str, Unit] = {}
        # What renderers read: the tracked files of what units render, copied once per run
        # and removed by ``close``.
        self.tracked = TrackedTree(self.boundaries)
        self._scans: dict[str, str | None] = {}

    def close(self) -> None:
        """Remove the run's private copies."""
        self.tracked.remove()

    def tree_problem(self, tree: str) -> str | None:
        """``gpulint.input.units.boundary.tree_problem`` of a chart or chart home, looked at
        once per run however many charts depend on it."""
        key = os.path.realpath(tree)
        if key not in self._scans:
            self._scans[key] = tree_problem(tree)
        return self._scans[key]

    def part(self, directory: str) -> Unit | None:
        """A base already built alone for an overlay that did not build."""
        return self._parts.get(os.path.realpath(directory))

    def keep_part(self, directory: str, part: Unit) -> Unit:
        return self._parts.setdefault(os.path.realpath(directory), part)

    def allow(self, boundaries: tuple[str, ...]) -> None:
        for boundary in boundaries:
            self.boundaries.setdefault(boundary, None)

    def readable(self, path: str) -> bool:
        return inside(path, tuple(self.boundaries))

    def load(self, path: str) -> LoadedFile | None:
        if path not in self._loaded:
            if not self.readable(path):
                self._loaded[path] = None
                return None
            try:
                data = read_bounded(path, self.max_file_size)
            except OSError:
                self._loaded[path] = None
            else:
                self._loaded[path] = load_file(path, data)
        return self._loaded[path]

    def kustomization(self, directory: str) -> Kustomization:
        key = os.path.normpath(directory)
        if key not in self._kustomizations:
            self._kustomizations[key] = Kustomization(
                key, tuple(self.boundaries) or boundaries_of(["."])
            )
        return self._kustomizations[key]

    def template(self, path: str) -> TemplateText | None:
        if path not in self._templates:
            if not self.readable(path):
                self._templates[path] = None
                return None
            try:
                text = read_bounded(path, self.max_file_size).decode("utf-8", errors="replace")
            except OSError:
                self._templates[path] = None
            else:
                self._templates[path] = TemplateText(path, text)
        return self._templates[path]


def kustomization_chain(kustomization: Kustomization, sources: SourceFiles) -> list[Kustomization]:
    """The kustomization and every local base and component below it."""
    found: dict[str, Kustomization] = {}
    stack = [kustomization]
    while stack:
        current = stack.pop()
        key = os.path.realpath(current.directory)
        if key in found:
            continue
        found[key] = current
        for reference in current.directories:
            if kustomization_file(reference.resolved):
                stack.append(sources.kustomization(reference.resolved))
    return list(found.values())


def fallback_files(unit: Unit, chain: list[Kustomization], sources: SourceFiles) -> None:
    """A kustomization that could not be built: its files, linted as plain files (never one
    outside the repository: ``SourceFiles.load`` refuses them). A generator's data is judged
    only as far as ``scope.generator_data_not_input`` says."""
    for kustomization in chain:
        data = {r.resolved for r in kustomization.files if r.field[0] in GENERATOR_FIELDS}
        for file in kustomization.owned_files():
            if os.path.basename(file) in KUSTOMIZATION_NAMES or file in unit.files:
                continue
            loaded = sources.load(file)
            if loaded is not None and file in data and generator_data_not_input(loaded):
                continue
            if loaded is not None:
                unit.loaded.append(loaded)
                unit.files.add(file)


def unavailable_unit(
    unit: Unit,
    chain: list[Kustomization],
    sources: SourceFiles,
    where: Location,
    message: str,
    fix: str,
) -> None:
    """GL705 for a kustomization gpulint will not build; its files are linted one by one."""
    unit.render_problems.append(
        RenderProblem(RENDER_UNAVAILABLE, where.file, where.line, where.column, message, fix)
    )
    fallback_files(unit, chain, sources)


def budget_spent(options: RenderOptions, output: ToolOutput) -> str:
    when = "while it rendered" if output.timed_out else "before it started"
    return f"the run's render budget of {options.budget.seconds:g} s ran out {when}"


def failure_message(output: ToolOutput, lead: str, tool: str) -> str:
    if output.limited:
        return f"It needs more than gpulint lets a renderer use: {tool}{output.message}"
    return f"{lead}{output.message}"
