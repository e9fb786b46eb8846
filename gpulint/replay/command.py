"""``gpulint replay``: its options and its run.

Exit codes as for lint: 0 no replay finding at or above --fail-on, 1 some, 2 usage error,
bad configuration, no readable input, an unusable Prometheus, or no autoscaler to replay.

Every line it writes on stderr quotes names, queries or Prometheus's words: each is written
through ``_say``, one line whatever it holds (``gpulint.report.escape``).
"""

from __future__ import annotations

import argparse
import datetime
import math
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TextIO

if TYPE_CHECKING:
    from gpulint.adoption.edits import FixPlan
    from gpulint.engine.config import Settings
    from gpulint.inventory import Inventory
    from gpulint.live.client import PrometheusAPI
    from gpulint.replay.model import History, ReplaySpec, Skipped
    from gpulint.replay.report import Replayed, ReplayOptions

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
# A day at the sync period is 5,760 points a series; a week at 15 s is 40,320 (four range
# requests). More than this many grid points is refused: memory grows with them.
MAX_POINTS = 100_000


def add_replay_options(parser: argparse.ArgumentParser) -> None:
    from gpulint.cli.options import (
        add_cluster_options,
        add_input_options,
        add_render_options,
        add_selection_options,
        add_version_options,
    )

    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or directories with the autoscalers, their workloads and the adapter "
        "config, as for lint; default: the current directory",
    )
    parser.add_argument(
        "--prometheus", metavar="URL", required=True, help="base URL of the Prometheus HTTP API"
    )
    parser.add_argument(
        "--prometheus-header",
        action="append",
        metavar="K=V",
        help="HTTP header for every request (repeatable)",
    )
    parser.add_argument(
        "--prometheus-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds for all the queries of the run (default: 60)",
    )
    parser.add_argument(
        "--autoscaler",
        metavar="[NAMESPACE/]NAME",
        help="only this HPA or ScaledObject",
    )
    parser.add_argument(
        "--range", default="24h", metavar="DURATION", help="how far back (default: 24h)"
    )
    parser.add_argument(
        "--end",
        metavar="TIME",
        help="the end of the range, RFC 3339 or Unix seconds (default: now)",
    )
    parser.add_argument(
        "--step", default="15s", metavar="DURATION", help="resolution of the history (default: 15s)"
    )
    parser.add_argument(
        "--pod-ready-after",
        metavar="DURATION",
        help="how long a new pod takes to serve (default: from the pod template's "
        "startupProbe and readinessProbe, else 120s)",
    )
    parser.add_argument(
        "--format",
        "-f",
        choices=("text", "json", "svg", "html", "markdown"),
        default="text",
        help="text, json (version 1), svg (one picture; --autoscaler picks it), html (one "
        "offline page) or markdown (for $GITHUB_STEP_SUMMARY); default: text",
    )
    parser.add_argument(
        "--pictures",
        metavar="DIR",
        help="with --format markdown: write each autoscaler's picture (SVG) into DIR; the "
        "Markdown names the files and carries a text summary of each instead (a picture "
        "inline would fill a job summary)",
    )
    parser.add_argument(
        "--pictures-url",
        metavar="URL",
        help="with --pictures: the address DIR is published at; the Markdown shows each "
        "picture from it",
    )
    parser.add_argument(
        "--compare-fix",
        action="store_true",
        help="replay gpulint's suggested behavior (GL102's fix) beside the one in use",
    )
    parser.add_argument(
        "--recommend",
        action="store_true",
        help="search each autoscaler's targets, behavior and tolerance over the replayed "
        "history for the setting with the least time under-provisioned (then scale-up lag) "
        "within --budget, ties broken by fewer flaps; print it as a patch",
    )
    parser.add_argument(
        "--budget",
        type=float,
        metavar="GPU_HOURS",
        help="the GPU-hours --recommend and --compare-fix may spend over the range (default: "
        "what the configured setting used)",
    )
    parser.add_argument(
        "--fix",
        action="store_true",
        help="with --recommend: write each recommended setting into its file, as "
        "gpulint lint --fix edits",
    )
    parser.add_argument(
        "--node-ready-after",
        metavar="DURATION",
        help="model GPU nodes: a new pod waits this long for a node once the pool's free "
        "GPUs are used (the time a node takes to join and be ready)",
    )
    parser.add_argument(
        "--gpus-per-node",
        type=int,
        default=8,
        metavar="N",
        help="with --node-ready-after: GPUs a node has (default: 8)",
    )
    parser.add_argument(
        "--max-nodes",
        type=int,
        metavar="N",
        help="with --node-ready-after: the most nodes of a target's pool (default: no limit)",
    )
    parser.add_argument(
        "--gpu-hour-cost",
        type=float,
        metavar="PRICE",
        help="the price of a GPU-hour: each replay's cost beside its GPU-hours",
    )
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning", "info", "never"),
        default="error",
        help="lowest severity of a replay finding (GL951-GL954) that fails the run (exit "
        "code 1; default: error)",
    )
    add_selection_options(parser, "GL95")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE")
    add_input_options(parser)
    add_version_options(parser)
    add_render_options(parser)
    add_cluster_options(parser)


