"""The options several commands share: reporting, fixes, input, rendering, cluster mode,
adoption and the live check."""

from __future__ import annotations

import argparse

from gpulint.live.window import add_window_options

COLOR_HELP = (
    "colour the text output: auto (default) colours it on a terminal unless NO_COLOR is "
    "set, always, never"
)


def split_ids(values: list[str] | None) -> list[str]:
    found: list[str] = []
    for value in values or []:
        found.extend(part.strip() for part in value.split(",") if part.strip())
    return found


def add_selection_options(parser: argparse.ArgumentParser, example: str = "GL4") -> None:
    """``--select``/``--ignore``: which of the command's rules run."""
    parser.add_argument(
        "--select",
        action="append",
        metavar="IDS",
        help=f"run only these rules (IDs, names or prefixes such as {example})",
    )
    parser.add_argument("--ignore", action="append", metavar="IDS", help="do not run these rules")


def add_lint_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        "-f",
        choices=("text", "concise", "json", "sarif", "github", "markdown"),
        help="report format: text (each finding with why and its fix), concise (one line per "
        "finding), json, sarif, github (annotations), markdown (a job summary); default: "
        "concise on a terminal, text when the report goes to a file or pipe",
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
    add_selection_options(parser)
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


def add_version_options(parser: argparse.ArgumentParser) -> None:
    """``--kubernetes-version`` ...: the releases the clusters run, for this run
    (gpulint.engine.versions); each beats .gpulint.yaml and what --cluster reads."""
    from gpulint.engine.versions import NAMES, NEWEST, OPTIONS, PROJECTS, SETTINGS

    versions = parser.add_argument_group(
        "the releases the clusters run (the verdicts that depend on them follow them)"
    )
    for project in PROJECTS:
        versions.add_argument(
            OPTIONS[project],
            type=_release,
            metavar="X.Y",
            help=f"{NAMES[project]} (default: {SETTINGS[project]} in .gpulint.yaml, what "
            f"--cluster reads, else {NEWEST[project]})",
        )


def _release(text: str) -> str:
    from gpulint.engine.versions import parse_release

    if parse_release(text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a release such as 1.35 or v2.18.1")
    return text


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
        "--new-since",
        metavar="REF",
        help="report only findings the input did not have at git revision REF (HEAD: the "
        "last commit): its files as they were are linted too, and their findings, matched as "
        "a baseline matches, left out; a change answers for what it brings, as the admission "
        "webhook judges an UPDATE. For the changed-only pre-commit hooks",
    )
    adoption.add_argument(
        "--report-only",
        action="store_true",
        help="the file PATHS are reported, the directory PATHS (default: the current "
        "directory) are linted with them as context; for the gpulint-changed pre-commit hook",
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
    add_window_options(live, defaults=True)
    live.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="say on stderr which Prometheus request a slow live check waits for and for how "
        "long (after 2 s): auto, only when stderr is a terminal (the default); always, also "
        "to a file or pipe, a line every 5 s; never",
    )
