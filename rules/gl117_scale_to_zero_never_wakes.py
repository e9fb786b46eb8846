"""An autoscaler scales its workload to zero and nothing can bring it back.

## What it checks
An HPA with ``minReplicas: 0`` (on Kubernetes 1.37 and later, where HPAScaleToZero is on by
default; before that GL108 refuses the field) or a KEDA ScaledObject whose
``minReplicaCount`` is 0 (KEDA's default), in two ways:

* **Nothing left to wake it.** Every metric the autoscaler reads comes from the workload's
  own pods: Resource and Pods metrics always do, and an Object or External metric (or a
  KEDA prometheus query) does when its series is one a model server exports from its own
  pods (``vllm:*``, Triton's ``nv_inference_*``, TGI's ``tgi_*``, SGLang's ``sglang:*``) or
  a dcgm-exporter series of the pods' GPUs. The series are followed through the input's
  prometheus-adapter rules. At zero replicas these series do not exist, so the metric has no
  value (or KEDA reads 0) and the workload stays at zero whatever the load. A metric whose
  source gpulint cannot tell, or one that exists without the pods (a queue, a gateway's
  request rate, the llm-d EPP's ``llm_d_epp_flow_control_queue_size``), is a way back, and
  the autoscaler is not reported.
* **Paused at zero from the start** (HPA): its target Deployment in the input is written
  with ``replicas: 0``. The HPA scales a workload up from zero only when it scaled it down
  itself (its ``ScaledToZero`` condition); a workload it finds at zero it takes as paused by
  hand, so a new Deployment applied with ``replicas: 0`` is never scaled.

## Why is this bad?
Scale to zero is what saves the GPU-hours of an idle model, and what strands it: after the
first quiet period the model is gone, requests fail or queue in front of it, and no
autoscaler event says why.

## Example
```yaml
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
spec:
  minReplicas: 0
  metrics:
  - type: External
    external:
      metric: {name: vllm:num_requests_waiting}   # exported by the vLLM pods themselves
      target: {type: AverageValue, averageValue: "5"}
```

## Use instead
```yaml
  metrics:
  - type: External
    external:
      metric: {name: llm_d_epp_flow_control_queue_size}  # the queue in front of the pods
      target: {type: AverageValue, averageValue: "5"}
```
or keep ``minReplicas: 1``.

## References
- KEP-2021 (kubernetes/enhancements@64765b4:keps/sig-autoscaling/2021-scale-from-zero
  README.md): the ``ScaledToZero`` condition, and "applying a new Deployment with
  ``replicas: 0`` and HPA ``minReplicas: 0`` ... the Deployment will never scale"; beta and
  on by default in 1.37 (kubernetes/kubernetes#139648).
- Kubernetes HPA docs: scaling to zero needs an Object or External metric, and the HPA is
  active only while one has a value.
- kedacore/keda pkg/scaling/executor/scale_scaledobjects.go: from zero KEDA scales up only
  when a trigger is active; pkg/scalers/prometheus_scaler.go reads an empty answer as 0
  (``ignoreNullValues``, default true).
- vLLM, Triton and TGI serve their metrics on the model server's own port; the llm-d EPP
  keeps exporting flow-control queue metrics with no endpoint (llm-d scale-from-zero guides).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA,
    Context,
    Finding,
    GeneratedScaledObject,
    HpaMetric,
    Inventory,
    Release,
    ScaledObject,
    Severity,
    abbreviated,
    as_dict,
    dig,
    edits,
    from_the_pods,
    is_generated,
    metric_names_in_query,
    related,
)

ID = "GL117"
NAME = "scale-to-zero-never-wakes"
SEVERITY = Severity.ERROR
SCOPE = "autoscaler"
FIXES = ("unsafe",)
STAGES = ("autoscaler",)

# HPAScaleToZero is beta and on by default from this release (kubernetes/kubernetes#139648).
SCALE_TO_ZERO_DEFAULT_ON = Release(1, 37)
POD_METRIC_TYPES = ("Resource", "ContainerResource", "Pods")
WAKE_HINT = (
    "a metric that exists with no pod: the queue in front of it (the llm-d EPP's "
    "llm_d_epp_flow_control_queue_size), a gateway's request rate, a message queue"
)


def check(view: HPA | ScaledObject, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if is_generated(view.manifest):
        return
    if isinstance(view, ScaledObject):
        yield from _scaled_object(view, ctx)
        return
    hpa = view
    if hpa.min_replicas != 0 or isinstance(hpa.min_replicas, bool):
        return
    if inventory.settings.versions.kubernetes < SCALE_TO_ZERO_DEFAULT_ON:
        return  # GL108: the API server refuses minReplicas 0 there
    yield from _paused_target(hpa, inventory, ctx)
    if not any(metric.type in ("Object", "External") for metric in hpa.metrics):
        return  # GL108: the API server refuses minReplicas 0 without one
    sources = [_source(metric, hpa, inventory) for metric in hpa.metrics]
    if any(source is None for source in sources):
        return
    named = sorted({s for s in sources if s})
    yield ctx.finding(
        hpa.manifest,
        ("spec", "minReplicas"),
        f"HorizontalPodAutoscaler {abbreviated(hpa.name)} scales to zero, but every metric it "
        f"reads comes from the pods it scales ({_and(named)}). At zero replicas those series "
        "do not exist, the HPA has no value, and the workload stays at zero whatever the "
        "load.",
        f"minReplicas: 1\n# or add {WAKE_HINT}",
        plan=edits.unsafe(edits.Replace(hpa.manifest, ("spec", "minReplicas"), "1")),
    )


def _source(metric: HpaMetric, hpa: HPA, inventory: Inventory) -> str | None:
    """Who the metric's values come from when that is the pods themselves ("" for Resource
    and Pods metrics); None when it may exist without them, or gpulint cannot tell."""
    if metric.type in POD_METRIC_TYPES:
        return f"{metric.type} metric {metric.name or '?'}"
    if metric.type not in ("Object", "External") or not metric.name:
        return None
    series: list[str] = []
    for rule in inventory.rules_exposing(metric.name, metric.api, hpa.manifest):
        names = rule.series_names()
        if names is None:
            return None  # a pattern: which series it serves cannot be told
        series += names
    found = {from_the_pods(name) for name in series or [metric.name]}
    if None in found:
        return None
    return _and(sorted(s for s in found if s))


def _paused_target(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if hpa.target_ref is None:
        return
    target = inventory.resolve_target(hpa.namespace, hpa.target_ref, hpa.manifest)
    manifest = target.manifest if target.found else None
    if manifest is None or manifest.kind != "Deployment" or target.owner is not None:
        return
    replicas = as_dict(manifest.data.get("spec")).get("replicas")
    if replicas != 0 or isinstance(replicas, bool):
        return
    yield ctx.finding(
        hpa.manifest,
        ("spec", "minReplicas"),
        f"HorizontalPodAutoscaler {abbreviated(hpa.name)} has minReplicas 0 and its target "
        f"Deployment {abbreviated(manifest.name)} is written with replicas: 0. The HPA scales "
        "a workload up from zero only when it scaled it down itself (its ScaledToZero "
        "condition); one it finds at zero it takes as paused by hand, so the Deployment is "
        "never scaled.",
        f"# in Deployment {manifest.name}: delete replicas (an HPA sets it), or replicas: 1",
        related=[related(manifest, ("spec", "replicas"), "replicas: 0")],
        plan=edits.unsafe(edits.Delete(manifest, ("spec", "replicas"))),
    )


def _scaled_object(scaled: ScaledObject, ctx: Context) -> Iterator[Finding]:
    if scaled.scaling_range().minimum != 0 or not scaled.triggers or scaled.target_ref is None:
        return
    found: set[str] = set()
    for trigger in scaled.triggers:
        if trigger.get("type") not in ("prometheus", "cpu", "memory"):
            return  # a queue, a cron ...: they exist without the pods
        if trigger.get("type") in ("cpu", "memory"):
            found.add(f"{trigger['type']} trigger")
            continue
        query = as_dict(trigger.get("metadata")).get("query")
        if not isinstance(query, str):
            return
        names = metric_names_in_query(query)
        sources = {from_the_pods(name) for name in names}
        if not names or None in sources:
            return
        found |= {s for s in sources if s}
    if isinstance(scaled, GeneratedScaledObject):
        yield from _generated(scaled, sorted(found), ctx)
        return
    path = ("spec", "minReplicaCount") if "minReplicaCount" in scaled.spec else ("spec",)
    said = "minReplicaCount 0" if "minReplicaCount" in scaled.spec else "no minReplicaCount"
    fix_plan = (
        edits.unsafe(edits.Replace(scaled.manifest, path, "1"))
        if "minReplicaCount" in scaled.spec
        else edits.unsafe(
            edits.Insert(scaled.manifest, ("spec",), edits.entries(minReplicaCount=1))
        )
    )
    yield ctx.finding(
        scaled.manifest,
        path,
        f"KEDA ScaledObject {abbreviated(scaled.name)} has {said}, so KEDA scales "
        f"{scaled.describe_target()} to zero, where nothing can wake it. Every trigger reads "
        f"the pods it scales ({_and(sorted(found))}): at zero replicas the query has no "
        "series, KEDA reads 0 and never activates the workload again.",
        f"minReplicaCount: 1\n# or add a trigger on {WAKE_HINT}",
        plan=fix_plan,
    )


def _generated(scaled: GeneratedScaledObject, found: list[str], ctx: Context) -> Iterator[Finding]:
    """A ScaledObject a controller makes (an LLMInferenceService's spec.scaling.keda): its
    minimum is the setting the controller copies into minReplicaCount (the nearest one
    written around the settings it is made from), which is what to change."""
    path: tuple[str | int, ...] | None = None
    for depth in range(len(scaled.spec_path), 0, -1):
        settings = as_dict(dig(scaled.manifest.data, scaled.spec_path[:depth]))
        written = next((k for k in ("minReplicas", "minReplicaCount") if k in settings), None)
        if written:
            path = (*scaled.spec_path[:depth], written)
            break
    where = ".".join(str(step) for step in (path or scaled.spec_path))
    head = (
        f"{scaled.made_by} has {where} 0"
        if path
        else f"{scaled.made_by} sets no minimum, and its controller's is 0"
    )
    body = (
        f"{head}: KEDA scales {scaled.describe_target()} to zero, where nothing can wake it. "
        f"The {scaled.title} made from it reads only the pods it scales ({_and(found)}): at "
        "zero replicas the query has no series, KEDA reads 0 and never activates the "
        "workload again."
    )
    hint = f"# or add a trigger on {WAKE_HINT}"
    if path:
        yield ctx.finding(
            scaled.manifest,
            path,
            body,
            f"{path[-1]}: 1\n{hint}",
            plan=edits.unsafe(edits.Replace(scaled.manifest, path, "1")),
        )
        return
    yield ctx.finding(
        scaled.manifest,
        scaled.spec_path,
        body,
        f"# in {where}: a minimum of 1 replica\n{hint}",
    )


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
