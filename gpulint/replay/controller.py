"""The HorizontalPodAutoscaler controller and KEDA's activation, as facts with their sources.

Sources (Kubernetes, pkg/controller/podautoscaler):

* ``replica_calculator.go``: how one metric becomes a replica count (``GetResourceReplicas``,
  ``calcPlainMetricReplicas``, ``getUsageRatioReplicaCount``,
  ``GetObjectPerPodMetricReplicas``, ``GetExternalPerPodMetricReplicas``, ``groupPods``);
* ``horizontal.go``: the max over metrics and what an invalid metric does
  (``computeReplicasForMetrics``), ``reconcileAutoscaler``'s min/max handling, the
  stabilization windows (``stabilizeRecommendation``, ``stabilizeRecommendationWithBehaviors``)
  and the behavior policies (``convertDesiredReplicasWithBehaviorRate``,
  ``calculateScaleUpLimitWithScalingRules``, ``calculateScaleDownLimitWithBehaviors``);
* ``pkg/apis/autoscaling/v2/defaults.go``: the default behavior
  (``GenerateHPAScaleUpRules``, ``GenerateHPAScaleDownRules``);
* kube-controller-manager flags: ``--horizontal-pod-autoscaler-sync-period`` (15 s),
  ``--horizontal-pod-autoscaler-tolerance`` (0.1),
  ``--horizontal-pod-autoscaler-downscale-stabilization`` (5 min).

KEDA (kedacore/keda): ``pkg/scaling/executor/scale_scaledobjects.go`` (``RequestScale``,
``scaleToZeroOrIdle``, ``scaleFromZeroOrIdle``), ``pkg/scaling/executor/scale_executor.go``
(``defaultCooldownPeriod`` 300 s, ``defaultInitialCooldownPeriod`` 0),
``apis/keda/v1alpha1/withtriggers_types.go`` (``defaultPollingInterval`` 30 s),
``apis/keda/v1alpha1/scaledobject_types.go`` (``GetHPAMinReplicas``: at least 1) and
``pkg/scalers/prometheus_scaler.go`` (a trigger is active when its value is above
``activationThreshold``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# kube-controller-manager: --horizontal-pod-autoscaler-sync-period default 15s.
SYNC_PERIOD_S = 15.0
# --horizontal-pod-autoscaler-tolerance default 0.1: |1 - ratio| <= 0.1 changes nothing.
TOLERANCE = 0.1
# --horizontal-pod-autoscaler-downscale-stabilization default 5m (HPAs without behavior).
DOWNSCALE_STABILIZATION_S = 300.0
# horizontal.go: without behavior, one sync adds at most max(2 x current, 4) replicas
# (scaleUpLimitFactor 2.0, scaleUpLimitMinimum 4.0).
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0

# KEDA: pkg/scaling/executor/scale_executor.go and withtriggers_types.go.
KEDA_COOLDOWN_S = 300.0
KEDA_INITIAL_COOLDOWN_S = 0.0
KEDA_POLLING_INTERVAL_S = 30.0


# --- behavior ---------------------------------------------------------------------------------


class Policy(NamedTuple):
    type: str  # "Pods" or "Percent"
    value: int
    period_s: float


class Rules(NamedTuple):
    """One direction of ``spec.behavior`` after the API server's defaulting."""

    stabilization_s: float
    select: str  # "Max", "Min" or "Disabled"
    policies: tuple[Policy, ...]


# pkg/apis/autoscaling/v2/defaults.go: scaleUp window 0, Max of (4 Pods, 100 Percent) per 15 s;
# scaleDown window 300 s (the controller flag), 100 Percent per 15 s.
DEFAULT_SCALE_UP = Rules(0.0, "Max", (Policy("Pods", 4, 15.0), Policy("Percent", 100, 15.0)))
DEFAULT_SCALE_DOWN = Rules(DOWNSCALE_STABILIZATION_S, "Max", (Policy("Percent", 100, 15.0),))


