"""An autoscaler targets the Deployment of one Knative revision.

## What it checks
An HPA or KEDA ScaledObject whose ``scaleTargetRef`` is a Deployment that Knative made for a
revision:

* its name has Knative's revision form ``<configuration>-NNNNN-deployment`` (for example
  ``hello-00001-deployment``, or ``<isvc>-predictor-00001-deployment`` for a KServe
  InferenceService in Knative mode), whether or not the Knative Service is in the input;
* or the Deployment is in the input and carries the ``serving.knative.dev/revision`` label or
  an ownerReference to a ``serving.knative.dev`` Revision, whatever its name.

Autoscalers that Knative itself created (owned by a PodAutoscaler) are not reported. In
cluster mode, targets whose Revision ownerReference the cluster confirms are reported by
GL903 instead, with what the cluster knows about the revision.

## Why is this bad?
Each change of the revision template creates a new revision and a new Deployment
(``-00002-deployment``); traffic moves there and the old Deployment is scaled to zero and
eventually deleted, so the autoscaler keeps scaling a Deployment that serves nothing. While the
revision does serve, Knative's own autoscaler (KPA by default) writes the same Deployment's
replicas, and the two overwrite each other.

## Example
```yaml
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm-predictor-00001-deployment}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "70"}
```

## Use instead
Delete the HPA and let Knative scale every revision with its HPA class, on the revision
template's annotations (for KServe, on the InferenceService's annotations):
```yaml
autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
autoscaling.knative.dev/metric: DCGM_FI_DEV_GPU_UTIL   # the name prometheus-adapter exposes
autoscaling.knative.dev/target: "70"
```

## References
- knative/serving pkg/reconciler/configuration/resources/revision.go (``<configuration>-%05d``)
  and pkg/reconciler/revision/resources/names/names.go (``<revision>-deployment``).
- knative/serving pkg/reconciler/autoscaling/kpa/scaler.go: KPA writes the revision
  Deployment's replicas (through ``/scale`` since knative-v1.22.0, knative/serving#16540).
- Knative docs, "Supported autoscaler types" (KPA and HPA classes).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA_CLASS,
    MIN_SCALE,
    REVISION_LABEL,
    Autoscaler,
    Context,
    Finding,
    InferenceService,
    Inventory,
    KnativeService,
    Manifest,
    Related,
    ResolvedTarget,
    Severity,
    TargetGroup,
    hpa_class_fix,
    is_knative_owned,
    owning_revision,
    related,
    revision_autoscalers,
    revision_deployment_parent,
    revision_metric,
)

ID = "GL105"
NAME = "hpa-targets-revision"
SEVERITY = Severity.ERROR
SCOPE = "target-group"
STAGES = ("workload",)

KSERVE_COMPONENT_SUFFIXES = ("-predictor", "-transformer", "-explainer")
# Labels Knative puts on a revision's Deployment (pkg/apis/serving/register.go).
SERVICE_LABEL = "serving.knative.dev/service"
CONFIGURATION_LABEL = "serving.knative.dev/configuration"


def check(group: TargetGroup, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    for autoscaler in group.autoscalers:
        finding = _check_one(autoscaler, inventory, ctx)
        if finding is not None:
            yield finding


def _revision_of(target: ResolvedTarget) -> str | None:
    """The revision name behind the Deployment, or None if it is not a revision's."""
    manifest = target.manifest
    if manifest is not None:
        if not is_knative_owned(manifest):
            return None
        label = manifest.labels.get(REVISION_LABEL)
        if isinstance(label, str) and label:
            return label
        return owning_revision(manifest) or manifest.name.removesuffix("-deployment")
    name = target.ref.name
    if revision_deployment_parent(name) is None:
        return None
    return name.removesuffix("-deployment")


def _configuration_of(target: ResolvedTarget, revision: str) -> str | None:
    """The Knative Service (or Configuration) the revision belongs to, when it can be told."""
    from_name = revision_deployment_parent(f"{revision}-deployment")
    if from_name is not None:
        return from_name
    if target.manifest is not None:
        for label in (SERVICE_LABEL, CONFIGURATION_LABEL):
            value = target.manifest.labels.get(label)
            if isinstance(value, str) and value:
                return value
    return None


