"""A GPU NIMService on the KServe platform runs in Knative mode, scaled on requests.

## What it checks
A NIMService (``apps.nvidia.com/v1alpha1``) with ``inferencePlatform: kserve`` whose model
server asks for GPUs, when the InferenceService the NIM operator makes for it runs in
KServe's Knative mode (``serving.kserve.io/deploymentMode: Knative`` or ``Serverless`` in
``spec.annotations``, or no mode there and a cluster default of Knative, the default of a
KServe install; ``kserve.default-deployment-mode`` in ``.gpulint.yaml`` says otherwise), and
its ``spec.annotations`` leave the revisions on Knative's KPA (the default class) or put them
on the HPA class with ``cpu`` or ``memory``. Revisions held at one replica
(``autoscaling.knative.dev/max-scale: "1"``, or ``min-scale`` equal to ``max-scale``) are
not reported.

## Why is this bad?
The NIM operator copies ``spec.annotations`` onto the InferenceService and, in Knative mode,
hands KServe neither ``spec.scale`` nor anything else about scaling: KServe makes a Knative
Service whose revisions the KPA scales on requests in flight per pod (or requests per
second), never on GPU load. A few long generations saturate a GPU without reaching the
concurrency target, while bursts of short requests add GPU pods that idle; NVIDIA's own
sample of this shape runs a GPU NIM on a concurrency target of 10.

## Example
```yaml
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: llama}
spec:
  inferencePlatform: kserve
  annotations:
    autoscaling.knative.dev/metric: concurrency
    autoscaling.knative.dev/target: "10"
  resources:
    limits: {nvidia.com/gpu: 1}
```

## Use instead
Knative's HPA class on a GPU metric, in ``spec.annotations``:
```yaml
spec:
  annotations:
    autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
    autoscaling.knative.dev/metric: DCGM_FI_DEV_GPU_UTIL
    autoscaling.knative.dev/target: "70"
```
or the standalone platform, with the HPA of ``spec.scale.hpa`` on a GPU or serving metric.

## References
- NVIDIA/k8s-nim-operator@f63f74d api/apps/v1alpha1/nimservice_types.go
  (``GetInferenceServiceParams``: scaling handed to KServe in Standard mode only;
  ``GetNIMServiceAnnotations``); internal/utils/kserve.go (``GetKServeDeploymentMode``);
  config/samples/nim/serving/kserve/knative/llm.yaml.
- knative/serving pkg/apis/autoscaling/register.go (the class, metric and target
  annotations; KPA and concurrency by default).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA_CLASS,
    KNATIVE,
    KNATIVE_CLASS_ANNOTATION,
    METRIC_ANNOTATION,
    MODE_ANNOTATION,
    MODE_VALUES,
    TARGET_ANNOTATION,
    Context,
    Finding,
    Inventory,
    NIMService,
    Path,
    Severity,
    claim_links,
    related,
)

ID = "GL134"
NAME = "nimservice-kserve-gpu-on-knative"
SEVERITY = Severity.WARNING
SCOPE = "nimservice"
STAGES = ("workload",)

# Knative's defaults (knative/serving pkg/apis/autoscaling: the KPA class, the concurrency
# metric) and the bounds of a revision's replicas.
KPA_CLASS = "kpa.autoscaling.knative.dev"
MIN_SCALE = "autoscaling.knative.dev/min-scale"
MAX_SCALE = "autoscaling.knative.dev/max-scale"
RESOURCE_METRICS = ("cpu", "memory")
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"


def check(nim: NIMService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if not nim.on_kserve:
        return
    annotations = nim.annotations
    written = annotations.get(MODE_ANNOTATION)
    if isinstance(written, str) and written in MODE_VALUES:
        mode, source = MODE_VALUES[written], f"spec.annotations {MODE_ANNOTATION}: {written}"
    else:
        mode, source = inventory.view_context().kserve_default_mode, "cluster default"
    if mode != KNATIVE:
        return
    gpus = [g for t in nim.pod_templates() for g in t.gpu_requests(inventory.gpu_names)]
    if not gpus or _pinned(nim):
        return
    chosen = annotations.get(KNATIVE_CLASS_ANNOTATION)
    autoscaler_class = chosen if isinstance(chosen, str) and chosen else KPA_CLASS
    metric = annotations.get(METRIC_ANNOTATION)
    if autoscaler_class == HPA_CLASS and metric not in (None, *RESOURCE_METRICS):
        return  # a GPU (or other custom) metric chosen on purpose
    if autoscaler_class not in (KPA_CLASS, HPA_CLASS):
        return  # a third-party class: gpulint cannot tell what it scales on
    target = annotations.get(TARGET_ANNOTATION)
    if autoscaler_class == KPA_CLASS:
        scaled_on = str(metric) if isinstance(metric, str) and metric else "concurrency"
        unit = "requests in flight per pod" if scaled_on == "concurrency" else "per pod"
        aim = f" with a target of {target} {unit}" if target is not None else ""
        short, how = "KPA", f"Knative's KPA scales it on {scaled_on}"
    else:
        scaled_on, aim = str(metric or "cpu"), ""
        short, how = "HPA class", f"Knative's HPA class scales it on {scaled_on}"
    resources = ", ".join(sorted({g.resource for g in gpus}))
    path: Path = ("spec", "inferencePlatform")
    for key in (KNATIVE_CLASS_ANNOTATION, METRIC_ANNOTATION, MODE_ANNOTATION):
        if key in annotations:
            path = ("spec", "annotations", key)
            break
    links = []
    configmap = inventory.kserve_mode_source()
    if configmap is not None and source == "cluster default":
        links.append(related(configmap, ("data", "deploy"), "cluster default"))
    links += claim_links(gpus)
    served = inventory.served_name(GPU_UTIL, nim.manifest) or GPU_UTIL
    yield ctx.finding(
        nim.manifest,
        path,
        f"NIMService {nim.describe()} asks for GPUs, but Knative's {short} scales it on "
        f"{scaled_on}, not on GPU load. It runs on the KServe platform in Knative mode "
        f"({source}), where {how}{aim}; the pods ask for {resources}. In Knative mode the NIM "
        "operator hands KServe spec.annotations and not spec.scale, so the revisions of its "
        "model server add GPU pods on request bursts and stay put while long generations "
        "saturate the GPUs.",
        "# Knative's HPA class on a GPU metric (spec.annotations reach the revisions)\n"
        "spec:\n"
        "  annotations:\n"
        f"    {KNATIVE_CLASS_ANNOTATION}: {HPA_CLASS}\n"
        f"    {METRIC_ANNOTATION}: {served}   # as your prometheus-adapter serves it\n"
        f'    {TARGET_ANNOTATION}: "70"\n'
        "# or inferencePlatform: standalone, with spec.scale.hpa on a GPU or serving metric",
        related=links,
    )


def _pinned(nim: NIMService) -> bool:
    """Revisions held at one replica count by ``min-scale``/``max-scale``."""
    low, high = nim.annotations.get(MIN_SCALE), nim.annotations.get(MAX_SCALE)
    if high is None:
        return False
    return str(high).strip() in ("1", str(low).strip())
