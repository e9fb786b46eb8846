"""A GPU NIMService on the KServe platform is autoscaled by KServe on CPU or memory.

## What it checks
A NIMService (``apps.nvidia.com/v1alpha1``) with ``inferencePlatform: kserve`` and
``scale.enabled: true`` whose model server asks for GPUs, when the InferenceService the NIM
operator makes for it runs in KServe's Standard mode: ``spec.annotations`` sets
``serving.kserve.io/deploymentMode: Standard`` (or ``RawDeployment``), or sets no mode and
the cluster default is Standard (the ``inferenceservice-config`` ConfigMap in the input, or
``kserve.default-deployment-mode`` in ``.gpulint.yaml``).

## Why is this bad?
On the KServe platform the NIM operator does not make the HPA of ``spec.scale.hpa``: it
makes an InferenceService with the ``hpa`` autoscaler class and hands KServe the replica
bounds and the first ``cpu`` or ``memory`` Resource metric of ``spec.scale.hpa.metrics``,
nothing else. A Pods, Object or External metric written there (a GPU or KV-cache metric)
is dropped, and without a cpu or memory metric KServe's HPA ``<name>-predictor`` scales on
CPU at 80% utilization, its default; ``behavior`` is dropped too. A GPU model server's CPU
idles while the GPU is saturated and requests queue, so the HPA does not scale out when it
should; NVIDIA's own sample of this shape scales a GPU NIM on CPU at 80%.

## Example
```yaml
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: llama}
spec:
  inferencePlatform: kserve
  annotations:
    serving.kserve.io/deploymentMode: Standard
  resources:
    limits: {nvidia.com/gpu: 1}
  scale:
    enabled: true
    hpa:
      maxReplicas: 3
      metrics:
      - type: Resource
        resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
```

## Use instead
The standalone platform, where the operator makes the HPA from ``spec.scale.hpa`` as written,
with a GPU or serving metric:
```yaml
spec:
  inferencePlatform: standalone
  scale:
    enabled: true
    hpa:
      maxReplicas: 3
      metrics:
      - type: Pods
        pods:
          metric: {name: DCGM_FI_DEV_GPU_UTIL}
          target: {type: AverageValue, averageValue: "70"}
```
or keep the KServe platform without ``spec.scale`` and scale KServe's Deployment
``<name>-predictor`` yourself (``serving.kserve.io/autoscalerClass: external`` in
``spec.annotations``).

## References
- NVIDIA/k8s-nim-operator@f63f74d api/apps/v1alpha1/nimservice_types.go
  (``GetInferenceServiceParams``: the ``hpa`` class and the bounds in Standard mode;
  ``GetInferenceServiceHPAParams``: only a cpu or memory Resource metric is kept);
  internal/utils/kserve.go (``GetKServeDeploymentMode``: the annotation, else the
  cluster default); config/samples/nim/serving/kserve/standard/llm.yaml.
- kserve/kserve@aaac4e2 pkg/controller/v1beta1/inferenceservice/reconcilers/hpa/
  hpa_reconciler.go (``getHPAMetrics``: cpu, 80% by default); pkg/constants/constants.go
  (``DefaultCPUUtilization``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpulint.ruleapi import (
    MODE_ANNOTATION,
    MODE_VALUES,
    STANDARD,
    Context,
    Finding,
    Inventory,
    NIMService,
    Path,
    Severity,
    as_dict,
    as_list,
    claim_links,
    related,
)

ID = "GL133"
NAME = "nimservice-kserve-cpu-autoscaler"
SEVERITY = Severity.ERROR
SCOPE = "nimservice"
STAGES = ("autoscaler",)

# The metrics the NIM operator hands KServe (GetInferenceServiceHPAParams), and KServe's
# default when it hands none (constants.DefaultCPUUtilization).
KEPT_RESOURCES = ("cpu", "memory")
DEFAULT_CPU_UTILIZATION = 80
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"


def check(nim: NIMService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if not nim.on_kserve or not nim.scale_enabled:
        return
    mode, source = _mode(nim, inventory)
    if mode != STANDARD:
        return  # Knative mode: KServe's Knative Service scales it, not an HPA
    gpus = [g for t in nim.pod_templates() for g in t.gpu_requests(inventory.gpu_names)]
    if not gpus:
        return
    kept, dropped = _metrics(nim)
    if kept is None:
        reads, default = f"CPU at {DEFAULT_CPU_UTILIZATION}% utilization", ", KServe's default"
    else:
        reads, default = _describe(kept[1]), ""
    lost = ""
    if dropped:
        names = ", ".join(_describe(entry) for _, entry in dropped)
        lost = f"; it drops what else spec.scale.hpa.metrics says ({names})"
    resources = ", ".join(sorted({g.resource for g in gpus}))
    links = [related(nim.manifest, path, "dropped") for path, _ in dropped]
    configmap = inventory.kserve_mode_source()
    if configmap is not None and source == "cluster default":
        links.append(related(configmap, ("data", "deploy"), "cluster default"))
    links += claim_links(gpus)
    metric = inventory.served_name(GPU_UTIL, nim.manifest) or GPU_UTIL
    yield ctx.finding(
        nim.manifest,
        kept[0] if kept is not None else ("spec", "scale", "enabled"),
        f"NIMService {nim.describe()} asks for GPUs, but KServe's HPA {nim.name}-predictor "
        f"scales it on {reads}. It runs on the KServe platform in Standard mode ({source}), "
        f"where the NIM operator hands KServe only a cpu or memory metric of spec.scale{lost}, "
        f"and KServe scales on {reads}{default}. The pods ask for {resources}, and a GPU model "
        "server's CPU idles while its GPU saturates, so it does not scale out when it should.",
        "# the standalone platform: the NIM operator makes the HPA of spec.scale.hpa as "
        "written\n"
        "inferencePlatform: standalone\n"
        "scale:\n"
        "  hpa:\n"
        "    metrics:\n"
        "    - type: Pods\n"
        "      pods:\n"
        f"        metric: {{name: {metric}}}   # as your prometheus-adapter serves it\n"
        '        target: {type: AverageValue, averageValue: "70"}\n'
        "# or keep the KServe platform: delete spec.scale, set\n"
        "# serving.kserve.io/autoscalerClass: external in spec.annotations\n"
        f"# and scale Deployment {nim.name}-predictor with your own HPA",
        related=links,
    )


def _mode(nim: NIMService, inventory: Inventory) -> tuple[str, str]:
    """The deployment mode of the InferenceService the operator makes, and where it comes
    from: ``spec.annotations``, else the cluster default (internal/utils/kserve.go)."""
    written = nim.annotations.get(MODE_ANNOTATION)
    if isinstance(written, str) and written in MODE_VALUES:
        return MODE_VALUES[written], f"spec.annotations {MODE_ANNOTATION}: {written}"
    return inventory.view_context().kserve_default_mode, "cluster default"


def _metrics(
    nim: NIMService,
) -> tuple[tuple[Path, dict[str, Any]] | None, list[tuple[Path, dict[str, Any]]]]:
    """The metric of ``spec.scale.hpa.metrics`` the operator keeps (the first cpu or memory
    Resource metric), and those it drops, each with its path."""
    base: Path = ("spec", "scale", "hpa", "metrics")
    kept: tuple[Path, dict[str, Any]] | None = None
    dropped: list[tuple[Path, dict[str, Any]]] = []
    for index, entry in enumerate(as_list(as_dict(nim.scale.get("hpa")).get("metrics"))):
        if not isinstance(entry, dict):
            continue
        resource = as_dict(entry.get("resource"))
        if (
            kept is None
            and entry.get("type") == "Resource"
            and resource.get("name") in (KEPT_RESOURCES)
        ):
            kept = ((*base, index), entry)
        else:
            dropped.append(((*base, index), entry))
    return kept, dropped


def _describe(entry: dict[str, Any]) -> str:
    """``cpu at 80% utilization``, ``the Pods metric gpu_cache_usage_perc``."""
    kind = entry.get("type")
    if kind == "Resource":
        resource = as_dict(entry.get("resource"))
        target = as_dict(resource.get("target"))
        name = resource.get("name")
        if target.get("averageUtilization") is not None:
            return f"{name} at {target.get('averageUtilization')}% utilization"
        return f"{name}"
    source = as_dict(entry.get(str(kind).lower() if isinstance(kind, str) else ""))
    name = as_dict(source.get("metric")).get("name")
    return f"the {kind} metric {name}" if name else f"a {kind} metric"
