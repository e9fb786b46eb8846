"""An HPA's Object metric with a ``Value`` target that adding replicas cannot lower.

## What it checks
Each ``Object`` metric of an HPA whose target is ``type: Value``, on a GPU series gpulint
knows (``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_DEV_FB_USED``, Triton's ``nv_gpu_utilization``
...), served by a prometheus-adapter rule of the input. It is reported when the value is
not the load of one replica:

* the described object is a Namespace: the value covers every GPU of the namespace, other
  workloads' included;
* the rule's query adds up the object's GPUs (``sum(...) by (<<.GroupBy>>)``, ``count``),
  as the chart's default rules do (``sum(<<.Series>>{<<.LabelMatchers>>}) by
  (<<.GroupBy>>)``): a Service-level sum of GPU utilization or memory;
* the workload's pods share their GPUs (``nvidia.com/gpu.shared``, which the NVIDIA device
  plugin advertises for time-slicing and MPS with ``renameByDefault``): every replica on a
  GPU reads that one GPU's utilization.

## Why is this bad?
For an Object metric with a ``Value`` target the HPA computes desired replicas as current
replicas times metric over target (kubernetes/kubernetes pkg/controller/podautoscaler
replica_calculator.go, ``GetObjectMetricReplicas``). That works only if more replicas bring
the metric down. A sum of GPU utilization over the Service's pods stays what the total load
is however many pods share it, and GPU memory grows with every replica that loads the
model; a namespace-wide value moves with other workloads; a GPU shared by the replicas is as
busy as all of them together. Above the target, the HPA adds pods until ``maxReplicas`` and
stays there; below it, it never scales out.

## Example
```yaml
  metrics:
  - type: Object
    object:
      metric: {name: gpu_utilization}     # sum(...) by (<<.GroupBy>>) over the Service
      describedObject: {apiVersion: v1, kind: Service, name: triton}
      target: {type: Value, value: "70"}
```

## Use instead
```yaml
      target: {type: AverageValue, averageValue: "70"}   # the sum divided by the replicas
```
For a namespace-wide value, read the workload's own GPUs per pod (``type: Pods`` from a rule
that maps pods); for replicas sharing GPUs, scale on their own load (requests waiting or in
flight per replica), which more replicas do lower.

## References
- kubernetes/kubernetes pkg/controller/podautoscaler/replica_calculator.go
  (``GetObjectMetricReplicas``, ``GetObjectPerPodMetricReplicas``) and horizontal.go (the
  ``Value``/``AverageValue`` branch).
- Kubernetes docs, "Horizontal Pod Autoscaling": Object metrics and ``AverageValue``.
- NVIDIA/k8s-device-plugin README, "Shared Access to GPUs" (``renameByDefault``,
  ``nvidia.com/gpu.shared``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from gpulint.ruleapi import (
    CUSTOM,
    HPA,
    AdapterRule,
    Context,
    Exporter,
    Finding,
    HpaMetric,
    Inventory,
    Related,
    ResolvedTarget,
    Severity,
    canonical_resource,
    is_dcgm_field,
    lookup,
    metric_names_in_query,
    outermost_aggregations,
    related,
)

ID = "GL409"
NAME = "adapter-unlowerable-object-metric"
SEVERITY = Severity.WARNING
SCOPE = "hpa"

SHARED_GPU = "nvidia.com/gpu.shared"
_ADDING = {"sum", "count"}
# Model servers' own KV-cache and queue figures are per pod, not per GPU.
_NOT_DEVICE = {Exporter.VLLM}


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if hpa.target_ref is None or not hpa.scaling_range().scales_out:
        return
    target: ResolvedTarget | None = None
    for metric in hpa.metrics:
        if metric.type != "Object" or not metric.name or metric.target is None:
            continue
        if metric.target.type != "Value" or metric.target.value is None:
            continue
        kind = (metric.described_object or {}).get("kind")
        resource = canonical_resource(kind) if isinstance(kind, str) and kind else None
        for rule in inventory.rules_exposing(metric.name, CUSTOM, near=hpa.manifest):
            series = _gpu_series(rule, metric.name)
            if series is None:
                continue
            if resource == "namespaces":
                why = (
                    f"it is {series} over the whole namespace, other workloads' GPUs included, "
                    "which this HPA's replicas do not move"
                )
                yield _finding(hpa, metric, rule, why, _PER_POD_FIX, ctx)
                break
            if _adds_up(rule):
                grows = " (and GPU memory grows with each replica)" if "FB_" in series else ""
                why = (
                    f"{rule.describe()} adds up {series} over the {kind}'s GPUs, a total that "
                    f"stays the same however many replicas share the load{grows}"
                )
                fix = (
                    "target:\n  type: AverageValue\n"
                    f'  averageValue: "{metric.target.value}"   # the total divided by the replicas'
                )
                yield _finding(hpa, metric, rule, why, fix, ctx)
                break
            if target is None:
                target = inventory.resolve_target(hpa.namespace, hpa.target_ref, hpa.manifest)
            shared = _shared_gpu_request(target, inventory)
            if shared is not None:
                why = (
                    f"the pods of {target.describe()} request {SHARED_GPU}, so replicas sharing "
                    f"a GPU all read that GPU's {series}, as high as their load together"
                )
                yield _finding(hpa, metric, rule, why, _LOAD_FIX, ctx, [shared])
                break


_PER_POD_FIX = (
    "# read the workload's own GPUs, per pod:\n- type: Pods\n  pods:\n    metric:\n"
    "      name: <a metric from a rule that maps pods>\n    target:\n"
    "      type: AverageValue\n      averageValue: <per-pod value>"
)
_LOAD_FIX = (
    "# scale shared-GPU replicas on their own load (requests waiting or in flight):\n"
    "- type: Pods\n  pods:\n    metric:\n      name: <requests per replica>\n"
    "    target:\n      type: AverageValue\n      averageValue: <per-replica value>"
)


def _gpu_series(rule: AdapterRule, name: str) -> str | None:
    """The per-GPU device series the rule serves as ``name``, if it is one."""
    candidates = list(rule.series_for(name) or [])
    if rule.metrics_query:
        candidates += [n for n in metric_names_in_query(rule.metrics_query) if n not in candidates]
    if rule.generated and name not in candidates:
        candidates.append(name)
    for series in candidates:
        metric = lookup(series)
        if (metric is not None and metric.exporter not in _NOT_DEVICE) or is_dcgm_field(series):
            return series
    return None


def _adds_up(rule: AdapterRule) -> bool:
    query = rule.metrics_query or ""
    outer = outermost_aggregations(query)
    return bool(outer) and all(p.aggregation.operator in _ADDING for p in outer)


def _shared_gpu_request(target: ResolvedTarget, inventory: Inventory) -> Related | None:
    document = target.template_document
    for template in target.templates:
        for request in template.gpu_requests(inventory.gpu_names):
            if request.resource == SHARED_GPU and document is not None:
                return related(document, request.container_path, "shared GPU request")
    return None


def _finding(
    hpa: HPA,
    metric: HpaMetric,
    rule: AdapterRule,
    why: str,
    fix: str,
    ctx: Context,
    links: Sequence[Related] = (),
) -> Finding:
    assert metric.target is not None
    message = (
        f"HPA {hpa.name} compares Object metric {metric.name} with a Value target that more "
        f"replicas cannot lower. {why[:1].upper()}{why[1:]}. Above the target the HPA scales to "
        "maxReplicas and stays there."
    )
    return ctx.finding(
        hpa.manifest,
        metric.target.field_path("type"),
        message,
        fix,
        related=[rule.related("adapter rule", "metricsQuery"), *links],
    )
