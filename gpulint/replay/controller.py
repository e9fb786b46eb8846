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

This module is the controller's state across syncs (stabilization, behavior policies, the
scale-up limit); ``behavior`` holds its settings, ``replicas`` the replica calculator and
``activation`` KEDA's activation.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpulint.replay.behavior import DOWNSCALE_STABILIZATION_S, Behavior

# horizontal.go: without behavior, one sync adds at most max(2 x current, 4) replicas
# (scaleUpLimitFactor 2.0, scaleUpLimitMinimum 4.0).
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0


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
    recommendations: list[tuple[int, float]] = field(default_factory=list)
    # fast: the windows' extremes from monotonic queues, O(1) a sync, instead of a scan of
    # the stored recommendations (the same answers: test_controller_parity.py compares them;
    # ``recommendations`` then stays empty)
    fast: bool = False
    _highs: Window | None = None
    _lows: Window | None = None
    up_events: list[ScaleEvent] = field(default_factory=list)
    down_events: list[ScaleEvent] = field(default_factory=list)
    # recordInitialRecommendation (horizontal.go): the first time the controller sees an
    # HPA, before it computes anything, it stores the target's replicas as a recommendation,
    # so that the first syncs cannot scale below them within the stabilization window
    # (horizontal_test.go TestScaleDownStabilizeInitialSize). Kept here until the first
    # stabilization reads the recommendations, then stored with its own time.
    seen: bool = False
    _initial: tuple[int, float] | None = None

    def first_sight(self, now: float, spec_replicas: int) -> None:
        """The controller's first look at the HPA records its replicas (once)."""
        if not self.seen:
            self.seen = True
            self._initial = (spec_replicas, now)

    def _take_initial(self) -> None:
        """The initial recommendation joins the stored ones, older than any new one."""
        if self._initial is None:
            return
        value, time = self._initial
        self._initial = None
        if self.fast:
            if self.behavior is None:
                self._highs = self._highs or Window(highest=True, inclusive=True)
            else:
                self._highs = self._highs or Window(highest=True, inclusive=False)
                self._lows = self._lows or Window(highest=False, inclusive=False)
                self._lows.add(value, time)
            self._highs.add(value, time)
        else:
            self.recommendations.insert(0, (value, time))

    def reconcile(self, now: float, spec_replicas: int, desired_by_metrics: int | None) -> int:
        """reconcileAutoscaler: the replicas to set. ``desired_by_metrics`` is None when the
        metrics gave no answer (the HPA keeps its replicas and records nothing)."""
        self.first_sight(now, spec_replicas)
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
        self._take_initial()
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
        self._take_initial()
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
