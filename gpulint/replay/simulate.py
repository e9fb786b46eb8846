"""Replay an autoscaler over a history: the demand model and the controller, sync by sync.

The demand model:

* a Pods metric is a per-pod average: the load it stands for is the observed mean times the
  pods that reported it (total demand is conserved), spread over the simulated pods that are
  ready; a per-pod value cannot pass its cap (100 for a percentage such as
  DCGM_FI_DEV_GPU_UTIL, 1 for a ratio), so a saturated history is a lower bound of demand;
* Object and External metrics (KEDA's triggers are External) are totals and pass as they
  are;
* a pod serves load only ``pod_ready_after_s`` after it is created; until then the controller
  sees it as a pod without a usable metric (replica_calculator.go groupPods: a Pending pod is
  ignored, and counted at 0 when the ratio says scale up) and it serves nothing;
* a scale-down removes the pods not yet ready first, the newest first (ReplicaSet's
  ActivePods ordering, kubernetes pkg/controller/controller_utils.go).

Between two samples of the history the last one holds, as in Prometheus's answer on a grid.

Nothing is kept per pod: the pods are a count of ready ones and batches of new ones by the
time they become ready (``Pods``), so that replicas in the millions (a history that says so,
a maxReplicas of 2^31-1) cost what four do.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections import deque
from collections.abc import Callable

from gpulint.replay.activation import KEDA_POLLING_INTERVAL_S, KedaActivation
from gpulint.replay.behavior import SYNC_PERIOD_S, Tolerances
from gpulint.replay.controller import HorizontalController
from gpulint.replay.model import (
    PER_POD,
    TOTAL_PER_POD,
    Event,
    History,
    ReplayMetric,
    ReplaySpec,
    Run,
    Tick,
)
from gpulint.replay.nodes import NodeOptions, NodePool
from gpulint.replay.replicas import (
    max_over_metrics,
    per_pod_total_replicas,
    uniform_pods_replicas,
    usage_ratio_replicas,
)


def initial_replicas(spec: ReplaySpec, history: History) -> int:
    """The replicas at the start: what was observed, else the pods that reported the first
    Pods metric, else minReplicas (a ScaledObject's minReplicaCount). Outside minReplicas
    and maxReplicas the controller's first sync brings them within (reconcileAutoscaler)."""
    start: int | None = history.observed[0] if history.observed else None
    if start is None:
        for index, metric in enumerate(spec.metrics):
            if metric.relation == PER_POD and history.pods[index]:
                start = history.pods[index][0]
                break
    if start is None:
        start = spec.keda.min_replica_count if spec.keda is not None else spec.min_replicas
    return max(0, start)


def replay(
    spec: ReplaySpec,
    history: History,
    sync_s: float = SYNC_PERIOD_S,
    nodes: NodeOptions | None = None,
    stop: Callable[[Tick], bool] | None = None,
) -> Run:
    """The simulated controller's syncs over ``history`` (empty when it has no points).
    ``nodes``: new pods wait for a GPU node (gpulint.replay.nodes). ``stop``: asked after
    each sync; when it says so, the replay ends there, ``Run.stopped`` (a search that knows
    the rest cannot matter)."""
    if not history.times:
        return Run([], [])
    hpa = HorizontalController(spec.min_replicas, spec.max_replicas, spec.behavior, fast=True)
    keda = spec.keda
    if keda is not None:
        keda = dataclasses.replace(keda, created=history.times[0] - 1)
    replicas = initial_replicas(spec, history)
    pods = Pods(replicas)
    pool = NodePool(nodes, spec.gpus_per_pod, replicas) if nodes is not None else None
    queued_s = 0.0 if pool is not None else None
    ticks: list[Tick] = []
    events: list[Event] = []
    start, end = history.times[0], history.times[-1]
    next_poll = start
    steps = int((end - start) // sync_s) + 1
    metrics = range(len(spec.metrics))
    # Readings and proposals are functions of what they read: when that has not changed
    # since the last sync (a steady load), the last answer stands.
    read_key: tuple[object, ...] | None = None
    proposed_key: tuple[object, ...] | None = None
    readings: list[tuple[float | None, float | None, float | None]] = []
    desired: int | None = None
    load: float | None = None
    value: float | None = None
    for step in range(steps):
        now = start + step * sync_s
        k = bisect.bisect_right(history.times, now) - 1
        if pool is not None:
            pool.advance(now)
        pods.advance(now)
        ready, starting = pods.ready, pods.starting
        key = (ready, *(_inputs(history, i, k) for i in metrics))
        if key != read_key:
            read_key, proposed_key = key, None
            readings = [_reading(spec, history, i, k, ready) for i in metrics]
            if spec.composite is not None:
                readings = [_composite_reading(spec, readings, ready)]
            load, value = _shown_load(readings)
        before = replicas
        reason = ""
        if keda is not None and now >= next_poll:
            next_poll = now + KEDA_POLLING_INTERVAL_S
            replicas, reason = _keda_poll(keda, spec, readings, now, replicas)
        hpa.first_sight(now, replicas)
        # The HPA acts at 0 replicas only when its minReplicas is 0 (HPAScaleToZero, on by
        # default from Kubernetes 1.37; the plan refuses minReplicas 0 before): an Object or
        # External metric then proposes ceil(value / target) (getUsageRatioReplicaCount), a
        # Pods metric has no pods to read. KEDA's HPA has minReplicas of at least 1, and at
        # 0 KEDA's activation alone moves it.
        if replicas == before and (replicas > 0 or spec.min_replicas == 0):
            if proposed_key != (replicas, starting):
                proposed_key = (replicas, starting)
                proposals = [
                    _proposal(metric, reading, replicas, ready, starting, spec.tolerances)
                    for metric, reading in zip(spec.controlled, readings, strict=True)
                ]
                desired = max_over_metrics(replicas, proposals)
            after = hpa.reconcile(now, replicas, desired)
            if after != replicas:
                reason = _reason(replicas, after, desired, spec)
                replicas = after
        if replicas != before:
            events.append(Event(now, before, replicas, reason))
            if replicas > before and pool is None:
                pods.add(replicas - before, now + spec.pod_ready_after_s)
            elif replicas > before and pool is not None:
                for placed, count in pool.add(replicas - before, now):
                    pods.add(count, placed + spec.pod_ready_after_s)
            else:
                pods.remove(before - replicas)
                if pool is not None:
                    pool.remove(before - replicas)
        if pool is not None and queued_s is not None and pool.queued():
            queued_s += sync_s
        tick = Tick(now, replicas, ready, starting, load, _compared(spec, value, before))
        ticks.append(tick)
        if stop is not None and stop(tick):
            return Run(ticks, events, queued_s, stopped=True)
    return Run(ticks, events, queued_s)


def _compared(spec: ReplaySpec, value: float | None, replicas: int) -> float | None:
    """The first metric's value on the scale the controller compares with its target: an
    Object/External AverageValue total over the replicas it divides by
    (GetExternalPerPodMetricReplicas: statusReplicas, those before the sync acts), none at 0
    replicas; any other metric as it reads."""
    if value is None or not spec.controlled or spec.controlled[0].relation != TOTAL_PER_POD:
        return value
    return value / replicas if replicas > 0 else None


def _shown_load(
    readings: list[tuple[float | None, float | None, float | None]],
) -> tuple[float | None, float | None]:
    """The load a tick shows (the highest of its metrics') and the first metric's value."""
    loads = [r[0] for r in readings if r[0] is not None]
    return (max(loads) if loads else None), (readings[0][1] if readings else None)


def _keda_poll(
    keda: KedaActivation,
    spec: ReplaySpec,
    readings: list[tuple[float | None, float | None, float | None]],
    now: float,
    replicas: int,
) -> tuple[int, str]:
    """KEDA's poll: active when a trigger's value is above its activation threshold; the
    replicas after it and why they changed ('' when they did not)."""
    active = any(
        r[2] is not None and r[2] > (m.activation or 0.0)
        for r, m in zip(readings, spec.controlled, strict=True)
    )
    after = keda.request_scale(now, replicas, active)
    if after == replicas:
        return replicas, ""
    return after, "KEDA activation" if after > replicas else "KEDA cooldown passed"


@dataclasses.dataclass(slots=True)
class _Batch:
    ready_at: float
    count: int


class Pods:
    """The target's pods by when they serve: ``ready`` ones, and batches of ``starting`` ones
    in the order they become ready. New pods all take the same time to be ready, so a batch
    created later is ready no sooner: batches are only added at the end and taken from the
    front."""

    __slots__ = ("_batches", "ready", "starting")

    def __init__(self, ready: int) -> None:
        self.ready = ready
        self.starting = 0
        self._batches: deque[_Batch] = deque()

    def advance(self, now: float) -> None:
        """The pods whose ready time has come (at or before ``now``) serve."""
        batches = self._batches
        while batches and batches[0].ready_at <= now:
            count = batches.popleft().count
            self.ready += count
            self.starting -= count

    def add(self, count: int, ready_at: float) -> None:
        batches = self._batches
        if batches and batches[-1].ready_at >= ready_at:
            # A pod waiting for a node serves no sooner than one created before it.
            batches[-1].count += count
        else:
            batches.append(_Batch(ready_at, count))
        self.starting += count

    def remove(self, count: int) -> None:
        """A scale-down: the pods not yet ready go first, the latest first, then ready ones
        (ReplicaSet's ActivePods ordering)."""
        batches = self._batches
        while count and batches:
            last = batches[-1]
            taken = min(count, last.count)
            last.count -= taken
            self.starting -= taken
            count -= taken
            if not last.count:
                batches.pop()
        self.ready -= min(count, self.ready)


def _inputs(history: History, index: int, k: int) -> tuple[float | None, int | None, int | None]:
    """What metric ``index``'s reading at history point ``k`` depends on."""
    if k < 0:
        return None, None, None
    pods = history.pods[index]
    return (
        history.values[index][k],
        pods[k] if pods else None,
        history.observed[k] if history.observed else None,
    )


def _reading(
    spec: ReplaySpec, history: History, index: int, k: int, ready: int
) -> tuple[float | None, float | None, float | None]:
    """(load in pods' worth at the target, the value the controller sees at ``ready`` ready
    pods, the raw value as KEDA reads it) for metric ``index`` at history point ``k``."""
    if k < 0:
        return None, None, None
    metric = spec.metrics[index]
    raw = history.values[index][k]
    if raw is None or not math.isfinite(raw):
        return None, None, None
    if metric.relation != PER_POD:
        return _total_reading(metric, raw, ready)
    reporting = history.pods[index][k] if history.pods[index] else None
    if reporting is None:
        reporting = history.observed[k] if history.observed else None
    demand = raw * (reporting if reporting is not None else 1)
    seen = None
    if ready > 0:
        seen = demand / ready
        if metric.cap is not None:
            seen = min(seen, metric.cap)
    return _finite((demand / metric.target, seen, demand))


def _total_reading(
    metric: ReplayMetric, raw: float, ready: int
) -> tuple[float | None, float | None, float | None]:
    """The reading of an Object or External metric: a total, per pod against an AverageValue
    target, as it is against a Value target."""
    if metric.relation == TOTAL_PER_POD:
        return _finite((raw / metric.target, raw, raw))
    return _finite((raw / metric.target * max(ready, 1), raw, raw))


def _composite_reading(
    spec: ReplaySpec,
    readings: list[tuple[float | None, float | None, float | None]],
    ready: int,
) -> tuple[float | None, float | None, float | None]:
    """KEDA's composite metric: the formula over the triggers' raw values, read as the one
    External metric of KEDA's HPA."""
    assert spec.composite is not None
    value = spec.composite.value([r[2] for r in readings])
    if value is None or not math.isfinite(value):
        return None, None, None
    return _total_reading(spec.composite.metric, value, ready)


def _finite(
    reading: tuple[float, float | None, float],
) -> tuple[float | None, float | None, float | None]:
    """A reading whose arithmetic went past the largest float (a value near 1.8e308 times the
    pods) is no reading: no replica count follows from it."""
    if all(value is None or math.isfinite(value) for value in reading):
        return reading
    return None, None, None


def _proposal(
    metric: ReplayMetric,
    reading: tuple[float | None, float | None, float | None],
    replicas: int,
    ready: int,
    starting: int,
    tolerances: Tolerances,
) -> int | None:
    _, seen, raw = reading
    if raw is None:
        return None
    if metric.relation == PER_POD:
        if seen is None:
            return None  # no ready pod reports the metric: FailedGetPodsMetric
        return uniform_pods_replicas(replicas, ready, starting, seen, metric.target, tolerances)
    if metric.relation == TOTAL_PER_POD:
        return per_pod_total_replicas(replicas, raw, metric.target, tolerances)
    return usage_ratio_replicas(replicas, raw / metric.target, ready, tolerances)


def _reason(before: int, after: int, desired: int | None, spec: ReplaySpec) -> str:
    if before > spec.max_replicas:
        return "above maxReplicas"
    if before < spec.min_replicas:
        return "below minReplicas"
    if desired is not None and desired != after:
        limited = "limited by behavior" if spec.behavior is not None else "limited"
        what = "up" if after > before else "down"
        if after in (spec.max_replicas, spec.min_replicas) and desired not in range(
            spec.min_replicas, spec.max_replicas + 1
        ):
            return f"scale {what} to {'maxReplicas' if after > before else 'minReplicas'}"
        return f"scale {what} {limited} (metrics asked for {desired})"
    return f"scale {'up' if after > before else 'down'}: metrics asked for {after}"
