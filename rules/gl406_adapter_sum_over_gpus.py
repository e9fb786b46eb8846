"""An HPA target on the per-GPU scale meets a rule that sums several GPUs per pod.

## What it checks
An HPA ``Pods`` metric served by a prometheus-adapter rule whose ``metricsQuery`` is a
``sum(...) by (...)`` over a per-GPU dcgm-exporter series on a bounded scale
(``DCGM_FI_DEV_GPU_UTIL`` 0-100, ``DCGM_FI_PROF_*`` ratios 0-1; the chart's default rules
sum too), when the pods of the HPA's target hold more than one GPU and the HPA's
``averageValue`` is still on the scale of one GPU (at most 100, or 1 for a ratio). The GPU
count per pod comes from the target's pod template (Deployment, StatefulSet, KServe
component ...), DRA claims included: a request for a GPU device class with
``allocationMode: ExactCount`` counts its ``count`` (1 by default); ``All`` leaves the count
unknown, and the rule silent.

A target below 1 on a percentage (``70m``) is a scale mix-up, not a one-GPU target: GL107
reports it, and its fix already multiplies by the GPUs summed per pod, so the fix draws no
GL406. GL107 likewise judges a ratio target against the summed range (up to 2 for two GPUs).

## Why is this bad?
dcgm-exporter writes one series per GPU, labelled with the pod that holds it. Summed per pod,
two GPUs at 60% read 120, so a target of ``"60"`` meant as "60% busy" is reached at 30% and
the HPA keeps twice the replicas the load needs (with four GPUs, four times). A pod that
uses one of its GPUs fully looks as busy as one that uses all of them half.

## Example
```yaml
# rule: metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
# on DCGM_FI_DEV_GPU_UTIL, and the Deployment asks for nvidia.com/gpu: 2
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}
      target: {type: AverageValue, averageValue: "60"}
```

## Use instead
```yaml
# rule:
metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
# or keep sum and scale the target: averageValue: "120"   (60 x 2 GPUs)
```

## References
- NVIDIA/dcgm-exporter: one series per GPU (label ``gpu``) with the pod's labels
  (internal/pkg/transformation/kubernetes.go).
- Kubernetes HPA docs, "Algorithm details": desired = ceil(current x value / target).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from gpulint.ruleapi import (
    CUSTOM,
    HPA,
    ONE_GPU_MAX,
    AdapterRule,
    Context,
    Finding,
    GpuMetric,
    HpaMetric,
    Inventory,
    Related,
    ResolvedTarget,
    Scale,
    Severity,
    format_number,
    gpus_per_pod,
    related,
    summed_gpu_series,
    try_quantity,
)

ID = "GL406"
NAME = "adapter-sum-over-gpus"
SEVERITY = Severity.WARNING
SCOPE = "hpa"
STAGES = ("adapter-rule",)


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if hpa.target_ref is None:
        return
    target: ResolvedTarget | None = None
    for metric in hpa.metrics:
        if metric.type != "Pods" or not metric.name or metric.target is None:
            continue
        value = try_quantity(metric.target.average_value)
        if value is None:
            continue
        for rule in inventory.rules_exposing(metric.name, CUSTOM, near=hpa.manifest):
            summed = summed_gpu_series(rule, metric.name)
            if summed is None:
                continue
            series, gpu_metric, start = summed
            if float(value) > ONE_GPU_MAX[gpu_metric.scale]:
                continue
            if gpu_metric.scale is Scale.PERCENT and float(value) < 1:
                continue  # below 1% is a scale mix-up: GL107 reports it, with the summed fix
            if target is None:
                target = inventory.resolve_target(hpa.namespace, hpa.target_ref, hpa.manifest)
            gpus, request_links = _gpus_per_pod(target, inventory)
            if gpus < 2:
                continue
            yield _finding(
                hpa,
                metric,
                rule,
                series,
                gpu_metric,
                start,
                gpus,
                float(value),
                target,
                ctx,
                request_links,
            )
            break


def _gpus_per_pod(target: ResolvedTarget, inventory: Inventory) -> tuple[int, list[Related]]:
    count, template = gpus_per_pod(target, inventory)
    document = target.template_document
    if template is None or document is None:
        return count, []
    requests = template.gpu_requests(inventory.gpu_names)
    return count, [related(document, r.container_path, "GPU request") for r in requests[:1]]


def _finding(
    hpa: HPA,
    metric: HpaMetric,
    rule: AdapterRule,
    series: str,
    gpu_metric: GpuMetric,
    start: int,
    gpus: int,
    value: float,
    target: ResolvedTarget,
    ctx: Context,
    request_links: list[Related],
) -> Finding:
    query = rule.metrics_query or ""
    scale = "0-100" if gpu_metric.scale is Scale.PERCENT else "0-1"
    unit = "%" if gpu_metric.scale is Scale.PERCENT else ""
    shown = format_number(value)
    where = target.describe()
    if target.owner is not None and target.manifest is None:
        where += f" (from {target.owner.kind} {target.owner.name})"
    message = (
        f"HPA {hpa.name} compares a per-pod sum over {gpus} GPUs with a one-GPU target. "
        f"The metric {_subject(metric.name, series)} is summed per pod by {rule.describe()}, "
        f"one series per GPU on a {scale} scale, and the pods of {where} hold {gpus} GPUs, so "
        f"the sum reaches the target {shown} when each GPU is at "
        f"{format_number(value / gpus)}{unit}: the HPA scales out at 1/{gpus} of the load it "
        "was meant for."
    )
    averaged = query[:start] + "avg" + query[start + 3 :]
    quoted = f"'{averaged}'" if "'" not in averaged else json.dumps(averaged)
    scaled = format_number(value * gpus)
    fix = (
        f"# in {rule.describe()}:\nmetricsQuery: {quoted}\n"
        f'# or keep the sum and scale the target: averageValue: "{scaled}"'
        f"  ({shown} x {gpus} GPUs)"
    )
    if rule.generated:
        fix = (
            f"# add a custom rule for {series} that averages (it takes precedence over the "
            f"chart's default rules):\nrules:\n  custom:\n  - seriesQuery: "
            f'\'{series}{{namespace!="",pod!=""}}\'\n'
            "    resources:\n      template: <<.Resource>>\n"
            "    metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'\n"
            f'# or scale the target: averageValue: "{scaled}"  ({shown} x {gpus} GPUs)'
        )
    return ctx.finding(
        hpa.manifest,
        metric.path,
        message,
        fix,
        related=[rule.related("adapter rule", "metricsQuery"), *request_links],
    )


def _subject(name: str | None, series: str) -> str:
    return series if name == series else f"{name} ({series})"
