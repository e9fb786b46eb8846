"""A GPU InferenceService runs in KServe's Knative mode, scaled on requests, not GPU load.

## What it checks
A ``serving.kserve.io`` InferenceService whose component asks for GPUs and that runs in
Knative mode: the annotation ``serving.kserve.io/deploymentMode: Knative`` (or
``Serverless``), or no annotation at all, since the cluster default applies and is Knative
on a default install (the ``inferenceservice-config`` ConfigMap in the input, or
``kserve.default-deployment-mode`` in ``.gpulint.yaml``, say otherwise). It is not reported
when the component's revisions use Knative's HPA class with a metric other than cpu or
memory, that is, a GPU (or other custom) metric chosen on purpose.

## Why is this bad?
In Knative mode KServe creates a Knative Service and sets the KPA class unless told
otherwise. The KPA scales on in-flight requests per pod (or requests per second), never on
GPU utilization: a few long generations saturate a GPU without reaching the concurrency
target, while bursts of short requests add GPU pods that idle. ``minReplicas: 0`` lets it
scale to zero, and the next request waits for a GPU node, an image pull and a model load.
Many GPU InferenceServices land here without anyone choosing it, because they carry no
``deploymentMode`` annotation.

## Example
```yaml
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llm
  annotations:
    autoscaling.knative.dev/target: "10"     # concurrency target: Knative mode by default
spec:
  predictor:
    model:
      modelFormat: {name: huggingface}
      resources:
        limits: {nvidia.com/gpu: 1}
```

## Use instead
Standard mode with your own GPU HPA (see GL303), decided when the InferenceService is
created (KServe rejects a mode change on update):
```yaml
metadata:
  annotations:
    serving.kserve.io/deploymentMode: Standard      # RawDeployment before KServe 0.16
    serving.kserve.io/autoscalerClass: external     # then an HPA on a GPU metric
```
or keep Knative mode and scale on a GPU metric with the HPA class:
```yaml
metadata:
  annotations:
    autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
    autoscaling.knative.dev/metric: DCGM_FI_DEV_GPU_UTIL
    autoscaling.knative.dev/target: "70"
```

## References
- kserve pkg/apis/serving/v1beta1/configmap.go (``defaultDeploymentMode``);
  config/configmap/inferenceservice.yaml (shipped value ``Serverless``).
- kserve pkg/controller/v1alpha1/utils/utils.go ``SetAutoScalingAnnotations`` (KPA default).
- kserve inference_service_validation.go ``validateDeploymentMode`` (mode is immutable).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA_CLASS,
    KNATIVE,
    KNATIVE_CLASS_ANNOTATION,
    KSERVE_CLASS_ANNOTATION,
    METRIC_ANNOTATION,
    MODE_ANNOTATION,
    STANDARD,
    TARGET_ANNOTATION,
    Context,
    Finding,
    InferenceService,
    Inventory,
    Severity,
    claim_links,
    mode_note,
    mode_spelling,
    related,
)

ID = "GL306"
NAME = "kserve-gpu-on-knative"
SEVERITY = Severity.WARNING
SCOPE = "isvc"
STAGES = ("workload",)

RESOURCE_METRICS = ("cpu", "memory")


def _fix(isvc: InferenceService, inventory: Inventory) -> str:
    version = inventory.settings.kserve_version
    note = mode_note(version, inventory.settings.versions.defaulted("kserve"))
    mode = mode_spelling(STANDARD, version)
    metric = inventory.served_name(GPU_UTIL, isvc.manifest) or GPU_UTIL
    return (
        f"metadata:\n  annotations:\n    {MODE_ANNOTATION}: {mode}   # {note}; "
        "recreate the InferenceService: the mode cannot change on update\n"
        f"    {KSERVE_CLASS_ANNOTATION}: external   # then add your own HPA on a GPU metric\n"
        "# or stay in Knative mode and scale on a GPU metric:\n"
        f"#   {KNATIVE_CLASS_ANNOTATION}: {HPA_CLASS}\n"
        f"#   {METRIC_ANNOTATION}: {metric}\n"
        f'#   {TARGET_ANNOTATION}: "70"'
    )


GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"


def check(isvc: InferenceService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if isvc.mode != KNATIVE:
        return
    configmap = inventory.kserve_mode_source()
    source = isvc.mode_source(configmap)
    for component in isvc.components:
        gpus = component.template.gpu_requests(inventory.gpu_names)
        if not gpus:
            continue
        if not isvc.scaling_range(component).scales_out:
            continue  # 0 to 1 (scale to zero only) or pinned: requests are the right signal
        settings = isvc.revision_autoscaling(component)
        metric = settings.metric.value if settings.metric is not None else None
        if settings.uses_hpa_class and metric not in RESOURCE_METRICS:
            continue  # a custom (GPU) metric chosen on purpose
        if not settings.uses_kpa and not settings.uses_hpa_class:
            continue  # a third-party autoscaler class: gpulint cannot tell what it does
        resources = ", ".join(sorted({g.resource for g in gpus}))
        per_pod = component.template.gpus_per_pod(inventory.gpu_names)
        asks = f"{resources}, {per_pod} per pod" if per_pod else resources
        if settings.uses_kpa:
            how = (
                f"Knative's {settings.describe_class()} scales it on "
                f"{settings.describe_metric()}, never on GPU load"
            )
        else:
            how = f"Knative's HPA class scales it on {settings.describe_metric()}, not on GPU load"
        zero = ""
        minimum = component.get("minReplicas")
        if minimum == 0 and settings.uses_kpa:
            zero = (
                "; minReplicas 0 also scales it to zero when idle, so the next request waits "
                "for a GPU pod to start and load its model"
            )
        links = [related(configmap, ("data", "deploy"), "cluster default")] if configmap else []
        links += claim_links(gpus)
        yield ctx.finding(
            isvc.manifest,
            ("metadata", "annotations", MODE_ANNOTATION),
            f"InferenceService {isvc.name} asks for GPUs in its {component.name}, but runs in "
            f"Knative mode, which does not scale on GPU load. The {component.name} asks for "
            f"{asks} and runs in Knative mode ({source}): {how}{zero}.",
            _fix(isvc, inventory),
            related=links,
        )
