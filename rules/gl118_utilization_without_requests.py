"""An autoscaler scales on CPU or memory utilization of pods where a container requests none.

## What it checks
An HPA ``Resource`` metric on ``cpu`` or ``memory`` with a ``Utilization`` target (an HPA
without metrics, which the API server gives cpu at 80% utilization, included; or a KEDA
``cpu``/``memory`` trigger with ``metricType: Utilization``, which becomes one), whose target
workload in the input has a container without a request for that resource: an app container,
or a sidecar (an init container with ``restartPolicy: Always``, GA in Kubernetes 1.33). A limit
counts, since the API server copies it into the request. The pod needs no container request
when it sets a pod-level request (``spec.resources.requests``, KEP-2837), which the HPA uses
from Kubernetes 1.34 (``kubernetes-version``). A LimitRange of the namespace in the input
that gives the resource a default request counts too. Targets that KServe or Knative generate
are left out (their controllers add their own containers), and so are containers a mutating
webhook injects (a service mesh's proxy), which gpulint cannot see: give them requests in the
mesh's settings.

## Why is this bad?
Utilization is usage divided by the sum of the pod's requests; the HPA controller refuses to
compute it when a container has no request ("missing request for cpu"), so the metric has no
value (FailedGetResourceMetric). Alone, the HPA never scales. Beside a GPU metric it is worse:
while one metric fails, the controller skips every scale-down, so the workload scales up on
the GPU metric and never comes back down. This is why keeping a CPU metric next to the GPU one
is safe only when every container, sidecars included, requests CPU.

## Example
```yaml
spec:
  template:
    spec:
      initContainers:
      - name: log-shipper
        restartPolicy: Always      # a sidecar, counted by the HPA, with no cpu request
      containers:
      - name: server
        resources: {requests: {cpu: "2"}, limits: {nvidia.com/gpu: 1}}
```

## Use instead
```yaml
      initContainers:
      - name: log-shipper
        restartPolicy: Always
        resources: {requests: {cpu: 50m}}
```

## References
- kubernetes/kubernetes pkg/controller/podautoscaler/replica_calculator.go
  ``calculatePodRequests``: "missing request for cpu in container ..."; restartable init
  containers counted since kubernetes/kubernetes#120001; pod-level requests used when set
  since kubernetes/kubernetes#132430 (KEP-2837, PodLevelResources beta and on by default in
  1.34).
- Kubernetes HPA docs, "Algorithm details" and "Scaling on multiple metrics".
- kedacore/keda pkg/scalers/cpu_memory_scaler.go: the trigger becomes a Resource metric.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpulint.ruleapi import (
    HPA,
    Context,
    Finding,
    Inventory,
    Manifest,
    PodTemplate,
    Release,
    ResolvedTarget,
    ScaledObject,
    Severity,
    abbreviated,
    as_dict,
    as_list,
    dig,
    is_generated,
    related,
)

ID = "GL118"
NAME = "utilization-without-requests"
SEVERITY = Severity.ERROR
SCOPE = "autoscaler"
STAGES = ("autoscaler",)

RESOURCES = ("cpu", "memory")
# The HPA reads pod-level requests from this release (kubernetes/kubernetes#132430, KEP-2837).
POD_LEVEL_FROM = Release(1, 34)


def check(view: HPA | ScaledObject, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if is_generated(view.manifest) or view.target_ref is None:
        return
    wanted = dict.fromkeys(_utilization_resources(view))
    if not wanted:
        return
    target = inventory.resolve_target(view.namespace, view.target_ref, view.manifest)
    if target.manifest is None or target.via != "object" or target.owner is not None:
        return
    pod_level = inventory.settings.versions.kubernetes >= POD_LEVEL_FROM
    for resource in wanted:
        if _defaulted_by_limit_range(inventory, target.manifest, resource):
            continue
        missing = [
            (template, container)
            for template in target.templates
            if not (pod_level and _pod_request(target.manifest, template, resource))
            for container in _counted(template)
            if not _requests(container, resource)
        ]
        if missing:
            yield _finding(view, target, resource, missing, inventory, ctx)


def _utilization_resources(view: HPA | ScaledObject) -> list[str]:
    if isinstance(view, HPA):
        if view.defaults_to_cpu:
            return ["cpu"]  # no metrics: the API server defaults to cpu 80% utilization
        return [
            m.name
            for m in view.metrics
            if m.type == "Resource"
            and m.name in RESOURCES
            and m.target is not None
            and m.target.average_utilization is not None
            and m.target.average_value is None
        ]
    return [
        str(t["type"])
        for t in view.triggers
        if t.get("type") in RESOURCES and t.get("metricType") == "Utilization"
    ]


def _counted(template: PodTemplate) -> list[Any]:
    """The containers whose requests the HPA adds up: app containers and sidecars."""
    return [
        c
        for c in template.containers
        if not c.init or as_dict(c.data).get("restartPolicy") == "Always"
    ]


def _requests(container: Any, resource: str) -> bool:
    resources = container.resources
    return any(
        as_dict(resources.get(key)).get(resource) is not None for key in ("requests", "limits")
    )


def _pod_request(manifest: Manifest, template: PodTemplate, resource: str) -> bool:
    spec_path = (*template.path, "spec") if template.path else ("spec",)
    requests = as_dict(as_dict(dig(manifest.data, (*spec_path, "resources"))).get("requests"))
    limits = as_dict(as_dict(dig(manifest.data, (*spec_path, "resources"))).get("limits"))
    return requests.get(resource) is not None or limits.get(resource) is not None


def _defaulted_by_limit_range(inventory: Inventory, workload: Manifest, resource: str) -> bool:
    """A LimitRange of the workload's namespace that gives containers a default request."""
    for limit_range in inventory.of_kind("LimitRange"):
        if (limit_range.namespace or "") != (workload.namespace or ""):
            continue
        for item in as_list(as_dict(limit_range.data.get("spec")).get("limits")):
            item = as_dict(item)
            if item.get("type", "Container") != "Container":
                continue
            for key in ("defaultRequest", "default"):
                if as_dict(item.get(key)).get(resource) is not None:
                    return True
    return False