def rules_from(data: Any, default: Rules) -> Rules:
    """A ``scaleUp``/``scaleDown`` mapping with the API server's defaults filled in: a field
    that is not set takes the default's (GenerateHPAScaleUpRules / GenerateHPAScaleDownRules
    keep the policies given, or use the default policies when there are none)."""
    if not isinstance(data, dict):
        return default
    window = _number(data.get("stabilizationWindowSeconds"))
    stabilization = window if window is not None else default.stabilization_s
    select = data.get("selectPolicy")
    policies = []
    for entry in data.get("policies") or []:
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        value, period = _number(entry.get("value")), _number(entry.get("periodSeconds"))
        if kind in ("Pods", "Percent") and value is not None and period is not None:
            policies.append(Policy(str(kind), int(value), float(period)))
    return Rules(
        stabilization,
        select if select in ("Max", "Min", "Disabled") else "Max",
        tuple(policies) or default.policies,
    )


class Behavior(NamedTuple):
    up: Rules
    down: Rules

    @classmethod
    def from_spec(cls, behavior: Any) -> Behavior | None:
        """None when the HPA has no behavior: defaults.go leaves a nil behavior nil and the
        controller then takes its older path (normalizeDesiredReplicas)."""
        if not isinstance(behavior, dict):
            return None
        return cls(
            rules_from(behavior.get("scaleUp"), DEFAULT_SCALE_UP),
            rules_from(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN),
        )


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


# --- one metric -> replicas (replica_calculator.go) -----------------------------------------


class Pod(NamedTuple):
    """What the replica calculator knows of one pod of the target.

    ``phase``: "Running", "Pending", "Failed"; ``deleting``: a deletionTimestamp is set;
    ``unready``: for CPU, a pod within its initialization period that is not ready (groupPods
    counts it with the ignored pods); ``value``: its metric, None when the metrics API
    returned none; ``request``: its resource request (Resource metrics only)."""

    value: float | None
    phase: str = "Running"
    unready: bool = False
    deleting: bool = False
    request: float = 0.0


class PodGroups(NamedTuple):
    ready: int
    ignored: list[int]  # indexes: pending pods, and unready pods for CPU
    missing: list[int]


def group_pods(pods: Sequence[Pod], resource_cpu: bool) -> PodGroups:
    """groupPods: failed and deleted pods are dropped; pending pods (and CPU pods not yet
    ready) are ignored; pods without a metric are missing; the rest are ready. Readiness
    matters only for CPU: a custom-metric pod that is Running counts whether ready or not."""
    ready, ignored, missing = 0, [], []
    for index, pod in enumerate(pods):
        if pod.deleting or pod.phase == "Failed":
            continue
        if pod.phase == "Pending" or (resource_cpu and pod.unready):
            ignored.append(index)
            continue
        if pod.value is None:
            missing.append(index)
            continue
        ready += 1
    return PodGroups(ready, ignored, missing)


def resource_replicas(
    current: int, pods: Sequence[Pod], target_utilization: float, tolerance: float = TOLERANCE
) -> int:
    """GetResourceReplicas: Utilization targets, the ratio of the pods' summed usage to their
    summed requests against the target percentage."""
    groups = group_pods(pods, resource_cpu=True)
    counted = _counted(pods, groups, with_requests=True)

    def ratio(values: dict[int, tuple[float, float]]) -> float:
        usage = sum(v for v, _ in values.values())
        requests = sum(r for _, r in values.values())
        if requests <= 0:
            raise MetricUnavailable("no pod has a request for the resource")
        return (usage * 100.0 / requests) / target_utilization

    usage_ratio = ratio(counted)
    # On a scale-down a pod without a metric counts as using 100% of its request.
    return _rebalance(current, pods, groups, counted, usage_ratio, ratio, tolerance, None)


def _counted(
    pods: Sequence[Pod], groups: PodGroups, *, with_requests: bool
) -> dict[int, tuple[float, float]]:
    """The pods whose metric counts, by index: (value, request, or 0 without requests);
    MetricUnavailable when none does."""
    counted = {
        i: (p.value, p.request if with_requests else 0.0)
        for i, p in enumerate(pods)
        if i not in groups.ignored
        and p.value is not None
        and not p.deleting
        and p.phase != "Failed"
    }
    if not counted:
        raise MetricUnavailable("did not receive metrics for any ready pods")
    return counted


