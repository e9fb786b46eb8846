"""The ``gpulint`` command.

Exit codes: 0 nothing at or above the fail-on level, 1 findings at or above it, 2 usage error,
bad configuration or no readable input.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import time
from collections.abc import Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any, TextIO, cast

from gpulint import __version__

if TYPE_CHECKING:
    from gpulint.adoption.baseline import Baseline
    from gpulint.adoption.changed import Changes
    from gpulint.engine.config import Settings
    from gpulint.engine.registry import Selection
    from gpulint.engine.result import Result
    from gpulint.input.units import Unit
    from gpulint.inventory import Inventory

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

COLOR_HELP = (
    "colour the text output: auto (default) colours it on a terminal unless NO_COLOR is "
    "set, always, never"
)
# What each optional front door needs (pyproject.toml's extras), by the modules it imports.
EXTRAS = {
    "live": ("prometheus_api_client", "requests"),
    "cluster": ("kubernetes",),
    "webhook": ("aiohttp", "kubernetes", "prometheus_client"),
}


def missing_extra(extra: str, what: str) -> str | None:
    """A one-line error when ``what`` needs an extra that is not installed, else None."""
    from importlib.util import find_spec

    missing = []
    for module in EXTRAS[extra]:
        try:
            found = find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    if not missing:
        return None
    return (
        f"{what} needs the optional dependencies of gpulint[{extra}] ({', '.join(missing)} "
        f"missing): pip install 'gpulint[{extra}]'"
    )


def _split_ids(values: list[str] | None) -> list[str]:
    found: list[str] = []
    for value in values or []:
        found.extend(part.strip() for part in value.split(",") if part.strip())
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpulint",
        description="Catch GPU autoscaling on Kubernetes that silently does not work.",
    )
    parser.add_argument("--version", action="version", version=f"gpulint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    lint = commands.add_parser("lint", help="lint manifests, Helm values and adapter configs")
    lint.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or directories (.yaml, .yml, .json); - reads stdin; "
        "default: the current directory",
    )
    add_lint_options(lint)
    add_fix_options(lint)
    add_render_options(lint)
    add_live_options(lint)
    add_cluster_options(lint)
    add_adoption_options(lint)

    check = commands.add_parser(
        "check-adapter",
        help="check a prometheus-adapter config and the HPAs it serves against a live Prometheus",
        description="The same as `gpulint lint --prometheus URL ADAPTER_FILE PATHS...`: every "
        "rule, plus the live rules GL801-GL812 against the Prometheus the adapter reads.",
    )
    check.add_argument(
        "adapter_file",
        metavar="ADAPTER_FILE",
        help="the adapter config: its own config file, Helm values or a ConfigMap",
    )
    check.add_argument(
        "paths", nargs="*", metavar="PATH", help="manifests with the HPAs and their workloads"
    )
    add_lint_options(check)
    add_render_options(check)
    add_live_options(check, required=True)

    trace = commands.add_parser(
        "trace",
        help="follow each autoscaler metric from the GPU workload to the autoscaler",
        description="For every autoscaler metric of the input (HPA Pods/Object/External "
        "metrics, KEDA prometheus triggers, Knative and KServe autoscalers on custom metrics), "
        "show each link of the chain workload -> exporter -> service -> scrape -> prometheus "
        "-> adapter-rule -> metrics-api -> autoscaler as ok, broken (with the findings that "
        "break it) or unknown. Exit code 1 when a chain has a broken link at or above "
        "--fail-on.",
    )
    trace.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or directories, as for lint; - reads stdin; default: the current directory",
    )
    trace.add_argument(
        "--format",
        "-f",
        choices=("text", "json", "mermaid"),
        default="text",
        help="text (a tree per metric), json (version 1) or mermaid (Markdown with a "
        "flowchart per metric); default: text",
    )
    trace.add_argument(
        "--autoscaler",
        metavar="[NAMESPACE/]NAME",
        help="only the metrics of this HPA, ScaledObject, Knative Service or InferenceService",
    )
    trace.add_argument(
        "--fail-on",
        choices=("error", "warning", "info", "never"),
        default="error",
        help="a broken link of this severity or above fails the run (exit code 1; default: error)",
    )
    trace.add_argument("--output", "-o", metavar="FILE", help="write the traces to FILE")
    trace.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help=COLOR_HELP
    )
    add_input_options(trace)
    add_render_options(trace)
    add_live_options(trace)
    add_cluster_options(trace)

    replay = commands.add_parser(
        "replay",
        help="replay each autoscaler's controller on the load Prometheus recorded",
        description="For every HPA and KEDA ScaledObject whose metrics gpulint traces to a "
        "query, fetch their history from Prometheus and replay the controller on it: scale "
        "events, flapping, time at maxReplicas, scale-up lag, GPU-hours, and the replay "
        "findings GL951-GL954.",
    )
    import_module("gpulint.replay.command").add_replay_options(replay)

    rules = commands.add_parser("rules", help="list the rule catalog")
    shape = rules.add_mutually_exclusive_group()
    shape.add_argument("--markdown", action="store_true", help="as the README's Markdown table")
    shape.add_argument("--docs", action="store_true", help="the full docs/rules.md")
    shape.add_argument("--json", action="store_true", help="as JSON")

    explain = commands.add_parser("explain", help="explain a rule: why, example, fix, facts")
    explain.add_argument("rule", metavar="RULE", help="rule ID or name, e.g. GL101")

    serve = commands.add_parser(
        "serve",
        help="run the validating admission webhook over HTTPS",
        description="Answer AdmissionReviews on POST /validate with the same rules as "
        "`gpulint lint`, over the cluster's inventory (or each object alone with --no-cluster).",
    )
    # gpulint.webhook is installed from webhook/ (pyproject package-dir), a mapping type
    # checkers do not follow: import it by name.
    import_module("gpulint.webhook.options").add_serve_options(serve)
    return parser


def add_lint_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        "-f",
        choices=("text", "json", "sarif", "github", "markdown"),
        default="text",
        help="report format (default: text)",
    )
    parser.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help="configuration file (default: .gpulint.yaml found upward)",
    )
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning", "info", "never"),
        default="error",
        help="lowest severity that fails the run (exit code 1; default: error)",
    )
    parser.add_argument(
        "--select",
        action="append",
        metavar="IDS",
        help="run only these rules (IDs, names or prefixes such as GL4)",
    )
    parser.add_argument("--ignore", action="append", metavar="IDS", help="do not run these rules")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE")
    parser.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help=COLOR_HELP
    )
    parser.add_argument(
        "--no-config", action="store_true", help="ignore any .gpulint.yaml (defaults only)"
    )
    parser.add_argument(
        "--max-file-size",
        type=_size,
        default=64 * 1024 * 1024,
        metavar="BYTES",
        help="a file (or rendered unit, or stdin) over this size is refused with GL702 "
        "(default: 64Mi; suffixes Ki, Mi, Gi)",
    )


def add_fix_options(parser: argparse.ArgumentParser) -> None:
    fixes = parser.add_argument_group("fixes")
    fixes.add_argument(
        "--fix",
        action="store_true",
        help="apply the safe fixes in place, lint again, and report what is left",
    )
    fixes.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="with --fix or --diff: apply the unsafe fixes too (they change what the "
        "cluster does: merging autoscalers, renaming metrics, changing targets)",
    )
    fixes.add_argument(
        "--diff",
        action="store_true",
        help="print the unified diff of what --fix would change and write nothing "
        "(exit 1 when there is a diff)",
    )


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """How a command other than lint reads its files: the configuration and the size limit."""
    parser.add_argument("--config", "-c", metavar="FILE", help="configuration file")
    parser.add_argument("--no-config", action="store_true", help="ignore any .gpulint.yaml")
    parser.add_argument(
        "--max-file-size",
        type=_size,
        default=64 * 1024 * 1024,
        metavar="BYTES",
        help="as for lint (default: 64Mi)",
    )


def add_render_options(parser: argparse.ArgumentParser) -> None:
    render = parser.add_argument_group("rendering (kustomize overlays, Helm charts, piped input)")
    render.add_argument(
        "--kustomize",
        metavar="CMD",
        help="how to build kustomizations (default: `kustomize build`, else `kubectl "
        "kustomize`, whichever is on PATH)",
    )
    render.add_argument(
        "--helm", metavar="CMD", help="the helm binary for `helm template` (default: from PATH)"
    )
    render.add_argument(
        "--helm-values",
        action="append",
        metavar="FILE",
        help="values for every chart rendered (repeatable, as helm's --values; default: the "
        "chart's own values.yaml)",
    )
    render.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help="the path piped input is reported under (and where relative origins of piped "
        "`kustomize build` or `helm template` output are found)",
    )


def _size(text: str) -> int:
    units = {"": 1, "k": 1000, "ki": 1024, "m": 1000**2, "mi": 1024**2, "g": 1000**3, "gi": 1024**3}
    number = text.strip().lower()
    suffix = number.lstrip("0123456789")
    digits = number[: len(number) - len(suffix)]
    if not digits or suffix not in units or len(digits) > 15:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 1048576, 500Ki or 64Mi")
    return int(digits) * units[suffix]


def add_cluster_options(parser: argparse.ArgumentParser) -> None:
    cluster = parser.add_argument_group("cluster mode (GL901-GL903)")
    cluster.add_argument(
        "--cluster",
        action="store_true",
        help="lint what the cluster holds instead of files (kubeconfig or in-cluster "
        "credentials); adds the cluster rules",
    )
    cluster.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (--cluster)")
    cluster.add_argument("--context", metavar="NAME", help="kubeconfig context (--cluster)")
    cluster.add_argument(
        "--namespace",
        "-n",
        metavar="NS",
        help="only this namespace (--cluster; the adapter and KServe ConfigMaps are read "
        "in --configmap-namespaces)",
    )
    cluster.add_argument(
        "--adapter-configmap",
        metavar="[NS/]NAME",
        help="the ConfigMap holding the prometheus-adapter config (--cluster; default: the "
        "chart's label app.kubernetes.io/name=prometheus-adapter, or the name "
        "prometheus-adapter or adapter-config)",
    )
    cluster.add_argument(
        "--adapter-configmap-selector",
        metavar="LABELS",
        help="a label selector for that ConfigMap (--cluster)",
    )
    cluster.add_argument(
        "--configmap-namespaces",
        action="append",
        metavar="NS[,NS...]",
        help="namespaces where the prometheus-adapter and KServe ConfigMaps are read "
        "(--cluster; default: monitoring,kserve; * for every namespace; the namespace of "
        "--adapter-configmap NS/NAME is added)",
    )


def add_adoption_options(parser: argparse.ArgumentParser) -> None:
    adoption = parser.add_argument_group(
        "adopting gpulint in an existing repository (baseline, changed objects)"
    )
    adoption.add_argument(
        "--write-baseline",
        metavar="FILE",
        help="record every finding of this run in FILE (JSON) and exit 0",
    )
    adoption.add_argument(
        "--baseline",
        metavar="FILE",
        help="report only findings not recorded in FILE by --write-baseline",
    )
    adoption.add_argument(
        "--changed-since",
        metavar="REF",
        help="lint everything, report only findings in objects changed since `git merge-base "
        "REF HEAD` (working tree and untracked files included)",
    )
    adoption.add_argument(
        "--report-only",
        action="store_true",
        help="the file PATHS are reported, the directory PATHS (default: the current "
        "directory) are linted with them as context; for the gpulint-changed pre-commit hook",
    )


class _Adoption:
    """``--baseline``, ``--write-baseline``, ``--changed-since``, ``--report-only``: which
    findings of a run are reported (gpulint.adoption.baseline, gpulint.adoption.changed)."""

    def __init__(self, args: argparse.Namespace) -> None:
        """Raises ValueError (a BaselineError, a ChangedError) for a usage error."""
        self.write_to: str | None = getattr(args, "write_baseline", None)
        self.baseline: Baseline | None = None
        self.changes: Changes | None = None
        path = getattr(args, "baseline", None)
        if path:
            from gpulint.adoption.baseline import load_baseline

            self.baseline = load_baseline(path)
        ref = getattr(args, "changed_since", None)
        report_only = getattr(args, "report_only", False)
        if (ref or report_only) and getattr(args, "cluster", False):
            raise ValueError("--changed-since and --report-only narrow a run over files")
        if ref and report_only:
            raise ValueError("give --changed-since or --report-only, not both")
        if ref:
            from gpulint.adoption.changed import changes_since

            self.changes = changes_since(ref)
        elif report_only:
            from gpulint.adoption.changed import whole_files

            paths = args.paths or []
            if "-" in paths:
                raise ValueError("--report-only reports files: it cannot read stdin")
            directories = [p for p in paths if os.path.isdir(p)] or ["."]
            files = [p for p in paths if not os.path.isdir(p)]
            self.changes = whole_files(files)
            outside = [f for f in files if not any(_inside(f, d) for d in directories)]
            args.paths = directories + outside

    def narrow(self, result: Result) -> None:
        """Write the baseline, then keep the findings the baseline and the changes leave."""
        if self.write_to:
            from gpulint.adoption.baseline import Baseline

            written = Baseline.of(result.findings)
            written.write(self.write_to)
            total = sum(written.counts.values())
            result.notes.append(
                f"baseline of {total} finding{'s' * (total != 1)} written to {self.write_to}"
            )
        findings = result.findings
        if self.baseline is not None:
            comparison = self.baseline.split(findings)
            findings = comparison.new
            result.baseline = (comparison.baselined, comparison.stale)
        if self.changes is not None:
            findings, outside = self.changes.narrow(findings)
            if outside:
                result.notes.append(
                    f"{outside} finding{'s' * (outside != 1)} outside the changes "
                    f"{self.changes.description} not reported"
                )
        result.findings = findings


def _inside(path: str, directory: str) -> bool:
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(directory))
    return relative != ".." and not relative.startswith(".." + os.sep)


def _cluster_inventory(
    args: argparse.Namespace, settings: Settings, selection: Selection
) -> tuple[Inventory, list[str]]:
    """``--cluster``: the inventory read from the cluster (raises InputError)."""
    from gpulint.cluster.kinds import AdapterConfigMapSelector, parse_configmap_namespaces
    from gpulint.cluster.mode import ClusterError, cluster_inventory

    if args.paths:
        raise ClusterError("--cluster reads the cluster: give no PATH with it")
    try:
        adapter = AdapterConfigMapSelector.parse(
            args.adapter_configmap, args.adapter_configmap_selector
        )
    except ValueError as error:
        raise ClusterError(str(error)) from None
    try:
        configmap_namespaces = parse_configmap_namespaces(args.configmap_namespaces)
    except ValueError as error:
        raise ClusterError(f"--configmap-namespaces: {error}") from None
    return cluster_inventory(
        settings,
        selection,
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespace=args.namespace,
        adapter_configmaps=adapter,
        configmap_namespaces=configmap_namespaces,
    )


def add_live_options(parser: argparse.ArgumentParser, required: bool = False) -> None:
    live = parser.add_argument_group("live check against Prometheus (GL801-GL812)")
    live.add_argument(
        "--prometheus",
        metavar="URL",
        required=required,
        help="base URL of the Prometheus HTTP API the adapter reads (Thanos, Mimir, "
        "VictoriaMetrics work too); adds the live rules",
    )
    live.add_argument(
        "--prometheus-header",
        action="append",
        metavar="K=V",
        help="HTTP header for every request, e.g. 'Authorization=Bearer <token>' (repeatable)",
    )
    live.add_argument(
        "--prometheus-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds for the whole live check (default: 30)",
    )
    live.add_argument(
        "--require-prometheus",
        action="store_true",
        help="an unusable Prometheus is an error (GL809, exit code 1), not a warning",
    )
    live.add_argument(
        "--lookback",
        default="24h",
        metavar="DURATION",
        help="how far back to look for metrics that disappeared and for observed values "
        "(default: 24h)",
    )


class _Live:
    """The live check of a run: its options, and what it found in each unit."""

    def __init__(self, options: Any) -> None:
        self.options = options
        self.notes: list[str] = []
        self.failed_required = False

    def __call__(self, inventory: Inventory) -> None:
        """Collect what the live rules read, for one unit's inventory."""
        from gpulint.kinds.keda import prometheus_triggers
        from gpulint.live.collector import collect

        triggers = prometheus_triggers(inventory.store.views.values())
        pipeline = inventory.pipeline
        if (
            not inventory.adapter_configs
            and not inventory.hpas
            and not triggers
            and not pipeline.all_monitors()
            and not pipeline.all_exporters()
        ):
            return
        inventory.live = collect(inventory, self.options)
        self.notes.extend(n for n in inventory.live.notes if n not in self.notes)
        if self.options.required and not inventory.live.available:
            self.failed_required = True


