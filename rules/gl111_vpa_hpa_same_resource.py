"""A VerticalPodAutoscaler resizes CPU or memory that an HPA or KEDA also scales the workload on.

## What it checks
Each ``autoscaling.k8s.io`` VerticalPodAutoscaler whose ``updatePolicy.updateMode`` changes
running pods (``Recreate``, the default when none is written; ``Auto``; ``InPlaceOrRecreate``;
``InPlace``), against the autoscalers that set the replicas of the workload its
``targetRef`` names: a HorizontalPodAutoscaler with a ``Resource`` or ``ContainerResource``
metric on ``cpu`` or ``memory`` (or no metrics, which the API server defaults to CPU 80%),
a KEDA ScaledObject with a ``cpu`` or ``memory`` trigger, and the HPA KServe makes for a
Standard-mode InferenceService component. It reports when the VPA sets that resource on
the container the metric reads: VPA sets ``cpu`` and ``memory`` unless
``resourcePolicy.containerPolicies`` narrows ``controlledResources`` or sets ``mode: "Off"``
for the container (its own policy, else the ``"*"`` one). ``Off`` and ``Initial`` are not
reported: they never change a running pod.

## Why is this bad?
The HPA computes utilization as usage divided by the requests the VPA keeps moving: when
load rises the VPA raises the requests, the utilization the HPA sees falls back, and the
HPA does not add replicas (or removes them); the two controllers answer the same signal
and undo each other. With an ``AverageValue`` target they still follow the same usage: the
VPA raises the requests as the HPA adds replicas, and lowers them once the load spreads.
The VPA project documents it as a known limitation: VPA "should not be used with the
Horizontal Pod Autoscaler (HPA) on the same resource metric (CPU or memory)". Using the VPA
for the resource the HPA does not read, or scaling the HPA on a custom metric (for a GPU
workload, a GPU series), is what the project supports.

## Example
```yaml
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {name: llm}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  updatePolicy: {updateMode: Recreate}      # sets cpu and memory
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
```

## Use instead
```yaml
  resourcePolicy:
    containerPolicies:
    - containerName: '*'
      controlledResources: [memory]         # cpu is the HPA's
```
or scale the HPA on a GPU metric (GL101) and keep the VPA for CPU and memory.

## References
- kubernetes/autoscaler vertical-pod-autoscaler/docs/known-limitations.md (VPA with HPA on
  the same resource metric).
- kubernetes/autoscaler vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1/types.go
  (``UpdateMode``: default ``Recreate``, ``Auto`` equal to ``Recreate``;
  ``ContainerResourcePolicy.controlledResources`` default ``[cpu, memory]``).
- Kubernetes autoscaling/v2 defaults.go (an HPA without metrics: CPU 80% utilization).
- KEDA scalers/cpu.md and scalers/memory.md (the triggers become Resource metrics of KEDA's
  HPA).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from gpulint.ruleapi import (
    HPA,
    VPA,
    Autoscaler,
    Context,
    Document,
    Finding,
    InferenceService,
    Inventory,
    Path,
    ScaledObject,
    Severity,
    abbreviated,
    as_dict,
    generated_hpa_metrics,
    related,
)

ID = "GL111"
NAME = "vpa-hpa-same-resource"
SEVERITY = Severity.WARNING
SCOPE = "vpa"


class _Reads(NamedTuple):
    """One cpu or memory signal an autoscaler scales on."""

    resource: str
    container: str | None  # a ContainerResource metric's container; None: the whole pod
    document: Document
    path: Path
    said: str  # "cpu metric 0"
    utilization: bool  # a target relative to the requests (Utilization), not an average value


def check(vpa: VPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if not vpa.updates_running_pods or vpa.target_ref is None:
        return
    target = inventory.resolve_target(vpa.namespace, vpa.target_ref, vpa.manifest)
    resized = vpa.resized_in(target.templates)
    if not resized:
        resized = {"*": vpa.resized("*")}
    group = inventory.target_groups().get(target.key)
    for autoscaler in group.autoscalers if group is not None else []:
        clashes = [
            reads
            for reads in _signals(autoscaler, inventory)
            if any(
                reads.resource in resources
                for container, resources in resized.items()
                if reads.container in (None, container) or container == "*"
            )
        ]
        if clashes:
            yield _finding(vpa, autoscaler, target.describe(), clashes, ctx)


def _signals(autoscaler: Autoscaler, inventory: Inventory) -> list[_Reads]:
    view = inventory.view_of(autoscaler.manifest)
    if isinstance(view, HPA):
        return _hpa_signals(view)
    if isinstance(view, ScaledObject):
        return _keda_signals(view)
    if isinstance(view, InferenceService):
        return _kserve_signals(view, autoscaler.target[2])
    return []


def _hpa_signals(hpa: HPA) -> list[_Reads]:
    found = []
    for metric in hpa.metrics:
        if metric.is_cpu_or_memory and metric.name is not None:
            container = as_dict(hpa.manifest.get((*metric.path, "containerResource"))).get(
                "container"
            )
            target = metric.target
            relative = target is not None and (
                target.type == "Utilization" or target.average_utilization is not None
            )
            found.append(
                _Reads(
                    metric.name,
                    container if isinstance(container, str) else None,
                    hpa.manifest,
                    metric.name_path,
                    f"{metric.name} metric {metric.index}",
                    relative,
                )
            )
    if hpa.defaults_to_cpu:
        said = "CPU 80% utilization (no metrics: the default)"
        found.append(_Reads("cpu", None, hpa.manifest, ("spec",), said, True))
    return found


def _keda_signals(scaled_object: ScaledObject) -> list[_Reads]:
    found = []
    for index, trigger in enumerate(scaled_object.spec.get("triggers") or []):
        kind = as_dict(trigger).get("type")
        if kind not in ("cpu", "memory"):
            continue
        metadata = as_dict(as_dict(trigger).get("metadata"))
        container = metadata.get("containerName")
        # metricType, or metadata.type as KEDA read it before 2.18 (cpu_memory_scaler.go)
        metric_type = as_dict(trigger).get("metricType") or metadata.get("type")
        found.append(
            _Reads(
                str(kind),
                container if isinstance(container, str) else None,
                scaled_object.manifest,
                ("spec", "triggers", index, "type"),
                f"{kind} trigger {index}",
                metric_type == "Utilization",
            )
        )
    return found


def _kserve_signals(isvc: InferenceService, workload: str) -> list[_Reads]:
    """The cpu/memory metrics of the HPA KServe makes for the component named ``workload``."""
    found = []
    for component in isvc.components:
        if isvc.component_name(component.name) != workload:
            continue
        for generated in generated_hpa_metrics(component):
            resource = generated.description.split(" ", 1)[0].lower()
            if resource in ("cpu", "memory"):
                found.append(
                    _Reads(
                        resource,
                        None,
                        isvc.manifest,
                        generated.path or component.path,
                        generated.description,
                        "utilization" in generated.description,
                    )
                )
    return found


def _why(clashes: list[_Reads]) -> str:
    if any(c.utilization for c in clashes):
        return (
            "The HPA divides usage by the requests the VPA keeps raising, so the utilization "
            "it sees falls back as the load grows and the two controllers undo each other: "
            "the VPA project says not to use them on the same resource."
        )
    return (
        "Both follow the same usage: as the load grows the VPA raises the requests while the "
        "HPA adds replicas, and once the load spreads over them the VPA lowers the requests "
        "again, each undoing what the other decided: the VPA project says not to use them on "
        "the same resource."
    )


def _kind_word(autoscaler: Autoscaler) -> str:
    if autoscaler.kind == "KServe":
        return "the HPA of InferenceService"
    return "ScaledObject" if autoscaler.kind == "ScaledObject" else "HorizontalPodAutoscaler"


def _finding(
    vpa: VPA, autoscaler: Autoscaler, workload: str, clashes: list[_Reads], ctx: Context
) -> Finding:
    resources = sorted({c.resource for c in clashes})
    names = " and ".join("CPU" if r == "cpu" else r for r in resources)
    signals = ", ".join(c.said for c in clashes)
    message = (
        f"VerticalPodAutoscaler {abbreviated(vpa.name, 40)} resizes the {names} that "
        f"{_kind_word(autoscaler)} {abbreviated(autoscaler.manifest.name, 40)} scales on. "
        f"{vpa.describe()} ({vpa.describe_mode()}) sets the {names} requests of {workload}, "
        f"which {autoscaler.describe()} scales on ({signals}). {_why(clashes)}"
    )
    left = [r for r in ("cpu", "memory") if r not in resources]
    if left:
        fix = (
            "resourcePolicy:\n"
            "  containerPolicies:\n"
            "  - containerName: '*'\n"
            f"    controlledResources: [{left[0]}]   # {', '.join(resources)}: the HPA's\n"
            "# or scale the HPA on a custom metric (a GPU series for a GPU workload)"
        )
    else:
        fix = (
            'updatePolicy:\n  updateMode: "Off"   # recommendations only: the HPA scales on both '
            "cpu and memory\n# or scale the HPA on a custom metric (a GPU series for a GPU "
            "workload)"
        )
    return ctx.finding(
        vpa.manifest,
        vpa.mode_path,
        message,
        fix,
        related=[related(c.document, c.path, "autoscaler metric") for c in clashes],
    )
