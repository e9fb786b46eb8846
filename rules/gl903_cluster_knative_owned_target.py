"""An autoscaler targets a Deployment that a Knative Revision owns, whatever its name.

## What it checks
In cluster mode (``gpulint lint --cluster``), an HPA or KEDA ScaledObject whose
``scaleTargetRef`` names a Deployment with an ownerReference to a ``serving.knative.dev``
Revision. The ownerReference is the cluster's own record, so this holds for revisions with
custom names (``spec.template.metadata.name``) too. When the Knative Service is known, the
finding says whether the revision is still its latest ready one. Autoscalers Knative itself
created (owned by a PodAutoscaler) are not reported. In files, GL105 reports the same
mistake from the Deployment's name, labels and ownerReferences; in cluster mode it leaves the
Revision-owned ones to this rule.

## Why is this bad?
Knative made that Deployment for one revision and scales it itself (the KPA writes its
replicas through ``/scale``, or the HPA class creates its own HPA), so two autoscalers write
one replica count.
The next change of the Service's template creates a new revision and a new Deployment:
traffic moves there, and the autoscaler keeps scaling a Deployment that serves nothing and is
deleted soon after.

## Example
```yaml
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: summarizer, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: summarizer-v2-deployment}
  maxReplicas: 4
# the Deployment: ownerReferences: [{apiVersion: serving.knative.dev/v1, kind: Revision,
#   name: summarizer-v2, controller: true}]
```

## Use instead
Delete the autoscaler and let Knative scale every revision with its HPA class, on the
Knative Service's ``spec.template.metadata.annotations``:
```yaml
autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
autoscaling.knative.dev/metric: DCGM_FI_DEV_GPU_UTIL
autoscaling.knative.dev/target: "70"
```

## References
- knative/serving pkg/reconciler/revision/resources/deploy.go (``MakeDeployment``: the
  controller ownerReference to the Revision).
- knative/serving pkg/reconciler/autoscaling/kpa/scaler.go (KPA writes the replicas, through
  the ``/scale`` subresource since knative-v1.22.0: knative/serving#16540).
- Knative docs, "Supported autoscaler types".
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    CONFIGURATION_LABEL,
    CUSTOM_METRIC_TYPES,
    HPA,
    HPA_CLASS,
    Autoscaler,
    Context,
    Finding,
    Inventory,
    KnativeService,
    Manifest,
    Related,
    Severity,
    TargetGroup,
    as_dict,
    format_number,
    generated_by,
    owning_revision,
    related,
    revision_deployment_parent,
    try_quantity,
)

ID = "GL903"
NAME = "cluster-knative-owned-target"
SEVERITY = Severity.ERROR
SCOPE = "target-group"
REQUIRES = "cluster"  # in files, GL105 reports the same targets
STAGES = ("workload",)

SERVICE_LABEL = "serving.knative.dev/service"


def check(group: TargetGroup, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    for autoscaler in group.autoscalers:
        ref = autoscaler.ref
        if autoscaler.implicit or ref is None or (ref.kind or "Deployment") != "Deployment":
            continue
        namespace = autoscaler.manifest.namespace
        target = inventory.resolve_target(namespace, ref, autoscaler.manifest).manifest
        revision = owning_revision(target) if target is not None else None
        if target is None or revision is None:
            continue
        names = _service_names(target, revision)
        ksvc = _knative_service(inventory, namespace, names)
        links: list[Related] = [related(target, ("metadata", "ownerReferences"), "owner")]
        parent = ""
        service = f"Knative Service {names[0]}" if names else "the Knative Service"
        where = f"on {service}, spec.template.metadata.annotations"
        if ksvc is not None:
            links.append(related(ksvc.manifest))
            parent = f" of Knative {ksvc.manifest.kind} {ksvc.name}"
            where = (
                f"on Knative {ksvc.manifest.kind} {ksvc.name}, spec.template.metadata.annotations"
            )
            isvc = generated_by(ksvc.manifest, "InferenceService")
            if isvc is not None:
                parent += f" (made by KServe for InferenceService {isvc})"
                where = f"on InferenceService {isvc}, metadata.annotations"
        message = (
            f"{autoscaler.describe()} targets Deployment {ref.name}, which Knative Revision "
            f"{revision}{parent} owns (ownerReferences): Knative scales that Deployment itself, "
            "so two autoscalers write its replicas, and the next template change moves traffic "
            "to a new revision's Deployment and leaves this one scaling nothing"
        )
        latest = _latest_ready(ksvc)
        if latest and latest != revision:
            message += f"; the latest ready revision is already {latest}"
        metric, value = _metric(autoscaler, inventory)
        fix = (
            f"# delete {autoscaler.describe()} and let Knative scale every revision; {where}:\n"
            f"autoscaling.knative.dev/class: {HPA_CLASS}\n"
            f"autoscaling.knative.dev/metric: {metric}\n"
            f'autoscaling.knative.dev/target: "{value}"'
        )
        yield ctx.finding(autoscaler.manifest, (*ref.path, "name"), message, fix, related=links)


def _service_names(deployment: Manifest, revision: str) -> list[str]:
    """The Knative Service or Configuration a revision's Deployment may belong to: from
    Knative's labels, else from the revision's generated name (``<config>-00004``)."""
    candidates = [deployment.labels.get(SERVICE_LABEL), deployment.labels.get(CONFIGURATION_LABEL)]
    candidates.append(revision_deployment_parent(f"{revision}-deployment"))
    return list(dict.fromkeys(c for c in candidates if isinstance(c, str) and c))


def _knative_service(
    inventory: Inventory, namespace: str | None, names: list[str]
) -> KnativeService | None:
    for name in names:
        ksvc = inventory.knative_service(namespace, name)
        if ksvc is not None:
            return ksvc
    return None


def _latest_ready(ksvc: KnativeService | None) -> str | None:
    if ksvc is None:
        return None
    latest = as_dict(ksvc.manifest.data.get("status")).get("latestReadyRevisionName")
    return latest if isinstance(latest, str) and latest else None


def _metric(autoscaler: Autoscaler, inventory: Inventory) -> tuple[str, str]:
    """The autoscaler's own custom metric and whole-number target, to hand Knative's HPA
    class (it truncates the target to an integer)."""
    hpa = inventory.view_of(autoscaler.manifest)
    if isinstance(hpa, HPA):
        for metric in hpa.metrics:
            if metric.type not in CUSTOM_METRIC_TYPES or not metric.name or not metric.target:
                continue
            quantity = try_quantity(metric.target.average_value or metric.target.value)
            if quantity is not None and quantity.is_integer and quantity.value > 0:
                return metric.name, format_number(quantity.value)
    return "DCGM_FI_DEV_GPU_UTIL   # the GPU metric your prometheus-adapter exposes", "70"
