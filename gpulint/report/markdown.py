"""Markdown for a CI job summary (GitHub's ``$GITHUB_STEP_SUMMARY``): counts, then a table
of the findings with their fixes.

Input text (file and object names, messages, notes) is escaped for Markdown and HTML
(``gpulint.report.escape.markdown_text``), so that a manifest cannot add links, images,
markup or mentions to the summary. The table stops at ``MAX_ROWS`` findings (a summary is
limited to 1 MiB); the counts are always complete.
"""

from __future__ import annotations

from typing import TextIO

from gpulint.core.model import Severity
from gpulint.core.paths import display_path
from gpulint.engine.causes import roots
from gpulint.engine.result import Result
from gpulint.report.escape import markdown_text
from gpulint.report.github import cause_place

MAX_ROWS = 500


def _cell(text: str) -> str:
    """Lines joined by ``<br>``, their indentation kept (a fix is YAML)."""
    lines = []
    for line in text.rstrip("\n").split("\n"):
        stripped = line.lstrip(" ")
        lines.append("&nbsp;" * (len(line) - len(stripped)) + markdown_text(stripped))
    return "<br>".join(lines)


def render_markdown(result: Result, stream: TextIO) -> None:
    errors, warnings, infos = (
        result.count(s) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)
    )
    stream.write("## gpulint\n\n")
    counts = (
        f"**{errors}** error{'s' * (errors != 1)}, **{warnings}** warning"
        f"{'s' * (warnings != 1)}, **{infos}** info in {result.files} "
        f"file{'s' * (result.files != 1)} ({result.objects} object"
        f"{'s' * (result.objects != 1)})"
    )
    if result.baseline is not None:
        baselined, stale, not_evaluated = result.baseline
        counts += f"; {baselined} baselined, {stale} stale baseline entr"
        counts += "y" if stale == 1 else "ies"
        if not_evaluated:
            counts += f", {not_evaluated} not evaluated (their files were not in the input)"
    suppressed = sum(result.suppressed.values())
    if suppressed:
        counts += f"; {suppressed} suppressed"
    stream.write(counts + "\n\n")
    if result.findings:
        stream.write("| where | rule | severity | finding | fix |\n|---|---|---|---|---|\n")
        tops = roots(result.findings)
        for finding, top in zip(result.findings[:MAX_ROWS], tops, strict=False):
            location = finding.location
            where = f"{display_path(location.file)}:{location.line}:{location.column}"
            message = finding.message
            if finding.units:
                message += f"\nin: {', '.join(finding.units)}"
            if top is not None:
                message += f"\nfollows from: {cause_place(result.findings[top])}"
            stream.write(
                f"| {_cell(where)} | {finding.rule} {finding.name} | {finding.severity} | "
                f"{_cell(message)} | {_cell(finding.fix)} |\n"
            )
        if len(result.findings) > MAX_ROWS:
            more = len(result.findings) - MAX_ROWS
            stream.write(f"\n{more} more finding{'s' * (more != 1)} not shown.\n")
        stream.write("\n")
    for note in result.notes:
        stream.write(f"> {markdown_text(note)}\n>\n")
    if result.notes:
        stream.write("\n")
