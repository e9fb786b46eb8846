"""From what a front door was given to the inventories the rules judge: the one assembly
that ``gpulint lint``, ``check-adapter``, ``trace``, ``replay``, ``context`` and the baseline
and ``--changed-since`` options all use, so that each judges the same objects with the same
cluster context however the paths are typed.

    paths ──> units planned ──> rendered and loaded ──> the run's clusters and what each unit
              (input.units.plan)  (input.units.render)   takes from its cluster (engine.context)
          ──> one inventory per unit, its own objects and what it takes (``Assembly.judged``)

``lint_text`` is the same road for one text, as a file of that name.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from gpulint.engine.config import Settings
from gpulint.engine.context import Context, RunContext, infer
from gpulint.engine.files import Prepare, build_units, lint_units, plan_units, unit_inventory
from gpulint.engine.registry import Selection
from gpulint.engine.result import Result
from gpulint.input.loader import MAX_FILE_SIZE, load_file
from gpulint.input.units import FILES, RenderOptions, Unit
from gpulint.inventory import Inventory


class Judged(NamedTuple):
    """A unit, the context it is judged with, and its inventory."""

    unit: Unit
    context: Context
    inventory: Inventory


class Assembly:
    """The units of a run, rendered, and the context of each."""

    __slots__ = ("context", "render_seconds", "units")

    def __init__(self, units: list[Unit], context: RunContext, render_seconds: float) -> None:
        self.units = units
        self.context = context
        self.render_seconds = render_seconds  # wall time of rendering (side by side)

    def judged(self, settings: Settings) -> Iterator[Judged]:
        """Each unit's inventory, built when asked (one at a time: a large run never holds
        every unit's index at once)."""
        for unit, context in zip(self.units, self.context.contexts, strict=True):
            yield Judged(unit, context, unit_inventory(unit, settings, context))

    def lint(
        self, settings: Settings, selection: Selection, prepare: Prepare | None = None
    ) -> Result:
        """Every unit judged: one Result for the run."""
        result = lint_units(self.units, settings, selection, prepare, self.context)
        if any(unit.rendered_by for unit in self.units):
            result.render_wall = self.render_seconds
        return result


def assemble(
    paths: Iterable[str],
    settings: Settings,
    options: RenderOptions | None = None,
    max_file_size: int = MAX_FILE_SIZE,
) -> Assembly:
    """The run's units, rendered, with their contexts. Raises InputError for a path that does
    not exist, an input with nothing to lint, or a ``units:``/``clusters:`` pattern that is
    refused or matches nothing."""
    plans = plan_units(list(paths) or ["."], settings, max_file_size)
    started = time.monotonic()
    units = build_units(plans, options or RenderOptions(max_file_size=max_file_size))
    rendered = time.monotonic() - started
    return Assembly(units, infer(units, settings), rendered)


def lint_text(
    text: bytes | str,
    name: str = "input.yaml",
    settings: Settings | None = None,
    selection: Selection | None = None,
) -> Result:
    """Lint one text as if it were the file ``name``, alone, through the engine's road."""
    settings = settings or Settings()
    data = text.encode() if isinstance(text, str) else text
    loaded = load_file(name, data)
    loaded.path = name
    unit = Unit(name, FILES, os.path.dirname(name) or ".")
    unit.loaded.append(loaded)
    unit.files.add(name)
    return lint_units([unit], settings, selection or Selection(), None, infer([unit], settings))
