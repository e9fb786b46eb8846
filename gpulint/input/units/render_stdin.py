"""Piped input: ``kustomize build`` or ``helm template`` output read from stdin, mapped back
to its sources when they can be found under ``--stdin-filename``."""

from __future__ import annotations

import os

from gpulint.core.model import SourceFile
from gpulint.core.paths import display_path
from gpulint.input.document import Document, as_dict
from gpulint.input.loader import (
    LoadedFile,
    load_file,
    read_problem,
    read_source,
)
from gpulint.input.units import RenderOptions, Unit
from gpulint.input.units.buildmetadata import build_annotations
from gpulint.input.units.helm import HelmSource, chart_inputs, chart_name, template_file
from gpulint.input.units.kustomize import (
    KUSTOMIZATION_NAMES,
    kustomization_file,
)
from gpulint.input.units.kustomize_origins import map_kustomize_output
from gpulint.input.units.render_helm import template_comments
from gpulint.input.units.sources import SourceFiles
from gpulint.input.units.walk import tree_files


def read_stdin(unit: Unit, options: RenderOptions, sources: SourceFiles) -> None:
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
    _map_kustomized(unit, loaded, base_dir, sources)
    helmed = [d for d in loaded.documents if d.rendered_from and d.source is None]
    if helmed:
        _map_helmed(unit, helmed, base_dir, sources)


def _map_kustomized(
    unit: Unit, loaded: LoadedFile, base_dir: str | None, sources: SourceFiles
) -> None:
    """Piped ``kustomize build`` output: by its origin annotations, else (``--stdin-filename``
    naming a kustomization) by the resources of that kustomization and its bases."""
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
            map_kustomize_output(unit, temporary, root, kustomization, sources)
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
            map_kustomize_output(
                unit, temporary, base_dir, sources.kustomization(base_dir), sources
            )


def _map_helmed(
    unit: Unit, helmed: list[Document], base_dir: str | None, sources: SourceFiles
) -> None:
    """Piped ``helm template`` output: each document at its template, when the chart named in
    its ``# Source:`` comment is found."""
    counts: dict[str, int] = {}
    charts: dict[str, str | None] = {}
    inputs: dict[str, tuple[SourceFile, ...]] = {}
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
        if chart not in inputs:
            # The values the output was rendered with are not known: the chart's own.
            inputs[chart] = chart_inputs(chart)
        document.source = HelmSource(
            document.data, template, index, source, unit.name, inputs[chart]
        )
        if file not in unit.files:
            unit.files.add(file)
            template_comments(unit, file, sources)


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
    return [
        os.path.normpath(root)
        for root, files in tree_files(top, max_depth=depth)
        if any(name in files for name in KUSTOMIZATION_NAMES)
    ]


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
    for root, files in tree_files(".", max_depth=6):
        if "Chart.yaml" in files and chart_name(root) == name:
            return os.path.normpath(root)
    return None
