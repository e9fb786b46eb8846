"""An HPA or KEDA ScaledObject scales a GPU workload on CPU or memory only.

## What it checks
An HPA whose target asks for GPUs (``nvidia.com/gpu``, ``nvidia.com/mig-*``, ``amd.com/gpu``,
``gpu.intel.com/*`` ..., or a DRA ResourceClaim for a GPU device class) and whose metrics are
only Resource/ContainerResource ``cpu`` or ``memory``, or which has no ``metrics`` at all.
autoscaling/v1 HPAs (``targetCPUUtilizationPercentage``) count as CPU-only. A KEDA
ScaledObject whose triggers are all ``cpu`` or ``memory`` (whatever their ``metricType``)
is the same pitfall: KEDA's HPA scales on those alone. The target is followed through KServe
(``<isvc>-predictor``) and Knative revision Deployments. An autoscaler whose range cannot scale
out (``minReplicas`` equal to ``maxReplicas``, or at most one replica) is left to GL110.

Pods that get their GPUs through Dynamic Resource Allocation (``resource.k8s.io`` v1, v1beta2
or v1beta1) name a ResourceClaimTemplate or ResourceClaim in ``spec.resourceClaims``; it
counts when it is in the input, in the pod's namespace, and one of its requests (``exactly``
or a ``firstAvailable`` choice) names a GPU device class: ``gpu.nvidia.com`` or
``mig.nvidia.com`` (NVIDIA's DRA driver), or one listed under ``gpu-device-classes`` in
``.gpulint.yaml``. A claim whose object is not in the input (or that does not write its
device class out) still counts when a container uses it (``resources.claims``), and the
message says that its device class could not be told. The finding names the claim's object
as a related location.

## Why is this bad?
GPU inference is bound by the GPU: the CPU can idle while the GPU is saturated and requests
queue, so a CPU HPA never scales out when it should. Worse, model loading bursts the CPU at
start-up, which can trigger runaway scale-up. An HPA without ``metrics`` is defaulted by the
API server to CPU 80% utilization.

## Example
```yaml
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: triton}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: triton}  # asks nvidia.com/gpu
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
```

## Use instead
```yaml
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}   # exposed by prometheus-adapter
      target: {type: AverageValue, averageValue: "70"}
```
Keep the CPU metric next to the GPU one if you like, the HPA takes the largest proposal,
provided every container of the pods (sidecars included) requests CPU, or the pod sets a
pod-level CPU request (Kubernetes 1.34 and later): otherwise the CPU metric has no value, and a
failing metric blocks every scale-down of the HPA (GL118).

## References
- Kubernetes autoscaling/v2 defaults.go: no metrics means CPU 80% utilization.
- Kubernetes HPA docs, "Scaling on multiple metrics".
- kubernetes/kubernetes pkg/controller/podautoscaler/replica_calculator.go
  ``calculatePodRequests`` (sidecars counted since kubernetes/kubernetes#120001, pod-level
  requests since #132430).
- Kubernetes docs, "Dynamic Resource Allocation"; kubernetes/api resource/v1/types.go.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA,
    MIG_ACTIVITY,
    Context,
    Finding,
    GpuRequest,
    Inventory,
    PodLabels,
    ScaledObject,
    Severity,
    claim_links,
    dcgm_labels,
    gpu_pods_metric,
    is_generated,
    prometheus_address,
    related,
)

ID = "GL101"
NAME = "hpa-cpu-on-gpu-workload"
SEVERITY = Severity.ERROR
SCOPE = "autoscaler"
STAGES = ("autoscaler",)

CPU_TRIGGERS = ("cpu", "memory")

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # what a KEDA trigger written for GPU pods queries
# Where KEDA's prometheus triggers query when the repository names no Prometheus of its own:
# the Service prometheus-operator makes for every Prometheus (kube-prometheus-stack's).
DEFAULT_ADDRESS = "http://prometheus-operated.monitoring.svc:9090"


def _metrics_fix(inventory: Inventory, hpa: HPA, gpus: list[GpuRequest]) -> str:
    """A GPU Pods metric under the name the HPA's prometheus-adapter serves it (GL401 judges
    the name the fix writes as it judges any other); on MIG slices, the engine's activity,
    which DCGM reports per instance (GL408)."""
    metric = gpu_pods_metric(inventory, hpa.manifest, any(g.is_mig for g in gpus))
    return (
        "metrics:\n"
        "- type: Pods\n"
        "  pods:\n"
        "    metric:\n"
        f"      name: {metric.name}   # {metric.comment}\n"
        "    target:\n"
        "      type: AverageValue\n"
        f'      averageValue: "{metric.target}"'
    )


def check(view: HPA | ScaledObject, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if view.target_ref is None or not view.scaling_range().scales_out:
        return
    if inventory.judged_at_generator(view.manifest):
        return  # made from settings another object holds: judged there, as written
    if isinstance(view, ScaledObject):
        yield from _check_scaled_object(view, inventory, ctx)
        return
    hpa = view
    assert hpa.target_ref is not None
    target = inventory.resolve_target(hpa.namespace, hpa.target_ref, hpa.manifest)
    gpus = target.gpu_requests(inventory.gpu_names)
    if not gpus:
        return
    if any(not m.is_cpu_or_memory for m in hpa.metrics):
        return
    resources = ", ".join(sorted({g.resource for g in gpus}))
    owner = target.owner or target.manifest
    links = [related(owner, ())] if owner is not None else []
    links += claim_links(gpus)
    if hpa.defaults_to_cpu:
        path: tuple[str | int, ...] = hpa.spec_path
        what = "has no metrics, so it scales on CPU only"
        why = "The API server defaults an HPA without metrics to CPU 80% utilization, and CPU"
    else:
        path = hpa.metrics[0].path
        names = sorted({m.name or "?" for m in hpa.metrics})
        what = f"scales only on {' and '.join(names)}"
        why = "CPU"
    via = ""
    if target.via.startswith("kserve"):
        via = f" (generated by InferenceService {target.owner.name})" if target.owner else ""
    elif target.via == "knative-revision" and target.owner is not None:
        via = f" (a revision of Knative {target.owner.kind} {target.owner.name})"
    elif target.via == "generated" and target.owner is not None:
        via = f" (made for {target.owner.kind} {target.owner.name})"
    yield ctx.finding(
        hpa.manifest,
        path,
        f"{hpa.title} {what}, but its target {target.describe()} asks for GPUs. "
        f"{why} load does not follow GPU load, so it will not scale when the GPU saturates "
        f"({target.describe()}{via} asks for {resources}).",
        _metrics_fix(inventory, hpa, gpus),
        related=links,
    )


def _check_scaled_object(
    scaled: ScaledObject, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    if is_generated(scaled.manifest) or not scaled.triggers:
        return
    if not all(t.get("type") in CPU_TRIGGERS for t in scaled.triggers):
        return
    assert scaled.target_ref is not None
    target = inventory.resolve_target(scaled.namespace, scaled.target_ref, scaled.manifest)
    gpus = target.gpu_requests(inventory.gpu_names)
    if not gpus:
        return
    resources = ", ".join(sorted({g.resource for g in gpus}))
    owner = target.owner or target.manifest
    names = " and ".join(sorted({str(t.get("type")) for t in scaled.triggers}))
    namespace = scaled.namespace or "<namespace>"
    address = prometheus_address(inventory, scaled.manifest)
    labels = dcgm_labels(inventory, scaled.manifest)
    note = ""
    if labels is None or labels.pod is None:
        # dcgm-exporter scraped as its ServiceMonitor does by default (honorLabels: false)
        labels = PodLabels("exported_namespace", "exported_pod")
        note = "   # namespace/pod with honorLabels: true"
    # DCGM reports no GPU utilization per MIG slice: the engine's activity instead (GL408)
    series, threshold = (MIG_ACTIVITY, "0.7") if any(g.is_mig for g in gpus) else (GPU_UTIL, "70")
    fix = (
        "triggers:\n"
        "- type: prometheus\n"
        "  metadata:\n"
        f"    serverAddress: {address or DEFAULT_ADDRESS}\n"
        f'    query: avg({series}{{{labels.namespace}="{namespace}",'
        f'{labels.pod}=~"{target.key[2]}-.*"}}){note}\n'
        f'    threshold: "{threshold}"'
    )
    yield ctx.finding(
        scaled.manifest,
        (*scaled.triggers_path, 0),
        f"{scaled.title} scales {target.describe()}, which asks for GPUs, "
        f"on {names} triggers only. KEDA's HPA follows CPU or memory load, which does not "
        f"follow GPU load, so it will not scale when the GPU saturates ({resources}).",
        fix,
        related=([related(owner, ())] if owner is not None else []) + claim_links(gpus),
    )
