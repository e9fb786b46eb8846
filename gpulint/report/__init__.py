"""Reporters: text for people (whole, or one line per finding: concise), JSON for tools,
SARIF for code scanning, GitHub annotations, Markdown for a job summary."""

from __future__ import annotations

from typing import TextIO

from gpulint.engine.result import Result

FORMATS = ("text", "concise", "json", "sarif", "github", "markdown")


def render(result: Result, fmt: str, stream: TextIO, color: bool = False) -> None:
    if fmt == "text":
        from gpulint.report.text import render_text

        render_text(result, stream, color)
    elif fmt == "concise":
        from gpulint.report.concise import render_concise

        render_concise(result, stream, color)
    elif fmt == "json":
        from gpulint.report.json import render_json

        render_json(result, stream)
    elif fmt == "sarif":
        from gpulint.report.sarif import render_sarif

        render_sarif(result, stream)
    elif fmt == "github":
        from gpulint.report.github import render_github

        render_github(result, stream)
    elif fmt == "markdown":
        from gpulint.report.markdown import render_markdown

        render_markdown(result, stream)
    else:  # pragma: no cover - argparse restricts the choices
        raise ValueError(f"unknown format {fmt}")
