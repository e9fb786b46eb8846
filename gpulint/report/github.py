"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request.

A command is one line: ``::error file=F,line=L,col=C,title=T::message``. The title is the
rule and the finding's headline (``GL406: HPA web ...``), the message its detail, the units
it was found in and the fix; a finding whose message is one sentence repeats it as the
message, which an annotation cannot leave empty; a finding that follows from another
(``gpulint.engine.causes``) says which, so that a reviewer fixes that one. The runner reads
``%25``, ``%0D`` and ``%0A`` in the message as ``%``, CR and LF, and also ``%3A`` and ``%2C``
in properties (actions/toolkit, command.ts), so every newline of a message or fix is encoded
and no input can end the line and start a command of its own. Control characters from the
input are shown as escapes first (``gpulint.report.escape``).
"""

from __future__ import annotations

from typing import TextIO

from gpulint.core.message import split_message
from gpulint.core.model import Finding, Severity
from gpulint.core.paths import display_path
from gpulint.engine.causes import roots
from gpulint.engine.result import Result
from gpulint.report.escape import escape_controls

_COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(escape_controls(text)).replace(":", "%3A").replace(",", "%2C")


def render_github(result: Result, stream: TextIO) -> None:
    findings = result.findings
    for finding, top in zip(findings, roots(findings), strict=True):
        location = finding.location
        headline, detail = split_message(finding.message)
        message = escape_controls(detail or headline)
        if top is not None:
            message += f"\nfollows from: {escape_controls(cause_place(findings[top]))}"
        if finding.units:
            message += f"\nin: {', '.join(escape_controls(u) for u in finding.units)}"
        if finding.fix:
            # gpulint's own line breaks stay line breaks of the annotation (encoded).
            fix = "\n".join(escape_controls(line) for line in finding.fix.split("\n"))
            message += f"\nfix: {fix}"
        stream.write(
            f"::{_COMMANDS[finding.severity]} file={_property(display_path(location.file))},"
            f"line={location.line},col={location.column},"
            f"title={_property(f'{finding.rule}: {headline}')}::{_data(message)}\n"
        )


def cause_place(cause: Finding) -> str:
    """``GL403 at monitoring/values.yaml:12:9``: the finding another follows from."""
    where = cause.location
    return f"{cause.rule} at {display_path(where.file)}:{where.line}:{where.column}"
