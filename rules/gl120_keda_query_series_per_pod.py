"""A KEDA prometheus trigger's query answers a series per pod of a workload that scales out.

## What it checks
A ``type: prometheus`` trigger of a ScaledObject whose ``maxReplicaCount`` (default 100) is
above 1, when its query reads series the workload's pods export (``vllm:*``, Triton's
``nv_inference_*``, TGI, SGLang, dcgm-exporter's GPU series: one per pod or per GPU) and does
not aggregate them into one: no aggregation around them, or one ``by`` a label that sets pods
or GPUs apart (``pod``, ``exported_pod``, ``instance``, ``gpu`` ...). A query whose every
series selector sits inside an aggregation without such a ``by`` (``sum(...)``,
``avg by (namespace) (...)``) answers one series, and one whose selectors each name one pod
(``pod="llm-0"``) answers that pod's; neither is reported. With ``--prometheus``,
GL810 checks the answer Prometheus gives now.

## Why is this bad?
KEDA's prometheus scaler takes exactly one number: an answer of two or more series fails the
poll with "prometheus query ... returned multiple elements". With one replica the query
answers one series and everything looks fine; the first scale-out to two pods breaks every
poll after it, so the workload is stuck at two replicas (the HPA gets no value, and scale-down
is skipped while a metric fails) unless ``spec.fallback`` takes over. vLLM's production-stack
chart renders exactly such a trigger, ``vllm:num_requests_waiting{model="..."}``, with no
aggregation.

## Example
```yaml
triggers:
- type: prometheus
  metadata:
    query: vllm:num_requests_waiting{model_name="llama"}
    threshold: "5"
```

## Use instead
```yaml
    query: sum(vllm:num_requests_waiting{model_name="llama"})
```

## References
- kedacore/keda@8b4f083:pkg/scalers/prometheus_scaler.go (``ExecutePromQuery``: "prometheus
  query %s returned multiple elements" when ``data.result`` has more than one series).
- vllm-project/production-stack@a6c01db:helm/templates/scaledobject-vllm.yaml (the query as
  the chart writes it).
- Kubernetes HPA docs, "Scaling on multiple metrics" (a failing metric blocks scale-down).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    Context,
    Finding,
    Inventory,
    PrometheusTrigger,
    Scale,
    ScaledObject,
    Severity,
    edits,
    from_the_pods,
    is_generated,
    metric_names_in_query,
    outermost_aggregations,
    scale_of,
    selectors_in_query,
)

# Labels that set a pod's (or its GPUs') series apart: grouping by one keeps a series each.
PER_POD_LABELS = frozenset(
    (
        "pod",
        "exported_pod",
        "pod_name",
        "kubernetes_pod_name",
        "instance",
        "container",
        "exported_container",
        "gpu",
        "UUID",
        "uuid",
        "device",
        "pci_bus_id",
        "Hostname",
        "hostname",
    )
)
POD_LABELS = ("pod", "exported_pod", "pod_name", "kubernetes_pod_name")

ID = "GL120"
NAME = "keda-query-series-per-pod"
SEVERITY = Severity.ERROR
SCOPE = "scaledobject"
FIXES = ("unsafe",)
STAGES = ("autoscaler",)


def check(scaled: ScaledObject, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if is_generated(scaled.manifest):
        return
    maximum = scaled.scaling_range().maximum
    if maximum is None or maximum < 2:
        return
    for trigger in scaled.prometheus_triggers:
        query = trigger.query
        if query is None or _aggregated_to_one(query) or _one_pod(query):
            continue
        names = metric_names_in_query(query)
        sources = sorted({s for name in names if (s := from_the_pods(name))})
        if not names or not sources:
            continue
        yield _finding(scaled, trigger, query, sources, maximum, ctx)


def _aggregated_to_one(query: str) -> bool:
    """Does every series selector of the query sit inside an aggregation without ``by``?"""
    outermost = outermost_aggregations(query)
    if not outermost:
        return False
    if any(
        p.aggregation.grouping == "by" and set(p.aggregation.labels) & PER_POD_LABELS
        for p in outermost
    ):
        return False
    if any(p.aggregation.grouping == "without" for p in outermost):
        return False
    if any(p.aggregation.operator in ("topk", "bottomk") for p in outermost):
        return False
    outside = query
    for placed in sorted(outermost, key=lambda p: p.start, reverse=True):
        outside = outside[: placed.start] + " " + outside[placed.end :]
    return not metric_names_in_query(outside)


def _one_pod(query: str) -> bool:
    """Does every selector name one pod (``pod="llm-0"``)? Then its series are that pod's."""
    selectors = selectors_in_query(query)
    return bool(selectors) and all(
        any(m.label in POD_LABELS and m.op == "=" and m.value for m in s.matchers)
        for s in selectors
    )


def _finding(
    scaled: ScaledObject,
    trigger: PrometheusTrigger,
    query: str,
    sources: list[str],
    maximum: int,
    ctx: Context,
) -> Finding:
    names = metric_names_in_query(query)
    ratio = any(scale_of(n) in (Scale.PERCENT, Scale.RATIO) for n in names)
    wrapped = f"{'avg' if ratio else 'sum'}({query})"
    return ctx.finding(
        scaled.manifest,
        trigger.query_path,
        f"The query of {trigger.describe()} answers one series per pod. It reads "
        f"{', '.join(sources)}, and {scaled.describe_target()} can run up to {maximum} "
        "replicas: from the second "
        "pod on, KEDA fails every poll with 'prometheus query ... returned multiple "
        f"elements', so the workload stops scaling: {scaled.on_failing_poll()}.",
        f"query: {wrapped}",
        plan=edits.unsafe(edits.Replace(scaled.manifest, trigger.query_path, _quoted(wrapped)))
        if "\n" not in query
        else None,
    )


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