def _live_check(
    args: argparse.Namespace, settings: Settings, selection: Selection, stderr: TextIO
) -> _Live | list[str] | None:
    """The live check when ``--prometheus`` is given (``[]`` when it is not, a list of notes
    when it has nothing to do); None after a usage error, said on stderr.

    Only this path imports the Prometheus client (and with it requests).
    """
    url = getattr(args, "prometheus", None)
    if not url:
        if getattr(args, "require_prometheus", False) or getattr(args, "prometheus_header", None):
            stderr.write(
                "gpulint: error: --require-prometheus and --prometheus-header need "
                "--prometheus URL\n"
            )
            return None
        return []
    problem = missing_extra("live", "--prometheus")
    if problem is not None:
        stderr.write(f"gpulint: error: {problem}\n")
        return None
    from gpulint.live.options import (
        LiveOptions,
        OptionError,
        parse_duration,
        parse_header,
        parse_url,
    )

    try:
        if not args.prometheus_timeout > 0:
            raise OptionError("--prometheus-timeout must be a number of seconds above zero")
        options = LiveOptions(
            parse_url(url),
            dict(parse_header(h) for h in args.prometheus_header or []),
            args.prometheus_timeout,
            args.require_prometheus,
            parse_duration(args.lookback),
        )
    except OptionError as error:
        stderr.write(f"gpulint: error: {error}\n")
        return None
    from gpulint.engine.registry import rule_index

    if not any(
        info.requires == "live" and selection.allows(info) and settings.rule(info.id).enabled
        for info in rule_index()
    ):
        return ["--prometheus given, but no live rule (GL801-GL812) is selected"]
    return _Live(options)