def _finding(
    view: HPA | ScaledObject,
    target: ResolvedTarget,
    resource: str,
    missing: list[tuple[PodTemplate, Any]],
    inventory: Inventory,
    ctx: Context,
) -> Finding:
    names = []
    for _, container in missing:
        kind = "sidecar" if container.init else "container"
        names.append(f"{kind} {abbreviated(container.name)}")
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    others = _other_metrics(view)
    if isinstance(view, HPA):
        what, path = f"HPA {abbreviated(view.name)}", _metric_path(view, resource)
        if view.defaults_to_cpu:
            what += " (no metrics: the API server's default)"
    else:
        what = f"KEDA ScaledObject {abbreviated(view.name)}"
        path = next(
            ("spec", "triggers", i)
            for i, t in enumerate(view.triggers)
            if t.get("type") == resource
        )
    consequence = (
        "while one metric fails the controller skips every scale-down, so the workload scales "
        "up on the other metrics and never comes back down"
        if others
        else "with no other metric, the workload never scales"
    )
    pod_level = (
        " (or a pod-level spec.resources.requests)"
        if inventory.settings.versions.kubernetes >= POD_LEVEL_FROM
        else ""
    )
    message = (
        f"{what} scales on {resource} utilization, but {shown} of {target.describe()} "
        f"requests no {resource}. The HPA cannot compute utilization without a request in "
        f"every container it counts ('missing request for {resource}'), so the metric has no "
        f"value, and {consequence}."
    )
    container = missing[0][1]
    example = "50m" if resource == "cpu" else "64Mi"
    fix = (
        f"# in {target.describe()}, every container and sidecar{pod_level}:\n"
        f"resources:\n  requests:\n    {resource}: {example}   # what {container.name} uses"
    )
    assert target.manifest is not None
    return ctx.finding(
        view.manifest,
        path,
        message,
        fix,
        related=[related(target.manifest, container.path, f"no {resource} request")],
    )


def _metric_path(hpa: HPA, resource: str) -> tuple[str | int, ...]:
    found = [m.path for m in hpa.metrics if m.type == "Resource" and m.name == resource]
    return found[0] if found else ("spec",)


def _other_metrics(view: HPA | ScaledObject) -> bool:
    if isinstance(view, HPA):
        return len(view.metrics) > 1
    return len(view.triggers) > 1
