"""Autoscaling settings KServe's HPA reconciler ignores in Standard mode.

## What it checks
In a ``serving.kserve.io`` InferenceService in Standard mode, for each component whose
autoscaler class is ``hpa`` (the default):

* ``autoScaling.behavior``: the HPA KServe creates always gets an empty ``behavior``;
* ``autoScaling.metrics`` entries of type ``External`` or ``PodMetric``: only ``Resource``
  cpu/memory entries become HPA metrics (the others are for ``autoscalerClass: keda``);
* ``scaleMetric``/``scaleTarget`` next to ``autoScaling``, which then wins;
* ``scaleMetric`` other than cpu or memory, and ``scaleMetric: memory`` without
  ``scaleTarget``: no metric is made;
* ``scaleMetricType``, which KServe reads nowhere;

and, whatever the class, the legacy annotations ``serving.kserve.io/metrics``,
``serving.kserve.io/metric`` and ``serving.kserve.io/targetUtilizationPercentage``.

## Why is this bad?
These settings look like they shape the HPA, but KServe's HPA reconciler drops them
(reconcilers/hpa/hpa_reconciler.go): the scale-down window you wrote is the API-server
default, the GPU or queue metric you listed never reaches the HPA, and when nothing usable is
left the HPA has no metrics, which the API server turns into CPU 80% utilization. With an
explicit ``serving.kserve.io/autoscalerClass: hpa`` KServe's webhook rejects unsupported
metrics instead; without it they are silently ignored. KServe 0.15 and later do not read the
legacy annotations at all (``targetUtilizationPercentage`` set the CPU target before).

## Example
```yaml
metadata:
  annotations:
    serving.kserve.io/deploymentMode: Standard
spec:
  predictor:
    maxReplicas: 4
    autoScaling:
      behavior:
        scaleDown: {stabilizationWindowSeconds: 600}    # ignored
      metrics:
      - type: External                                   # ignored
        external:
          metric: {backend: prometheus, query: "sum(vllm:num_requests_waiting)"}
          target: {type: Value, value: "10"}
```

## Use instead
```yaml
metadata:
  annotations:
    serving.kserve.io/deploymentMode: Standard
    serving.kserve.io/autoscalerClass: keda    # KEDA uses External metrics and behavior
```

## References
- kserve pkg/controller/v1beta1/inferenceservice/reconcilers/hpa/hpa_reconciler.go
  (``getHPAMetrics``: ``if metric.Resource == nil { continue }``; ``Behavior: {}``).
- kserve reconcilers/keda/keda_reconciler.go (copies ``autoScaling.behavior``).
- kserve pkg/apis/serving/v1beta1/inference_service_validation.go
  ``validateScalingHPACompExtension``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpulint.ruleapi import (
    KSERVE_CLASS_ANNOTATION,
    LEGACY_AUTOSCALING_ANNOTATIONS,
    STANDARD,
    Component,
    Context,
    Finding,
    InferenceService,
    Inventory,
    Path,
    Severity,
    abbreviated,
)

ID = "GL305"
NAME = "kserve-ignored-autoscaling"
SEVERITY = Severity.WARNING
SCOPE = "isvc"
STAGES = ("workload",)

KEDA_FIX = f"{KSERVE_CLASS_ANNOTATION}: keda   # in metadata.annotations: KEDA reads these"
CPU_DEFAULT = (
    "the HPA KServe creates has no metrics, and the API server defaults it to CPU 80% utilization"
)


def check(isvc: InferenceService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if isvc.mode != STANDARD:
        return
    for key, field in LEGACY_AUTOSCALING_ANNOTATIONS.items():
        if key in isvc.manifest.annotations:
            yield _legacy(isvc, key, field, ctx)
    # KServe's webhook checks the component's settings only when the class is spelled out.
    rejected = isvc.class_annotation == "hpa" and (
        isvc.mode_is_explicit or isvc.mode_annotation is None
    )
    for component, _ in isvc.components_under_kserve_hpa():
        yield from _component(isvc, component, rejected, ctx)


def _legacy(isvc: InferenceService, key: str, field: str, ctx: Context) -> Finding:
    value = isvc.manifest.annotations[key]
    if key.endswith("targetUtilizationPercentage"):
        why = (
            "KServe 0.15 and later do not read it (older releases took it as the CPU target); "
            "the HPA target is scaleTarget, 80 when unset"
        )
    elif key.endswith("/metrics"):
        why = (
            "KServe's webhook checked it before 0.15, but no release chose the HPA metric "
            "from it; the HPA metric is scaleMetric, cpu when unset"
        )
    else:
        why = "It is not a KServe annotation; the HPA metric is scaleMetric, cpu when unset"
    where = "predictor" if isvc.component("predictor") is not None else "<component>"
    if field == "scaleMetric" and value not in ("cpu", "memory"):
        fix = (
            f"delete the annotation {key}; KServe's HPA scales only on cpu or memory "
            f"(spec.{where}.scaleMetric): for other metrics set {KSERVE_CLASS_ANNOTATION} to keda "
            "or external"
        )
    else:
        fix = f"spec.{where}.{field}: {value}   # and delete the annotation {key}"
    return ctx.finding(
        isvc.manifest,
        ("metadata", "annotations", key),
        f"InferenceService {abbreviated(isvc.name)} sets {key}, which changes nothing. "
        f"It is set to {value!r}. {why}.",
        fix,
    )


def _component(
    isvc: InferenceService, component: Component, rejected: bool, ctx: Context
) -> Iterator[Finding]:
    base = component.path
    who = f"The {component.name} of InferenceService {abbreviated(isvc.name)}"
    auto_scaling = component.get("autoScaling")
    if isinstance(auto_scaling, dict):
        yield from _auto_scaling(isvc, component, auto_scaling, rejected, who, ctx)
    else:
        yield from _scale_metric(isvc, component, rejected, who, ctx)
    if "scaleMetricType" in component.data:
        path: Path = (*base, "scaleMetricType")
        yield ctx.finding(
            isvc.manifest,
            path,
            f"{who} sets scaleMetricType, which KServe reads nowhere. The field exists in the "
            "CRD only.",
            "delete scaleMetricType; set target.type in autoScaling.metrics instead",
        )


def _auto_scaling(
    isvc: InferenceService,
    component: Component,
    auto_scaling: dict[str, Any],
    rejected: bool,
    who: str,
    ctx: Context,
) -> Iterator[Finding]:
    """autoScaling (KServe >= 0.15): what autoscalerClass hpa ignores or refuses in it."""
    base = component.path
    if "behavior" in auto_scaling:
        yield ctx.finding(
            isvc.manifest,
            (*base, "autoScaling", "behavior"),
            f"{who} sets autoScaling.behavior, which KServe's HPA ignores. KServe's HPA "
            "reconciler ignores it with autoscalerClass hpa: the HPA always gets an empty "
            "behavior (the API-server defaults); only autoscalerClass keda copies it.",
            KEDA_FIX,
        )
    metrics = auto_scaling.get("metrics")
    entries = metrics if isinstance(metrics, list) else []
    usable = [e for e in entries if isinstance(e, dict) and isinstance(e.get("resource"), dict)]
    for index, entry in enumerate(entries):
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind not in ("External", "PodMetric"):
            continue
        if rejected:
            outcome = (
                "KServe's webhook rejects the InferenceService (\"invalid HPA metric source "
                f'type with value [{kind}],valid metric source types are Resource")'
            )
        else:
            outcome = "KServe's HPA reconciler skips it"
            if not usable:
                outcome += f"; with no Resource entry left, {CPU_DEFAULT}"
        yield ctx.finding(
            isvc.manifest,
            (*base, "autoScaling", "metrics", index),
            f"{who} lists {'an' if kind == 'External' else 'a'} {kind} metric, which "
            "autoscalerClass hpa does not take. With "
            f"autoscalerClass hpa, {outcome}; {kind} metrics in autoScaling.metrics are "
            "read only with autoscalerClass keda.",
            KEDA_FIX,
        )
    for field in ("scaleMetric", "scaleTarget"):
        if field in component.data:
            yield ctx.finding(
                isvc.manifest,
                (*base, field),
                f"{who} sets {field} next to autoScaling, which KServe ignores. KServe "
                f"builds the HPA from autoScaling alone and ignores {field}.",
                f"delete {field} and set the metric in autoScaling.metrics",
            )


def _scale_metric(
    isvc: InferenceService, component: Component, rejected: bool, who: str, ctx: Context
) -> Iterator[Finding]:
    """scaleMetric and scaleTarget: a metric KServe's HPA cannot scale on."""
    base = component.path
    metric = component.get("scaleMetric")
    if isinstance(metric, str) and metric not in ("cpu", "memory"):
        if rejected:
            outcome = f'KServe\'s webhook rejects it ("[{metric}] is not a supported metric")'
        else:
            outcome = f"KServe makes no metric of it, so {CPU_DEFAULT}"
        yield ctx.finding(
            isvc.manifest,
            (*base, "scaleMetric"),
            f"{who} sets a scaleMetric KServe's HPA cannot scale on. It sets scaleMetric: "
            f"{metric}, but KServe's HPA in Standard mode scales only on cpu or memory: "
            f"{outcome}.",
            "scaleMetric: cpu   # concurrency and rps need Knative mode; custom metrics "
            f"need {KSERVE_CLASS_ANNOTATION}: keda or external",
        )
    elif metric == "memory" and component.get("scaleTarget") is None:
        yield ctx.finding(
            isvc.manifest,
            (*base, "scaleMetric"),
            f"{who} sets scaleMetric: memory without scaleTarget. KServe makes a memory "
            f"metric only with a target, so {CPU_DEFAULT}.",
            "scaleTarget: 80   # memory utilization in percent of the request",
        )
