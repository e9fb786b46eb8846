"""The ``gpulint`` command.

Exit codes: 0 nothing at or above the fail-on level, 1 findings at or above it, 2 usage error,
bad configuration or no readable input.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from gpulint import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


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

    rules = commands.add_parser("rules", help="list the rule catalog")
    shape = rules.add_mutually_exclusive_group()
    shape.add_argument("--markdown", action="store_true", help="as the README's Markdown table")
    shape.add_argument("--docs", action="store_true", help="the full docs/rules.md")
    shape.add_argument("--json", action="store_true", help="as JSON")

    explain = commands.add_parser("explain", help="explain a rule: why, example, fix, facts")
    explain.add_argument("rule", metavar="RULE", help="rule ID or name, e.g. GL101")
    return parser


def add_lint_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        "-f",
        choices=("text", "json", "sarif", "github"),
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
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto")


def _settings(config: str | None, stderr: TextIO) -> object:
    from gpulint.config import ConfigError, Settings, find_config, load_settings
    from gpulint.engine import rule_option_schemas

    path = config or find_config()
    if path is None:
        return Settings()
    try:
        return load_settings(path, rule_option_schemas())
    except ConfigError as error:
        stderr.write(f"gpulint: configuration error: {error}\n")
        return None


def run_lint(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpulint.engine import Result, Selection, inventory_from_paths, run
    from gpulint.loader import InputError
    from gpulint.model import Severity
    from gpulint.report import render

    # Parsed documents form no reference cycles worth collecting during a run.
    gc.disable()
    settings = _settings(args.config, stderr)
    if settings is None:
        return EXIT_USAGE
    paths = args.paths or ["."]
    try:
        inventory = inventory_from_paths(paths, settings)  # type: ignore[arg-type]
    except InputError as error:
        stderr.write(f"gpulint: error: {error}\n")
        return EXIT_USAGE
    if not inventory.files:
        stderr.write(f"gpulint: error: no .yaml, .yml or .json files in {' '.join(paths)}\n")
        return EXIT_USAGE
    selection = Selection(_split_ids(args.select), _split_ids(args.ignore))
    findings = run(inventory, selection)
    result = Result(findings, len(inventory.files), len(inventory.manifests), inventory.skipped)
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
    if args.fail_on == "never":
        return EXIT_OK
    threshold = Severity.parse(args.fail_on)
    return EXIT_FINDINGS if any(f.severity >= threshold for f in findings) else EXIT_OK


def run_rules(args: argparse.Namespace, stdout: TextIO) -> int:
    import json

    from gpulint.engine import all_rules
    from gpulint.ruledocs import rules_document, rules_table

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
    from gpulint.engine import rule_by_id
    from gpulint.ruledocs import rule_text

    spec = rule_by_id(args.rule)
    if spec is None:
        stderr.write(f"gpulint: error: no rule {args.rule!r} (see `gpulint rules`)\n")
        return EXIT_USAGE
    stdout.write(rule_text(spec))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    stdout, stderr = sys.stdout, sys.stderr
    try:
        if args.command == "lint":
            return run_lint(args, stdout, stderr)
        if args.command == "rules":
            return run_rules(args, stdout)
        if args.command == "explain":
            return run_explain(args, stdout, stderr)
        parser.print_help(stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `gpulint lint . | head`: the reader went away; nothing left to say.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
