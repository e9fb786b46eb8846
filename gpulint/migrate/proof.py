"""The proof of a migration: the HPA and its ScaledObject replayed over the same history, and
every generated query checked live.

* The replay (``gpulint.replay``): the HPA through the adapter's queries as the adapter renders
  them for it, the ScaledObject through its triggers as KEDA sends them and the HPA KEDA makes
  of them (its minimum of at least one replica, its behavior), over the same range of the same
  Prometheus. Where the two replicas differ by more than one at a sync, the proof says when and
  what each read there.
* The live check: each trigger's query answers exactly one series now (KEDA's prometheus
  scaler fails with "returned multiple elements" on more, kedacore/keda
  pkg/scalers/prometheus_scaler.go), and its value is the sum of what the adapter's query
  answers for the same HPA: the scale the HPA's target was written on.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from gpulint.input.document import Manifest
from gpulint.inventory import Inventory
from gpulint.kinds.keda import ScaledObject
from gpulint.live.client import PrometheusAPI, QueryRejected
from gpulint.live.kedaquery import read_answer
from gpulint.live.snapshot import Answer
from gpulint.migrate.lowering import Lowered
from gpulint.replay.history import HistoryError, fetch
from gpulint.replay.plan import Untraceable, hpa_spec, scaled_object_spec
from gpulint.replay.report import Replayed, replay_one, stamp

__all__ = ["Check", "Proof", "prove", "side_by_side"]

# How far the ScaledObject's replicas may stray from the HPA's at one sync and still agree.
TOLERANCE_REPLICAS = 1
# Differences listed in the report (the count says how many there were).
SHOWN_DIFFERENCES = 5
# Syncs this far apart or closer belong to one stretch of differences.
SYNC_GAP_S = 15.0
# Two readings of one quantity, one through the adapter's query and one through KEDA's, agree
# when they differ by no more than this share (floating-point sums in another order).
RELATIVE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Check:
    """One trigger's query asked now."""

    metric: str
    query: str
    series: int
    value: float | None
    adapter_value: float | None  # the sum of the adapter query's series
    adapter_series: int
    problem: str | None


@dataclass(frozen=True)
class Difference:
    time: float
    hpa: int
    scaled: int


@dataclass
class Proof:
    lowered: Lowered
    hpa: Replayed | None = None
    scaled: Replayed | None = None
    not_replayed: str | None = None
    syncs: int = 0
    differences: list[Difference] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return (
            self.not_replayed is None
            and not self.differences
            and all(check.problem is None for check in self.checks)
        )

    def lines(self) -> list[str]:
        key = self.lowered.key
        out: list[str] = []
        if self.not_replayed is not None:
            out.append(f"proof {key}: not replayed: {self.not_replayed}")
        elif self.differences:
            worst = max(abs(d.hpa - d.scaled) for d in self.differences)
            found = episodes(self.differences)
            out.append(
                f"proof {key}: the ScaledObject's replicas differ from the HPA's by more than "
                f"{TOLERANCE_REPLICAS} at {len(self.differences)} of {self.syncs} syncs, in "
                f"{len(found)} stretch{'es' * (len(found) != 1)} (at most {worst}):"
            )
            for first, last in found[:SHOWN_DIFFERENCES]:
                out.append(
                    f"  {stamp(first.time)} to {stamp(last.time)}: HPA {first.hpa}, "
                    f"ScaledObject {first.scaled}; {self._events_before(last.time)}"
                )
            out += [f"  why: {line}" for line in self.why()]
        else:
            out.append(
                f"proof {key}: replayed over {self.syncs} syncs, the ScaledObject within "
                f"{TOLERANCE_REPLICAS} replica of the HPA at every one"
            )
        for check in self.checks:
            if check.problem is not None:
                out.append(f"proof {key}: {check.metric}: {check.problem}")
            else:
                out.append(
                    f"proof {key}: {check.metric}: one series now, {check.value:g}, the sum of "
                    f"the adapter's {check.adapter_series} series"
                )
        return out

    def why(self) -> list[str]:
        """What sets the two controllers apart, from the metrics migrated."""
        reasons = []
        types = {trigger.metric_type for trigger in self.lowered.triggers}
        if "Pods" in types:
            reasons.append(
                "the HPA's Pods metric counts a pod that reports no value yet (one still "
                "starting) at the target when it scales down (kubernetes "
                "pkg/controller/podautoscaler/replica_calculator.go, calcPlainMetricReplicas), "
                "which holds its recommendation up until new pods serve; KEDA's HPA reads one "
                "External value for the whole workload, so its scale-down window opens "
                "earlier, and a pod's value is not capped at what one pod can report"
            )
        if "Object" in types or "External" in types:
            reasons.append(
                "the HPA's Object and External metrics and KEDA's trigger divide the same "
                "sum by the same pods: where they part, the adapter's query and KEDA's "
                "answered differently at that sync (compare the two with gpulint replay)"
            )
        return reasons

    def _events_before(self, at: float) -> str:
        """Each controller's last change of replicas up to the sync after ``at``."""
        parts = []
        for name, replayed in (("the HPA", self.hpa), ("the ScaledObject", self.scaled)):
            if replayed is None:
                continue
            last = None
            for event in replayed.run.events:
                if event.time > at + SYNC_GAP_S:
                    break
                last = event
            if last is not None:
                parts.append(
                    f"{name} went {last.before} -> {last.after} at {stamp(last.time)} "
                    f"({last.reason})"
                )
        return "; ".join(parts) or "no change of replicas before it"

    def as_json(self) -> dict[str, Any]:
        return {
            "hpa": self.lowered.key,
            "agrees": self.agrees,
            "not_replayed": self.not_replayed,
            "syncs": self.syncs,
            "why": self.why() if self.differences else [],
            "differences": [
                {"time": stamp(d.time), "hpa": d.hpa, "scaled_object": d.scaled}
                for d in self.differences
            ],
            "checks": [
                {
                    "metric": c.metric,
                    "query": c.query,
                    "series": c.series,
                    "value": c.value,
                    "adapter_series": c.adapter_series,
                    "adapter_value": c.adapter_value,
                    "problem": c.problem,
                }
                for c in self.checks
            ],
        }