def plain_metric_replicas(
    current: int, pods: Sequence[Pod], target_average: float, tolerance: float = TOLERANCE
) -> int:
    """calcPlainMetricReplicas: Pods metrics (and Resource AverageValue), the mean of the
    pods' values against the target average."""
    groups = group_pods(pods, resource_cpu=False)
    counted = _counted(pods, groups, with_requests=False)

    def ratio(values: dict[int, tuple[float, float]]) -> float:
        return (sum(v for v, _ in values.values()) / len(values)) / target_average

    usage_ratio = ratio(counted)
    # On a scale-down a pod without a metric counts as using exactly the target.
    return _rebalance(current, pods, groups, counted, usage_ratio, ratio, tolerance, target_average)


def uniform_pods_replicas(
    current: int,
    ready: int,
    pending: int,
    value: float,
    target_average: float,
    tolerance: float = TOLERANCE,
) -> int:
    """``plain_metric_replicas`` for ``ready`` pods that all report ``value`` and ``pending``
    Pending pods, without building the pods: what a replay asks every sync. The arithmetic is
    the same, in the same order (tests/replay/test_controller_parity.py compares the two)."""
    if ready <= 0:
        raise MetricUnavailable("did not receive metrics for any ready pods")
    total = 0.0
    for _ in range(ready):
        total += value
    usage_ratio = (total / ready) / target_average
    if not (pending and usage_ratio > 1.0):
        if abs(1.0 - usage_ratio) <= tolerance:
            return current
        return math.ceil(usage_ratio * ready)
    counted = ready + pending
    new_ratio = (total / counted) / target_average
    if abs(1.0 - new_ratio) <= tolerance or new_ratio < 1.0:
        return current  # too small a change, or counting the pending pods reversed it
    desired = math.ceil(new_ratio * counted)
    return current if desired < current else desired


def _rebalance(
    current: int,
    pods: Sequence[Pod],
    groups: PodGroups,
    counted: dict[int, tuple[float, float]],
    usage_ratio: float,
    ratio: Callable[[dict[int, tuple[float, float]]], float],
    tolerance: float,
    missing_down: float | None,
) -> int:
    """The second pass both calculators share: missing and ignored pods filled in, then the
    ratio again. ``missing_down``: what a pod without a metric counts as on a scale-down
    (None: its request, for Resource metrics)."""
    resource = missing_down is None
    rebalance_ignored = bool(groups.ignored) and usage_ratio > 1.0
    if not rebalance_ignored and not groups.missing:
        if abs(1.0 - usage_ratio) <= tolerance:
            return current
        return math.ceil(usage_ratio * groups.ready)
    values = dict(counted)
    if groups.missing:
        for index in groups.missing:
            request = pods[index].request
            if usage_ratio < 1.0:
                down = request if missing_down is None else missing_down
                values[index] = (down, request)
            elif usage_ratio > 1.0 or not resource:
                values[index] = (0.0, request)  # on a scale-up, as using nothing
    if rebalance_ignored:
        for index in groups.ignored:
            values[index] = (0.0, pods[index].request)  # on a scale-up, unready pods use 0
    new_ratio = ratio(values)
    if (
        abs(1.0 - new_ratio) <= tolerance
        or (usage_ratio < 1.0 < new_ratio)
        or (usage_ratio > 1.0 > new_ratio)
    ):
        return current  # too small a change, or the rebalancing reversed the direction
    desired = math.ceil(new_ratio * len(values))
    if (new_ratio < 1.0 and desired > current) or (new_ratio > 1.0 and desired < current):
        return current
    return desired


def usage_ratio_replicas(
    current: int, usage_ratio: float, ready_pods: int, tolerance: float = TOLERANCE
) -> int:
    """getUsageRatioReplicaCount: Object Value and External Value targets. With replicas
    it scales the ready pods by the ratio; at 0 replicas it is ceil(ratio) (scale from zero,
    when the HPAScaleToZero feature lets minReplicas be 0)."""
    if current != 0:
        if abs(1.0 - usage_ratio) <= tolerance:
            return current
        return math.ceil(usage_ratio * ready_pods)
    return math.ceil(usage_ratio)


