"""Write replays as text, JSON (version 1), SVG, one offline HTML page, or Markdown.

The SVG is written by hand (no plotting library): per autoscaler, the replicas over time
(observed, simulated, and with gpulint's fix when compared) above the metric against its
target. Markdown carries no picture inline (a data URI of one is about 95 KB, and a job
summary holds 1 MiB): each autoscaler gets a compact summary in text, a line of block
characters per series (``_sparkline``), and its pictures go to files (``Pictures``: the
directory ``--pictures`` names), shown as images from ``--pictures-url`` when given.

Names, queries, notes and messages come from the input and from Prometheus; each writer
escapes them as the lint reporters do (``gpulint.report.escape``): in text, control
characters shown as escapes and no line a CI workflow command (``safe_line``); in SVG and
HTML, as XML text (``xml_text``), so the picture stays well-formed; in Markdown, as literal
text (``markdown_text``), so no name adds a link, an image, HTML or a mention to a job
summary. JSON keeps the values, written with ASCII escapes.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from gpulint.core.model import Finding
from gpulint.replay.behavior import SYNC_PERIOD_S
from gpulint.replay.model import TOTAL_PER_POD, History, ReplayMetric, ReplaySpec, Skipped
from gpulint.replay.objective import figure_verdict
from gpulint.replay.report import Replayed, behavior_yaml, stamp
from gpulint.report.escape import (
    escape_controls,
    markdown_code,
    markdown_text,
    safe_line,
    xml_text,
)

JSON_VERSION = 1
_FIGURE_LABELS = (
    ("scale_events", "scale events", ""),
    ("flaps", "flaps (reversed within 10 min)", ""),
    ("time_at_max_s", "time at maxReplicas", "s"),
    ("time_at_min_s", "time at minReplicas", "s"),
    ("time_under_provisioned_s", "time under-provisioned", "s"),
    ("time_over_provisioned_s", "time over-provisioned", "s"),
    ("scale_up_lag_s", "longest scale-up lag", "s"),
    ("gpu_hours_used", "GPU-hours used", "h"),
    ("gpu_hours_needed", "GPU-hours needed", "h"),
    ("time_queued_s", "time a pod waited for a node", "s"),
    ("cost", "cost (GPU-hours x price)", "$"),
)


# --- series ----------------------------------------------------------------------------------


def series_rows(replayed: Replayed) -> list[dict[str, Any]]:
    """One row per point of the history: the first metric's value as fetched, the replicas
    observed and simulated (after the sync at or before that time)."""
    history, ticks = replayed.history, replayed.run.ticks
    if not ticks:
        return []
    times = [t.time for t in ticks]
    stamps = _stamps(history)
    rows = []
    for k, time in enumerate(history.times):
        index = max(0, bisect.bisect_right(times, time) - 1)
        value = history.values[0][k] if history.values else None
        rows.append(
            {
                "time": stamps[k],
                "value": _number(value),
                "observed_replicas": history.observed[k] if history.observed else None,
                "simulated_replicas": ticks[index].replicas,
            }
        )
    return rows


_STAMPS: dict[int, tuple[History, list[str]]] = {}


def _stamps(history: History) -> list[str]:
    """The history's times in RFC 3339, made once for the replay and its fix."""
    cached = _STAMPS.get(id(history))
    if cached is None or cached[0] is not history:
        cached = _STAMPS[id(history)] = (history, [stamp(t) for t in history.times])
        if len(_STAMPS) > 2:
            _STAMPS.pop(next(iter(_STAMPS)))
    return cached[1]