def _check_one(autoscaler: Autoscaler, inventory: Inventory, ctx: Context) -> Finding | None:
    ref = autoscaler.ref
    if autoscaler.implicit or ref is None or (ref.kind or "Deployment") != "Deployment":
        return None
    target = inventory.resolve_target(autoscaler.manifest.namespace, ref, autoscaler.manifest)
    revision = _revision_of(target)
    if revision is None:
        return None
    if (
        inventory.cluster is not None
        and target.manifest is not None
        and owning_revision(target.manifest) is not None
    ):
        return None  # GL903 reports it in cluster mode, with what the cluster knows
    configuration = _configuration_of(target, revision)
    owner = target.owner
    links: list[Related] = []
    if target.manifest is not None:
        links.append(related(target.manifest, ("metadata",), "revision Deployment"))
    if owner is not None:
        links.append(related(owner))
    isvc = inventory.inference_service_of(owner) if owner is not None else None
    view = inventory.view_of(owner) if isinstance(owner, Manifest) else None
    ksvc = view if isinstance(view, KnativeService) else None
    parent, fight, where = _generator(ksvc, isvc, configuration)
    message = (
        f"{autoscaler.describe()} targets Deployment {ref.name} of Knative revision "
        f"{revision}. Knative created it for {parent}: the next change of the revision template "
        "makes a new revision and Deployment and leaves this autoscaler on one that is scaled "
        f"to zero and deleted, and while it serves, {fight}."
    )
    namespace = autoscaler.manifest.namespace
    fighting = (
        revision_autoscalers(inventory, namespace, configuration, autoscaler)
        if configuration is not None
        else [autoscaler]
    )
    written = ksvc.manifest if ksvc is not None else (isvc.manifest if isvc is not None else None)
    fix = hpa_class_fix(
        where,
        ksvc is None and isvc is not None,
        revision_metric(inventory, [a.manifest for a in fighting], written or autoscaler.manifest),
        [a.describe() for a in fighting],
        ksvc is not None and not any(key in ksvc.template_annotations for key in MIN_SCALE),
    )
    return ctx.finding(
        autoscaler.manifest,
        (*ref.path, "name"),
        message,
        fix,
        related=links,
        deletes=[a.manifest for a in fighting],
        writes=[written] if written is not None else [],
        fix_at_path=False,
    )


def _generator(
    ksvc: KnativeService | None, isvc: InferenceService | None, configuration: str | None
) -> tuple[str, str, str]:
    """What made the revision, how its autoscaler fights the user's, and the object whose
    revisions Knative's autoscaling is set on instead."""
    if ksvc is not None:
        parent = f"Knative {ksvc.manifest.kind} {ksvc.name}"
        if ksvc.autoscaler_class == HPA_CLASS:
            fight = (
                "Knative's own HPA for the revision (class hpa.autoscaling.knative.dev) claims "
                "it too, so Kubernetes >= 1.26 stops both (AmbiguousSelector)"
            )
        elif ksvc.uses_kpa:
            fight = "Knative's KPA writes its replicas too, so the two overwrite each other"
        else:
            fight = (
                f"Knative's autoscaler (class {ksvc.autoscaler_class}) scales it too, so the "
                "two overwrite each other"
            )
        where = parent
    elif isvc is not None:
        parent = f"InferenceService {isvc.name} (KServe Knative mode)"
        fight = "Knative's autoscaler writes its replicas too, so the two overwrite each other"
        where = f"InferenceService {isvc.name}"
    elif configuration is None:
        parent = "its Knative Service"
        fight = "Knative's autoscaler writes its replicas too, so the two overwrite each other"
        where = "the Knative Service"
    else:
        generator = (
            f"Knative Service {configuration}"
            if not configuration.endswith(KSERVE_COMPONENT_SUFFIXES)
            else f"Knative Service {configuration} (KServe's name for an InferenceService "
            "component in Knative mode)"
        )
        parent = generator
        fight = "Knative's autoscaler writes its replicas too, so the two overwrite each other"
        where = f"Knative Service {configuration}"
        if configuration.endswith(KSERVE_COMPONENT_SUFFIXES):
            where += " (for KServe, the InferenceService's metadata.annotations)"
    return parent, fight, where
