"""A KEDA prometheus trigger's query fails in Prometheus or answers something KEDA cannot use.

## What it checks
With ``--prometheus``, gpulint sends each ``type: prometheus`` trigger's ``query`` (of a
ScaledObject or a ScaledJob) as KEDA's prometheus scaler does: an instant query at the
current time, with the trigger's ``namespace`` and ``queryParameters`` as query parameters
and its ``customHeaders`` as headers (those ``--prometheus-header`` sets win; connection
headers such as ``Host`` are not sent, and the finding says so). It reports:

* a query Prometheus rejects (a syntax or execution error), with Prometheus' message;
* an answer KEDA cannot read: a scalar or string result (KEDA decodes ``data.result`` as a
  list of series; ``[time, "value"]`` is none), a range vector (its one series carries
  ``values``, no ``value``), or more than one series: KEDA fails with "prometheus query ...
  returned multiple elements" whatever ``ignoreNullValues`` says; the message names the labels
  that set the series apart;
* one series now, whose labels name a pod (``pod``, ``exported_pod`` ...), for a workload
  that can run more than one replica: a warning, since the second pod's series makes it
  several (GL120 says the same offline, from the query);
* a query Prometheus takes longer to answer than KEDA waits: the trigger's ``timeout`` (a Go
  duration or milliseconds), else ``KEDA_HTTP_DEFAULT_TIMEOUT``, 3000 ms by default. gpulint
  measures from where it runs and waits 2 s more than KEDA would before it gives up (a
  warning);
* a query whose answer gpulint could not use (an HTTP error for this query only, an answer
  over 64 MiB or not JSON): the trigger was not checked (a warning). One query failing never
  stops the others from being checked; only a Prometheus that cannot be reached at all is
  GL809.

The check runs against the one Prometheus given with ``--prometheus``. A trigger's
``serverAddress`` is usually another name of that server (the in-cluster Service, while
gpulint goes through a port-forward), so its query is sent there all the same, and when the
two addresses differ the finding says which server answered in place of the trigger's and the
run's notes list the addresses. gpulint does not follow ``unsafeSsl`` (it verifies TLS as
``--prometheus`` asks) nor read a TriggerAuthentication (give ``--prometheus-header``).
The admission webhook does not run trigger queries: whoever may create a ScaledObject writes
its query, and the webhook's Prometheus credentials are the operator's.

## Why is this bad?
KEDA polls the query every ``pollingInterval`` (30 s). Each failing poll leaves the HPA that
KEDA made without a value for the trigger (FailedGetExternalMetric), so the workload does not
follow its load, unless ``spec.fallback`` holds a fixed replica count after
``failureThreshold`` failures. A ScaledJob's trigger is sent and judged the same way; KEDA
skips a failing one at every poll (event ``KEDAScalerFailed``) and starts no job on it
(pkg/scaling/scale_handler.go ``getScaledJobMetrics``). A query that works in the
Prometheus UI (which draws every series, and takes a range vector) can still fail in KEDA,
which wants exactly one number.

## Example
```yaml
triggers:
- type: prometheus
  metadata:
    serverAddress: http://prometheus-operated.monitoring.svc:9090
    query: DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod=~"llm-.*"}  # a series per GPU
    threshold: "70"
```

## Use instead
```yaml
    query: avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod=~"llm-.*"})
```

## References
- kedacore/keda pkg/scalers/prometheus_scaler.go (``ExecutePromQuery``: the request, the
  decoding into ``data.result[].value``, "returned multiple elements", "the value list is
  empty") and pkg/scalers/prometheus_scaler_test.go (``testPromQueryResult``).
- kedacore/keda cmd/operator/main.go (``KEDA_HTTP_DEFAULT_TIMEOUT``, 3000 ms) and
  pkg/scalers/scalersconfig/typed_config.go (``timeout``: a duration or milliseconds).
- kedacore/keda pkg/fallback/fallback.go (``spec.fallback``).
- KEDA docs, Prometheus scaler (keda.sh/docs/latest/scalers/prometheus).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from gpulint.ruleapi import (
    TIMEOUT,
    AdapterRule,
    Answer,
    Context,
    Finding,
    Inventory,
    LiveSnapshot,
    PrometheusTrigger,
    Reading,
    Scale,
    Severity,
    TriggerEvidence,
    code,
    curl_for,
    failing_poll,
    listing,
    metric_names_in_query,
    scale_of,
    selectors_in_query,
    sent_to,
)

ID = "GL810"
NAME = "live-keda-query-broken"
SEVERITY = Severity.ERROR
SCOPE = "prometheus-query"  # the prometheus triggers of ScaledObjects and ScaledJobs
REQUIRES = "live"  # runs only with --prometheus


def check(
    item: AdapterRule | PrometheusTrigger, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    live: LiveSnapshot | None = inventory.live
    if live is None or not isinstance(item, PrometheusTrigger):
        return
    trigger = item
    evidence = live.for_trigger(trigger)
    if evidence is not None:
        for message, fix, severity in _problems(evidence):
            yield ctx.finding(
                trigger.manifest, trigger.query_path, message, fix, key=False, severity=severity
            )


def _problems(evidence: TriggerEvidence) -> Iterator[tuple[str, str, Severity | None]]:
    """(message, fix, severity or None for the rule's) of one trigger's query."""
    trigger = evidence.trigger
    head = trigger.describe()
    context = sent_to(evidence)
    if evidence.error is not None:
        yield (
            f"{head}: Prometheus rejects the query: {evidence.error}; every poll KEDA makes "
            f"fails the same way, so {failing_poll(evidence)}{context}",
            f"# fix the PromQL and try it as KEDA sends it:\n{curl_for(evidence)}",
            None,
        )
    elif evidence.failure is not None:
        yield (
            f"{head}: {_not_checked(evidence)}{context}",
            f"# see what Prometheus answers:\n{curl_for(evidence)}",
            Severity.WARNING,
        )
    elif evidence.reading is not None:
        broken = _unreadable(evidence, evidence.reading, trigger.query or "")
        if broken is not None:
            why, fix = broken
            yield f"{head}: {why}{context}", fix, None
        else:
            per_pod = _one_of_several(evidence, evidence.reading, trigger.query or "")
            if per_pod is not None:
                yield f"{head}: {per_pod[0]}{context}", per_pod[1], Severity.WARNING
    slow = _slow(evidence)
    if slow:
        yield (
            f"{head}: {slow}{context}",
            f'timeout: "{_milliseconds(evidence)}"   # milliseconds KEDA waits for this '
            "trigger; or make the query cheaper (a recording rule)",
            Severity.WARNING,
        )


def _unreadable(evidence: TriggerEvidence, reading: Reading, query: str) -> tuple[str, str] | None:
    """(why KEDA cannot use the answer and what follows, the fix), or None when it can."""
    ignore = evidence.trigger.ignore_null_values is not False
    failing = f"so {failing_poll(evidence)}"
    if reading.answer is Answer.UNDECODABLE:
        kind = f"a {reading.result_type}" if reading.result_type else "an answer"
        return (
            f"the query returns {kind} ({reading.detail}), which KEDA cannot decode: it reads "
            f"data.result as a list of series, each with one value, and every poll fails, "
            f"{failing}",
            f"query: {_quoted(f'vector({query.strip()})')}   # one series KEDA can read",
        )
    if reading.answer is Answer.NO_VALUE:
        outcome = (
            "reads 0 every poll (ignoreNullValues defaults to true): the trigger is never "
            f"active and {evidence.trigger.scaled_object.asks_for_none}"
            if ignore
            else f"fails every poll (ignoreNullValues is false), {failing}"
        )
        return (
            f"the query returns a range vector: its series carries a list of values and no "
            f"value, so KEDA finds no number in it and {outcome}",
            f"query: {_quoted(f'last_over_time({query.strip()})')}   # the newest sample: "
            "one value",
        )
    if reading.answer is Answer.MULTIPLE:
        apart = (
            f", set apart by {listing(reading.varying)}"
            if reading.varying
            else (" with the same labels" if reading.shown else "")
        )
        keys = reading.varying[:3]
        shown = ", ".join(
            code("{" + ",".join(f'{k}="{s.label(k)}"' for k in keys) + "}", 120)
            for s in reading.shown
        )
        more = " ..." if reading.count > len(reading.shown) else ""
        examples = f" ({shown}{more})" if keys else ""
        aggregate = _aggregate(query)
        return (
            f"the query returns {reading.count} series{apart}{examples}, and KEDA fails "
            "every poll with 'prometheus query ... returned multiple elements' (whatever "
            f"ignoreNullValues says): it takes exactly one, {failing}",
            f"query: {_quoted(f'{aggregate}({query.strip()})')}   # one value for the "
            "workload"
            + (
                "; sum() instead for a total divided by a per-replica threshold"
                if aggregate == "avg"
                else ""
            ),
        )
    return None


# Labels that name the pod a series is about (dcgm-exporter's, through honorLabels or not;
# the pod a model server's series is scraped from).
POD_LABELS = ("pod", "exported_pod", "pod_name", "kubernetes_pod_name")


def _one_of_several(
    evidence: TriggerEvidence, reading: Reading, query: str
) -> tuple[str, str] | None:
    """One series now, but the series of one pod (the answer names it) of a workload that may
    run more: the first scale-out makes the answer several series (GL120 offline)."""
    if reading.answer is not Answer.VALUE or reading.count != 1 or not reading.shown:
        return None
    sample = reading.shown[0]
    label = next((k for k in POD_LABELS if sample.label(k)), None)
    pinned = [
        m
        for selector in selectors_in_query(query)
        for m in selector.matchers
        if m.label in POD_LABELS and m.op == "="
    ]
    if pinned:
        return None  # the query names the pod: its series stay that pod's
    owner = evidence.trigger.scaled_object
    maximum = owner.scaling_range().maximum
    if label is None or owner.target_ref is None or maximum is None or maximum < 2:
        return None
    return (
        f"the query answers one series now, {code(f'{label}={sample.label(label)!r}', 120)}: "
        f"one series per pod, and {owner.describe_target()} can run up to {maximum} replicas. "
        "From the second pod on, KEDA fails every poll with 'prometheus query ... returned "
        f"multiple elements', so {failing_poll(evidence)}",
        f"query: {_quoted(f'{_aggregate(query)}({query.strip()})')}   # one value for the workload",
    )


def _aggregate(query: str) -> str:
    """avg for percentages and ratios (an average GPU), sum for anything else (a total)."""
    scales = {scale_of(name) for name in metric_names_in_query(query)}
    return "avg" if scales and scales <= {Scale.PERCENT, Scale.RATIO} else "sum"


def _not_checked(evidence: TriggerEvidence) -> str:
    failure = evidence.failure or ""
    if evidence.failure_reason == TIMEOUT:
        if evidence.elapsed is not None and evidence.elapsed >= evidence.wait:
            return (
                f"Prometheus gave no answer to the query within {evidence.elapsed:.1f} s, and "
                f"KEDA waits {evidence.wait:g} s ({_wait_source(evidence)}): its polls time out "
                f"too, so {failing_poll(evidence)} (measured from where gpulint runs)"
            )
        return f"the query was not checked: {failure} (--prometheus-timeout ran out)"
    return f"the query was not checked: {failure}"


def _slow(evidence: TriggerEvidence) -> str:
    elapsed = evidence.elapsed
    if evidence.failure is not None or elapsed is None or elapsed <= evidence.wait:
        return ""
    return (
        f"Prometheus took {elapsed:.1f} s to answer the query, longer than the "
        f"{evidence.wait:g} s KEDA waits ({_wait_source(evidence)}): KEDA's polls time out, "
        f"so {failing_poll(evidence)} (measured from where gpulint runs; KEDA's way to "
        "Prometheus may be shorter)"
    )


def _wait_source(evidence: TriggerEvidence) -> str:
    if evidence.trigger.text("timeout"):
        return "the trigger's timeout"
    return "KEDA_HTTP_DEFAULT_TIMEOUT, 3000 ms unless the KEDA operator sets it"


def _milliseconds(evidence: TriggerEvidence) -> int:
    taken = evidence.elapsed if evidence.elapsed is not None else evidence.wait
    return int(max(taken * 2, evidence.wait + 1) * 1000)


def _quoted(query: str) -> str:
    if "\n" in query:
        return "|\n" + "\n".join(f"  {line}".rstrip() for line in query.splitlines())
    return f"'{query}'" if "'" not in query else json.dumps(query)