def _number(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


# --- JSON ------------------------------------------------------------------------------------


def finding_json(finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "name": finding.name,
        "severity": str(finding.severity),
        "message": finding.message,
        "fix": finding.fix,
        "location": {
            "file": finding.location.file,
            "line": finding.location.line,
            "column": finding.location.column,
        },
    }


def replay_json(replayed: Replayed, series: bool = True) -> dict[str, Any]:
    """One replay in the JSON contract (``series`` False: without the rows, for writers
    that format them themselves)."""
    spec = replayed.spec
    return {
        "autoscaler": {"kind": spec.kind, "namespace": spec.namespace, "name": spec.name},
        "target": {"kind": spec.target_kind, "name": spec.target_name},
        "metrics": [
            {"name": m.name, "type": m.type, "target": m.target, "query": m.query}
            for m in _listed(spec)
        ],
        "series": series_rows(replayed) if series else [],
        "events": [
            {"time": stamp(e.time), "from": e.before, "to": e.after, "reason": e.reason}
            for e in replayed.run.events
        ],
        "figures": replayed.figures.as_json(),
        "findings": [finding_json(f) for f in replayed.findings],
        "compare_fix": (
            replay_json(replayed.fixed, series) if replayed.fixed is not None else None
        ),
        "verdict": verdict_json(replayed),
        "recommendation": (
            replayed.recommendation.as_json() if replayed.recommendation is not None else None
        ),
    }


def verdict_json(replayed: Replayed) -> dict[str, Any] | None:
    """--compare-fix's call: better by the objective or not, why, and each figure's."""
    if replayed.verdict is None or replayed.fixed is None:
        return None
    mine, theirs = replayed.figures.as_json(), replayed.fixed.figures.as_json()
    return {
        "better": replayed.verdict.better,
        "why": replayed.verdict.why,
        "figures": {
            key: judged for key in mine if (judged := figure_verdict(key, mine[key], theirs[key]))
        },
        "behavior": behavior_yaml(replayed.fixed.spec.behavior),
    }


def render_json(
    replays: Sequence[Replayed],
    start: float,
    end: float,
    step: float,
    out: TextIO,
    skipped: Sequence[Skipped] = (),
) -> None:
    """The document ``replay_json`` describes, written piece by piece: the series (thousands
    of rows a replay) are formatted directly, which costs a fraction of building and encoding
    a mapping per row. ``not_replayed``: the autoscalers left out, each with its reason."""
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    window = {"start": stamp(start), "end": stamp(end), "step_s": step}
    out.write(f'{{"version":{JSON_VERSION},"range":{dumps(window)},"replays":[')
    for index, replayed in enumerate(replays):
        if index:
            out.write(",")
        _write_replay(replayed, out, dumps)
    left = [
        {"kind": s.kind, "namespace": s.namespace, "name": s.name, "reason": s.reason}
        for s in skipped
    ]
    out.write(f'],"not_replayed":{dumps(left)}}}\n')


def _write_replay(replayed: Replayed, out: TextIO, dumps: Any) -> None:
    document = replay_json(replayed, series=False)
    out.write("{")
    for key in ("autoscaler", "target", "metrics"):
        out.write(f'"{key}":{dumps(document[key])},')
    out.write('"series":[')
    out.write(",".join(_series_rows_text(replayed)))
    out.write("],")
    for key in ("events", "figures", "findings"):
        out.write(f'"{key}":{dumps(document[key])},')
    out.write('"compare_fix":')
    if replayed.fixed is None:
        out.write("null")
    else:
        _write_replay(replayed.fixed, out, dumps)
    for key in ("verdict", "recommendation"):
        out.write(f',"{key}":{dumps(document[key])}')
    out.write("}")


def _series_rows_text(replayed: Replayed) -> list[str]:
    """``series_rows`` as JSON text, row by row (floats as json writes them: repr)."""
    rows = []
    for row in series_rows(replayed):
        value, observed = row["value"], row["observed_replicas"]
        rows.append(
            f'{{"time":"{row["time"]}","value":{"null" if value is None else repr(value)},'
            f'"observed_replicas":{"null" if observed is None else int(observed)},'
            f'"simulated_replicas":{int(row["simulated_replicas"])}}}'
        )
    return rows


# --- text ------------------------------------------------------------------------------------


def _figure(value: float | int | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "$":
        return f"{value:.2f}"
    if unit == "s":
        return f"{value / 60:.1f} min" if value >= 60 else f"{value:g} s"
    if unit == "h":
        return f"{value:.2f}"
    return str(value)


def render_text(
    replays: Sequence[Replayed],
    start: float,
    end: float,
    step: float,
    out: TextIO,
    skipped: Sequence[Skipped] = (),
) -> None:
    lines = [f"replay {stamp(start)} .. {stamp(end)}, step {step:g} s"]
    if not replays:
        lines.append("no autoscaler replayed")
    for replayed in replays:
        lines.append("")
        lines += _text_lines(replayed)
    if skipped:
        lines.append("")
        lines += [left.describe() for left in skipped]
    for line in lines:
        # Each line holds text of the input's: shown, never acted on.
        out.write(safe_line(escape_controls(line)) + "\n")


def _text_lines(replayed: Replayed) -> list[str]:
    spec = replayed.spec
    lines = [
        f"{spec.kind} {spec.namespace}/{spec.name} -> {spec.target_kind} {spec.target_name} "
        f"(replicas {spec.min_replicas}-{spec.max_replicas}, pods ready after "
        f"{spec.pod_ready_after_s:g} s: {spec.pod_ready_source}, {spec.gpus_per_pod} GPU(s) "
        "each)"
    ]
    for metric in _listed(spec):
        lines.append(
            f"  metric {metric.name} ({metric.type} {metric.target_type} {metric.target:g}): "
            f"{' '.join(metric.query.split())}"
        )
    lines += [f"  note: {note}" for note in replayed.history.notes]
    compared = replayed.fixed
    theirs = compared.figures.as_json() if compared else None
    lines += _table_lines(replayed.figures.as_json(), theirs, "with the fix")
    events = replayed.run.events
    if events:
        shown = ", ".join(f"{stamp(e.time)[11:16]} {e.before}->{e.after}" for e in events[:8])
        more = f" and {len(events) - 8} more" if len(events) > 8 else ""
        lines.append(f"  scale events: {shown}{more}")
    for finding in replayed.findings:
        lines.append(f"  {finding.rule} {finding.severity}: {finding.message}")
        lines.append(f"    at {finding.location.file}:{finding.location.line}")
    if compared is not None and replayed.verdict is not None:
        lines.append(f"  the fix: {replayed.verdict.why}")
        lines.append("  the fix replayed (under spec):")
        lines += [f"    {line}" for line in behavior_yaml(compared.spec.behavior).splitlines()]
    lines += _recommendation_lines(replayed)
    return lines


def _table_lines(mine: dict[str, Any], theirs: dict[str, Any] | None, heading: str) -> list[str]:
    """The figures as configured, and beside them another setting's with better or worse
    for each; a figure no replay measured (no nodes, no price) is left out."""
    width = max(len(label) for _, label, _ in _FIGURE_LABELS)
    header = f"  {'':<{width}}  {'as configured':>14}"
    lines = [header + (f"  {heading:>14}" if theirs is not None else "")]
    for key, label, unit in _FIGURE_LABELS:
        if mine[key] is None:
            continue
        line = f"  {label:<{width}}  {_figure(mine[key], unit):>14}"
        if theirs is not None:
            line += f"  {_figure(theirs[key], unit):>14}"
            judged = figure_verdict(key, mine[key], theirs[key])
            line += f"  {judged}" if judged else ""
        lines.append(line)
    return lines


def _recommendation_lines(replayed: Replayed) -> list[str]:
    found = replayed.recommendation
    if found is None:
        return []
    if not found.better:
        return [f"  recommendation: {found.why}"]
    lines = ["  recommendation:"]
    lines += _table_lines(replayed.figures.as_json(), found.figures.as_json(), "recommended")
    lines.append(f"  why: {found.why}")
    lines.append("  patch:")
    lines += [f"    {line}" for line in (found.patch or "").splitlines()]
    return lines


# --- SVG -------------------------------------------------------------------------------------

WIDTH, HEIGHT = 820, 420
_LEFT, _RIGHT, _TOP = 56, 16, 28
_PANEL = 150  # height of each panel
_GAP = 48
_COLORS = {
    "observed": "#8c8c8c",
    "simulated": "#1f6fd1",
    "fixed": "#1a9b4b",
    "metric": "#e07b00",
    "replayed-metric": "#f2b866",
    "target": "#c62828",
}
_MAX_POINTS = 1600  # a polyline keeps at most this many points (about two per pixel)


def _scale(lo: float, hi: float, top: float) -> Any:
    span = hi - lo if hi > lo else 1.0

    def y(value: float) -> float:
        return top + _PANEL - (value - lo) / span * _PANEL

    return y


def _x_of(start: float, end: float) -> Any:
    span = end - start if end > start else 1.0
    inner = WIDTH - _LEFT - _RIGHT

    def x(time: float) -> float:
        return _LEFT + (time - start) / span * inner

    return x


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(points) <= _MAX_POINTS:
        return points
    every = len(points) / _MAX_POINTS
    kept = [points[int(i * every)] for i in range(_MAX_POINTS)]
    kept.append(points[-1])
    return kept


def _polyline(points: list[tuple[float, float]], color: str, name: str, dash: str = "") -> str:
    if not points:
        return ""
    text = " ".join(f"{x:.1f},{y:.1f}" for x, y in _thin(points))
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<polyline class="series {name}" data-series="{name}" fill="none" stroke="{color}" '
        f'stroke-width="1.6"{extra} points="{text}"/>'
    )


def _steps(
    times: Sequence[float], values: Sequence[int | None], x: Any, y: Any
) -> list[tuple[float, float]]:
    """A step line: each value holds until the next time."""
    points: list[tuple[float, float]] = []
    last: int | None = None
    for time, value in zip(times, values, strict=True):
        if value is None:
            continue
        if last is not None and value != last:
            points.append((x(time), y(last)))
        points.append((x(time), y(value)))
        last = value
    return points


def render_svg(replayed: Replayed) -> str:
    spec, history, run = replayed.spec, replayed.history, replayed.run
    start, end = _time_span(history)
    x = _x_of(start, end)
    tick_times = [t.time for t in run.ticks]
    simulated = [t.replicas for t in run.ticks]
    fixed = [t.replicas for t in replayed.fixed.run.ticks] if replayed.fixed else []
    observed = list(history.observed)
    top_replicas = max([spec.max_replicas, *simulated, *fixed, *[o or 0 for o in observed]])
    y_rep = _scale(0, top_replicas + 0.5, _TOP)
    metric = spec.controlled[0] if spec.controlled else None
    metric_top = _metric_top(spec, history)
    top2 = _TOP + _PANEL + _GAP
    y_met = _scale(0, metric_top, top2)
    title = xml_text(
        f"{spec.kind} {spec.namespace}/{spec.name}: replicas (above) and "
        f"{_metric_label(metric) if metric else 'metric'} against its target (below)"
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
        f"<title>{title}</title>",
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<text x="{_LEFT}" y="16" font-size="13" font-weight="bold">{title}</text>',
    ]
    # Replicas are whole pods: their axis is labelled at 0, half way and the top, rounded.
    replica_marks = sorted({0, round(top_replicas / 2), top_replicas})
    parts += _panel(_TOP, replica_marks, y_rep, "replicas")
    label = xml_text(_metric_label(metric) if metric else "")
    parts += _panel(top2, [0, metric_top / 2, metric_top], y_met, label)
    parts += _time_axis(start, end, x, top2)
    parts.append(
        _polyline(_steps(history.times, observed, x, y_rep), _COLORS["observed"], "observed")
    )
    parts.append(
        _polyline(_steps(tick_times, simulated, x, y_rep), _COLORS["simulated"], "simulated")
    )
    if replayed.fixed is not None:
        parts.append(
            _polyline(_steps(tick_times, fixed, x, y_rep), _COLORS["fixed"], "fixed", "5 3")
        )
    if metric is not None and history.values:
        parts += _metric_lines(replayed, metric, x, y_met, metric_top)
    parts += _legend(replayed.fixed is not None)
    parts.append("</svg>")
    return "\n".join(p for p in parts if p) + "\n"


def _time_span(history: History) -> tuple[float, float]:
    """The time the picture spans: the history's first point to a sync after its last."""
    if not history.times:
        return 0.0, 1.0
    return history.times[0], history.times[-1] + SYNC_PERIOD_S


def _listed(spec: ReplaySpec) -> tuple[ReplayMetric, ...]:
    """The metrics a report lists: each one queried, and KEDA's composite metric."""
    return spec.metrics + ((spec.composite.metric,) if spec.composite is not None else ())


def compared_values(spec: ReplaySpec, history: History) -> list[float | None]:
    """The first metric as observed, on the scale the controller compares with its target:
    an AverageValue target of an Object or External metric (KEDA's triggers by default) is
    per pod, the total over the replicas the target had (replica_calculator.go
    ``GetExternalPerPodMetricReplicas``: usage / (target x statusReplicas)), so its total is
    drawn divided by the replicas observed (no point where they are unknown or 0); a Pods
    metric is the pods' mean already, and a Value target the total. With KEDA's
    scalingModifiers it is the composite metric, the formula over the triggers' values."""
    metric = spec.controlled[0] if spec.controlled else None
    values: list[float | None] = list(history.values[0]) if history.values else []
    if spec.composite is not None and history.values:
        composite = spec.composite
        values = [composite.value(list(point)) for point in zip(*history.values, strict=True)]
    if metric is None or metric.relation != TOTAL_PER_POD:
        return list(values)
    observed = history.observed or [None] * len(values)
    return [
        None if v is None or not pods else v / pods
        for v, pods in zip(values, observed, strict=True)
    ]


def _metric_label(metric: ReplayMetric) -> str:
    return f"{metric.name} per pod" if metric.relation == TOTAL_PER_POD else metric.name


def _metric_top(spec: ReplaySpec, history: History) -> float:
    """The top of the metric panel: a tenth above the highest value or the target."""
    metric = spec.controlled[0] if spec.controlled else None
    values = [v for v in compared_values(spec, history) if v is not None]
    top = max([*values, metric.target if metric else 1.0])
    above = top * 1.1
    if not math.isfinite(above):  # a value near the largest float has no tenth above it
        return top
    return above or 1.0


def _panel(top: float, marks: list[Any], y: Callable[[float], float], label: str) -> list[str]:
    """A panel's frame, its axis marks and its label."""
    parts = [
        f'<rect x="{_LEFT}" y="{top}" width="{WIDTH - _LEFT - _RIGHT}" height="{_PANEL}" '
        'fill="none" stroke="#d0d0d0"/>'
    ]
    for value in marks:
        parts.append(
            f'<text x="{_LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.3g}</text>'
        )
    parts.append(
        f'<text x="12" y="{top + _PANEL / 2:.1f}" transform="rotate(-90 12 '
        f'{top + _PANEL / 2:.1f})" text-anchor="middle">{label}</text>'
    )
    return parts


def _time_axis(start: float, end: float, x: Callable[[float], float], top2: float) -> list[str]:
    """Five time stamps under the lower panel."""
    parts = []
    for fraction, anchor in (
        (0.0, "start"),
        (0.25, "middle"),
        (0.5, "middle"),
        (0.75, "middle"),
        (1.0, "end"),
    ):
        time = start + (end - start) * fraction
        parts.append(
            f'<text x="{x(time):.1f}" y="{top2 + _PANEL + 16}" text-anchor="{anchor}">'
            f"{stamp(time)[5:16].replace('T', ' ')}</text>"
        )
    return parts


def _metric_lines(
    replayed: Replayed,
    metric: ReplayMetric,
    x: Callable[[float], float],
    y_met: Callable[[float], float],
    metric_top: float,
) -> list[str]:
    """The metric as observed, as the replayed pods see it, and its target."""
    history, run = replayed.history, replayed.run
    points = [
        (x(t), y_met(v))
        for t, v in zip(history.times, compared_values(replayed.spec, history), strict=True)
        if v is not None
    ]
    replayed_points = [
        (x(t.time), y_met(min(t.value, metric_top))) for t in run.ticks if t.value is not None
    ]
    target_y = y_met(metric.target)
    return [
        _polyline(replayed_points, _COLORS["replayed-metric"], "replayed-metric"),
        _polyline(points, _COLORS["metric"], "metric"),
        f'<line class="target" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{target_y:.1f}" '
        f'y2="{target_y:.1f}" stroke="{_COLORS["target"]}" stroke-dasharray="6 4"/>',
    ]


def _legend(fixed: bool) -> list[str]:
    legend = [("observed", "observed replicas"), ("simulated", "replayed replicas")]
    if fixed:
        legend.append(("fixed", "replayed with the fix"))
    legend += [
        ("metric", "metric as observed"),
        ("replayed-metric", "as the replayed pods see it"),
        ("target", "target"),
    ]
    parts = []
    lx: float = _LEFT
    for key, text in legend:
        parts.append(
            f'<rect x="{lx:.0f}" y="{HEIGHT - 14}" width="12" height="4" fill="{_COLORS[key]}"/>'
            f'<text x="{lx + 16:.0f}" y="{HEIGHT - 9}">{text}</text>'
        )
        lx += 22 + len(text) * 5.6
    return parts


# --- HTML and Markdown -------------------------------------------------------------------------


def render_html(
    replays: Sequence[Replayed],
    start: float,
    end: float,
    step: float,
    out: TextIO,
    skipped: Sequence[Skipped] = (),
) -> None:
    """One page with every picture inline and the figures: no script, no network."""
    out.write(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>gpulint replay</title>"
        "<style>body{font-family:sans-serif;margin:2em;color:#222}"
        "table{border-collapse:collapse}td,th{padding:2px 10px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}</style></head><body>\n"
    )
    out.write(f"<h1>gpulint replay</h1><p>{stamp(start)} .. {stamp(end)}, step {step:g} s</p>\n")
    for replayed in replays:
        spec = replayed.spec
        out.write(f"<section><h2>{xml_text(f'{spec.kind} {spec.namespace}/{spec.name}')}</h2>\n")
        out.write(render_svg(replayed))
        out.write(_figures_table_html(replayed))
        for finding in replayed.findings:
            out.write(
                f"<p><b>{finding.rule}</b> {xml_text(str(finding.severity))}: "
                f"{xml_text(finding.message)}</p>\n"
            )
        out.write("</section>\n")
    for left in skipped:
        out.write(f"<p>{xml_text(left.describe())}</p>\n")
    out.write("</body></html>\n")


def _figures_table_html(replayed: Replayed) -> str:
    mine = replayed.figures.as_json()
    parts = [_table_html(mine, replayed.fixed.figures.as_json() if replayed.fixed else None)]
    if replayed.verdict is not None and replayed.fixed is not None:
        parts.append(f"<p>The fix: {xml_text(replayed.verdict.why)}</p>\n")
        parts.append(f"<pre>{xml_text(behavior_yaml(replayed.fixed.spec.behavior))}</pre>\n")
    found = replayed.recommendation
    if found is not None:
        parts.append(f"<h3>Recommendation</h3><p>{xml_text(found.why)}</p>\n")
        if found.better:
            parts.append(_table_html(mine, found.figures.as_json(), "recommended"))
            parts.append(f"<pre>{xml_text(found.patch or '')}</pre>\n")
    return "".join(parts)


def _table_html(
    mine: dict[str, Any], theirs: dict[str, Any] | None, heading: str = "with the fix"
) -> str:
    rows = ["<table><tr><th></th><th>as configured</th>"]
    rows.append(f"<th>{heading}</th><th></th></tr>" if theirs else "</tr>")
    for key, label, unit in _FIGURE_LABELS:
        if mine[key] is None:
            continue
        rows.append(f"<tr><td>{label}</td><td>{_figure(mine[key], unit)}</td>")
        if theirs:
            judged = figure_verdict(key, mine[key], theirs[key])
            rows.append(f"<td>{_figure(theirs[key], unit)}</td><td>{judged}</td></tr>")
        else:
            rows.append("</tr>")
    rows.append("</table>\n")
    return "".join(rows)


class Pictures:
    """Where ``render_markdown`` writes each autoscaler's picture: a directory, and the URL
    it is served from, if any (then the Markdown shows the pictures as images)."""

    def __init__(self, directory: str, url: str | None = None) -> None:
        self.directory = directory
        self.url = url.rstrip("/") if url else None
        self._names: set[str] = set()

    def write(self, replayed: Replayed) -> str:
        """The picture of ``replayed``, written; its file name. Names are made of the
        autoscaler's kind, namespace and name, with every character but letters, digits,
        ``.``, ``-`` and ``_`` as ``-`` (a name from the input makes no path), and a number
        when two are alike."""
        spec = replayed.spec
        base = re.sub(r"[^A-Za-z0-9._-]", "-", f"{spec.kind}-{spec.namespace}-{spec.name}")
        base = base.strip(".-")[:120] or "autoscaler"
        name, number = f"{base}.svg", 1
        while name in self._names:
            number += 1
            name = f"{base}-{number}.svg"
        self._names.add(name)
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, name), "w", encoding="utf-8") as handle:
            handle.write(render_svg(replayed))
        return name


