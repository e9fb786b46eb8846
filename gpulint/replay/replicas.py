"""How one metric becomes a replica count, and the max over metrics (kubernetes:
pkg/controller/podautoscaler/replica_calculator.go ``GetResourceReplicas``,
``calcPlainMetricReplicas``, ``getUsageRatioReplicaCount``, ``GetObjectPerPodMetricReplicas``,
``GetExternalPerPodMetricReplicas``, ``groupPods``; horizontal.go
``computeReplicasForMetrics``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import NamedTuple

from gpulint.core.quantity import INT32_MAX
from gpulint.replay.behavior import DEFAULT_TOLERANCES, Tolerances

# uniform_pods_replicas adds the pods' value one pod at a time up to this many ready pods,
# and through ``repeated_sum`` (the same float, in a few steps) beyond.
SUMMED_PODS = 64


def repeated_sum(value: float, count: int) -> float:
    """``0.0`` plus ``value``, ``count`` times, in floats, exactly as a loop of
    ``total += value`` sums it, in time that grows with the binades the total crosses (a few
    dozen), not with ``count``: the sum of the pods' values of millions of replicas.

    While the total stays between the same two powers of two, its last place ``2**last`` is
    fixed, and each addition adds the same whole number of places: ``value / 2**last``
    rounded to the nearest, a tie to the one that leaves the total's last bit even (IEEE 754
    round-half-even). So the total moves one addition at a time into each binade, then by a
    multiplication up to the binade's end."""
    if value < 0 and count > 0:
        return -repeated_sum(-value, count)  # rounding to nearest is symmetric
    total, done = 0.0, 0
    while done < count:
        total += value
        done += 1
        if done == count or not math.isfinite(total):
            return total  # an infinite or NaN total stays so
        if total == 0.0:
            return 0.0  # a value of 0 adds nothing
        exponent = math.frexp(total)[1]  # total in [2**(exponent - 1), 2**exponent)
        last = max(exponent - 53, -1074)
        whole = int(math.ldexp(total, -last))  # the total in last places, exact
        places = Fraction(value) / Fraction(2) ** last
        low = math.floor(places)
        if places - low == Fraction(1, 2):
            if whole % 2:
                continue  # the next addition makes the total even; from there on it stays
            step = low if low % 2 == 0 else low + 1
        else:
            step = round(places)
        if step == 0:
            return total  # the value is under half a last place: adding it changes nothing
        limit = 1 << (exponent - last)  # the binade's end, in last places
        jumps = min((limit - 1 - whole) // step, count - done)
        if jumps > 0:
            total = math.ldexp(whole + jumps * step, last)
            done += jumps
    return total


def replicas_of(ratio: float) -> int:
    """``math.ceil`` of a replica count the calculator computed as a float, within what
    a replica count holds: the controller takes it as an int32 (replica_calculator.go:
    ``int32(math.Ceil(...))``), and a value from Prometheus near the largest float makes the
    product infinite, which no integer is."""
    if not ratio < INT32_MAX:  # above, infinite or NaN
        return INT32_MAX
    return math.ceil(ratio)


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
    current: int,
    pods: Sequence[Pod],
    target_utilization: float,
    tolerance: Tolerances = DEFAULT_TOLERANCES,
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
    # On a scale-down a pod without a metric counts as using max(100%, the target) of its
    # request: 100% alone made a target above 100% scale down harder for the missing pods
    # (kubernetes/kubernetes#112178, in 1.26; TestReplicaCalcMissingMetricsScaleDownTargetOver100).
    fallback = max(100.0, target_utilization) / 100.0
    return _rebalance(current, pods, groups, counted, usage_ratio, ratio, tolerance, fallback)


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
    current: int,
    pods: Sequence[Pod],
    target_average: float,
    tolerance: Tolerances = DEFAULT_TOLERANCES,
) -> int:
    """calcPlainMetricReplicas: Pods metrics (and Resource AverageValue), the mean of the
    pods' values against the target average."""
    groups = group_pods(pods, resource_cpu=False)
    counted = _counted(pods, groups, with_requests=False)

    def ratio(values: dict[int, tuple[float, float]]) -> float:
        return (sum(v for v, _ in values.values()) / len(values)) / target_average

    usage_ratio = ratio(counted)
    # On a scale-down a pod without a metric counts as using exactly the target.
    return _rebalance(
        current, pods, groups, counted, usage_ratio, ratio, tolerance, target_average, False
    )


