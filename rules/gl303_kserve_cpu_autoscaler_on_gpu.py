"""KServe itself puts a CPU (or memory) HPA on a GPU InferenceService in Standard mode.

## What it checks
A ``serving.kserve.io`` InferenceService in Standard mode (the annotation
``serving.kserve.io/deploymentMode: Standard`` or ``RawDeployment``, or a cluster default of
Standard) whose component asks for GPUs while its autoscaler class is ``hpa``: the
annotation ``serving.kserve.io/autoscalerClass: hpa``, or no class at all, since ``hpa`` is
the default. KServe's HPA reconciler only ever makes Resource metrics: ``scaleMetric`` cpu
(target ``scaleTarget``, 80% by default) or memory, or the cpu/memory entries of
``autoScaling.metrics``. Multi-node predictors (``workerSpec``) are not checked: KServe
accepts only ``autoscalerClass: none`` for them.

## Why is this bad?
In Standard mode KServe creates an HPA named like the Deployment (``<isvc>-predictor``) on
CPU 80% utilization unless told otherwise. A GPU model server's CPU idles while the GPU is
saturated and requests queue, so the HPA never scales out when it should, and a CPU burst
during model loading can scale out for nothing. Adding your own GPU HPA next to KServe's
does not help: two HPAs on one Deployment are both disabled (``AmbiguousSelector``, since
Kubernetes 1.26). The legacy annotations ``serving.kserve.io/metrics`` and
``serving.kserve.io/targetUtilizationPercentage`` change nothing: KServe 0.15 and later do
not read them.

## Example
```yaml
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llm
  annotations:
    serving.kserve.io/deploymentMode: Standard
spec:
  predictor:
    maxReplicas: 4
    model:
      modelFormat: {name: huggingface}
      resources:
        limits: {nvidia.com/gpu: 1}
```

## Use instead
Tell KServe to stay out and bring your own GPU HPA (named differently from the Deployment:
KServe rewrites an HPA named ``<isvc>-predictor``):
```yaml
metadata:
  annotations:
    serving.kserve.io/deploymentMode: Standard
    serving.kserve.io/autoscalerClass: external
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm-predictor-gpu}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm-predictor}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "70"}
```
Or use ``serving.kserve.io/autoscalerClass: keda`` with an ``External`` metric of backend
``prometheus`` in ``spec.predictor.autoScaling.metrics``.

## References
- kserve pkg/controller/v1beta1/inferenceservice/reconcilers/hpa/hpa_reconciler.go
  (``getHPAMetrics``, ``createHPA``, ``shouldDeleteHPA``); pkg/constants/constants.go
  (``DefaultAutoscalerClass = hpa``, ``DefaultCPUUtilization = 80``).
- KServe docs, "Autoscaling with HPA": ``external`` and ``none`` classes.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    EXTERNAL_LINE,
    LEGACY_AUTOSCALING_ANNOTATIONS,
    Component,
    Context,
    Finding,
    InferenceService,
    Inventory,
    Path,
    Severity,
    claim_links,
    external_class_fix,
    generated_hpa_metrics,
    kserve_gpu_hpa,
    own_autoscaler,
)

ID = "GL303"
NAME = "kserve-cpu-autoscaler-on-gpu"
SEVERITY = Severity.ERROR
SCOPE = "isvc"
STAGES = ("workload",)


def check(isvc: InferenceService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    source = isvc.mode_source(inventory.kserve_mode_source())
    for component, class_path in isvc.components_under_kserve_hpa():
        gpus = component.template.gpu_requests(inventory.gpu_names)
        if not gpus:
            continue
        scaling = isvc.scaling_range(component)
        if not scaling.scales_out and "maxReplicas" in component.data:
            continue  # pinned on purpose: KServe's HPA neither scales out wrongly nor too late
        resources = ", ".join(sorted({g.resource for g in gpus}))
        per_pod = component.template.gpus_per_pod(inventory.gpu_names)
        asks = f"{resources}, {per_pod} per pod" if per_pod else resources
        metrics = generated_hpa_metrics(component)
        path: Path = next(
            (m.path for m in metrics if m.path is not None), class_path or component.path
        )
        hpa_name = isvc.component_name(component.name)
        chosen = "annotation" if class_path is not None else "the default"
        yield ctx.finding(
            isvc.manifest,
            path,
            f"KServe scales the GPU {component.name} of InferenceService {isvc.name} on "
            f"{' and '.join(m.description for m in metrics)}. It runs in Standard mode "
            f"({source}) with autoscalerClass hpa ({chosen}), so KServe creates HPA {hpa_name} "
            f"for its {component.name}, which asks for GPUs ({asks}); CPU and memory do not "
            f"follow GPU load, so it will not scale out when the GPU saturates"
            f"{_legacy_note(isvc)}.",
            _fix(isvc, component, inventory),
            related=claim_links(gpus),
            fix_at_path=False,
        )


def _legacy_note(isvc: InferenceService) -> str:
    legacy = [key for key in LEGACY_AUTOSCALING_ANNOTATIONS if key in isvc.manifest.annotations]
    if not legacy:
        return ""
    if len(legacy) == 1:
        return f" ({legacy[0]} changes nothing: KServe 0.15 and later do not read it)"
    return f" ({' and '.join(legacy)} change nothing: KServe 0.15 and later do not read them)"


def _fix(isvc: InferenceService, component: Component, inventory: Inventory) -> str:
    if own_autoscaler(isvc, component, inventory):
        # an autoscaler of the user's scales the component already (GL103 says the same)
        return external_class_fix(isvc.name)
    return f"metadata:\n  annotations:\n    {EXTERNAL_LINE}\n---\n" + kserve_gpu_hpa(
        isvc, component, inventory
    )
