"""An HPA or ScaledObject scales a Knative revision that the KPA already scales.

## What it checks
An HPA or KEDA ScaledObject whose ``scaleTargetRef`` is a revision Deployment
(``<configuration>-NNNNN-deployment``, or a Deployment labelled as a Knative revision's) of a
Knative Service or Configuration, or of a KServe InferenceService in Knative mode, when that
Service's revisions use the KPA class: ``kpa.autoscaling.knative.dev``, which is also the
default, and the class KServe sets unless told otherwise. The Knative Service or
InferenceService must be in the input; without it gpulint cannot know the class.

## Why is this bad?
The KPA does not go through an HPA: every 2 seconds it computes the replicas a revision
needs from request concurrency (or rps) and patches ``spec.replicas`` of the revision's
Deployment directly. An HPA on the same Deployment writes ``spec.replicas`` from its own
metric every 15 seconds. The two never agree, so the replica count flaps between their
answers: GPU pods are started and killed over and over, each paying the model load. When the
KPA scales the revision to zero, the HPA stops with ``ScalingActive=False``. (That the
revision's Deployment is replaced by the next revision is a separate problem, GL105.)

## Example
```yaml
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm-00001-deployment}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "70"}
```
with Knative Service ``llm`` carrying no ``autoscaling.knative.dev/class`` annotation.

## Use instead
Delete the HPA and let Knative create one per revision with the HPA class:
```yaml
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
        autoscaling.knative.dev/metric: DCGM_FI_DEV_GPU_UTIL
        autoscaling.knative.dev/target: "70"
```
For a KServe InferenceService put the same annotations on its ``metadata.annotations``.

## References
- knative/serving pkg/reconciler/autoscaling/kpa/scaler.go (patches the Deployment's
  replicas); pkg/autoscaler/scaling/multiscaler.go (2 s tick).
- Knative docs, "Supported autoscaler types".
- kserve pkg/controller/v1alpha1/utils/utils.go ``SetAutoScalingAnnotations`` (KPA unless
  the InferenceService sets a class).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from gpulint.ruleapi import (
    CONFIGURATION_LABEL,
    CUSTOM_METRIC_TYPES,
    HPA,
    HPA_CLASS,
    KNATIVE,
    KNATIVE_CLASS_ANNOTATION,
    METRIC_ANNOTATION,
    RESOURCE_METRIC_TYPES,
    TARGET_ANNOTATION,
    Autoscaler,
    Context,
    Finding,
    Inventory,
    Manifest,
    Path,
    Related,
    RevisionAutoscaling,
    ScaledObject,
    Severity,
    TargetGroup,
    TargetRef,
    format_number,
    is_knative_owned,
    related,
    revision_deployment_parent,
    try_quantity,
)

ID = "GL201"
NAME = "knative-kpa-with-hpa"
SEVERITY = Severity.ERROR
SCOPE = "target-group"
STAGES = ("workload",)

PROMETHEUS_QUERY_ANNOTATION = "autoscaling.knative.dev/prometheus-query"


def check(group: TargetGroup, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    for autoscaler in group.autoscalers:
        ref = autoscaler.ref
        if autoscaler.implicit or ref is None or (ref.kind or "Deployment") != "Deployment":
            continue
        found = _revision_owner(autoscaler.manifest.namespace, ref, inventory)
        if found is None:
            continue
        settings, parent, owner_path, on_isvc, gpu = found
        if not settings.uses_kpa:
            continue
        links: list[Related] = [
            related(
                settings.document,
                settings.autoscaler_class.path or owner_path,
                "autoscaler class",
            )
        ]
        kind = "HPA" if autoscaler.kind == "HorizontalPodAutoscaler" else "ScaledObject"
        metric = settings.metric.value if settings.metric is not None else "concurrency"
        pods = "GPU pods, each loading its model," if gpu else "pods"
        yield ctx.finding(
            autoscaler.manifest,
            ref.path,
            f"{autoscaler.describe()} scales Deployment {ref.name}, which Knative's KPA scales "
            f"too. The Deployment is a revision of {parent}, whose revisions are scaled by the "
            f"{settings.describe_class()}: the KPA patches the Deployment's spec.replicas itself "
            f"every 2 seconds from {metric}, the {kind} sets it from its own metric every 15 "
            f"seconds, so the replica count flaps between the two and {pods} are started and "
            "killed over and over.",
            _fix(autoscaler, inventory, on_isvc),
            related=links,
        )


def _revision_owner(
    namespace: str | None, ref: TargetRef, inventory: Inventory
) -> tuple[RevisionAutoscaling, str, Path, bool, bool] | None:
    """The autoscaling of whatever made the revision Deployment ``ref`` names: (settings,
    description, path of its template or metadata, whether it is an InferenceService,
    whether the pods ask for GPUs)."""
    target = inventory.resolve_target(namespace, ref)
    gpu = bool(target.gpu_requests(inventory.gpu_names))
    parent: str | None = None
    if target.manifest is not None:
        if not is_knative_owned(target.manifest):
            return None
        label = target.manifest.labels.get(CONFIGURATION_LABEL)
        parent = label if isinstance(label, str) and label else None
    else:
        parent = revision_deployment_parent(ref.name)
    if parent is None:
        return None
    for candidate in dict.fromkeys((parent, parent.removesuffix("-default"))):
        ksvc = inventory.knative_service(namespace, candidate)
        if ksvc is not None:
            description = f"Knative {ksvc.manifest.kind} {ksvc.name}"
            if ksvc.template is not None:
                gpu = gpu or bool(ksvc.template.gpu_requests(inventory.gpu_names))
            return ksvc.revision_autoscaling(), description, ksvc.template_path, False, gpu
        found = inventory.isvc_for_component(namespace, candidate)
        if found is not None:
            isvc, component_name = found
            component = isvc.component(component_name)
            if component is None or isvc.mode != KNATIVE:
                return None
            description = (
                f"the {component_name} of InferenceService {isvc.name} (Knative mode: "
                f"{isvc.mode_source(inventory.kserve_mode_source())})"
            )
            gpu = gpu or bool(component.template.gpu_requests(inventory.gpu_names))
            settings = isvc.revision_autoscaling(component)
            return settings, description, ("metadata",), True, gpu
    return None


def _fix(autoscaler: Autoscaler, inventory: Inventory, on_isvc: bool) -> str:
    metric, target, query = _metric_of(autoscaler.manifest, inventory)
    indent = "    " if on_isvc else "        "
    head = (
        "metadata:\n  annotations:\n"
        if on_isvc
        else "spec:\n  template:\n    metadata:\n      annotations:\n"
    )
    lines = [
        f"# delete {autoscaler.describe()}; Knative then creates and owns one HPA per revision",
        head.rstrip("\n"),
        f"{indent}{KNATIVE_CLASS_ANNOTATION}: {HPA_CLASS}",
        f"{indent}{METRIC_ANNOTATION}: {metric}",
        f'{indent}{TARGET_ANNOTATION}: "{target}"',
    ]
    if query is not None:
        lines.append(
            f"{indent}{PROMETHEUS_QUERY_ANNOTATION}: {json.dumps(query)}"
            "   # read by Knative's autoscaler-keda extension"
        )
    return "\n".join(lines)


def _metric_of(manifest: Manifest, inventory: Inventory) -> tuple[str, str, str | None]:
    """Metric, whole-number target and (for KEDA) Prometheus query to hand the HPA class:
    the autoscaler's own when it has them (Knative truncates the target to an integer)."""
    view = inventory.view_of(manifest)
    found = None
    if isinstance(view, HPA):
        found = _hpa_metric(view)
    elif isinstance(view, ScaledObject):
        found = _trigger_metric(view)
    return found or (
        "DCGM_FI_DEV_GPU_UTIL   # the name your prometheus-adapter exposes",
        "70",
        None,
    )


