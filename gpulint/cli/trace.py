"""``gpulint trace``: the chain of every autoscaler metric, rendered."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, TextIO

from gpulint.cli.exitcodes import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
from gpulint.cli.inputs import assembled, prepared_cluster, read_settings
from gpulint.cli.livecheck import LiveCheck, live_check
from gpulint.cli.output import report_written, wants_color

if TYPE_CHECKING:
    import argparse

    from gpulint.engine.config import Settings
    from gpulint.engine.registry import Selection
    from gpulint.trace.chain import Trace


def run_trace(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """``gpulint trace``: the chains of every unit (or of the cluster), rendered."""
    from gpulint.engine.registry import Selection
    from gpulint.trace.chain import select

    gc.disable()
    settings = read_settings(args, stderr)
    if settings is None:
        return EXIT_USAGE
    selection = Selection()
    live = live_check(args, settings, selection, stderr)
    if live is None:
        return EXIT_USAGE
    prepare = live if isinstance(live, LiveCheck) else None
    found = _traces(args, settings, selection, prepare, stderr)
    if found is None:
        return EXIT_USAGE
    found = select(found, args.autoscaler)
    if args.autoscaler and not found:
        from gpulint.report.escape import escape_controls

        # One line, whatever the name holds (gpulint.cli.main's stream makes it inert).
        wanted = escape_controls(args.autoscaler)
        stderr.write(f"gpulint: error: --autoscaler {wanted}: no such autoscaler metric\n")
        return EXIT_USAGE
    if not report_written(args.output, stdout, stderr, lambda out: _write_traces(args, found, out)):
        return EXIT_USAGE
    if isinstance(live, LiveCheck) and live.failed_required:
        return EXIT_FINDINGS
    if args.fail_on == "never":
        return EXIT_OK
    return _exit_code(args.fail_on, found)


def _traces(
    args: argparse.Namespace,
    settings: Settings,
    selection: Selection,
    prepare: LiveCheck | None,
    stderr: TextIO,
) -> list[Trace] | None:
    """The traces of the cluster or of every unit of the paths; None after an error said on
    stderr."""
    from gpulint.engine.runner import run
    from gpulint.trace.chain import traces

    found: list[Trace] = []
    if args.cluster:
        cluster = prepared_cluster(args, settings, selection, prepare, stderr)
        if cluster is None:
            return None
        inventory = cluster[0]
        found.extend(traces(inventory, run(inventory, selection), "cluster"))
        return found
    assembly = assembled(args, settings, stderr)
    if assembly is None:
        return None
    # Each unit with the platform its cluster lends it, as lint judges it.
    for unit, _, inventory in assembly.judged(settings):
        if prepare is not None:
            prepare(inventory)
        found.extend(traces(inventory, run(inventory, selection), unit.name))
    return found


def _write_traces(args: argparse.Namespace, found: list[Trace], out: TextIO) -> None:
    from gpulint.trace import render

    if args.format == "json":
        render.render_json(found, out)
    elif args.format == "mermaid":
        render.render_mermaid(found, out)
    else:
        render.render_text(found, out, wants_color(args.color, out))


def _exit_code(fail_on: str, found: list[Trace]) -> int:
    """1 when a broken link is at or above ``--fail-on``."""
    from gpulint.core.model import Severity

    threshold = Severity.parse(fail_on)
    broken = [
        link.severity
        for trace in found
        for link in trace.links
        if link.status == "broken" and link.severity is not None
    ]
    return EXIT_FINDINGS if any(s >= threshold for s in broken) else EXIT_OK
