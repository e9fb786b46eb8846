"""A run over files: units planned, rendered, each judged on its own, the findings merged.

Every unit gets its own inventory, so that what one cluster holds never changes the verdict
on another; besides its own objects it holds only the platform components its cluster lends
it (``gpulint.engine.context``), and findings that use them say where they came from. A file
that reaches several units (a kustomize base under two overlays) has its findings reported
once, naming the units where each occurs; a suppression in such a file is unused (GL703)
only when it is unused in every unit that reads it.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from gpulint.core.model import Finding, NotChecked, joined
from gpulint.engine.config import Settings
from gpulint.engine.context import (
    Context,
    RunContext,
    borrowed_classified,
    infer,
    named_sources,
)
from gpulint.engine.coverage import merged, not_checked
from gpulint.engine.registry import Selection
from gpulint.engine.result import Result, UnitSummary
from gpulint.engine.runner import UNUSED_SUPPRESSION, run_units
from gpulint.input.loader import MAX_FILE_SIZE, InputError
from gpulint.input.units import STDIN, RenderOptions, Unit
from gpulint.input.units.plan import UnitPlan, plan
from gpulint.inventory import Inventory

# Called with each unit's inventory before the rules run (the live Prometheus check).
Prepare = Callable[[Inventory], None]
# Units are judged in batches of about this many objects (their own and what they take from
# their cluster): enough for the rules' second core to pay (runner.TWO_CORES_MIN_OBJECTS),
# few enough that a batch's inventories stay a small part of a large run's memory.
BATCH_OBJECTS = 1000


def plan_units(
    paths: Iterable[str], settings: Settings, max_file_size: int = MAX_FILE_SIZE
) -> list[UnitPlan]:
    """The units of a run. Raises InputError for a path that does not exist or an input with
    nothing to lint."""
    paths = list(paths)
    plans = plan(paths, settings, max_file_size)
    if not plans:
        raise InputError(f"no .yaml, .yml or .json files in {' '.join(paths)}")
    return plans


def build_units(plans: list[UnitPlan], options: RenderOptions) -> list[Unit]:
    """Render and load every unit; renders run side by side (each is its own process)."""
    if not any(p.kustomizations or p.charts or p.kind == STDIN for p in plans):
        # Files only: the plans hold everything loaded, and the renderers (with the process
        # machinery they import) are not needed; this is most of a one-file lint's imports.
        return [_files_unit(p) for p in plans]
    from gpulint.input.units.render import SourceFiles, build

    sources = SourceFiles(options.max_file_size)
    try:
        rendered = [p for p in plans if p.kustomizations or p.charts]
        built: dict[int, Unit] = {}
        if len(rendered) > 1:
            from concurrent.futures import ThreadPoolExecutor

            workers = min(len(rendered), max(2, os.cpu_count() or 2))
            with ThreadPoolExecutor(workers) as pool:
                for p, unit in zip(
                    rendered, pool.map(lambda p: build(p, options, sources), rendered), strict=True
                ):
                    built[id(p)] = unit
        units = []
        for p in plans:
            found = built.get(id(p))
            unit = found if found is not None else build(p, options, sources)
            if unit.kind == STDIN and _empty(unit):
                raise InputError(
                    "stdin is empty: nothing to lint (did the command before the pipe fail?)"
                )
            units.append(unit)
    finally:
        sources.close()  # the private copies renderers read, whatever happened
    return _with_parts(units)


def _empty(unit: Unit) -> bool:
    """Nothing but whitespace was read (and nothing that could not be read)."""
    return not any((loaded.text or b"").strip() for loaded in unit.loaded) and not any(
        loaded.problems for loaded in unit.loaded
    )


def _with_parts(units: list[Unit]) -> list[Unit]:
    """The units, and after them the bases of kustomizations that did not build, each judged
    as a unit once, unless it is a unit already or a kustomization that built judges it."""
    judged = {directory for unit in units for directory in unit.judged}
    judged.update(os.path.realpath(unit.root) for unit in units if unit.kind != STDIN)
    parts: dict[str, Unit] = {}
    stack = [part for unit in units for part in unit.parts]
    for unit in units:
        for part in unit.parts:
            part.origin = unit.origin
    while stack:
        part = stack.pop(0)
        for inner in part.parts:
            inner.origin = part.origin
        stack.extend(part.parts)
        key = os.path.realpath(part.root)
        if key in judged or key in parts:
            continue
        parts[key] = part
    return units + list(parts.values())


def _files_unit(plan: UnitPlan) -> Unit:
    """The unit of a plan with nothing to render or read from stdin (what
    ``gpulint.input.units.render.build`` makes of it)."""
    unit = Unit(plan.name, plan.kind, plan.root)
    unit.declared = plan.declared
    unit.origin = plan.origin
    unit.problems.extend(plan.problems)
    unit.skipped.extend(plan.skipped)
    for loaded in plan.loaded:
        unit.loaded.append(loaded)
        unit.files.add(loaded.path)
    return unit


def unit_inventory(unit: Unit, settings: Settings, context: Context | None = None) -> Inventory:
    """The unit's inventory: its own files, and the platform documents its context lends it
    (``gpulint.engine.context``)."""
    inventory = Inventory(settings)
    inventory.problems.extend(unit.problems)
    inventory.skipped.extend(unit.skipped)
    inventory.render_problems.extend(unit.render_problems)
    for loaded in unit.loaded:
        inventory.add_file(loaded)
        loaded.text = None  # classified: the bytes are not needed again
    if context is not None:
        for classified in borrowed_classified(context):
            inventory.add(classified)
    inventory.ignore_comments.extend(unit.ignore_comments)
    inventory.files = sorted(unit.files)
    return inventory


def lint_units(
    units: list[Unit],
    settings: Settings,
    selection: Selection,
    prepare: Prepare | None = None,
    run_context: RunContext | None = None,
) -> Result:
    """Judge each unit, with its context (inferred here unless given); one Result."""
    started = time.monotonic()
    per_unit: list[tuple[Unit, list[Finding], set[str]]] = []
    summaries: list[UnitSummary] = []
    files: set[str] = set()
    skipped: list[tuple[str, str]] = []
    suppressed: dict[str, int] = {}
    objects = 0
    unchecked: list[tuple[str, list[NotChecked]]] = []
    # Before any inventory is built: the borrowed documents keep their file's text.
    if run_context is None:
        run_context = infer(units, settings)
    contexts = run_context.contexts
    batch: list[tuple[Unit, Context, Inventory]] = []
    held = 0

    def judge() -> None:
        """The batch's units judged in one pass of the rules (``runner.run_units``)."""
        nonlocal objects
        counts: list[dict[str, int]] = [{} for _ in batch]
        found = run_units([inventory for _, _, inventory in batch], selection, counts, True)
        for (unit, context, inventory), raw, unit_counts in zip(batch, found, counts, strict=True):
            findings = [
                shown
                for finding in raw
                if (shown := named_sources(finding, context, unit.files)) is not None
            ]
            unchecked.append((unit.name, not_checked(inventory, context, selection)))
            for rule, count in unit_counts.items():
                suppressed[rule] = suppressed.get(rule, 0) + count
            comment_files = {c.file for c in inventory.ignore_comments}
            per_unit.append((unit, findings, unit.files | comment_files))
            files.update(unit.files)
            skipped.extend(unit.skipped)
            for loaded in unit.loaded:
                if loaded.skipped_reason:
                    skipped.append((loaded.path, loaded.skipped_reason))
            own = len(inventory) - context.borrowed_objects
            objects += own
            summaries.append(
                UnitSummary(
                    unit.name,
                    unit.kind,
                    unit.root,
                    own,
                    tuple(unit.rendered_by),
                    unit.render_seconds,
                    context.describe() if len(units) > 1 else "",
                )
            )
        batch.clear()

    # An inventory's indexes refer to each other, so a judged one is freed by the cyclic
    # collector; `gpulint lint` turns it off (parsed documents form no cycles), and 10,000
    # units' inventories were then all kept to the end (220 MB). With it off, each batch's
    # leftovers are collected once judged, among the objects made since the batch began:
    # what the run held before is frozen, not scanned again.
    collect = not gc.isenabled()
    if collect:
        gc.freeze()
    try:
        for unit, context in zip(units, contexts, strict=True):
            # held by the batch alone, so that it is freed with the batch
            batch.append((unit, context, unit_inventory(unit, settings, context)))
            if prepare is not None:
                prepare(batch[-1][2])
            held += len(batch[-1][2])
            # Units are judged together, a batch at a time: the rules start once per batch
            # and share its work between two cores like one large unit's, while a run of
            # thousands of units never holds more than a batch's inventories at once.
            if held >= BATCH_OBJECTS or unit is units[-1]:
                judge()
                held = 0
                if collect:
                    gc.collect(0)
    finally:
        if collect:
            gc.unfreeze()
    findings = merge(per_unit) if len(per_unit) > 1 else (per_unit[0][1] if per_unit else [])
    result = Result(findings, len(files), objects, _unique(skipped), units=summaries)
    result.clusters = run_context.clusters
    result.versions = settings.versions
    result.not_checked = merged(unchecked)
    result.inputs = frozenset(files)
    for unit in units:
        if unit.kind == STDIN:  # edits are placed in what was piped, not in a file on disk
            for loaded in unit.loaded:
                if loaded.text is not None:
                    result.sources.give(loaded.path, loaded.text.decode("utf-8", "replace"))
    result.notes.extend(dict.fromkeys(note for unit in units for note in unit.notes))
    result.suppressed = suppressed
    result.lint_seconds = time.monotonic() - started
    return result


