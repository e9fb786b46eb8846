"""``file:line:col: GL101 [error] headline``, the detail wrapped and the fix indented
below, a summary line last.

The first line of a finding is the headline (the message's first sentence), so that a run
reads as one line per problem; the rest of the message is wrapped to the terminal's width
(100 columns when the output is not a terminal) under it, as pint and ruff keep the
explanation apart from the line that names the problem.

Everything that comes from the input (file names, messages, fixes, notes) is escaped
(``gpulint.report.escape``) before gpulint adds its own colours.
"""

from __future__ import annotations

import os
from typing import TextIO

from gpulint.core.message import split_message
from gpulint.core.model import Finding, Severity
from gpulint.core.paths import display_path
from gpulint.engine.result import Result
from gpulint.report.escape import escape_controls, safe_line, safe_lines

_COLORS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.INFO: "\033[36m"}
_BOLD, _DIM, _RESET = "\033[1m", "\033[2m", "\033[0m"
INDENT = "    "
DEFAULT_WIDTH = 100
MIN_WIDTH = 60


def output_width(stream: TextIO) -> int:
    """The terminal's width when ``stream`` is one, else ``DEFAULT_WIDTH`` (CI logs, files)."""
    try:
        if stream.isatty():
            return max(os.get_terminal_size(stream.fileno()).columns, MIN_WIDTH)
    except (AttributeError, OSError, ValueError):
        pass
    return DEFAULT_WIDTH


def wrapped(text: str, width: int) -> list[str]:
    """``text`` (escaped already) as lines of at most ``width`` columns, each indented;
    a word longer than a line (a URL, a PromQL query) stays whole on its own line.

    A greedy fill over the words, as ``textwrap`` does for this case at a tenth of the cost:
    a run with 100,000 findings prints each one's detail."""
    room = width - len(INDENT)
    lines: list[str] = []
    line: list[str] = []
    used = -1
    for word in text.split():
        if used + 1 + len(word) > room and line:
            lines.append(INDENT + " ".join(line))
            line, used = [], -1
        line.append(word)
        used += 1 + len(word)
    if line:
        lines.append(INDENT + " ".join(line))
    return lines


def render_text(result: Result, stream: TextIO, color: bool = False) -> None:
    width = output_width(stream)
    for finding in result.findings:
        _write_finding(finding, stream, color, width)
    for path, reason in result.skipped:
        shown = safe_line(escape_controls(display_path(path)))
        stream.write(f"{shown}: skipped: {escape_controls(reason)}\n")
    for note in result.notes:
        stream.write(f"note: {escape_controls(note)}\n")
    stream.write(_summary(result) + "\n")
    if len(result.units) > 1:
        shown = ", ".join(
            f"{escape_controls(u.name)} ({u.kind}, {u.objects})" for u in result.units[:20]
        )
        more = f" and {len(result.units) - 20} more" if len(result.units) > 20 else ""
        stream.write(f"units: {shown}{more}\n")


def _write_finding(finding: Finding, stream: TextIO, color: bool, width: int) -> None:
    """A finding: its headline, the rest of its message wrapped, where it was found, its fix."""
    location = finding.location
    where = safe_line(
        escape_controls(f"{display_path(location.file)}:{location.line}:{location.column}")
    )
    severity = str(finding.severity)
    if color:
        severity = f"{_COLORS[finding.severity]}{severity}{_RESET}"
        head = f"{_BOLD}{where}{_RESET}: {_BOLD}{finding.rule}{_RESET} [{severity}]"
    else:
        head = f"{where}: {finding.rule} [{severity}]"
    headline, detail = split_message(finding.message)
    stream.write(f"{head} {escape_controls(headline)}\n")
    if detail:
        for line in wrapped(escape_controls(detail), width):
            stream.write(safe_line(line) + "\n")
    if finding.units:
        stream.write(f"{INDENT}in: {escape_controls(', '.join(finding.units))}\n")
    if location.rendered_from and location.rendered_from not in finding.units:
        stream.write(f"{INDENT}rendered from: {escape_controls(location.rendered_from)}\n")
    if location.note:
        stream.write(f"{INDENT}note: {escape_controls(location.note)}\n")
    if finding.fix:
        lines = safe_lines(finding.fix.rstrip("\n"))
        prefix = f"{_DIM}fix:{_RESET}" if color else "fix:"
        stream.write(f"{INDENT}{prefix} {lines[0]}\n")
        for line in lines[1:]:
            stream.write(f"         {line}\n")


def _summary(result: Result) -> str:
    """The last line: counts by severity, files and objects, what was left out, timings."""
    errors, warnings, infos = (
        result.count(s) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)
    )
    # Cluster mode reads objects, not files.
    where = f"in {result.files} file{'s' * (result.files != 1)} " if result.files else ""
    summary = (
        f"gpulint: {errors} error{'s' * (errors != 1)}, "
        f"{warnings} warning{'s' * (warnings != 1)}, {infos} info "
        f"{where}({result.objects} object{'s' * (result.objects != 1)})"
    )
    if result.skipped:
        summary += f", {len(result.skipped)} skipped"
    suppressed = sum(result.suppressed.values())
    if suppressed:
        most_first = sorted(result.suppressed.items(), key=lambda item: (-item[1], item[0]))
        by_rule = ", ".join(f"{rule} {count}" for rule, count in most_first)
        summary += f", {suppressed} suppressed ({by_rule})"
    if result.baseline is not None:
        baselined, stale = result.baseline
        summary += f", {baselined} baselined"
        if stale:
            summary += f" ({stale} baseline entr{'ies' if stale != 1 else 'y'} fixed since)"
    if len(result.units) > 1:
        summary += f"; {len(result.units)} units"
    if any(unit.rendered_by for unit in result.units):
        summary += f"; rendering {result.render_seconds:.1f} s, lint {result.lint_seconds:.1f} s"
    if result.config:
        summary += f"; config {escape_controls(display_path(result.config))}"
    return summary
