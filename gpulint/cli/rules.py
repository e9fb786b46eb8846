"""``gpulint rules`` and ``gpulint explain``: the rule catalog and one rule's documentation."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from gpulint.cli.exitcodes import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    import argparse


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
    from gpulint.cli.output import wants_color
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
    lines = document_lines(rule_text(spec), width, wants_color("auto", stdout))
    stdout.write("".join(line + "\n" for line in lines))
    return EXIT_OK