def merge(per_unit: list[tuple[Unit, list[Finding], set[str]]]) -> list[Finding]:
    """One finding per (rule, place, message), naming the units it was found in. A finding
    in a file that only one unit reads needs no unit names: the file says it."""
    readers: dict[str, list[str]] = {}
    for unit, _, unit_files in per_unit:
        for file in unit_files:
            readers.setdefault(file, []).append(unit.name)
    merged: dict[tuple[Any, ...], tuple[Finding, list[str]]] = {}
    for unit, findings, _ in per_unit:
        for finding in findings:
            where = finding.location
            key = (finding.rule, where.file, where.line, where.column, finding.message)
            entry = merged.get(key)
            if entry is None:
                merged[key] = (finding, [unit.name])
                continue
            if unit.name not in entry[1]:
                entry[1].append(unit.name)
            if finding.made_from != entry[0].made_from:  # each unit rendered it from its own
                made_from = joined(entry[0].made_from, finding.made_from)
                merged[key] = (entry[0]._replace(made_from=made_from), entry[1])
    found = []
    for finding, names in merged.values():
        file = finding.location.file
        reading = readers.get(file, [])
        if finding.rule == UNUSED_SUPPRESSION and len(names) < len(reading):
            continue  # the suppression is used in another unit that reads the file
        if len(reading) > 1 or len(names) > 1:
            location = finding.location
            if len(names) > 1 and location.rendered_from in names:
                location = location._replace(rendered_from=None)  # the units say it
            finding = finding._replace(units=tuple(names), location=location)
        found.append(finding)
    found.sort(key=Finding.sort_key)
    return found


def _unique(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(items))
