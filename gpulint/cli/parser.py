"""The ``gpulint`` argument parser: one subcommand each for lint, check-adapter, trace,
replay, migrate, context, rules, explain and serve."""

from __future__ import annotations

import argparse
from importlib import import_module

from gpulint import __version__
from gpulint.cli.options import (
    COLOR_HELP,
    add_adoption_options,
    add_cluster_options,
    add_fix_options,
    add_input_options,
    add_lint_options,
    add_live_options,
    add_render_options,
    add_version_options,
)


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
    add_version_options(lint)
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
    add_version_options(check)
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
    add_version_options(trace)
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

    migrate = commands.add_parser(
        "migrate",
        help="rewrite the input for another autoscaler: `gpulint migrate keda`",
        description="Rewrite HPAs served by prometheus-adapter as KEDA ScaledObjects, where "
        "each came from, and prove them against Prometheus (docs/migrate.md).",
    )
    import_module("gpulint.migrate.command").add_migrate_options(migrate)

    context = commands.add_parser(
        "context",
        help="show the clusters of the input and what each unit is judged with",
        description="The clusters of the input (from clusters: in .gpulint.yaml, the "
        "repository's Flux or Argo CD objects, or the input as one cluster), their units, the "
        "platform components each unit holds, and what each takes from its cluster and why: "
        "what lint, trace and replay judge each unit with (docs/context.md).",
    )
    context.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or directories, as for lint; default: the current directory",
    )
    context.add_argument(
        "--format", "-f", choices=("text", "json"), default="text", help="default: text"
    )
    context.add_argument("--output", "-o", metavar="FILE", help="write it to FILE")
    add_input_options(context)
    add_render_options(context)

    rules = commands.add_parser("rules", help="list the rule catalog")
    shape = rules.add_mutually_exclusive_group()
    shape.add_argument(
        "--markdown", action="store_true", help="as the Markdown table of docs/rules.md"
    )
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