def uniform_pods_replicas(
    current: int,
    ready: int,
    pending: int,
    value: float,
    target_average: float,
    tolerance: Tolerances = DEFAULT_TOLERANCES,
) -> int:
    """``plain_metric_replicas`` for ``ready`` pods that all report ``value`` and ``pending``
    Pending pods, without building the pods: what a replay asks every sync. The arithmetic is
    the same, in the same order (tests/replay/test_controller_parity.py compares the two)."""
    if ready <= 0:
        raise MetricUnavailable("did not receive metrics for any ready pods")
    if ready <= SUMMED_PODS:
        total = 0.0
        for _ in range(ready):
            total += value
    else:
        total = repeated_sum(value, ready)
    usage_ratio = (total / ready) / target_average
    if not (pending and usage_ratio > 1.0):
        if tolerance.within(usage_ratio):
            return current
        return replicas_of(usage_ratio * ready)
    counted = ready + pending
    new_ratio = (total / counted) / target_average
    if tolerance.within(new_ratio) or new_ratio < 1.0:
        return current  # too small a change, or counting the pending pods reversed it
    desired = replicas_of(new_ratio * counted)
    return current if desired < current else desired


def _rebalance(
    current: int,
    pods: Sequence[Pod],
    groups: PodGroups,
    counted: dict[int, tuple[float, float]],
    usage_ratio: float,
    ratio: Callable[[dict[int, tuple[float, float]]], float],
    tolerance: Tolerances,
    missing_down: float,
    per_request: bool = True,
) -> int:
    """The second pass both calculators share: missing and ignored pods filled in, then the
    ratio again. ``missing_down``: what a pod without a metric counts as on a scale-down (a
    share of its request when ``per_request``, for Resource metrics; else a value)."""
    rebalance_ignored = bool(groups.ignored) and usage_ratio > 1.0
    if not rebalance_ignored and not groups.missing:
        if tolerance.within(usage_ratio):
            return current
        return replicas_of(usage_ratio * groups.ready)
    values = dict(counted)
    _fill_missing(values, pods, groups, usage_ratio, missing_down, per_request)
    if rebalance_ignored:
        for index in groups.ignored:
            values[index] = (0.0, pods[index].request)  # on a scale-up, unready pods use 0
    new_ratio = ratio(values)
    if (
        tolerance.within(new_ratio)
        or (usage_ratio < 1.0 < new_ratio)
        or (usage_ratio > 1.0 > new_ratio)
    ):
        return current  # too small a change, or the rebalancing reversed the direction
    desired = replicas_of(new_ratio * len(values))
    if (new_ratio < 1.0 and desired > current) or (new_ratio > 1.0 and desired < current):
        return current
    return desired


def _fill_missing(
    values: dict[int, tuple[float, float]],
    pods: Sequence[Pod],
    groups: PodGroups,
    usage_ratio: float,
    missing_down: float,
    per_request: bool,
) -> None:
    """The pods without a metric: on a scale-down as ``missing_down`` (times their request
    for Resource metrics), on a scale-up as using nothing, and at a ratio of exactly 1 left
    out: GetResourceReplicas and calcPlainMetricReplicas fill them only when the ratio is
    below or above 1 (replica_calculator.go; TestReplicaCalcPodMetric "no change: missing
    metrics", 5 pods of which 3 report the target, stays at 5)."""
    for index in groups.missing:
        request = pods[index].request
        if usage_ratio < 1.0:
            down = request * missing_down if per_request else missing_down
            values[index] = (down, request)
        elif usage_ratio > 1.0:
            values[index] = (0.0, request)  # on a scale-up, as using nothing


def usage_ratio_replicas(
    current: int, usage_ratio: float, ready_pods: int, tolerance: Tolerances = DEFAULT_TOLERANCES
) -> int:
    """getUsageRatioReplicaCount: Object Value and External Value targets. With replicas
    it scales the ready pods by the ratio; at 0 replicas it is ceil(ratio) (scale from zero,
    when the HPAScaleToZero feature lets minReplicas be 0)."""
    if current != 0:
        if tolerance.within(usage_ratio):
            return current
        return replicas_of(usage_ratio * ready_pods)
    return replicas_of(usage_ratio)


def per_pod_total_replicas(
    status_replicas: int,
    total: float,
    target_average: float,
    tolerance: Tolerances = DEFAULT_TOLERANCES,
) -> int:
    """GetObjectPerPodMetricReplicas / GetExternalPerPodMetricReplicas: AverageValue targets
    on Object and External metrics divide the total by the target, once the ratio to the
    current replicas leaves the tolerance."""
    if status_replicas > 0:
        ratio = total / (target_average * status_replicas)
        if tolerance.within(ratio):
            return status_replicas
    return replicas_of(total / target_average)


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
