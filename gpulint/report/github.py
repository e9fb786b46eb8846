"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request."""

from __future__ import annotations

from typing import TextIO

from gpulint.engine import Result
from gpulint.model import Severity
from gpulint.paths import display_path

_COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(result: Result, stream: TextIO) -> None:
    for finding in result.findings:
        location = finding.location
        message = finding.message
        if finding.units:
            message += f"\nin: {', '.join(finding.units)}"
        if finding.fix:
            message += f"\nfix: {finding.fix}"
        stream.write(
            f"::{_COMMANDS[finding.severity]} file={_property(display_path(location.file))},"
            f"line={location.line},col={location.column},"
            f"title={_property(f'{finding.rule} {finding.name}')}::{_data(message)}\n"
        )