def per_pod_total_replicas(
    status_replicas: int, total: float, target_average: float, tolerance: float = TOLERANCE
) -> int:
    """GetObjectPerPodMetricReplicas / GetExternalPerPodMetricReplicas: AverageValue targets
    on Object and External metrics divide the total by the target, once the ratio to the
    current replicas leaves the tolerance."""
    if status_replicas > 0:
        ratio = total / (target_average * status_replicas)
        if abs(1.0 - ratio) <= tolerance:
            return status_replicas
    return math.ceil(total / target_average)


class MetricUnavailable(Exception):
    """The metrics API returned nothing usable for a metric (FailedGet*Metric)."""


def max_over_metrics(spec_replicas: int, proposals: Sequence[int | None]) -> int | None:
    """computeReplicasForMetrics: the largest proposal; None (no scaling this sync) when every
    metric is invalid, or when some are and the valid ones would scale down."""
    valid = [p for p in proposals if p is not None]
    invalid = len(proposals) - len(valid)
    if not valid:
        return None
    replicas = max(valid)
    if invalid and replicas < spec_replicas:
        return None
    return replicas


# --- the controller's state across syncs (horizontal.go) --------------------------------------


@dataclass
class ScaleEvent:
    change: int
    time: float


@dataclass
class HorizontalController:
    """The state horizontal.go keeps per HPA: recommendations for the stabilization windows
    and the scale events the rate policies count. Times are seconds."""

    min_replicas: int
    max_replicas: int
    behavior: Behavior | None
    tolerance: float = TOLERANCE
    recommendations: list[tuple[int, float]] = field(default_factory=list)
    # fast: the windows' extremes from monotonic queues, O(1) a sync, instead of a scan of
    # the stored recommendations (the same answers: test_controller_parity.py compares them;
    # ``recommendations`` then stays empty)
    fast: bool = False
    _highs: Window | None = None
    _lows: Window | None = None
    up_events: list[ScaleEvent] = field(default_factory=list)
    down_events: list[ScaleEvent] = field(default_factory=list)

    def reconcile(self, now: float, spec_replicas: int, desired_by_metrics: int | None) -> int:
        """reconcileAutoscaler: the replicas to set. ``desired_by_metrics`` is None when the
        metrics gave no answer (the HPA keeps its replicas and records nothing)."""
        if spec_replicas == 0 and self.min_replicas != 0:
            return 0  # scaling is disabled while the target is at 0 (KEDA deactivated it)
        if spec_replicas > self.max_replicas:
            desired = self.max_replicas
        elif spec_replicas < self.min_replicas:
            desired = self.min_replicas
        else:
            if desired_by_metrics is None:
                return spec_replicas
            if self.behavior is None:
                desired = self.normalize(now, spec_replicas, desired_by_metrics)
            else:
                desired = self.normalize_with_behavior(now, spec_replicas, desired_by_metrics)
        if desired != spec_replicas:
            self.store_event(now, spec_replicas, desired)
        return desired

    # without behavior: normalizeDesiredReplicas
    def normalize(self, now: float, current: int, prenormalized: int) -> int:
        stabilized = self.stabilize(now, prenormalized)
        return self.convert_with_rules(current, stabilized)

    def stabilize(self, now: float, prenormalized: int) -> int:
        """stabilizeRecommendation: the highest recommendation of the last 5 minutes; the
        slot of the last one that fell out of the window is reused."""
        if self.fast:
            highs = self._highs = self._highs or Window(highest=True, inclusive=True)
            found = highs.extreme(now - DOWNSCALE_STABILIZATION_S)
            highs.add(prenormalized, now)
            return prenormalized if found is None else max(found, prenormalized)
        highest = prenormalized
        reuse = None
        cutoff = now - DOWNSCALE_STABILIZATION_S
        for index, (value, time) in enumerate(self.recommendations):
            if time < cutoff:
                reuse = index  # the last one that fell out of the window
            elif value > highest:
                highest = value
        self._store_recommendation(reuse, prenormalized, now)
        return highest

    def convert_with_rules(self, current: int, desired: int) -> int:
        """convertDesiredReplicasWithRules: within min and max, and at most
        max(2 x current, 4) in one sync."""
        limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
        maximum = min(self.max_replicas, limit)
        return max(self.min_replicas, min(desired, maximum))

    # with behavior: normalizeDesiredReplicasWithBehaviors
    def normalize_with_behavior(self, now: float, current: int, prenormalized: int) -> int:
        stabilized = self.stabilize_with_behavior(now, current, prenormalized)
        return self.convert_with_behavior_rate(now, current, stabilized)

    def stabilize_with_behavior(self, now: float, current: int, prenormalized: int) -> int:
        """stabilizeRecommendationWithBehaviors: a scale-up goes no higher than the lowest
        recommendation of the scale-up window, a scale-down no lower than the highest of the
        scale-down window; the new recommendation is stored (in the slot of the last one
        outside both windows, if any)."""
        assert self.behavior is not None
        up_cutoff = now - self.behavior.up.stabilization_s
        down_cutoff = now - self.behavior.down.stabilization_s
        up, down = prenormalized, prenormalized
        reuse = None
        if self.fast:
            lows = self._lows = self._lows or Window(highest=False, inclusive=False)
            highs = self._highs = self._highs or Window(highest=True, inclusive=False)
            lowest, highest = lows.extreme(up_cutoff), highs.extreme(down_cutoff)
            lows.add(prenormalized, now)
            highs.add(prenormalized, now)
            up = up if lowest is None else min(up, lowest)
            down = down if highest is None else max(down, highest)
            return min(max(current, up), down)  # up <= prenormalized <= down
        for index, (value, time) in enumerate(self.recommendations):
            if time > up_cutoff and value < up:
                up = value
            if time > down_cutoff and value > down:
                down = value
            if time < up_cutoff and time < down_cutoff:
                reuse = index  # the last one outside both windows
        recommendation = current
        if recommendation < up:
            recommendation = up
        if recommendation > down:
            recommendation = down
        self._store_recommendation(reuse, prenormalized, now)
        return recommendation

    def convert_with_behavior_rate(self, now: float, current: int, desired: int) -> int:
        """convertDesiredReplicasWithBehaviorRate: the policies' limit, then min and max."""
        assert self.behavior is not None
        if desired > current:
            limit = max(self.scale_up_limit(now, current), current)
            return min(desired, min(self.max_replicas, limit))
        if desired < current:
            limit = min(self.scale_down_limit(now, current), current)
            return max(desired, max(self.min_replicas, limit))
        return desired

    def scale_up_limit(self, now: float, current: int) -> int:
        """calculateScaleUpLimitWithScalingRules: per policy, the replicas at the start of its
        period (current, less what was added, plus what was removed within it) plus the
        policy's Pods, or times (1 + Percent/100) rounded up; Max or Min over the policies;
        Disabled keeps the current replicas."""
        assert self.behavior is not None
        rules = self.behavior.up
        if rules.select == "Disabled":
            return current
        proposals = []
        for policy in rules.policies:
            start = self._period_start(now, current, policy.period_s)
            if policy.type == "Pods":
                proposals.append(start + policy.value)
            else:
                proposals.append(math.ceil(start * (1 + policy.value / 100.0)))
        return min(proposals) if rules.select == "Min" else max(proposals)

    def _period_start(self, now: float, current: int, period_s: float) -> int:
        """The replicas at the start of a policy's period: the current ones, less what was
        added and plus what was removed within it."""
        return (
            current
            - _changed_within(self.up_events, now, period_s)
            + _changed_within(self.down_events, now, period_s)
        )

    def scale_down_limit(self, now: float, current: int) -> int:
        """calculateScaleDownLimitWithBehaviors: per policy, the period's starting replicas
        less Pods, or times (1 - Percent/100) truncated; Max selects the lowest limit (the
        biggest change), Min the highest."""
        assert self.behavior is not None
        rules = self.behavior.down
        if rules.select == "Disabled":
            return current
        proposals = []
        for policy in rules.policies:
            start = self._period_start(now, current, policy.period_s)
            if policy.type == "Pods":
                proposals.append(start - policy.value)
            else:
                proposals.append(int(start * (1 - policy.value / 100.0)))
        return max(proposals) if rules.select == "Min" else min(proposals)

    def store_event(self, now: float, previous: int, new: int) -> None:
        """storeScaleEvent: kept only for HPAs with a behavior; events older than the longest
        period of their direction's policies are dropped."""
        if self.behavior is None:
            return
        if new > previous:
            longest = max(p.period_s for p in self.behavior.up.policies)
            self.up_events = [e for e in self.up_events if e.time > now - longest]
            self.up_events.append(ScaleEvent(new - previous, now))
        else:
            longest = max(p.period_s for p in self.behavior.down.policies)
            self.down_events = [e for e in self.down_events if e.time > now - longest]
            self.down_events.append(ScaleEvent(previous - new, now))

    def _store_recommendation(self, reuse: int | None, value: int, now: float) -> None:
        if reuse is None:
            self.recommendations.append((value, now))
        else:
            self.recommendations[reuse] = (value, now)


