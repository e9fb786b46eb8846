"""``gpulint context``: what each unit of the input is judged with, and why.

The same assembly lint, trace and replay use (``gpulint.engine.assembly``): the clusters of
the input, the units of each, the platform components each unit holds, what each takes from
its cluster and from which unit, and what was left because two units were equally near.
Exit code 0, or 2 for a usage error or unreadable input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from gpulint.cli.exitcodes import EXIT_OK, EXIT_USAGE
from gpulint.cli.inputs import assembled, read_settings
from gpulint.cli.output import report_written

if TYPE_CHECKING:
    import argparse

    from gpulint.engine.assembly import Assembly


def run_context(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    settings = read_settings(args, stderr)
    if settings is None:
        return EXIT_USAGE
    assembly = assembled(args, settings, stderr)
    if assembly is None:
        return EXIT_USAGE
    report = context_report(assembly)

    def write(out: TextIO) -> None:
        if args.format == "json":
            from gpulint.report.escape import write_json

            write_json(report, out)
        else:
            _write_text(report, out)

    return EXIT_OK if report_written(args.output, stdout, stderr, write) else EXIT_USAGE


def context_report(assembly: Assembly) -> dict[str, Any]:
    """The context of every unit, cluster by cluster (the JSON of ``gpulint context``)."""
    from gpulint.core.paths import display_path
    from gpulint.engine.context import components_of

    units = {
        unit.name: (unit, context)
        for unit, context in zip(assembly.units, assembly.context.contexts, strict=True)
    }
    clusters = []
    for cluster in assembly.context.clusters:
        members = []
        for name in cluster.units:
            unit, context = units[name]
            members.append(
                {
                    "name": unit.name,
                    "kind": unit.kind,
                    "root": display_path(unit.root) if unit.root != "-" else "-",
                    "files": len(unit.files),
                    "components": {
                        category: [display_path(f) for f in files]
                        for category, files in components_of(unit).items()
                    },
                    "takes": [
                        {"component": b.category, "from": b.provider, "why": b.why}
                        for b in context.borrowed
                    ],
                    "notTaken": [
                        {"component": category, "equallyNear": list(providers)}
                        for category, providers in context.ambiguous
                    ],
                }
            )
        clusters.append({"name": cluster.name, "why": cluster.why, "units": members})
    return {"version": 1, "clusters": clusters}


def _write_text(report: dict[str, Any], out: TextIO) -> None:
    from gpulint.report.escape import escape_controls, safe_line
    from gpulint.report.wrap import fill, output_width

    width = output_width(out)

    def write(first: str, text: str, rest: str) -> None:
        for line in fill(escape_controls(text), width, first, rest):
            out.write(safe_line(line) + "\n")

    for number, cluster in enumerate(report["clusters"]):
        if number:
            out.write("\n")
        count = len(cluster["units"])
        write(
            "",
            f"cluster {cluster['name']} ({cluster['why']}): {count} unit{'s' * (count != 1)}",
            "    ",
        )
        for unit in cluster["units"]:
            write(
                "  ",
                f"{unit['name']} ({unit['kind']}, {unit['files']} "
                f"file{'s' * (unit['files'] != 1)})",
                "      ",
            )
            for category, files in unit["components"].items():
                write("    holds ", f"{category}: {', '.join(files)}", "          ")
            grouped: dict[tuple[str, str], list[str]] = {}
            for taken in unit["takes"]:
                grouped.setdefault((taken["from"], taken["why"]), []).append(taken["component"])
            for (source, why), components in grouped.items():
                write("    takes ", f"{', '.join(components)} from {source} ({why})", "          ")
            for left in unit["notTaken"]:
                near = " and ".join(left["equallyNear"])
                write(
                    "    lacks ",
                    f"{left['component']}: {near} are equally near; declare "
                    "clusters: in .gpulint.yaml to choose",
                    "          ",
                )