def render_markdown(
    replays: Sequence[Replayed],
    start: float,
    end: float,
    step: float,
    out: TextIO,
    pictures: Pictures | None = None,
    skipped: Sequence[Skipped] = (),
) -> None:
    """Per autoscaler: its series in brief, its figures, its findings; its picture written
    to ``pictures`` (and shown from its URL), never inline."""
    out.write(f"## gpulint replay\n\n{stamp(start)} .. {stamp(end)}, step {step:g} s\n")
    for replayed in replays:
        spec = replayed.spec
        out.write(f"\n### {spec.kind} {markdown_text(f'{spec.namespace}/{spec.name}')}\n\n")
        out.write(markdown_code(series_summary(replayed)) + "\n\n")
        if pictures is not None:
            name = pictures.write(replayed)
            if pictures.url is not None:
                alt = f"replicas and metric of {markdown_text(spec.name)}"
                out.write(f"![{alt}]({pictures.url}/{name})\n\n")
            else:
                shown = markdown_text(os.path.join(pictures.directory, name))
                out.write(f"Picture: {shown}\n\n")
        theirs = replayed.fixed.figures.as_json() if replayed.fixed else None
        mine = replayed.figures.as_json()
        out.write(_table_markdown(mine, theirs, "with the fix"))
        if replayed.verdict is not None and replayed.fixed is not None:
            out.write(f"\nThe fix: {markdown_text(replayed.verdict.why)}\n\n")
            # one line of flow YAML: a job summary of many autoscalers stays short
            flow = behavior_yaml(replayed.fixed.spec.behavior, flow=True)
            out.write(markdown_code(flow) + "\n")
        found = replayed.recommendation
        if found is not None:
            out.write(f"\n**Recommendation**: {markdown_text(found.why)}\n\n")
            if found.better:
                out.write(_table_markdown(mine, found.figures.as_json(), "recommended"))
                out.write(f"\n{markdown_code(found.patch or '')}\n")
        for finding in replayed.findings:
            message = markdown_text(finding.message)
            out.write(f"\n- **{finding.rule}** {finding.severity}: {message}\n")
    if skipped:
        out.write("\n" + "".join(f"- {markdown_text(left.describe())}\n" for left in skipped))


