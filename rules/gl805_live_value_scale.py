"""An HPA's target is on another scale than the values Prometheus returns for its pods.

## What it checks
With ``--prometheus``, for each HPA metric an adapter rule serves with data, gpulint compares
the HPA target with the values the rendered query returned for the HPA's pods now and over the
look-back window (``--lookback``, default 24h), and warns when:

* the values are a ratio (0-1) and the target is above 1 (``"60"`` on
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``);
* a percent metric (0-100) returns values above 100 for a pod: the metricsQuery sums the
  GPUs of multi-GPU pods (External metrics are totals by design and are not judged here);
* the target is above anything observed: the HPA never scales out;
* the target is below anything observed: the HPA sits at maxReplicas.

The message shows the observed minimum, median and maximum and the span of the look-back
window they cover. The last two verdicts speak of the whole window, so they need history
covering ``--min-history`` of it (default 90%: 21h36m of 24h); on less, a short Prometheus
history or a new workload, the finding is info and says how much history is missing instead
(a value that never reached a target in an hour of idle load says nothing of the peak). The
first two need one value: a ratio never exceeds 1 and a percent never exceeds 100.

A target above the range of a ratio is an **error** when the metric is a ratio gpulint knows
and every value is below the target: the values prove it is never reached.

A target that GL107 already reports as on the wrong scale from the input alone (``"60"`` on a
ratio gpulint knows, ``70m`` on a percentage) stays GL107's finding, one finding per defect.
GL107 can only say the target is never reached *unless* the adapter's query adds several
series up per pod; the values answer that. Where they prove the target is never reached, this
rule's finding settles GL107's (``SETTLES``, ``gpulint.engine.settled``): the report shows
one finding, GL107's, with its fix, carrying the values observed and their span instead of
the hedge, as an error; JSON and SARIF name GL805 in ``settledBy``. Where they do not (values
above the target: the query adds up or scales the series), GL107's finding stands as it is.
Without ``--prometheus`` GL107's finding is unchanged.

## Why is this bad?
The HPA divides the observed value by the target. A ratio against 60 never reaches it; a sum
of two GPUs at 50% reads 100 and doubles the replicas although each GPU is half idle; a
target nothing reaches or everything exceeds turns autoscaling off in one direction.

## Example
```yaml
metrics:
- type: Pods
  pods:
    metric: {name: gpu_busy}          # from DCGM_FI_PROF_GR_ENGINE_ACTIVE: 0.31 ... 0.77
    target: {type: AverageValue, averageValue: "60"}
```

## Use instead
```yaml
    target: {type: AverageValue, averageValue: "600m"}   # 0.6 on the ratio scale
```

## References
- Kubernetes HPA algorithm: desiredReplicas = ceil(currentReplicas x current / target).
- NVIDIA dcgm-exporter etc/default-counters.csv: GPU_UTIL in %, PROF_* ratios.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA,
    Context,
    Finding,
    HpaEvidence,
    Inventory,
    LiveSnapshot,
    Scale,
    Severity,
    Verdict,
    between,
    enough_history,
    judge,
    number,
    off_scale,
    paste_quantity,
    ratio_target_fix,
    related,
    rule_where,
    scale_of,
    seen_over,
    short_history,
    stats,
    try_quantity,
)

ID = "GL805"
NAME = "live-value-scale"
SEVERITY = Severity.WARNING
SCOPE = "hpa"
REQUIRES = "live"  # runs only with --prometheus
STAGES = ("autoscaler",)
SETTLES = ("GL107",)


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    live: LiveSnapshot | None = inventory.live
    if live is None:
        return
    for evidence in live.for_hpa(hpa, inventory):
        observed = evidence.observed_stats()
        metric = evidence.metric
        if observed is None or metric.target is None:
            continue
        field, raw = _target(evidence)
        quantity = try_quantity(raw) if raw is not None else None
        if quantity is None or field is None:
            continue
        # GL107 reports this target from the input alone; this rule's finding on its line
        # settles GL107's (SETTLES): only where the values prove it is never reached.
        offline = off_scale(hpa, metric, field, quantity.value, inventory)
        target = float(quantity.value)
        _, median, high = observed
        span = evidence.history_span
        seen = f"observed {stats(observed)} for {evidence.target} {seen_over(span, live)}"
        scale = scale_of(evidence.series_name)
        path = (*metric.target.path, field)
        head = f"HPA {hpa.name} targets {metric.name} at {raw} ({field})"
        links = [
            related(
                evidence.rule.document,
                (*evidence.rule.path, "metricsQuery"),
                "adapter rule that serves the metric",
            )
        ]
        max_replicas = hpa.max_replicas if isinstance(hpa.max_replicas, int) else None
        verdict = judge(
            observed,
            target,
            scale,
            per_object=_per_object(evidence),
            max_replicas=max_replicas,
            sums_judged=metric.type == "Pods",
        )
        proven = verdict is Verdict.RATIO_TARGET and high < target
        if offline and not proven:
            continue  # the data does not answer GL107's question: its finding stands
        if verdict is Verdict.RATIO_TARGET:
            fix = ratio_target_fix(field, target)
            summed = ""
            if high > 1 and metric.type == "Pods":
                summed = (
                    f"; values above 1 mean the metricsQuery of {rule_where(evidence.rule)} "
                    "sums a pod's GPUs"
                )
                fix += "\nmetricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'"
            yield ctx.finding(
                hpa.manifest,
                path,
                f"{head}, but {evidence.series_name} is a ratio (0-1): {seen}; the target is "
                f"never reached, so the HPA never scales out{summed}",
                fix,
                related=links,
                # A known ratio under the target at every value: never reached, not a guess.
                severity=Severity.ERROR if proven and (offline or scale is Scale.RATIO) else None,
            )
        elif verdict is Verdict.SUMMED_PERCENT:
            yield ctx.finding(
                hpa.manifest,
                path,
                f"{head}, but {evidence.series_name} is a percent (0-100) and the values reach "
                f"{number(high)}: the metricsQuery of {rule_where(evidence.rule)} sums the GPUs "
                f"of multi-GPU pods ({seen}), so a pod's GPUs add up against a per-GPU target and "
                "the HPA scales out too early",
                "metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'   "
                "# one value per pod on the 0-100 scale",
                related=links,
            )
        elif verdict in (Verdict.NEVER_REACHED, Verdict.ALWAYS_EXCEEDED) and not enough_history(
            span, live
        ):
            side = "above" if verdict is Verdict.NEVER_REACHED else "below"
            why, wait = short_history(span, live)
            yield ctx.finding(
                hpa.manifest,
                path,
                f"{head}, {side} anything observed so far ({seen}), but {why}",
                wait,
                related=links,
                severity=Severity.INFO,
            )
        elif verdict is Verdict.NEVER_REACHED:
            yield ctx.finding(
                hpa.manifest,
                path,
                f"{head}, above anything observed ({seen}): the HPA never scales out",
                f'{field}: "{paste_quantity(between(median, high))}"   # between the median '
                "and the peak observed; pick the load you want to scale at",
                related=links,
            )
        elif verdict is Verdict.ALWAYS_EXCEEDED:
            yield ctx.finding(
                hpa.manifest,
                path,
                f"{head}, below anything observed ({seen}): the HPA sits at maxReplicas "
                f"({hpa.max_replicas})",
                f'{field}: "{paste_quantity(between(median, high))}"   # between the median '
                "and the peak observed; pick the load you want to scale at",
                related=links,
            )


def _target(evidence: HpaEvidence) -> tuple[str | None, object]:
    target = evidence.metric.target
    if target is None:
        return None, None
    if evidence.metric.type == "Pods" or target.value is None:
        return "averageValue", target.average_value
    return "value", target.value


def _per_object(evidence: HpaEvidence) -> bool:
    """Is the target compared with each value as it is (no division by replicas)?"""
    target = evidence.metric.target
    return evidence.metric.type == "Pods" or (target is not None and target.value is not None)
