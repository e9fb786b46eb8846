"""A Helm chart rendered with the real ``helm template`` (stand-in values for required ones,
within the run's budget), and its output mapped back to the templates."""

from __future__ import annotations

import os
import re
import shutil
import tempfile

from gpulint.core.model import SourceFile
from gpulint.core.paths import display_path
from gpulint.input.loader import (
    LoadedFile,
    ignore_comments,
    load_file,
    read_bounded,
)
from gpulint.input.units import RenderOptions, RenderProblem, Unit
from gpulint.input.units.boundary import inside
from gpulint.input.units.charts import (
    REQUIRED_RETRIES,
    Prepared,
    folded_chart_key,
    is_library,
    prepare,
    required_value,
    stand_in_values,
)
from gpulint.input.units.chartvalues import ChartValues, beside_values
from gpulint.input.units.helm import HelmSource, chart_inputs, chart_name, template_file
from gpulint.input.units.sources import (
    RENDER_FAILED,
    RENDER_UNAVAILABLE,
    SourceFiles,
    budget_spent,
    failure_message,
)
from gpulint.input.units.tools import BudgetSpent, Tool, ToolOutput, run_tool
from gpulint.input.units.walk import tree_files


def build_chart(
    unit: Unit,
    chart: str,
    options: RenderOptions,
    sources: SourceFiles,
    values: ChartValues | None = None,
) -> None:
    """Render ``chart`` with ``values`` (chart-testing's or the configuration's values files,
    gpulint.input.units.chartvalues) and the run's ``--helm-values``; with neither, a chart
    that does not render with values.yaml alone is rendered with the first sample or
    per-environment values file beside its Chart.yaml that renders."""
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
        for root, files in tree_files(chart):
            for name in files:
                if name.endswith((".yaml", ".yml", ".json")) and name != "Chart.yaml":
                    loaded = sources.load(os.path.join(root, name))
                    if loaded is not None:
                        unit.loaded.append(loaded)
                        unit.files.add(loaded.path)

    def unavailable(message: str, fix: str, line: int = 1, column: int = 1) -> None:
        unit.render_problems.append(
            RenderProblem(RENDER_UNAVAILABLE, chart_yaml, line, column, message, fix)
        )
        fallback()

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
    folded = folded_chart_key(chart)
    if folded is not None:
        at_line, at_column, spelled, field = folded
        unavailable(
            f"chart {unit.name} was not rendered: its Chart.yaml spells the field {field} as "
            f"{spelled!r}. Helm reads Chart.yaml with Go's case-insensitive JSON decoding and "
            "takes it for that field, which gpulint does not read in that spelling; its "
            "values are linted, its templates skipped.",
            f"write {field} exactly as Helm documents it",
            at_line,
            at_column,
        )
        return
    problem = sources.tree_problem(chart)
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
    unreadable = sources.tracked.unreadable(chart_yaml)
    if unreadable is not None:
        unavailable(
            f"chart {unit.name} was not rendered: gpulint hands Helm only the files git "
            f"tracks, and its Chart.yaml is not one ({unreadable}); its values are linted, "
            "its templates skipped.",
            "commit the chart (`git add` it) before linting it",
        )
        return
    chosen = list(values.files) if values is not None else []
    for file in chosen:
        refused = _values_problem(file, sources)
        if refused is not None:
            named = (
                "named for it in .gpulint.yaml (chart-values:)"
                if values is not None and values.found_in == "config"
                else "in its ci/ directory"
            )
            unavailable(
                f"chart {unit.name} was not rendered: its values file {display_path(file)}, "
                f"{named}, is not handed to Helm ({refused}); its values are linted, its "
                "templates skipped.",
                "name values files of the repository that git tracks",
            )
            return
    prepared = prepare(
        chart,
        [*chosen, *options.helm_values],
        tuple(sources.boundaries),
        sources.tracked,
        options.budget.spend,
        sources.tree_problem,
    )
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
    beside: str | None = None  # the values file beside Chart.yaml it was rendered with
    alone = ""  # why values.yaml alone did not render, then
    try:
        stand_in_dir = tempfile.mkdtemp(prefix="gpulint-values-")
        try:
            given = [_in_copy(file, chart, prepared, sources, options) for file in chosen]
            output, stood = _render_chart(tool, prepared, options, stand_in_dir, given)
            if values is None and not options.helm_values and _fails_on_values(output):
                found = _render_beside(tool, chart, prepared, options, sources, stand_in_dir)
                if found is not None:
                    alone = sources.tracked.unmirrored(prepared.unmirrored(output.message))
                    beside, output, stood = found
                    chosen = [beside]
        except BudgetSpent as spent:
            output, stood = ToolOutput(False, b"", str(spent), budget_spent=True), []
        except OSError as error:
            # Not the chart's fault: reported as a chart not rendered here (GL705).
            reason = f"a values file could not be copied for helm ({error.strerror})"
            output, stood = ToolOutput(False, b"", reason, missing=True), []
        finally:
            shutil.rmtree(stand_in_dir, ignore_errors=True)
    finally:
        prepared.remove()
    unit.rendered_by.append(f"{tool.name} template {display_path(chart)}")
    if not output.ok:
        message = sources.tracked.unmirrored(prepared.unmirrored(output.message))
        if output.budget_spent:
            unit.render_problems.append(
                RenderProblem(
                    RENDER_UNAVAILABLE,
                    chart_yaml,
                    1,
                    1,
                    f"chart {unit.name} was not rendered: {budget_spent(options, output)}; its "
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
                    "name the values gpulint should render it with: chart-values in "
                    ".gpulint.yaml, or --helm-values FILE",
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
                + failure_message(output, "Rendering it fails with: ", "helm "),
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
    if beside is not None:
        unit.notes.append(
            f"chart {unit.name} does not render with its values.yaml alone "
            f"({_first_line(alone)}); it was rendered with {os.path.basename(beside)}, "
            "which its authors keep beside Chart.yaml (name the values files to render it "
            "with in .gpulint.yaml: chart-values)"
        )
    left_out = prepared.note(unit.name)
    if left_out is not None:
        unit.notes.append(left_out)
    rendered = load_file(f"<helm template {display_path(chart)}>", output.stdout)
    inputs = chart_inputs(chart, (*chosen, *options.helm_values), prepared.vendored)
    _map_helm_output(unit, rendered, chart, sources, prepared.vendored, inputs)
    unit.loaded.append(rendered)


def _render_chart(
    tool: Tool,
    prepared: Prepared,
    options: RenderOptions,
    stand_in_dir: str,
    given: list[str] | None = None,
) -> tuple[ToolOutput, list[str]]:
    """``helm template`` of the prepared chart with the values files ``given`` (paths in the
    copy) and ``--helm-values``; a ``required`` value it fails on is stood in and the render
    retried, a bounded number of times. (output, the value paths stood in)"""
    stood: list[str] = []
    while True:
        argv = [*tool.argv, "template", prepared.directory]
        for values in [*(given or []), *options.helm_values]:
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


def _values_problem(file: str, sources: SourceFiles) -> str | None:
    """Why a values file gpulint chose (the configuration's, chart-testing's) is not handed
    to Helm: outside the repository, or not a file git tracks; None when it may be."""
    if not inside(os.path.normpath(os.path.abspath(file)), tuple(sources.boundaries)):
        return "it is outside the repository"
    return sources.tracked.unreadable(file)


def _in_copy(
    file: str, chart: str, prepared: Prepared, sources: SourceFiles, options: RenderOptions
) -> str:
    """Where a values file of the repository is in what Helm is given: in the chart's copy,
    or copied to the run's private tree (raises BudgetSpent, OSError)."""
    relative = os.path.relpath(os.path.realpath(file), os.path.realpath(chart))
    if not relative.startswith(".."):
        return os.path.join(prepared.directory, relative)
    sources.tracked.file(file, options.budget.spend)
    return sources.tracked.place(file)


def _fails_on_values(output: ToolOutput) -> bool:
    """Did Helm refuse the chart's templates with these values (not the machine: the
    budget, a timeout, a limit, no helm, dependencies not downloaded)?"""
    if output.ok or output.budget_spent or output.timed_out or output.limited or output.missing:
        return False
    return "missing in charts/" not in output.message and "dependency" not in (
        output.message.lower()
    )


def _render_beside(
    tool: Tool,
    chart: str,
    prepared: Prepared,
    options: RenderOptions,
    sources: SourceFiles,
    stand_in_dir: str,
) -> tuple[str, ToolOutput, list[str]] | None:
    """The first sample or per-environment values file beside Chart.yaml the chart renders
    with: (the file, Helm's output, the values stood in); None when none does."""
    for file in beside_values(chart):
        if sources.tracked.unreadable(file) is not None:
            continue
        copied = _in_copy(file, chart, prepared, sources, options)
        output, stood = _render_chart(tool, prepared, options, stand_in_dir, [copied])
        if output.ok:
            return file, output, stood
        if not _fails_on_values(output):
            return None  # the machine, not the values: the budget is spent, or a limit
    return None


def _first_line(message: str) -> str:
    """Helm's error without its prefix and its advice to pass --debug, at most 200
    characters."""
    line = message.strip().split("\n")[0].removeprefix("Error: ")
    line = re.sub(r"\s*Use --debug flag.*$", "", line)
    return line if len(line) <= 200 else line[:197] + "..."


def _error_line(message: str) -> int | None:
    match = re.search(r"\.yaml:(\d+):", message)
    return int(match.group(1)) if match else None


def _map_helm_output(
    unit: Unit,
    rendered: LoadedFile,
    chart: str,
    sources: SourceFiles,
    vendored: dict[str, str] | None = None,
    inputs: tuple[SourceFile, ...] = (),
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
        document.source = HelmSource(document.data, template, index, source, unit.name, inputs)
        if file not in unit.files:
            unit.files.add(file)
            template_comments(unit, file, sources)


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


def template_comments(unit: Unit, file: str, sources: SourceFiles) -> None:
    try:
        data = read_bounded(file, sources.max_file_size)
    except OSError:
        return
    if b"gpulint:" in data:
        unit.ignore_comments.extend(ignore_comments(file, data))