def run_check_adapter(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """``gpulint check-adapter --prometheus URL ADAPTER_FILE [PATHS...]``."""
    from gpulint.input.loader import InputError, load_file
    from gpulint.inventory import Inventory as _Inventory

    try:
        loaded = load_file(args.adapter_file)
    except (InputError, OSError) as error:
        stderr.write(f"gpulint: error: {error}\n")
        return EXIT_USAGE
    probe = _Inventory()
    probe.add_file(loaded)
    if not probe.adapter_configs and not probe.problems:
        stderr.write(
            f"gpulint: error: {args.adapter_file} holds no prometheus-adapter configuration "
            "(its config file, Helm values with rules:, or a ConfigMap whose data holds it)\n"
        )
        return EXIT_USAGE
    args.paths = [args.adapter_file, *args.paths]
    return run_lint(args, stdout, stderr)


def _settings(args: argparse.Namespace, stderr: TextIO) -> Settings | None:
    """The configuration in use: ``--config``, else ``.gpulint.yaml`` found upward from the
    working directory (``--no-config``: none). None after an error, said on stderr."""
    from gpulint.engine.config import ConfigError, Settings, find_config, load_settings
    from gpulint.engine.registry import rule_names, rule_option_schemas

    if getattr(args, "no_config", False):
        return Settings()
    path = args.config or find_config()
    if path is None:
        return Settings()
    try:
        return load_settings(path, rule_option_schemas(), rule_names())
    except ConfigError as error:
        for line in str(error).splitlines():
            stderr.write(f"gpulint: configuration error: {line}\n")
        return None


def _selection(args: argparse.Namespace, stderr: TextIO) -> Selection | None:
    """``--select``/``--ignore``, every entry a rule ID, name or ID prefix (``GL4``); None
    after an unknown one, said on stderr with the nearest rule."""
    from gpulint.engine.registry import Selection, unknown_rule_patterns

    select, ignore = _split_ids(args.select), _split_ids(args.ignore)
    for option, patterns in (("--select", select), ("--ignore", ignore)):
        for pattern, suggestion in unknown_rule_patterns(patterns):
            hint = f"; did you mean {suggestion}?" if suggestion else " (see `gpulint rules`)"
            stderr.write(f"gpulint: error: {option} {pattern}: no such rule{hint}\n")
            return None
    return Selection(select, ignore)


def run_lint(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpulint.core.model import Severity
    from gpulint.engine.result import Result
    from gpulint.report import render
    from gpulint.report.escape import escape_controls

    # Parsed documents form no reference cycles worth collecting during a run.
    gc.disable()
    settings = _settings(args, stderr)
    if settings is None:
        return EXIT_USAGE
    selection = _selection(args, stderr)
    if selection is None:
        return EXIT_USAGE
    fixing = getattr(args, "fix", False) or getattr(args, "diff", False)
    if fixing:
        refused = _refuse_fix(args)
        if refused is not None:
            stderr.write(f"gpulint: error: {refused}\n")
            return EXIT_USAGE
    live = _live_check(args, settings, selection, stderr)
    if live is None:
        return EXIT_USAGE
    try:
        adoption = _Adoption(args)
    except ValueError as error:
        stderr.write(f"gpulint: error: {escape_controls(str(error))}\n")
        return EXIT_USAGE

    def reported() -> Result | int:
        """One lint, narrowed to what is reported (baseline, changes)."""
        linted = _lint_once(args, settings, selection, live, stderr)
        if isinstance(linted, int):
            return linted
        try:
            adoption.narrow(linted)
        except ValueError as error:
            stderr.write(f"gpulint: error: {escape_controls(str(error))}\n")
            return EXIT_USAGE
        return linted

    result: Result | int = reported()
    if fixing and isinstance(result, Result):
        from gpulint.adoption.fix import Writable, fix
        from gpulint.core.paths import display_path

        write = not args.diff
        result, outcome = fix(
            result,
            reported,
            Writable(args.paths or ["."]),
            unsafe=args.unsafe_fixes,
            write=write,
        )
        for file in outcome.refused:
            stderr.write(
                f"gpulint: not fixed: {escape_controls(file)} is outside the input or not a "
                "regular file\n"
            )
        if not write:
            stdout.write("".join(outcome.diffs))
            for file, diff in outcome.withheld.items():
                stderr.write(
                    f"gpulint: --diff: {escape_controls(display_path(file))}: not in the "
                    "patch: its name or a changed line holds control characters, shown "
                    f"escaped here (`--fix` applies it)\n{diff}"
                )
            if outcome.waiting:
                stderr.write(
                    f"gpulint: {outcome.waiting} more fixes overlap these; `--fix` applies "
                    "them in a later round\n"
                )
            if not outcome.diffs and not outcome.withheld and not outcome.waiting:
                # On stderr: stdout stays an empty patch for whatever applies it.
                which = (
                    "fix applies"
                    if args.unsafe_fixes
                    else ("safe fix applies (--unsafe-fixes adds the others)")
                )
                stderr.write(f"gpulint: --diff: nothing to change: no {which}\n")
            return EXIT_FINDINGS if outcome.diffs or outcome.withheld else EXIT_OK
        if isinstance(result, Result) and outcome.fixes:
            files = len(outcome.files)
            names = [os.path.normpath(f) for f in outcome.files]
            shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if files > 10 else "")
            result.notes.append(
                f"fixed: {outcome.fixes} {'fix' if outcome.fixes == 1 else 'fixes'} applied to "
                f"{files} {'file' if files == 1 else 'files'} ({shown})"
            )
    if isinstance(result, int):
        return result
    _note_fixable(result, getattr(args, "unsafe_fixes", False), fixing)
    out = stdout
    handle = None
    if args.output:
        handle = open(args.output, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        out = handle
    try:
        color = args.color == "always" or (
            args.color == "auto" and out.isatty() and "NO_COLOR" not in os.environ
        )
        render(result, args.format, out, color)
    finally:
        if handle is not None:
            handle.close()
    if isinstance(live, _Live) and live.failed_required:
        return EXIT_FINDINGS
    if args.fail_on == "never" or adoption.write_to:
        return EXIT_OK
    threshold = Severity.parse(args.fail_on)
    return EXIT_FINDINGS if any(f.severity >= threshold for f in result.findings) else EXIT_OK


def _refuse_fix(args: argparse.Namespace) -> str | None:
    """Why ``--fix``/``--diff`` cannot run on this input, or None."""
    option = "--fix" if args.fix else "--diff"
    if args.fix and args.diff:
        return "--fix and --diff exclude each other (--diff writes nothing)"
    if getattr(args, "cluster", False):
        return f"{option} edits files; a live cluster has none (lint its manifests instead)"
    if "-" in (args.paths or []):
        return f"{option} edits files; stdin has none (lint the files it was rendered from)"
    return None


def _note_fixable(result: Result, unsafe: bool, fixing: bool) -> None:
    """Say how many of the findings ``--fix`` (and ``--unsafe-fixes``) would fix."""

    safe, more = result.fixable(unsafe)
    if fixing:
        safe = 0  # what was fixable has been fixed; what is left needs judgment or a round
    if safe:
        result.notes.append(
            f"fixable: {safe} {'finding has a fix' if safe == 1 else 'findings have fixes'} "
            "that `gpulint lint --fix` applies (`--diff` shows them first)"
        )
    if more:
        result.notes.append(
            f"fixable: {more} more with `--fix --unsafe-fixes` (they change what the cluster "
            "does: review them)"
        )


def _lint_once(
    args: argparse.Namespace,
    settings: Settings,
    selection: Selection,
    live: list[str] | _Live,
    stderr: TextIO,
) -> Result | int:
    """One lint of the input (files and units, or the cluster): the result, or an exit code
    after an error said on stderr."""
    from gpulint.engine.result import Result
    from gpulint.engine.runner import run

    notes: list[str] = list(live) if isinstance(live, list) else []
    prepare = live if isinstance(live, _Live) else None
    if getattr(args, "cluster", False):
        cluster = _prepared_cluster(args, settings, selection, prepare, stderr)
        if cluster is None:
            return EXIT_USAGE
        inventory, cluster_notes = cluster
        findings = run(inventory, selection)
        result = Result(findings, 0, len(inventory.manifests), inventory.skipped)
        notes = cluster_notes + notes
    else:
        from gpulint.engine.files import lint_units

        built = _built_units(args, settings, stderr)
        if built is None:
            return EXIT_USAGE
        units, rendered = built
        result = lint_units(units, settings, selection, prepare)
        if any(unit.rendered_by for unit in units):
            result.render_wall = rendered
    result.config = settings.source
    result.notes.extend(notes)
    if isinstance(live, _Live):
        result.notes.extend(live.notes)
    return result


def _prepared_cluster(
    args: argparse.Namespace,
    settings: Settings,
    selection: Selection,
    prepare: _Live | None,
    stderr: TextIO,
) -> tuple[Inventory, list[str]] | None:
    """The cluster's inventory and notes, with the live check's snapshot taken for it when
    ``prepare``; None after an error said on stderr."""
    from gpulint.input.loader import InputError

    problem = missing_extra("cluster", "--cluster")
    if problem is not None:
        stderr.write(f"gpulint: error: {problem}\n")
        return None
    try:
        inventory, notes = _cluster_inventory(args, settings, selection)
    except InputError as error:
        stderr.write(f"gpulint: error: {error}\n")
        return None
    if prepare is not None:
        prepare(inventory)
    return inventory, notes


def _built_units(
    args: argparse.Namespace, settings: Settings, stderr: TextIO
) -> tuple[list[Unit], float] | None:
    """The lint units of the paths given, rendered, and the seconds rendering took; None
    after an error said on stderr."""
    from gpulint.engine.files import build_units, plan_units
    from gpulint.input.loader import InputError
    from gpulint.input.units import RenderOptions

    options = RenderOptions(
        getattr(args, "kustomize", None),
        getattr(args, "helm", None),
        getattr(args, "helm_values", None),
        args.max_file_size,
        getattr(args, "stdin_filename", None),
    )
    try:
        plans = plan_units(args.paths or ["."], settings, args.max_file_size)
        started = time.monotonic()
        units = build_units(plans, options)
    except InputError as error:
        stderr.write(f"gpulint: error: {error}\n")
        return None
    return units, time.monotonic() - started


def run_trace(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """``gpulint trace``: the chains of every unit (or of the cluster), rendered."""
    from gpulint.core.model import Severity
    from gpulint.engine.registry import Selection
    from gpulint.engine.runner import run
    from gpulint.trace.chain import Trace, select, traces

    gc.disable()
    settings = _settings(args, stderr)
    if settings is None:
        return EXIT_USAGE
    selection = Selection()
    live = _live_check(args, settings, selection, stderr)
    if live is None:
        return EXIT_USAGE
    prepare = live if isinstance(live, _Live) else None
    found: list[Trace] = []
    if args.cluster:
        cluster = _prepared_cluster(args, settings, selection, prepare, stderr)
        if cluster is None:
            return EXIT_USAGE
        inventory = cluster[0]
        found.extend(traces(inventory, run(inventory, selection), "cluster"))
    else:
        from gpulint.engine.files import unit_inventory

        built = _built_units(args, settings, stderr)
        if built is None:
            return EXIT_USAGE
        for unit in built[0]:
            inventory = unit_inventory(unit, settings)
            if prepare is not None:
                prepare(inventory)
            found.extend(traces(inventory, run(inventory, selection), unit.name))
    found = select(found, args.autoscaler)
    if args.autoscaler and not found:
        stderr.write(f"gpulint: error: --autoscaler {args.autoscaler}: no such autoscaler metric\n")
        return EXIT_USAGE
    out = stdout
    handle = None
    if args.output:
        handle = open(args.output, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        out = handle
    try:
        from gpulint.trace import render

        if args.format == "json":
            render.render_json(found, out)
        elif args.format == "mermaid":
            render.render_mermaid(found, out)
        else:
            color = args.color == "always" or (
                args.color == "auto" and out.isatty() and "NO_COLOR" not in os.environ
            )
            render.render_text(found, out, color)
    finally:
        if handle is not None:
            handle.close()
    if isinstance(live, _Live) and live.failed_required:
        return EXIT_FINDINGS
    if args.fail_on == "never":
        return EXIT_OK
    threshold = Severity.parse(args.fail_on)
    broken = [
        link.severity
        for trace in found
        for link in trace.links
        if link.status == "broken" and link.severity is not None
    ]
    return EXIT_FINDINGS if any(s >= threshold for s in broken) else EXIT_OK


def run_rules(args: argparse.Namespace, stdout: TextIO) -> int:
    import json

    from gpulint.engine.docs import rules_document, rules_table
    from gpulint.engine.registry import all_rules

    specs = all_rules()
    if args.markdown:
        stdout.write(rules_table(specs) + "\n")
    elif args.docs:
        stdout.write(rules_document(specs))
    elif args.json:
        json.dump(
            [
                {
                    "id": s.id,
                    "name": s.name,
                    "severity": str(s.severity),
                    "summary": s.doc.summary,
                    "options": s.defaults(),
                    "fixable": s.fixable,
                    "fixKinds": list(s.fixes),
                }
                for s in specs
            ],
            stdout,
            indent=2,
        )
        stdout.write("\n")
    else:
        width = max(len(s.name) for s in specs)
        for spec in specs:
            stdout.write(
                f"{spec.id}  {spec.name:<{width}}  {spec.severity!s:<7}  {spec.doc.summary}\n"
            )
    return EXIT_OK


def run_explain(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpulint.engine.docs import rule_text
    from gpulint.engine.registry import rule_by_id, unknown_rule_patterns
    from gpulint.report.wrap import document_lines, output_width

    spec = rule_by_id(args.rule)
    if spec is None:
        [(_, near)] = unknown_rule_patterns([args.rule])
        hint = f"did you mean {near}? " if near else ""
        stderr.write(f"gpulint: error: no rule {args.rule!r} ({hint}see `gpulint rules`)\n")
        return EXIT_USAGE
    width = output_width(stdout)
    stdout.write("".join(line + "\n" for line in document_lines(rule_text(spec), width)))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from gpulint.report.escape import SafeStream

    stdout = sys.stdout
    stderr = cast("TextIO", SafeStream(sys.stderr))
    try:
        if args.command == "lint":
            return run_lint(args, stdout, stderr)
        if args.command == "check-adapter":
            return run_check_adapter(args, stdout, stderr)
        if args.command == "trace":
            return run_trace(args, stdout, stderr)
        if args.command == "replay":
            replayed: int = import_module("gpulint.replay.command").run_replay(args, stdout, stderr)
            return replayed
        if args.command == "rules":
            return run_rules(args, stdout)
        if args.command == "explain":
            return run_explain(args, stdout, stderr)
        if args.command == "serve":
            problem = missing_extra("webhook", "gpulint serve")
            if problem is not None:
                stderr.write(f"gpulint: error: {problem}\n")
                return EXIT_USAGE
            code: int = import_module("gpulint.webhook.server").run_serve(args, stdout, stderr)
            return code
        parser.print_help(stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `gpulint lint . | head`: the reader went away; nothing left to say.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


def entry() -> None:
    """The ``gpulint`` command: ``main``, then out of the process at once. A large run holds
    hundreds of megabytes of small objects that the interpreter would otherwise free one by
    one on the way out, for nothing; ``gpulint serve`` returns only when it has stopped."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
