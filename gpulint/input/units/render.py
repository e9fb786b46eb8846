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

This module dispatches a planned unit to its renderer: ``render_kustomize``, ``render_helm``
and ``render_stdin``; ``sources`` holds the files they map rendered objects back to.
"""

from __future__ import annotations

import time

from gpulint.input.units import FILES, HELM, KUSTOMIZE, STDIN, RenderOptions, Unit
from gpulint.input.units.plan import UnitPlan
from gpulint.input.units.render_helm import build_chart
from gpulint.input.units.render_kustomize import build_kustomization
from gpulint.input.units.render_stdin import read_stdin
from gpulint.input.units.sources import SourceFiles


def build(plan: UnitPlan, options: RenderOptions, sources: SourceFiles) -> Unit:
    unit = Unit(plan.name, plan.kind, plan.root)
    unit.declared = plan.declared
    unit.origin = plan.origin
    sources.allow(plan.boundaries)
    unit.problems.extend(plan.problems)
    unit.skipped.extend(plan.skipped)
    for loaded in plan.loaded:
        unit.loaded.append(loaded)
        unit.files.add(loaded.path)
    started = time.monotonic()
    for kustomization in plan.kustomizations:
        build_kustomization(unit, kustomization, options, sources)
    for chart in plan.charts:
        build_chart(unit, chart, options, sources, plan.chart_values.get(chart))
    unit.render_seconds = time.monotonic() - started
    if plan.kind == STDIN:
        read_stdin(unit, options, sources)
    return unit


__all__ = ["FILES", "HELM", "KUSTOMIZE", "RenderOptions", "SourceFiles", "build"]