class Window:
    """The highest (or lowest) value stored since a cutoff that only moves forward: a
    monotonic queue, each value added and dropped once."""

    __slots__ = ("highest", "inclusive", "queue")

    def __init__(self, highest: bool, inclusive: bool) -> None:
        self.highest = highest
        self.inclusive = inclusive  # a value stored at the cutoff itself still counts
        self.queue: deque[tuple[int, float]] = deque()

    def extreme(self, cutoff: float) -> int | None:
        queue = self.queue
        while queue and (queue[0][1] < cutoff if self.inclusive else queue[0][1] <= cutoff):
            queue.popleft()
        return queue[0][0] if queue else None

    def add(self, value: int, time: float) -> None:
        queue = self.queue
        if self.highest:
            while queue and queue[-1][0] <= value:
                queue.pop()
        else:
            while queue and queue[-1][0] >= value:
                queue.pop()
        queue.append((value, time))


def _changed_within(events: Sequence[ScaleEvent], now: float, period_s: float) -> int:
    """getReplicasChangePerPeriod: the replicas changed by events after now - period."""
    return sum(e.change for e in events if e.time > now - period_s)


# --- KEDA ------------------------------------------------------------------------------------


@dataclass
class KedaActivation:
    """RequestScale for a ScaledObject: the 0 <-> 1 step the HPA cannot take.

    Active (a trigger's value above its activationThreshold): from 0 (or below minimum with
    idleReplicaCount) to max(minReplicaCount, 1), and lastActiveTime is now. Inactive: to
    idleReplicaCount (or minReplicaCount 0) once lastActiveTime + cooldownPeriod has passed
    (or, with no lastActiveTime, creation + initialCooldownPeriod); below minReplicaCount
    without idle replicas, up to minReplicaCount."""

    min_replica_count: int = 0
    idle_replica_count: int | None = None
    cooldown_s: float = KEDA_COOLDOWN_S
    initial_cooldown_s: float = KEDA_INITIAL_COOLDOWN_S
    created: float = 0.0
    last_active: float | None = None

    def request_scale(self, now: float, current: int, active: bool) -> int:
        minimum = self.min_replica_count
        idle = self.idle_replica_count
        if active:
            if (idle is not None and current < minimum) or current == 0:
                self.last_active = now
                return minimum if minimum > 0 else 1
            self.last_active = now
            return current
        if (idle is not None and current > idle) or (current > 0 and minimum == 0):
            if self.last_active is None:
                due = self.created + self.initial_cooldown_s < now
            else:
                due = self.last_active + self.cooldown_s < now
            if due:
                return idle if idle is not None else minimum
            return current
        if idle is None and current < minimum:
            return minimum
        return current


def hpa_min_replicas(min_replica_count: int | None) -> int:
    """GetHPAMinReplicas: the HPA KEDA generates has minReplicas of at least 1."""
    return min_replica_count if min_replica_count is not None and min_replica_count > 0 else 1
