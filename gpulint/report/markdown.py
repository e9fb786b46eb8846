"""Markdown for a CI job summary (GitHub's ``$GITHUB_STEP_SUMMARY``): counts, a table of the
findings, then their fixes.

Prose from the input (file and object names, messages, notes) is escaped for Markdown and
HTML (``gpulint.report.escape.markdown_text``), so that a manifest cannot add links, images,
markup or mentions to the summary. A fix is code a reader copies: it is a fenced code block
(``escape.markdown_code``), which GitHub renders as written, links and mentions included as
plain text, so that what is copied is what gpulint printed (a table cell holds no code block,
and as prose a URL in a fix needed a zero-width space to stay unlinked). A finding that
follows from another (``gpulint.engine.causes``) says which, and its fix is that one's.

The table stops at ``MAX_ROWS`` findings (a summary is limited to 1 MiB); the counts are
always complete.
"""

from __future__ import annotations

from typing import TextIO

from gpulint.core.model import Severity
from gpulint.core.paths import display_path
from gpulint.engine.causes import roots
from gpulint.engine.result import Result
from gpulint.report.escape import markdown_code, markdown_text
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
        _write_findings(result, stream)
    for note in result.notes:
        stream.write(f"> {markdown_text(note)}\n>\n")
    if result.notes:
        stream.write("\n")


def _write_findings(result: Result, stream: TextIO) -> None:
    """The table of findings, then each fix as a code block under its number."""
    stream.write("| where | rule | severity | finding |\n|---|---|---|---|\n")
    findings = result.findings
    tops = roots(findings)
    fixes: list[tuple[int, str, str]] = []
    for finding, top in zip(findings[:MAX_ROWS], tops, strict=False):
        location = finding.location
        where = f"{display_path(location.file)}:{location.line}:{location.column}"
        message = finding.message
        if finding.units:
            message += f"\nin: {', '.join(finding.units)}"
        if top is not None:
            message += f"\nfollows from: {cause_place(findings[top])}"
        cell = _cell(message)
        if finding.fix and top is None:
            fixes.append((len(fixes) + 1, f"{finding.rule} at {where}", finding.fix))
            cell += f"<br>**fix {len(fixes)}** below"
        stream.write(
            f"| {_cell(where)} | {finding.rule} {finding.name} | {finding.severity} | {cell} |\n"
        )
    if len(findings) > MAX_ROWS:
        more = len(findings) - MAX_ROWS
        stream.write(f"\n{more} more finding{'s' * (more != 1)} not shown.\n")
    stream.write("\n")
    for number, what, fix in fixes:
        stream.write(f"**fix {number}**: {markdown_text(what)}\n\n{markdown_code(fix)}\n\n")
