"""``gpulint migrate keda``: its options and its run.

Exit codes: 0 every HPA served by prometheus-adapter was migrated (and, with ``--prometheus``,
proved), 1 some were refused or the proof found them apart, 2 usage error, bad configuration,
no readable input or an unusable Prometheus.

Every line it writes on stderr or in the report quotes names, queries or Prometheus's words:
each goes through ``gpulint.report.escape`` (one line, whatever it holds).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from gpulint.inventory import Inventory
    from gpulint.migrate.lowering import Lowered
    from gpulint.migrate.placement import Placed
    from gpulint.migrate.proof import Proof

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def add_migrate_options(parser: argparse.ArgumentParser) -> None:
    from gpulint.cli.options import add_input_options, add_render_options, add_version_options

    targets = parser.add_subparsers(dest="target", metavar="TARGET")
    keda = targets.add_parser(
        "keda",
        help="rewrite HPAs served by prometheus-adapter as KEDA ScaledObjects",
        description="For every HPA whose Pods, Object or External metrics a prometheus-adapter "
        "rule of the input serves, write the KEDA ScaledObject that scales the same: each "
        "trigger's query the adapter's as it renders it for the HPA, summed to one series; "
        "threshold and metricType from the HPA's targets; its replicas and behavior; the HPA "
        "removed and KEDA asked to take it over. Written where the HPA came from (a new file "
        "beside it, or a patch of the overlay that made it); a chart's HPA is refused. With "
        "--prometheus, both are replayed over the same history and every query is checked "
        "live (docs/migrate.md).",
    )
    keda.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or directories with the HPAs, their workloads and the adapter config; "
        "default: the current directory",
    )
    mode = keda.add_mutually_exclusive_group()
    mode.add_argument(
        "--diff", action="store_true", help="print the change as a patch (git apply takes it)"
    )
    mode.add_argument("--write", action="store_true", help="write the change in place")
    keda.add_argument(
        "--server-address",
        metavar="URL",
        help="the Prometheus the triggers query, when the input does not say which one "
        "prometheus-adapter queries",
    )
    keda.add_argument(
        "--prometheus",
        metavar="URL",
        help="prove the migration against this Prometheus: replay the HPA and the ScaledObject "
        "over the same history, and check every query live",
    )
    keda.add_argument(
        "--prometheus-header", action="append", metavar="K=V", help="HTTP header (repeatable)"
    )
    keda.add_argument(
        "--prometheus-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds for all the queries of the proof (default: 60)",
    )
    keda.add_argument("--range", default="24h", metavar="DURATION", help="replayed (default: 24h)")
    keda.add_argument(
        "--end", metavar="TIME", help="the end of the replay, RFC 3339 or Unix seconds"
    )
    keda.add_argument("--step", default="15s", metavar="DURATION", help="default: 15s")
    keda.add_argument(
        "--picture",
        metavar="FILE",
        help="with --prometheus: write the first proved HPA's two replays side by side (SVG)",
    )
    keda.add_argument(
        "--format", "-f", choices=("text", "json"), default="text", help="the report's format"
    )
    add_input_options(keda)
    add_version_options(keda)
    add_render_options(keda)


def _say(stream: TextIO, text: str) -> None:
    from gpulint.report.escape import escape_controls, safe_line

    stream.write(safe_line(escape_controls(text)) + "\n")


@dataclass
class Migration:
    """One run: the HPAs migrated, where, and the ones refused."""

    placed: list[tuple[Placed, Inventory]] = field(default_factory=list)
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # (key, file, reason)
    # The ScaledObjects of refused HPAs that could be lowered (a chart's), by HPA key.
    unplaced: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_migrate(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpulint.adoption.fix import Writable
    from gpulint.cli.inputs import assembled, read_settings
    from gpulint.migrate.writing import changes

    if args.target != "keda":
        _say(stderr, "gpulint: error: say what to migrate to: gpulint migrate keda [PATHS]")
        return EXIT_USAGE
    if args.picture and not args.prometheus:
        _say(stderr, "gpulint: error: --picture draws the proof's replays: give --prometheus")
        return EXIT_USAGE
    settings = read_settings(args, stderr)
    if settings is None:
        return EXIT_USAGE
    assembly = assembled(args, settings, stderr)
    if assembly is None:
        return EXIT_USAGE
    migration = _migrate(assembly, settings, args.server_address)
    paths = list(args.paths or ["."])
    found = changes([p for p, _ in migration.placed], paths, Writable(paths))
    for placed, why in found.refused:
        hpa = placed.lowered.hpa
        migration.refused.append((placed.lowered.key, hpa.manifest.file, why))
    written = {id(p) for p in found.written}
    migrated = [(p, inventory) for p, inventory in migration.placed if id(p) in written]
    proofs: list[Proof] = []
    if args.prometheus:
        proved = _prove(args, [(p.lowered, inventory) for p, inventory in migrated], stderr)
        if proved is None:
            return EXIT_USAGE
        proofs = proved
    report = stderr if args.diff else stdout
    if args.diff:
        patch, withheld = found.patch()
        stdout.write(patch)
        for file, escaped in withheld.items():
            _say(
                stderr,
                f"gpulint: the change of {file} holds control characters; not in the "
                "patch, shown escaped:",
            )
            stderr.write(escaped + "\n")
    elif args.write:
        try:
            found.write()
        except OSError as error:
            _say(stderr, f"gpulint: error: cannot write: {error}")
            return EXIT_USAGE
    if args.format == "json":
        _report_json(migration, migrated, found, proofs, report)
    else:
        _report_text(args, migration, migrated, found, proofs, report)
    if args.picture and proofs:
        from gpulint.migrate.proof import side_by_side

        try:
            with open(args.picture, "w", encoding="utf-8") as handle:
                handle.write(side_by_side(proofs[0]))
        except OSError as error:
            _say(stderr, f"gpulint: error: cannot write {args.picture}: {error}")
            return EXIT_USAGE
    failed = migration.refused or any(not proof.agrees for proof in proofs)
    return EXIT_FINDINGS if failed else EXIT_OK


def _migrate(assembly: Any, settings: Any, server_address: str | None) -> Migration:
    from gpulint.chain.written import adapter_prometheus_address
    from gpulint.migrate.lowering import Refusal, candidates, lower
    from gpulint.migrate.placement import place

    migration = Migration()
    taken: set[str] = set()
    seen: set[tuple[str, str, str]] = set()
    for judged in assembly.judged(settings):
        inventory = judged.inventory
        address = server_address or adapter_prometheus_address(inventory)
        for hpa in candidates(inventory):
            # A file two units read is migrated once; an overlay's build, once per overlay.
            built = hpa.manifest.source is not None
            identity = (
                judged.unit.root if built else "",
                hpa.manifest.file,
                str(hpa.manifest.index),
            )
            if identity in seen:
                continue
            seen.add(identity)
            lowered = lower(hpa, inventory, address)
            if isinstance(lowered, Refusal):
                migration.refused.append((lowered.key, hpa.manifest.file, lowered.reason))
                continue
            placement = place(lowered, judged.unit.root, taken)
            if placement.placed is None:
                migration.refused.append(
                    (lowered.key, hpa.manifest.file, placement.refusal or "not placed")
                )
                migration.unplaced[lowered.key] = lowered.scaled_object
                continue
            migration.placed.append((placement.placed, inventory))
    return migration


def _prove(
    args: argparse.Namespace, lowered: list[tuple[Lowered, Inventory]], stderr: TextIO
) -> list[Proof] | None:
    import math
    import time

    from gpulint.live.client import Deadline, PrometheusAPI, PrometheusError
    from gpulint.live.options import OptionError, parse_duration, parse_header, parse_url
    from gpulint.migrate.proof import prove
    from gpulint.replay.command import MAX_POINTS, _time

    try:
        url = parse_url(args.prometheus)
        headers = dict(parse_header(h) for h in args.prometheus_header or [])
        span = parse_duration(args.range)
        step = parse_duration(args.step)
        end = _time(args.end) if args.end else time.time()
    except (OptionError, ValueError) as error:
        _say(stderr, f"gpulint: error: {error}")
        return None
    if step <= 0 or span <= 0 or not math.isfinite(end) or span / step + 1 > MAX_POINTS:
        _say(
            stderr,
            f"gpulint: error: --range and --step must be positive, at most {MAX_POINTS} points",
        )
        return None
    end = math.floor(end / step) * step
    api = PrometheusAPI(url, headers, Deadline(args.prometheus_timeout))
    try:
        return [prove(api, item, inventory, (end - span, end, step)) for item, inventory in lowered]
    except PrometheusError as error:
        _say(stderr, f"gpulint: error: Prometheus at {url}: {error}")
        return None
    finally:
        api.close()


def _where(placed: Placed) -> str:
    from gpulint.core.paths import display_path

    files = ", ".join(display_path(f.path) for f in placed.new_files)
    if placed.where == "overlay":
        return f"{files} (resources and a delete patch of its overlay)"
    origin = display_path(placed.lowered.hpa.manifest.file)
    return f"{files} (beside it; the HPA removed from {origin})"


def _report_text(
    args: argparse.Namespace,
    migration: Migration,
    migrated: list[tuple[Placed, Inventory]],
    found: Any,
    proofs: list[Proof],
    out: TextIO,
) -> None:
    from gpulint.core.paths import display_path

    verb = "migrated" if args.write else "to migrate"
    for placed, _ in migrated:
        _say(out, f"HorizontalPodAutoscaler {placed.lowered.key}: {verb} -> {_where(placed)}")
        for trigger in placed.lowered.triggers:
            if trigger.query is not None:
                _say(
                    out,
                    f"  {trigger.metric} ({trigger.metric_type} {trigger.target_type} "
                    f"{trigger.threshold}): {trigger.query}",
                )
    for key, file, reason in migration.refused:
        _say(out, f"HorizontalPodAutoscaler {key} ({display_path(file)}): refused: {reason}")
    for proof in proofs:
        for line in proof.lines():
            _say(out, line)
    if args.write and any(placed.where == "overlay" for placed, _ in migrated):
        _say(
            out,
            "the new files of overlays are not tracked by git yet: gpulint renders a "
            "kustomization from what git tracks, so `git add` them before linting",
        )
    if not migrated and not migration.refused:
        _say(out, "no HPA of the input reads a metric prometheus-adapter serves")
    elif not args.write and not args.diff and migrated:
        _say(out, f"{len(migrated)} to migrate: see the change with --diff, make it with --write")


def _report_json(
    migration: Migration,
    migrated: list[tuple[Placed, Inventory]],
    found: Any,
    proofs: list[Proof],
    out: TextIO,
) -> None:
    from gpulint.core.paths import display_path
    from gpulint.report.escape import write_json

    data = {
        "version": 1,
        "migrated": [
            {
                "hpa": placed.lowered.key,
                "file": display_path(placed.lowered.hpa.manifest.file),
                "where": placed.where,
                "new_files": [display_path(f.path) for f in placed.new_files],
                "scaled_object": placed.lowered.scaled_object,
                "triggers": [
                    {
                        "metric": t.metric,
                        "type": t.metric_type,
                        "metricType": t.target_type,
                        "threshold": t.threshold,
                        "adapter_query": t.adapter_query,
                        "query": t.query,
                    }
                    for t in placed.lowered.triggers
                ],
            }
            for placed, _ in migrated
        ],
        "refused": [
            {
                "hpa": key,
                "file": display_path(file),
                "reason": reason,
                "scaled_object": migration.unplaced.get(key),
            }
            for key, file, reason in migration.refused
        ],
        "proofs": [proof.as_json() for proof in proofs],
        "changed_files": [display_path(f) for f in [*found.after, *found.new]],
    }
    write_json(data, out)
