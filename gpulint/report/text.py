"""``file:line:col: GL101 [error] message``, the fix indented below, a summary line last.

Everything that comes from the input (file names, messages, fixes, notes) is escaped
(``gpulint.report.escape``) before gpulint adds its own colours.
"""

from __future__ import annotations

from typing import TextIO

from gpulint.engine import Result
from gpulint.model import Severity
from gpulint.paths import display_path
from gpulint.report.escape import escape_controls, safe_line, safe_lines

_COLORS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.INFO: "\033[36m"}
_BOLD, _DIM, _RESET = "\033[1m", "\033[2m", "\033[0m"


def render_text(result: Result, stream: TextIO, color: bool = False) -> None:
    for finding in result.findings:
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
        stream.write(f"{head} {escape_controls(finding.message)}\n")
        if finding.units:
            stream.write(f"    in: {escape_controls(', '.join(finding.units))}\n")
        if location.rendered_from and location.rendered_from not in finding.units:
            stream.write(f"    rendered from: {escape_controls(location.rendered_from)}\n")
        if location.note:
            stream.write(f"    note: {escape_controls(location.note)}\n")
        if finding.fix:
            lines = safe_lines(finding.fix.rstrip("\n"))
            prefix = f"{_DIM}fix:{_RESET}" if color else "fix:"
            stream.write(f"    {prefix} {lines[0]}\n")
            for line in lines[1:]:
                stream.write(f"         {line}\n")
    for path, reason in result.skipped:
        shown = safe_line(escape_controls(display_path(path)))
        stream.write(f"{shown}: skipped: {escape_controls(reason)}\n")
    for note in result.notes:
        stream.write(f"note: {escape_controls(note)}\n")
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
        by_rule = ", ".join(f"{rule} {count}" for rule, count in sorted(result.suppressed.items()))
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
        summary += f"; config {display_path(result.config)}"
    stream.write(summary + "\n")
    if len(result.units) > 1:
        shown = ", ".join(f"{u.name} ({u.kind}, {u.objects})" for u in result.units[:20])
        more = f" and {len(result.units) - 20} more" if len(result.units) > 20 else ""
        stream.write(f"units: {shown}{more}\n")