def _table_markdown(mine: dict[str, Any], theirs: dict[str, Any] | None, heading: str) -> str:
    lines = ["| | as configured |" + (f" {heading} | |" if theirs else "")]
    lines.append("|---|---:|" + ("---:|---|" if theirs else ""))
    for key, label, unit in _FIGURE_LABELS:
        if mine[key] is None:
            continue
        line = f"| {label} | {_figure(mine[key], unit)} |"
        if theirs:
            judged = figure_verdict(key, mine[key], theirs[key])
            line += f" {_figure(theirs[key], unit)} | {judged} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


# Eight heights of a bar, lowest first (Unicode block elements U+2581..U+2588).
_BARS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
SPARK_WIDTH = 48


def series_summary(replayed: Replayed) -> str:
    """The picture in a few lines of text: the replicas observed, replayed (and with the
    fix) and the metric against its target, each a line of bars over the same time, with
    its lowest and highest value."""
    spec, history, run = replayed.spec, replayed.history, replayed.run
    start, end = _time_span(history)
    ticks = [t.time for t in run.ticks]
    rows = [("observed", history.times, list(history.observed))]
    rows.append(("replayed", ticks, [t.replicas for t in run.ticks]))
    if replayed.fixed is not None:
        fixed = replayed.fixed.run.ticks
        rows.append(("with fix", [t.time for t in fixed], [t.replicas for t in fixed]))
    top = max([spec.max_replicas, *(v for _, _, values in rows for v in values if v is not None)])
    lines = [f"replicas, {stamp(start)[:16]} .. {stamp(end)[:16]} (0 to {top}):"]
    for label, times, values in rows:
        lines.append(f"  {label:<9} {_sparkline(times, values, start, end, top)}{_range(values)}")
    metric = spec.controlled[0] if spec.controlled else None
    if metric is not None and history.values:
        metric_top = _metric_top(spec, history)
        measured = compared_values(spec, history)
        lines.append(f"{escape_controls(_metric_label(metric))} (target {metric.target:g}):")
        line = _sparkline(history.times, measured, start, end, metric_top)
        lines.append(f"  {'observed':<9} {line}{_range(measured)}")
    return "\n".join(lines)


def _sparkline(
    times: Sequence[float],
    values: Sequence[float | int | None],
    start: float,
    end: float,
    top: float,
) -> str:
    """``values`` over [start, end) as ``SPARK_WIDTH`` bars, each the highest value of its
    slice of time (a burst shows however short); a slice with no value repeats the one
    before it, or is blank before the first."""
    slices: list[float | None] = [None] * SPARK_WIDTH
    span = (end - start) or 1.0
    for time, value in zip(times, values, strict=False):
        if value is None:
            continue
        index = min(SPARK_WIDTH - 1, max(0, int((time - start) / span * SPARK_WIDTH)))
        held = slices[index]
        slices[index] = value if held is None else max(held, value)
    bars, last = [], None
    for value in slices:
        last = value if value is not None else last
        if last is None:
            bars.append(" ")
        else:
            level = 0 if top <= 0 else round(min(max(last / top, 0.0), 1.0) * (len(_BARS) - 1))
            bars.append(_BARS[level])
    return "".join(bars)


def _range(values: Sequence[float | int | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "  no data"
    low, high = min(present), max(present)
    return f"  {low:g}" if low == high else f"  {low:g}..{high:g}"
