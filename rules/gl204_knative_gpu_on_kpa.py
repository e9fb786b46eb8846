"""A Knative Service that asks for GPUs is scaled by the KPA, on requests rather than GPU load.

## What it checks
A Knative Service or Configuration whose revision template asks for a GPU resource and whose
revisions use the KPA class (``kpa.autoscaling.knative.dev``, the default when no
``autoscaling.knative.dev/class`` is set). Knative Services that KServe generated for an
InferenceService are left to GL306, which reports the InferenceService.

## Why is this bad?
The KPA scales on in-flight requests per pod (``concurrency``, default target 100) or
requests per second (``rps``); it never sees GPU utilization. For GPU inference the two
disagree: a few long LLM generations saturate a GPU without reaching the concurrency target,
so nothing scales out while latency climbs, and many short requests add GPU pods that sit
idle. With the default ``min-scale`` of 0 the KPA also scales the revision to zero when
idle, and the next request waits for a GPU node, an image pull and a model load.

## Example
```yaml
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: llm}
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/target: "10"      # concurrency, KPA by default
    spec:
      containers:
      - image: vllm/vllm-openai
        resources:
          limits: {nvidia.com/gpu: 1}
```

## Use instead
Scale on a GPU metric with Knative's HPA class (it needs the ``serving-hpa`` extension and a
prometheus-adapter rule that serves the metric), or run the model as a KServe
InferenceService in Standard mode with your own GPU HPA:
```yaml
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
        autoscaling.knative.dev/metric: DCGM_FI_DEV_GPU_UTIL
        autoscaling.knative.dev/target: "70"
        autoscaling.knative.dev/min-scale: "1"
```

## References
- Knative docs, "Supported autoscaler types" and "Configuring metrics" (KPA: concurrency or
  rps; HPA: cpu, memory or a custom metric).
- knative/serving config/core/configmaps/autoscaler.yaml
  (``container-concurrency-target-default: "100"``, scale to zero on by default).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    KNATIVE_CLASS_ANNOTATION,
    KPA_METRICS,
    MIN_SCALE,
    Autoscaler,
    Context,
    Finding,
    Inventory,
    KnativeService,
    Severity,
    annotation_text,
    claim_links,
    generated_by,
    hpa_class_fix,
    revision_autoscalers,
    revision_metric,
)

ID = "GL204"
NAME = "knative-gpu-on-kpa"
SEVERITY = Severity.WARNING
SCOPE = "knative"
STAGES = ("workload",)


def check(ksvc: KnativeService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if ksvc.template is None or generated_by(ksvc.manifest, "InferenceService") is not None:
        return
    settings = ksvc.revision_autoscaling()
    if not settings.uses_kpa or not ksvc.scaling_range().scales_out:
        return  # pinned (min-scale = max-scale), or 0 to 1 only: requests are the signal
    gpus = ksvc.template.gpu_requests(inventory.gpu_names)
    if not gpus:
        return
    resources = ", ".join(sorted({g.resource for g in gpus}))
    per_pod = ksvc.template.gpus_per_pod(inventory.gpu_names)
    asks = f"{resources}, {per_pod} per pod" if per_pod else resources
    metric = settings.metric.value if settings.metric is not None else "concurrency"
    if metric not in KPA_METRICS:
        return  # the KPA rejects the metric itself (GL203)
    min_scale = next(
        (
            annotation_text(ksvc.template_annotations[key])
            for key in MIN_SCALE
            if key in ksvc.template_annotations
        ),
        None,
    )
    idle = ""
    if min_scale in (None, "0"):
        idle = (
            "; with min-scale 0 (the default) it also scales to zero when idle, so the next "
            "request waits for a GPU pod to start and load its model"
        )
    fighting = revision_autoscalers(inventory, ksvc.namespace, ksvc.name)
    yield ctx.finding(
        ksvc.manifest,
        ksvc.annotation_path(KNATIVE_CLASS_ANNOTATION),
        f"Knative {ksvc.manifest.kind} {ksvc.name} asks for GPUs ({asks}), but its revisions "
        f"are scaled on requests, not GPU load. The {settings.describe_class()} scales them on "
        f"{settings.describe_metric()}: it adds GPU pods when requests per pod pass the target, "
        f"never on GPU load{idle}.",
        _fix(ksvc, inventory, fighting),
        related=claim_links(gpus),
        deletes=[a.manifest for a in fighting],
        fix_at_path=False,
    )


def _fix(ksvc: KnativeService, inventory: Inventory, fighting: list[Autoscaler]) -> str:
    """The revisions on Knative's HPA class, as GL201 and GL105 write it when autoscalers of
    the user's fight the KPA on them (then those are deleted, and the fix is printed once)."""
    fix = hpa_class_fix(
        f"Knative {ksvc.manifest.kind} {ksvc.name}",
        False,
        revision_metric(inventory, [a.manifest for a in fighting], ksvc.manifest),
        [a.describe() for a in fighting],
        min_scale=not any(key in ksvc.template_annotations for key in MIN_SCALE),
    )
    if fighting:
        return fix
    return f"{fix}\n# or: a KServe InferenceService in Standard mode with your own GPU HPA"