def _say(stderr: TextIO, text: str) -> None:
    """A line on stderr: its control characters shown as escapes (a newline in a name
    included, so the line stays one), and no CI workflow command at its start."""
    from gpulint.report.escape import escape_controls, safe_line

    stderr.write(safe_line(escape_controls(text)) + "\n")


def _time(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone (add Z or +00:00)")
    return moment.timestamp()


def run_replay(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpulint.cli.extras import missing_extra
    from gpulint.cli.inputs import read_selection, read_settings
    from gpulint.live.options import OptionError, parse_duration, parse_header, parse_url

    problem = missing_extra("live", "gpulint replay")
    if problem is not None:
        _say(stderr, f"gpulint: error: {problem}")
        return EXIT_USAGE
    try:
        url = parse_url(args.prometheus)
        headers = dict(parse_header(h) for h in args.prometheus_header or [])
        span = parse_duration(args.range)
        step = parse_duration(args.step)
        ready_after = (
            parse_duration(args.pod_ready_after) if args.pod_ready_after is not None else None
        )
        end = _time(args.end) if args.end else time.time()
        options = _options(args, parse_duration)
    except (OptionError, ValueError) as error:
        _say(stderr, f"gpulint: error: {error}")
        return EXIT_USAGE
    if (args.pictures or args.pictures_url) and args.format != "markdown":
        _say(stderr, "gpulint: error: --pictures and --pictures-url go with --format markdown")
        return EXIT_USAGE
    if args.pictures_url and not args.pictures:
        _say(stderr, "gpulint: error: --pictures-url needs --pictures DIR (where to write them)")
        return EXIT_USAGE
    if args.pictures_url and not re.match(r"^https?://[^\s()<>]+$", args.pictures_url):
        _say(stderr, "gpulint: error: --pictures-url must be an http(s) URL")
        return EXIT_USAGE
    if step <= 0 or span <= 0 or not math.isfinite(end):
        _say(stderr, "gpulint: error: --range and --step must be positive")
        return EXIT_USAGE
    if span / step + 1 > MAX_POINTS:
        _say(
            stderr,
            f"gpulint: error: --range {args.range} at --step {args.step} is more than "
            f"{MAX_POINTS} points; take a longer step",
        )
        return EXIT_USAGE
    end = math.floor(end / step) * step  # on the step's grid, as Prometheus aligns nothing
    start = end - span
    settings = read_settings(args, stderr)
    if settings is None:
        return EXIT_USAGE
    selection = read_selection(args, stderr)
    if selection is None:
        return EXIT_USAGE
    inventories = _inventories(args, settings, stderr)
    if inventories is None:
        return EXIT_USAGE
    from gpulint.live.client import Deadline, PrometheusAPI, PrometheusError
    from gpulint.replay.report import replay_one

    api = PrometheusAPI(url, headers, Deadline(args.prometheus_timeout))
    fetched: list[tuple[ReplaySpec, History, Inventory]] = []
    skipped: list[Skipped] = []
    wanted = args.autoscaler
    matched = False
    try:
        for inventory in inventories:
            window = (start, end, step)
            found = _fetch_inventory(
                args, inventory, api, window, ready_after, fetched, skipped, stderr
            )
            matched = found or matched
    except PrometheusError as error:
        _say(stderr, f"gpulint: error: Prometheus at {url}: {error}")
        return EXIT_USAGE
    finally:
        api.close()
    # Replayed once every history is in: --prometheus-timeout is for the queries alone, not
    # for a --recommend search between them.
    replays = [
        replay_one(spec, history, inventory, selection=selection, options=options)
        for spec, history, inventory in fetched
    ]
    if wanted and not matched:
        _say(stderr, f"gpulint: error: --autoscaler {wanted}: no such HPA or ScaledObject")
        return EXIT_USAGE
    if not replays and (not skipped or args.format == "svg"):
        _say(stderr, "gpulint: error: no autoscaler could be replayed")
        return EXIT_USAGE
    try:
        # With nothing replayed the report still says why each autoscaler was left out.
        _write(args, replays, skipped, start, end, step, stdout, stderr)
    except OSError as error:  # --output or --pictures where nothing can be written
        target = error.filename if isinstance(error.filename, str) else args.output
        if not target or isinstance(error, BrokenPipeError):
            raise  # stdout's reader went away: gpulint.cli.main says nothing more
        _say(stderr, f"gpulint: error: cannot write {target}: {error.strerror or error}")
        return EXIT_USAGE
    if not replays:
        _say(stderr, "gpulint: error: no autoscaler could be replayed")
        return EXIT_USAGE
    if args.fix:
        _apply_recommendations(args, replays, stderr)
    return _exit_code(args.fail_on, replays)


def _options(args: argparse.Namespace, parse_duration: Callable[[str], float]) -> ReplayOptions:
    """The options beside the replay itself; ValueError for one out of its range."""
    from gpulint.replay.nodes import NodeOptions
    from gpulint.replay.report import ReplayOptions

    if args.fix and not args.recommend:
        raise ValueError("--fix goes with --recommend (it writes the recommended settings)")
    for name, value in (("--budget", args.budget), ("--gpu-hour-cost", args.gpu_hour_cost)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a number, 0 or more")
    nodes = None
    if args.node_ready_after is not None:
        ready = parse_duration(args.node_ready_after)
        if args.gpus_per_node < 1 or (args.max_nodes is not None and args.max_nodes < 1):
            raise ValueError("--gpus-per-node and --max-nodes must be 1 or more")
        nodes = NodeOptions(ready, args.gpus_per_node, args.max_nodes)
    elif args.max_nodes is not None or args.gpus_per_node != 8:
        raise ValueError("--gpus-per-node and --max-nodes go with --node-ready-after")
    return ReplayOptions(
        compare_fix=args.compare_fix,
        recommend=args.recommend,
        budget=args.budget,
        nodes=nodes,
        gpu_hour_cost=args.gpu_hour_cost,
    )


def _apply_recommendations(
    args: argparse.Namespace, replays: list[Replayed], stderr: TextIO
) -> None:
    """``--fix``: each better recommendation's edits, written as ``gpulint lint --fix``
    writes its fixes (gpulint.adoption): in place, only under the paths given, all of a
    recommendation or none of it."""
    from gpulint.adoption.edits import Sources, plan_edits
    from gpulint.adoption.fix import Writable, write_file

    class _Proposal(NamedTuple):
        plan: FixPlan
        key: str

    proposals = []
    for replayed in replays:
        found = replayed.recommendation
        if found is None or not found.better:
            continue
        key = f"{replayed.spec.kind} {replayed.spec.key}"
        if found.plan is None:
            _say(stderr, f"gpulint: {key}: the recommendation cannot be written in place")
            continue
        proposals.append(_Proposal(found.plan, key))
    # One round, as lint --fix's first: every edit placed against the text as it was read.
    applied = plan_edits(proposals, Sources(), unsafe_too=True, writable=Writable(args.paths))
    for proposal in proposals:
        if proposal not in applied.fixed:
            _say(stderr, f"gpulint: {proposal.key}: the recommendation cannot be written in place")
    for file in applied.refused:
        _say(stderr, f"gpulint: {file} may not be written (outside the paths given)")
    for file, text in applied.after.items():
        write_file(file, text)
        _say(stderr, f"gpulint: recommendations written to {file}")


def _inventories(
    args: argparse.Namespace, settings: Settings, stderr: TextIO
) -> list[Inventory] | None:
    """The cluster's inventory, or one per unit of the paths; None after an error said on
    stderr."""
    from gpulint.cli.inputs import assembled, prepared_cluster
    from gpulint.engine.registry import Selection

    if args.cluster:
        cluster = prepared_cluster(args, settings, Selection(), None, stderr)
        if cluster is None:
            return None
        return [cluster[0]]
    assembly = assembled(args, settings, stderr)
    if assembly is None:
        return None
    # Each unit with what its cluster lends it, as lint judges it.
    return [judged.inventory for judged in assembly.judged(settings)]


def _fetch_inventory(
    args: argparse.Namespace,
    inventory: Inventory,
    api: PrometheusAPI,
    window: tuple[float, float, float],
    ready_after: float | None,
    fetched: list[tuple[ReplaySpec, History, Inventory]],
    skipped: list[Skipped],
    stderr: TextIO,
) -> bool:
    """The histories of the autoscalers of one inventory that ``--autoscaler`` asks for (each
    that can be fetched); the others go to ``skipped``, their reasons said on stderr too; did
    any match?"""
    from gpulint.replay.history import HistoryError, fetch
    from gpulint.replay.model import Skipped
    from gpulint.replay.plan import plan

    wanted = args.autoscaler
    matched = False
    found = plan(inventory, ready_after)
    for left in found.skipped:
        if _wanted(wanted, left.namespace, left.name):
            matched = True
            skipped.append(left)
            _say(stderr, f"gpulint: {left.describe()}")
    for spec in found.specs:
        if not _wanted(wanted, spec.namespace, spec.name):
            continue
        matched = True
        try:
            history = fetch(api, spec, *window)
        except HistoryError as error:
            left = Skipped(spec.kind, spec.namespace, spec.name, str(error))
            skipped.append(left)
            _say(stderr, f"gpulint: {left.describe()}")
            continue
        fetched.append((spec, history, inventory))
    return matched


def _wanted(wanted: str | None, namespace: str, name: str) -> bool:
    if not wanted:
        return True
    if "/" in wanted:
        return wanted == f"{namespace}/{name}"
    return wanted == name


def _write(
    args: argparse.Namespace,
    replays: list[Replayed],
    skipped: list[Skipped],
    start: float,
    end: float,
    step: float,
    stdout: TextIO,
    stderr: TextIO,
) -> None:
    from gpulint.replay import render

    out = stdout
    handle = None
    if args.output:
        handle = open(args.output, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        out = handle
    try:
        if args.format == "json":
            render.render_json(replays, start, end, step, out, skipped)
        elif args.format == "html":
            render.render_html(replays, start, end, step, out, skipped)
        elif args.format == "markdown":
            pictures = render.Pictures(args.pictures, args.pictures_url) if args.pictures else None
            render.render_markdown(replays, start, end, step, out, pictures, skipped)
        elif args.format == "svg":
            if len(replays) > 1:
                _say(
                    stderr,
                    f"gpulint: {len(replays)} autoscalers replayed; the SVG shows the first "
                    f"({replays[0].spec.key}): pick one with --autoscaler, or use --format html",
                )
            out.write(render.render_svg(replays[0]))
        else:
            render.render_text(replays, start, end, step, out, skipped)
    finally:
        if handle is not None:
            handle.close()


def _exit_code(fail_on: str, replays: list[Replayed]) -> int:
    from gpulint.core.model import Severity

    if fail_on == "never":
        return EXIT_OK
    threshold = Severity.parse(fail_on)
    found = [f.severity for r in replays for f in r.findings]
    return EXIT_FINDINGS if any(s >= threshold for s in found) else EXIT_OK
