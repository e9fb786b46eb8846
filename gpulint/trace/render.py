"""Traces as text, JSON (version 1, a contract) and Mermaid flowcharts.

* text: a tree per autoscaler metric, one line per link: its status in words (``ok``,
  ``BROKEN``, ``?`` for unknown), the stage, what the link is and where it is written; the
  first broken link is marked ``<- first break``. Readable without colour.
* json: ``{"version": 1, "traces": [{"autoscaler": {apiVersion, kind, namespace, name, file,
  line}, "metric", "unit", "links": [{"stage", "object", "file", "line", "status",
  "findings", "detail"}]}]}``.
* mermaid: Markdown with one fenced ``flowchart LR`` per trace under a heading that names the
  autoscaler, the metric and (with several units) the unit, which GitHub renders in a PR
  comment, a job summary (``$GITHUB_STEP_SUMMARY``) or a README; broken links are red, unknown
  ones dashed grey.

Text from the input (object names, details) is escaped as the lint reporters escape it
(``gpulint.report.escape``): in text, shown and never acted on; in a Mermaid label, Mermaid's
own characters as its entities (``mermaid_label``), so no label can end its node, the block or
start a directive; in the Markdown title above each chart, as literal Markdown
(``markdown_text``), so no title adds a link, an image, HTML or a mention to a job summary.
"""

from __future__ import annotations

from typing import Any, TextIO

import gpulint
from gpulint.core.model import Location, ObjectRef
from gpulint.core.paths import display_path
from gpulint.report.escape import (
    escape_controls,
    markdown_text,
    mermaid_label,
    safe_line,
    write_json,
)
from gpulint.report.wrap import fill, output_width
from gpulint.trace.links import BROKEN, OK, UNKNOWN, Link, Trace

_WORDS = {OK: "ok", BROKEN: "BROKEN", UNKNOWN: "?"}
_COLORS = {OK: "\x1b[32m", BROKEN: "\x1b[1;31m", UNKNOWN: "\x1b[2m"}
_RESET = "\x1b[0m"


def _where(location: Location | None) -> str:
    if location is None:
        return ""
    return f"{display_path(location.file)}:{location.line}"


def _shown(ref: ObjectRef | None) -> str:
    return str(ref) if ref is not None else ""


def render_text(traces: list[Trace], stream: TextIO, color: bool = False) -> None:
    if not traces:
        stream.write("gpulint trace: no autoscaler metric to trace in the input\n")
        return
    columns = output_width(stream)
    units = {t.unit for t in traces}
    for number, trace in enumerate(traces):
        if number:
            stream.write("\n")
        unit = f" [unit {trace.unit}]" if len(units) > 1 and trace.unit else ""
        head = f"{_shown(trace.autoscaler)}, metric {trace.metric} ({_where(trace.location)}){unit}"
        for line in fill(escape_controls(head), columns, "", "    "):
            stream.write(safe_line(line) + "\n")
        first = trace.first_broken()
        width = max(len(stage) for stage in (link.stage for link in trace.links))
        for position, link in enumerate(trace.links):
            last = position == len(trace.links) - 1
            branch = "└─" if last else "├─"
            word = f"{_WORDS[link.status]:<6}"
            text = escape_controls(link.detail)
            where = _where(link.location)
            if where:
                text += f"  ({escape_controls(where)})"
            if link.findings:
                text += f"  [{', '.join(link.findings)}]"
            if link is first:
                text += "  <- first break"
            # Continued under the link's text, the tree's line still drawn beside it.
            prefix = f"{branch} {word} {link.stage:<{width}}  "
            under = "   " if last else "│  "
            rest = under + " " * (len(prefix) - len(under) if len(prefix) <= columns // 2 else 4)
            lines = fill(text, columns, prefix, rest)
            if color:
                coloured = f"{branch} {_COLORS[link.status]}{word}{_RESET} {link.stage:<{width}}  "
                lines[0] = coloured + lines[0][len(prefix) :]
            for line in lines:
                stream.write(safe_line(line) + "\n")
    broken = sum(1 for t in traces if t.first_broken() is not None)
    stream.write(
        f"\ngpulint trace: {len(traces)} chain{'s' * (len(traces) != 1)}, {broken} broken\n"
    )


def _object(ref: ObjectRef | None) -> dict[str, Any] | None:
    if ref is None:
        return None
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "namespace": ref.namespace,
        "name": ref.name,
    }


def _link_dict(link: Link) -> dict[str, Any]:
    return {
        "stage": link.stage,
        "object": _object(link.object),
        "file": display_path(link.location.file) if link.location else None,
        "line": link.location.line if link.location else None,
        "status": link.status,
        "findings": list(link.findings),
        "detail": link.detail,
    }


def traces_to_dict(traces: list[Trace]) -> dict[str, Any]:
    return {
        "version": 1,
        "gpulintVersion": gpulint.__version__,
        "traces": [
            {
                "autoscaler": {
                    **(_object(t.autoscaler) or {}),
                    "file": display_path(t.location.file),
                    "line": t.location.line,
                },
                "metric": t.metric,
                "unit": t.unit,
                "links": [_link_dict(link) for link in t.links],
            }
            for t in traces
        ],
    }


def render_json(traces: list[Trace], stream: TextIO) -> None:
    write_json(traces_to_dict(traces), stream)


def render_mermaid(traces: list[Trace], stream: TextIO) -> None:
    if not traces:
        stream.write("_gpulint trace: no autoscaler metric to trace in the input._\n")
        return
    units = {t.unit for t in traces}
    for number, trace in enumerate(traces):
        if number:
            stream.write("\n")
        first = trace.first_broken()
        title = f"{_shown(trace.autoscaler)}: {trace.metric}"
        if len(units) > 1 and trace.unit:
            # The same autoscaler in two units (broken/ and fixed/) must not share a heading.
            title += f" in unit {display_path(trace.unit)}"
        if first is not None:
            title += f" (broken at {first.stage})"
        stream.write(f"**{markdown_text(title)}**\n\n```mermaid\nflowchart LR\n")
        for position, link in enumerate(trace.links):
            lines = [f"{link.stage}: {_WORDS[link.status]}"]
            if link.label:
                lines.append(link.label)
            if link.findings:
                lines.append(", ".join(link.findings))
            label = "<br/>".join(mermaid_label(line) for line in lines)
            stream.write(f'  n{position}["{label}"]:::{link.status}\n')
        for position in range(1, len(trace.links)):
            stream.write(f"  n{position - 1} --> n{position}\n")
        stream.write(
            "  classDef ok fill:#e6f4ea,stroke:#2e7d32\n"
            "  classDef broken fill:#fdecea,stroke:#c62828,stroke-width:3px\n"
            "  classDef unknown fill:#f5f5f5,stroke:#9e9e9e,stroke-dasharray:4 3\n"
            "```\n"
        )
