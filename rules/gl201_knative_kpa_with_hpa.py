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
needs from request concurrency (or rps) and writes the replicas of the revision's
Deployment directly (through the ``/scale`` subresource since knative 1.22, a JSON patch of
``spec.replicas`` before). An HPA on the same Deployment writes ``spec.replicas`` from its own
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
- knative/serving pkg/reconciler/autoscaling/kpa/scaler.go (``applyScale``: the Deployment's
  replicas, through ``/scale`` since knative/serving#16540, knative-v1.22.0);
  pkg/autoscaler/scaling/multiscaler.go (2 s tick).
- Knative docs, "Supported autoscaler types".
- kserve pkg/controller/v1alpha1/utils/utils.go ``SetAutoScalingAnnotations`` (KPA unless
  the InferenceService sets a class).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from gpulint.ruleapi import (
    CONFIGURATION_LABEL,
    KNATIVE,
    MIN_SCALE,
    Context,
    Finding,
    Inventory,
    Manifest,
    Path,
    Related,
    RevisionAutoscaling,
    Severity,
    TargetGroup,
    TargetRef,
    hpa_class_fix,
    is_knative_owned,
    related,
    revision_autoscalers,
    revision_deployment_parent,
    revision_metric,
)

ID = "GL201"
NAME = "knative-kpa-with-hpa"
SEVERITY = Severity.ERROR
SCOPE = "target-group"
STAGES = ("workload",)


def check(group: TargetGroup, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    for autoscaler in group.autoscalers:
        ref = autoscaler.ref
        if autoscaler.implicit or ref is None or (ref.kind or "Deployment") != "Deployment":
            continue
        found = _revision_owner(autoscaler.manifest.namespace, ref, inventory)
        if found is None:
            continue
        if not found.settings.uses_kpa:
            continue
        settings = found.settings
        links: list[Related] = [
            related(
                settings.document,
                settings.autoscaler_class.path or found.path,
                "autoscaler class",
            )
        ]
        kind = "HPA" if autoscaler.kind == "HorizontalPodAutoscaler" else "ScaledObject"
        metric = settings.metric.value if settings.metric is not None else "concurrency"
        pods = "GPU pods, each loading its model," if found.gpu else "pods"
        fighting = revision_autoscalers(
            inventory, autoscaler.manifest.namespace, found.configuration, autoscaler
        )
        yield ctx.finding(
            autoscaler.manifest,
            ref.path,
            f"{autoscaler.describe()} scales Deployment {ref.name}, which Knative's KPA scales "
            f"too. The Deployment is a revision of {found.description}, whose revisions are "
            f"scaled by the {settings.describe_class()}: the KPA writes the Deployment's "
            f"replicas itself every 2 seconds from {metric}, the {kind} sets them from its "
            f"own metric every 15 seconds, so the replica count flaps between the two and "
            f"{pods} are started and killed over and over.",
            hpa_class_fix(
                found.owner_name,
                found.on_isvc,
                revision_metric(inventory, [a.manifest for a in fighting], found.owner),
                [a.describe() for a in fighting],
                found.min_scale,
            ),
            related=links,
            deletes=[a.manifest for a in fighting],
            writes=[found.owner],
            fix_at_path=False,
        )


class _Owner(NamedTuple):
    """What made a revision Deployment, and how its revisions are autoscaled."""

    settings: RevisionAutoscaling
    description: str  # for messages: Knative Service llm, the predictor of ...
    path: Path  # its revision template, or metadata
    owner: Manifest  # where the autoscaling annotations are written
    owner_name: str  # Knative Service llm, InferenceService llm
    on_isvc: bool
    configuration: str  # the name its revision Deployments start with
    gpu: bool  # the pods ask for GPUs
    min_scale: bool  # no min-scale is written (the fix says the HPA class keeps one pod)


def _revision_owner(namespace: str | None, ref: TargetRef, inventory: Inventory) -> _Owner | None:
    """The autoscaling of whatever made the revision Deployment ``ref`` names."""
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
            return _Owner(
                ksvc.revision_autoscaling(),
                description,
                ksvc.template_path,
                ksvc.manifest,
                description,
                False,
                candidate,
                gpu,
                not any(key in ksvc.template_annotations for key in MIN_SCALE),
            )
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
            return _Owner(
                isvc.revision_autoscaling(component),
                description,
                ("metadata",),
                isvc.manifest,
                f"InferenceService {isvc.name}",
                True,
                candidate,
                gpu,
                False,
            )
    return None
