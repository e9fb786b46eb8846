"""Where observed values sit against an autoscaling target, judged alike for an HPA metric
(GL805) and a KEDA prometheus trigger (GL812).

The HPA controller asks for ``ceil(currentReplicas x value / target)`` replicas when it compares
each value with the target as it is (a Pods metric, a ``Value`` target), and for
``ceil(total / target)`` when it divides a total by an ``AverageValue`` target (an External or
Object metric, a KEDA trigger by default). So a target above every value observed never
scales out, and one below every value (below every total divided by maxReplicas) holds the
workload at maxReplicas (Kubernetes: pkg/controller/podautoscaler/replica_calculator.go).
"""

from __future__ import annotations

import enum

from gpulint.metrics.names import Scale


class Verdict(enum.Enum):
    RATIO_TARGET = "ratio-target"  # values on the 0-1 scale, a target above 1
    SUMMED_PERCENT = "summed-percent"  # a percent above 100: GPUs added up
    NEVER_REACHED = "never-reached"  # the target is above every value
    ALWAYS_EXCEEDED = "always-exceeded"  # every value keeps the workload at maxReplicas


def judge(
    observed: tuple[float, float, float],
    target: float,
    scale: Scale | None,
    *,
    per_object: bool,
    max_replicas: int | None,
    sums_judged: bool,
) -> Verdict | None:
    """What is wrong with ``target`` against the (min, median, max) observed, if anything.

    ``scale`` None: not known, and values that never exceed 1 count as a ratio.
    ``sums_judged``: a percent above 100 means the query adds up GPUs (per-pod values);
    totals are sums by design and are not judged so."""
    low, _, high = observed
    if (scale is Scale.RATIO or (scale is None and high <= 1.0)) and target > 1:
        return Verdict.RATIO_TARGET
    if sums_judged and scale is Scale.PERCENT and high > 100:
        return Verdict.SUMMED_PERCENT
    # Compared as it is, or a total divided by the replicas: at one replica the value itself
    # must pass the target.
    if high < target:
        return Verdict.NEVER_REACHED
    if per_object:
        if low > target:
            return Verdict.ALWAYS_EXCEEDED
    elif max_replicas is not None and low > target * max_replicas:
        return Verdict.ALWAYS_EXCEEDED
    return None


def between(median: float, high: float) -> float:
    """A target to suggest: halfway between the median and the peak observed."""
    return median + (high - median) / 2


def float_text(value: float) -> str:
    """A float as KEDA's ``threshold`` takes it (no Kubernetes suffixes): ``0.6``, ``72``."""
    if abs(value) >= 10:
        return str(round(value))
    return f"{value:.3g}"
