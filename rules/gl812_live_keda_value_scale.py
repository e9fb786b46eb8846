"""A KEDA prometheus trigger's threshold is on another scale than the values its query returns.

## What it checks
With ``--prometheus``, for each ``type: prometheus`` trigger whose query returns one value
(see GL810), gpulint reads the query's values now and over the look-back window
(``--lookback``, default 24h, as a subquery) and compares them with the trigger, judging as
GL805 does for an HPA metric:

* the values are on the 0-1 scale (the query reads a ratio such as
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``) and ``threshold`` is above 1: it is never reached;
* ``threshold`` is above every value: with the default ``metricType`` (AverageValue) KEDA's
  HPA asks for ``ceil(value / threshold)`` replicas, never more than one; with
  ``metricType: Value`` it never scales out (a query that returned 0 throughout saw no load
  and is not judged so);
* every value is above ``threshold`` times ``maxReplicaCount`` (AverageValue; above
  ``threshold`` with Value): the workload sits at ``maxReplicaCount``, as when a sum over
  every GPU of the cluster meets a per-replica threshold;
* with ``minReplicaCount`` 0 (the default), ``activationThreshold`` is at or above every
  value: the trigger is never active, so KEDA keeps the workload at zero (again, a query
  that returned 0 throughout is not judged).

The message shows the observed minimum, median and maximum and the span of the look-back
window they cover. Every verdict but the first speaks of the whole window, so it needs history
covering ``--min-history`` of it (default 90%: 21h36m of 24h); on less (a Prometheus that
holds hours, a new query) the finding is info and says how much history is missing instead:
a threshold above an hour of idle load may well be reached at the daily peak. The first needs
one value: a ratio never exceeds 1.

## Why is this bad?
A ScaledObject with ``advanced.scalingModifiers`` is not judged: KEDA then hands its HPA one
composite metric, the formula over the triggers' values, against ``scalingModifiers.target``,
and no trigger's threshold is used (keda-docs 2.20, "scalingModifiers").

KEDA hands the value to the HPA it made as an External metric against ``threshold``. A
ratio against 70 never reaches it; a target nothing reaches or everything exceeds turns
autoscaling off in one direction; and a trigger that is never active (the value must be
above ``activationThreshold``) never brings a workload back from zero.

## Example
```yaml
triggers:
- type: prometheus
  metadata:
    serverAddress: http://prometheus-operated.monitoring.svc:9090
    query: avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace="ml"})   # 0.31 ... 0.77
    threshold: "70"
```

## Use instead
```yaml
    threshold: "0.7"   # on the ratio's 0-1 scale
```

## References
- kedacore/keda pkg/scalers/prometheus_scaler.go (``GetMetricSpecForScaling``: External
  metric ``s<index>-prometheus`` with target ``threshold``; ``GetMetricsAndActivity``:
  active when the value is above ``activationThreshold``) and pkg/scalers/scaler.go
  (``GetMetricTargetType``: AverageValue by default).
- kedacore/keda pkg/scaling/executor/scale_scaledobjects.go (no trigger active: scale to
  ``minReplicaCount``, 0 when unset).
- Kubernetes HPA algorithm: desiredReplicas = ceil(currentReplicas x current / target).
- NVIDIA dcgm-exporter etc/default-counters.csv: GPU_UTIL in %, PROF_* ratios.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    Context,
    Finding,
    Inventory,
    LiveSnapshot,
    Scale,
    ScaledObject,
    Severity,
    TriggerEvidence,
    Verdict,
    between,
    enough_history,
    float_text,
    judge,
    metric_names_in_query,
    number,
    scale_of,
    seen_over,
    sent_to,
    short_history,
    stats,
    target_of,
)

ID = "GL812"
NAME = "live-keda-value-scale"
SEVERITY = Severity.WARNING
SCOPE = "scaledobject"
REQUIRES = "live"  # runs only with --prometheus


def check(scaled_object: ScaledObject, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    live: LiveSnapshot | None = inventory.live
    if live is None or scaled_object.scaling_modifiers is not None:
        return  # KEDA compares the formula's value with scalingModifiers.target instead
    scaling = scaled_object.scaling_range()
    for trigger in scaled_object.prometheus_triggers:
        evidence = live.for_trigger(trigger)
        observed = evidence.observed_stats() if evidence is not None else None
        threshold = trigger.threshold
        if evidence is None or observed is None or threshold is None:
            continue
        low, median, high = observed
        span = evidence.history_span
        seen = f"observed {stats(observed)} {seen_over(span, live)}"
        enough = enough_history(span, live)
        why, wait = short_history(span, live)
        head = f"{trigger.describe()}: threshold {number(threshold)}"
        average = trigger.metric_type != "Value"
        target = target_of(evidence)
        scale = _scale(evidence, high)
        verdict = judge(
            observed,
            threshold,
            scale,
            per_object=not average,
            max_replicas=scaling.maximum,
            sums_judged=False,
        )
        found: tuple[str, str] | None = None
        severity = None
        if verdict is Verdict.RATIO_TARGET:
            names = ", ".join(n for n in _names(evidence) if scale_of(n) is Scale.RATIO)
            found = (
                f"{head} is never reached: the query returns values on the 0-1 scale "
                f"({names} is a ratio; {seen}), so {_never_out(average, target)}",
                f'threshold: "{float_text(threshold / 100)}"   # {number(threshold)}% on the '
                "0-1 scale",
            )
        elif verdict is Verdict.NEVER_REACHED and high > 0 and not enough:
            found = (
                f"{head} is above every value the query returned so far ({seen}), but {why}",
                wait,
            )
            severity = Severity.INFO
        elif verdict is Verdict.ALWAYS_EXCEEDED and not enough:
            found = (
                f"{head} is below every value the query returned so far ({seen}), but {why}",
                wait,
            )
            severity = Severity.INFO
        elif verdict is Verdict.NEVER_REACHED and high > 0:
            # (A query that returned 0 throughout saw no load: that says nothing of the scale.)
            found = (
                f"{head} is above every value the query returned ({seen}), so "
                f"{_never_out(average, target)}",
                f'threshold: "{float_text(between(median, high))}"   # between the median and '
                "the peak observed; pick the load you want to scale at",
            )
        elif verdict is Verdict.ALWAYS_EXCEEDED:
            found = _always_above(evidence, head, seen, average, low, high, scaling.maximum)
        if found is not None:
            message, fix = found
            yield ctx.finding(
                trigger.manifest,
                trigger.query_path,
                message + sent_to(evidence),
                fix,
                key=False,
                severity=severity,
            )
        activation = trigger.activation_threshold
        # As above, a query that returned 0 throughout saw no load to activate on.
        never_active = scaling.minimum == 0 and activation is not None and 0 < high <= activation
        if never_active and activation is not None and not enough:
            yield ctx.finding(
                trigger.manifest,
                trigger.query_path,
                f"{trigger.describe()}: activationThreshold {number(activation)} is at or above "
                f"every value the query returned so far ({seen}), but {why}{sent_to(evidence)}",
                wait,
                key=False,
                severity=Severity.INFO,
            )
        elif never_active and activation is not None:
            unless = " unless another trigger is active" if len(scaled_object.triggers) > 1 else ""
            suggested = float_text(low / 2) if low > 0 else "0"
            yield ctx.finding(
                trigger.manifest,
                trigger.query_path,
                f"{trigger.describe()}: activationThreshold {number(activation)} is at or above "
                f"every value the query returned ({seen}): the trigger is never active (KEDA "
                f"wants a value above it), so with minReplicaCount 0 KEDA keeps {target} at "
                f"zero replicas{unless}{sent_to(evidence)}",
                f'activationThreshold: "{suggested}"   # below the values observed',
                key=False,
            )


def _scale(evidence: TriggerEvidence, high: float) -> Scale:
    """The query's scale as far as gpulint can tell from what it reads and returns: a ratio
    when every metric it names is one and no value exceeds 1 (``* 100`` turns it into a
    percent); else the names' scale when they agree. Never None: a query is not taken for a
    ratio only because its values are small."""
    scales = {scale_of(name) for name in _names(evidence)}
    if scales == {Scale.RATIO}:
        return Scale.RATIO if high <= 1.0 else Scale.OTHER
    if len(scales) == 1:
        return scales.pop() or Scale.OTHER
    return Scale.OTHER


def _names(evidence: TriggerEvidence) -> list[str]:
    return metric_names_in_query(evidence.trigger.query or "")


def _never_out(average: bool, target: str) -> str:
    if average:
        return (
            "KEDA's HPA asks for ceil(value / threshold) = 1 replica at most and "
            f"{target} never scales out"
        )
    return f"{target} never scales out"


def _always_above(
    evidence: TriggerEvidence,
    head: str,
    seen: str,
    average: bool,
    low: float,
    high: float,
    maximum: int | None,
) -> tuple[str, str]:
    target = target_of(evidence)
    if average and maximum:
        return (
            f"{head} is below every value the query returned divided by maxReplicaCount "
            f"{maximum} ({seen}): KEDA's HPA asks for ceil(value / threshold) replicas, more "
            f"than {maximum}, so {target} sits at maxReplicaCount (does the query add up more "
            "than the workload's own GPUs?)",
            f'threshold: "{float_text(high / maximum)}"   # the peak observed reaches '
            "maxReplicaCount; or narrow the query to the workload's pods",
        )
    return (
        f"{head} is below every value the query returned ({seen}), so {target} keeps scaling "
        "out until it sits at maxReplicaCount",
        f'threshold: "{float_text(between(low, high))}"   # within the values observed; pick '
        "the load you want to scale at",
    )