def _hpa_metric(hpa: HPA) -> tuple[str, str, str | None] | None:
    """The HPA's first custom metric with a whole-number target, or its cpu utilization."""
    for metric in hpa.metrics:
        if not metric.name or metric.target is None:
            continue
        if metric.type in CUSTOM_METRIC_TYPES:
            written = metric.target.average_value or metric.target.value
            quantity = try_quantity(written)
            if quantity is not None and quantity.is_integer and quantity.value > 0:
                return metric.name, format_number(quantity.value), None
        elif metric.type in RESOURCE_METRIC_TYPES and metric.name == "cpu":
            utilization = metric.target.average_utilization
            if isinstance(utilization, int) and utilization > 0:
                return "cpu", str(utilization), None
    return None


def _trigger_metric(scaled: ScaledObject) -> tuple[str, str, str | None] | None:
    """The ScaledObject's first prometheus trigger with a whole-number threshold."""
    for trigger in scaled.triggers:
        metadata = trigger.get("metadata")
        if trigger.get("type") != "prometheus" or not isinstance(metadata, dict):
            continue
        query, threshold = metadata.get("query"), metadata.get("threshold")
        quantity = try_quantity(threshold)
        name = metadata.get("metricName")
        if isinstance(query, str) and quantity is not None and quantity.is_integer:
            name = name if isinstance(name, str) and name else scaled.name
            return name, format_number(quantity.value), query
    return None
