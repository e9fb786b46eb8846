"""An HPA scales on a Resource metric other than cpu and memory, which no metrics API serves.

## What it checks
Each ``Resource`` or ``ContainerResource`` metric of an HPA (autoscaling/v2 and v2beta2)
whose ``name`` is neither ``cpu`` nor ``memory``: ``nvidia.com/gpu``, ``amd.com/gpu``,
``ephemeral-storage``, any extended resource. When the name is a GPU resource (the built-in
names, DRA extended resources, ``gpu-resources`` in ``.gpulint.yaml``), the message says where
GPU load comes from instead. HPAs that KEDA, KServe or Knative generated are left to their
owners.

## Why is this bad?
The HPA controller reads Resource metrics from ``metrics.k8s.io``, and what serves that API
(metrics-server, or prometheus-adapter's ``resourceRules``) knows cpu and memory only: a
request for any other resource has no value. The HPA reports ``FailedGetResourceMetric`` and
the metric never takes part. Alone, it leaves the HPA without a metric, so the workload never
scales; next to other metrics it is worse than useless: when any metric fails and the others
propose fewer replicas, the controller skips the scale-down, so the workload scales up on the
other metrics and never comes back down.

## Example
```yaml
metrics:
- type: Resource
  resource:
    name: nvidia.com/gpu
    target: {type: Utilization, averageUtilization: 90}
```

## Use instead
```yaml
metrics:
- type: Pods
  pods:
    metric: {name: DCGM_FI_DEV_GPU_UTIL}   # dcgm-exporter, served by prometheus-adapter
    target: {type: AverageValue, averageValue: "90"}
```

## References
- Kubernetes pkg/controller/podautoscaler/metrics/client.go: Resource metrics come from
  ``metrics.k8s.io`` PodMetrics, which carry cpu and memory (k8s.io/metrics
  pkg/apis/metrics/v1beta1 ``ContainerMetrics.Usage``; metrics-server collects those two).
- kubernetes-sigs/prometheus-adapter docs/config.md: ``resourceRules`` has ``cpu`` and
  ``memory`` only.
- Kubernetes pkg/controller/podautoscaler/horizontal.go ``computeReplicasForMetrics``: with
  an invalid metric, a proposal below the current replicas is not acted on (the HPA docs,
  "Scaling on multiple metrics").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpulint.ruleapi import (
    HPA,
    RESOURCE_METRIC_TYPES,
    Context,
    Finding,
    HpaMetric,
    Inventory,
    Severity,
    abbreviated,
    edits,
    is_generated,
    is_unknown,
)

ID = "GL116"
NAME = "hpa-unserved-resource-metric"
SEVERITY = Severity.ERROR
SCOPE = "hpa"
FIXES = ("unsafe",)
STAGES = ("autoscaler",)

SERVED = ("cpu", "memory")  # what metrics.k8s.io carries
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DEFAULT_TARGET = 70


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if is_generated(hpa.manifest) or hpa.version not in ("v2", "v2beta2"):
        return
    unserved = [
        m
        for m in hpa.metrics
        if m.type in RESOURCE_METRIC_TYPES and m.name is not None and m.name not in SERVED
    ]
    others = [m for m in hpa.metrics if m not in unserved]
    for metric in unserved:
        name = metric.name or ""
        if is_unknown(name):
            continue
        gpu = inventory.gpu_names.is_gpu(name)
        yield ctx.finding(
            hpa.manifest,
            metric.name_path,
            _message(hpa, metric, name, others, gpu),
            _fix(metric, inventory, hpa, gpu),
            plan=_plan(hpa, metric, inventory) if gpu else None,
        )


def _message(hpa: HPA, metric: HpaMetric, name: str, others: list[HpaMetric], gpu: bool) -> str:
    text = (
        f"HPA {abbreviated(hpa.name)} scales on {metric.type} metric {abbreviated(name)}, which "
        "no metrics API serves. The resource metrics API (metrics.k8s.io) carries cpu and "
        "memory only, so the HPA never "
        "gets a value for it (FailedGetResourceMetric)"
    )
    if others:
        text += (
            ", and while one metric fails the controller skips every scale-down: the workload "
            "scales up on the other metrics and never comes back down"
        )
    else:
        text += " and, with no other metric, never scales"
    if gpu:
        text += (
            ". GPU load comes from dcgm-exporter through prometheus-adapter, as a Pods metric "
            "(or from KEDA's prometheus trigger)"
        )
    return text + "."


def _utilization(metric: HpaMetric) -> int:
    target = metric.target
    value = target.average_utilization if target is not None else None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 100:
        return value
    return DEFAULT_TARGET


def _gpu_metric_name(inventory: Inventory, hpa: HPA) -> str | None:
    """The name the input's adapter serves GPU utilization under; the DCGM name when the
    input holds no adapter config (None: its configs serve no such metric)."""
    served = inventory.served_name(GPU_UTIL, hpa.manifest)
    if served is not None:
        return served
    return None if inventory.adapter_configs_near(hpa.manifest) else GPU_UTIL


def _pods_entry(name: str, target: int) -> dict[str, Any]:
    return {
        "metric": {"name": name},
        "target": {"type": "AverageValue", "averageValue": str(target)},
    }


def _fix(metric: HpaMetric, inventory: Inventory, hpa: HPA, gpu: bool) -> str:
    if not gpu:
        return (
            f"# delete the {metric.type} metric {metric.name}: only cpu and memory have values;\n"
            "# scale on what the workload exports instead (a Pods or External metric)"
        )
    name = _gpu_metric_name(inventory, hpa) or GPU_UTIL
    return (
        "- type: Pods\n"
        "  pods:\n"
        f"    metric: {{name: {name}}}   # the name your prometheus-adapter rule exposes\n"
        f'    target: {{type: AverageValue, averageValue: "{_utilization(metric)}"}}'
    )


def _plan(hpa: HPA, metric: HpaMetric, inventory: Inventory) -> edits.FixPlan | None:
    """The Resource metric turned into a Pods metric on GPU utilization, when the input's
    adapter serves one (or the input has no adapter config)."""
    name = _gpu_metric_name(inventory, hpa)
    if name is None or metric.type != "Resource":
        return None
    return edits.unsafe(
        edits.Replace(hpa.manifest, (*metric.path, "type"), "Pods"),
        edits.Delete(hpa.manifest, (*metric.path, "resource")),
        edits.Insert(
            hpa.manifest, metric.path, edits.entries(pods=_pods_entry(name, _utilization(metric)))
        ),
    )
