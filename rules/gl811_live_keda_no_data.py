"""A KEDA prometheus trigger's query returns no value: KEDA scales on 0, or its polls fail.

## What it checks
With ``--prometheus``, each ``type: prometheus`` trigger's query (of a ScaledObject or a
ScaledJob) is sent as KEDA sends it (see GL810). When the answer holds no series, or one
series whose value is NaN or an infinity, gpulint says what KEDA does with it and why the
query found nothing:

* a metric it reads has no series in Prometheus: never seen within ``--lookback``, or last
  seen at a given time, with the name that exists instead (another exporter's, another case,
  a typo) and how its values convert;
* a metric it reads went stale: its last sample, and that the exporter stopped writing it;
* the metrics exist, so the query's label matchers or functions filter every series out.

With ``ignoreNullValues`` true (KEDA's default) the finding is a warning: KEDA reads 0. With
``ignoreNullValues: "false"`` it is an error: every poll fails.

A query that reads a legacy or misspelt GPU name is GL402's finding from the input alone; its
finding on the query settles GL402's (``SETTLES``, ``gpulint.engine.settled``): one finding,
GL402's, saying what Prometheus answered, with the more severe of the two severities.

## Why is this bad?
KEDA's prometheus scaler turns an empty answer, and NaN or an infinity, into 0 unless
``ignoreNullValues`` is false. A trigger at 0 is never active (active means above
``activationThreshold``) and asks its HPA for no replicas: with ``minReplicaCount`` 0 (the
default) and no other trigger active, KEDA scales the workload to zero, so a typo in a label
matcher takes GPUs away from a serving workload without any error. With
``ignoreNullValues: "false"`` each poll fails instead ("prometheus metrics 'prometheus'
target may be lost, the result is empty") and the HPA gets no value, unless ``spec.fallback``
stands in. A ScaledJob's trigger at 0 counts no work waiting, so KEDA starts no job on it;
a failing one KEDA skips at every poll (event ``KEDAScalerFailed``).

## Example
```yaml
triggers:
- type: prometheus
  metadata:
    serverAddress: http://prometheus-operated.monitoring.svc:9090
    # honorLabels: false keeps the workload's namespace in exported_namespace
    query: avg(DCGM_FI_DEV_GPU_UTIL{namespace="ml",pod=~"llm-.*"})
    threshold: "70"
```

## Use instead
```yaml
    query: avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod=~"llm-.*"})
    ignoreNullValues: "false"   # fail loudly, rather than scale on 0, when the data is gone
```

## References
- kedacore/keda pkg/scalers/prometheus_scaler.go (``ExecutePromQuery``: an empty result,
  an empty value list and NaN/Inf are 0 with ``ignoreNullValues``, else an error; the
  metadata default ``ignoreNullValues=true``), kedacore/keda#3065.
- kedacore/keda pkg/scalers/prometheus_scaler_test.go (``testPromQueryResult``: "no values",
  "NaN", "+Inf", each with and without ``ignoreNullValues``).
- kedacore/keda pkg/scaling/executor/scale_scaledobjects.go (``minReplicaCount`` 0 when
  unset; no trigger active: scale to it); pkg/scaling/scale_handler.go
  (``getScaledJobMetrics``: a ScaledJob's failing scaler is skipped, "but continue").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from gpulint.ruleapi import (
    AdapterRule,
    Answer,
    Context,
    Finding,
    Inventory,
    LiveSnapshot,
    Matcher,
    PrometheusTrigger,
    Selector,
    SeriesSummary,
    Severity,
    TriggerEvidence,
    ago,
    curl_for,
    failing_poll,
    format_duration,
    labels_carried,
    listing,
    mention,
    metric_names_in_query,
    sent_to,
)

ID = "GL811"
NAME = "live-keda-no-data"
SEVERITY = Severity.WARNING
SCOPE = "prometheus-query"  # the prometheus triggers of ScaledObjects and ScaledJobs
REQUIRES = "live"  # runs only with --prometheus
SETTLES = ("GL402",)


def check(
    item: AdapterRule | PrometheusTrigger, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    live: LiveSnapshot | None = inventory.live
    if live is None or not isinstance(item, PrometheusTrigger):
        return
    trigger = item
    evidence = live.for_trigger(trigger)
    reading = evidence.reading if evidence is not None else None
    if evidence is None or reading is None:
        return
    if reading.answer is Answer.EMPTY:
        answer = f"the query returns no series{_why_empty(evidence, live)}"
    elif reading.answer is Answer.NOT_FINITE:
        value = "NaN" if reading.value != reading.value else f"{reading.value:+}"
        answer = (
            f"the query returns {value} (0/0 gives NaN: an average or a ratio over no "
            "series, or a NaN sample)"
        )
    else:
        return
    ignore = trigger.ignore_null_values is not False
    if ignore:
        message = (
            f"{trigger.describe()}: {answer}; KEDA reads 0 (ignoreNullValues defaults to "
            f"true): the trigger is never active and "
            f"{trigger.scaled_object.asks_for_none}, so {trigger.scaled_object.on_zero()}"
        )
    else:
        message = (
            f"{trigger.describe()}: {answer}; with ignoreNullValues false every poll fails, "
            f"so {failing_poll(evidence)}"
        )
    yield ctx.finding(
        trigger.manifest,
        trigger.query_path,
        message + sent_to(evidence),
        _fix(evidence, ignore),
        key=False,
        severity=None if ignore else Severity.ERROR,
    )


def _why_empty(evidence: TriggerEvidence, live: LiveSnapshot) -> str:
    reasons = [_absent(name, evidence, live) for name in evidence.absent_names]
    for name in evidence.stale_names:
        seen = evidence.last_seen.get(name)
        when = f": its last sample is {ago(seen, live.evaluated_at)}" if seen is not None else ""
        reasons.append(f"{name} stopped{when}, so Prometheus has no current value")
    for selector, summary in evidence.filtered:
        reason = _filtered_out(selector, summary)
        if reason is not None:
            reasons.append(reason)
    if reasons:
        return ": " + "; ".join(reasons)
    names = [n for n in _names(evidence) if n not in evidence.absent_names]
    if names:
        verb = "has" if len(names) == 1 else "have"
        return (
            f": {listing(names)} {verb} series now, so the query's label matchers or functions "
            "filter every one out"
        )
    return ""


def _absent(name: str, evidence: TriggerEvidence, live: LiveSnapshot) -> str:
    """A metric the query names without series: when it was last seen, what stands for it."""
    seen = evidence.last_seen.get(name)
    if seen is not None:
        reason = f"{name} has no series now (last seen {ago(seen, live.evaluated_at)})"
    else:
        window = live.window if live.lookback >= live.max_age else format_duration(live.max_age)
        reason = f"{name} has no series: it was never seen in the last {window} (--lookback)"
    found = evidence.alternatives.get(name)
    if found:
        first = found[0]
        reason += f"; {first.name} from {first.source} exists ({first.conversion})"
    return reason


def _filtered_out(selector: Selector, summary: SeriesSummary) -> str | None:
    """Series of the metric exist, and the selector's matchers exclude every one (alone or
    together); None when they do not."""
    excluding = _excluding(selector, summary)
    name = selector.metric or listing(selector.literal_names() or ["its metric"])
    carried = labels_carried(summary)
    if excluding:
        which = " and ".join(f"`{m}`" for m in excluding)
        said = "the matcher" if len(excluding) == 1 else "the matchers"
        verb = "excludes" if len(excluding) == 1 else "each exclude"
        return (
            f"{name} has {summary.count} series, but {said} {which} {verb} every one "
            f"of them (the series carry {carried})"
        )
    if all(summary.rejected.get(str(m), 0) for m in selector.label_matchers()):
        drops = ", ".join(
            f"`{m}` drops {summary.rejected.get(str(m), 0)}" for m in selector.label_matchers()
        )
        return (
            f"{name} has {summary.count} series, but the matchers together exclude all of "
            f"them ({drops}; the series carry {carried})"
        )
    return None


def _names(evidence: TriggerEvidence) -> list[str]:
    return metric_names_in_query(evidence.trigger.query or "")


def _excluding(selector: Selector, summary: SeriesSummary) -> list[Matcher]:
    return [
        m for m in selector.label_matchers() if summary.rejected.get(str(m), 0) == summary.count
    ]


def _relabelled(matcher: Matcher, summary: SeriesSummary) -> str | None:
    """The label the series carry that the matcher meant (``namespace`` under
    honorLabels: false is the exporter's; the workload's is ``exported_namespace``), when
    the same test on it keeps some series."""
    plain = matcher.label.removeprefix("exported_")
    for label in (f"exported_{plain}", plain):
        if label == matcher.label or not summary.carries(label):
            continue
        moved = Matcher(label, matcher.op, matcher.value)
        if any(moved.matches(value) for value in summary.values.get(label, {})):
            return label
    return None


def _fix(evidence: TriggerEvidence, ignore: bool) -> str:
    query = evidence.trigger.query or ""
    replaced = query
    notes = []
    for name, found in evidence.alternatives.items():
        replaced = mention(name).sub(found[0].name, replaced)
        notes.append(f"# {name} -> {found[0].name}: {found[0].conversion}")
    for selector, summary in evidence.filtered:
        for matcher in _excluding(selector, summary):
            label = _relabelled(matcher, summary)
            if label is not None:
                replaced = _matcher_label(matcher.label).sub(label, replaced)
                notes.append(f"# the series carry the workload's {matcher.label} as {label}")
    lines = []
    if replaced != query:
        flat = " ".join(replaced.split())
        lines.append(f"query: '{flat}'" if "'" not in flat else f"query: {json.dumps(flat)}")
        lines.extend(dict.fromkeys(notes))
    else:
        lines.append(f"# compare the query with the series Prometheus has:\n{curl_for(evidence)}")
    if ignore:
        lines.append('ignoreNullValues: "false"   # fail loudly rather than scale on 0')
    return "\n".join(lines)


def _matcher_label(label: str) -> re.Pattern[str]:
    """``label`` where a matcher names it (``{label="..."``, ``,label=~"..."``)."""
    return re.compile(rf"(?<=[{{,\s]){re.escape(label)}(?=\s*(?:=~|!~|!=|=)\s*[\"'`])")