def episodes(differences: list[Difference]) -> list[tuple[Difference, Difference]]:
    """Consecutive differing syncs as stretches: (first, last)."""
    found: list[tuple[Difference, Difference]] = []
    for item in differences:
        if found and item.time - found[-1][1].time <= SYNC_GAP_S:
            found[-1] = (found[-1][0], item)
        else:
            found.append((item, item))
    return found


def scaled_object_view(lowered: Lowered) -> ScaledObject:
    """The ScaledObject as gpulint reads one from a file (it is not written yet)."""
    return ScaledObject(Manifest(lowered.scaled_object, lowered.hpa.manifest.file))


def prove(
    api: PrometheusAPI,
    lowered: Lowered,
    inventory: Inventory,
    window: tuple[float, float, float],
) -> Proof:
    proof = Proof(lowered)
    start, end, step = window
    try:
        before = hpa_spec(lowered.hpa, inventory, None)
        after = scaled_object_spec(scaled_object_view(lowered), inventory, None)
    except Untraceable as why:
        proof.not_replayed = str(why)
    else:
        try:
            proof.hpa = replay_one(before, fetch(api, before, start, end, step), inventory)
            proof.scaled = replay_one(after, fetch(api, after, start, end, step), inventory)
        except HistoryError as error:
            proof.not_replayed = str(error)
        else:
            compare(proof, proof.hpa, proof.scaled)
    proof.checks = [
        check_query(api, trigger.metric, trigger.query, trigger.adapter_query, end)
        for trigger in lowered.triggers
        if trigger.query is not None and trigger.adapter_query is not None
    ]
    return proof


def compare(proof: Proof, hpa: Replayed, scaled: Replayed) -> None:
    replicas = {tick.time: tick.replicas for tick in scaled.run.ticks}
    for tick in hpa.run.ticks:
        other = replicas.get(tick.time)
        if other is None:
            continue
        proof.syncs += 1
        if abs(other - tick.replicas) > TOLERANCE_REPLICAS:
            proof.differences.append(Difference(tick.time, tick.replicas, other))


def check_query(api: PrometheusAPI, metric: str, query: str, adapter: str, at: float) -> Check:
    at = min(at, time.time())
    try:
        reading = read_answer(api.query(query, at))
        answer = api.query(adapter, at)
    except QueryRejected as error:
        return Check(metric, query, 0, None, None, 0, f"Prometheus refuses the query: {error}")
    values = [_value(item) for item in answer.get("result") or [] if isinstance(item, dict)]
    finite = [v for v in values if v is not None]
    adapter_value = math.fsum(finite) if finite else None
    problem = None
    if reading.answer is Answer.MULTIPLE:
        problem = f"answers {reading.count} series; KEDA fails on more than one"
    elif reading.answer is Answer.EMPTY:
        problem = (
            "answers no series now (nor does the adapter's query)"
            if not values
            else f"answers no series now, while the adapter's query answers {len(values)}"
        )
    elif reading.answer is not Answer.VALUE or reading.value is None:
        problem = f"answers no number KEDA reads ({reading.answer.name.lower()})"
    elif adapter_value is None:
        problem = "the adapter's query answers no number to compare it with"
    elif not _close(reading.value, adapter_value):
        problem = (
            f"reads {reading.value:g} where the adapter's series add up to {adapter_value:g}: "
            "not the scale the HPA's target was written on"
        )
    value = reading.value if reading.answer is Answer.VALUE else None
    return Check(metric, query, reading.count, value, adapter_value, len(values), problem)


def _value(item: dict[str, Any]) -> float | None:
    point = item.get("value")
    if not isinstance(point, list) or len(point) < 2 or not isinstance(point[1], str):
        return None
    try:
        value = float(point[1])
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= RELATIVE_TOLERANCE * max(1.0, abs(a), abs(b))


def side_by_side(proof: Proof) -> str:
    """The two replays' pictures (``gpulint replay --format svg``) side by side, the HPA's
    on the left."""
    from gpulint.replay.render import render_svg

    pictures = [r for r in (proof.hpa, proof.scaled) if r is not None]
    if not pictures:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'
    drawn = [render_svg(r) for r in pictures]
    widths, heights = [], []
    for svg in drawn:
        widths.append(int(_attribute(svg, "width")))
        heights.append(int(_attribute(svg, "height")))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{sum(widths)}" '
        f'height="{max(heights)}" viewBox="0 0 {sum(widths)} {max(heights)}">'
    ]
    offset = 0
    for svg, width in zip(drawn, widths, strict=True):
        inner = svg.replace("<svg ", f'<svg x="{offset}" y="0" ', 1)
        parts.append(inner)
        offset += width
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _attribute(svg: str, name: str) -> str:
    marker = f' {name}="'
    start = svg.index(marker) + len(marker)
    return svg[start : svg.index('"', start)]
