"""dcgm-exporter leaves the pod off the series of GPUs that DRA allocates, which autoscalers read.

## What it checks
Each dcgm-exporter of the unit (a DaemonSet written out, or made by the dcgm-exporter chart
or gpu-operator values) that does not run with ``--kubernetes-enable-dra`` (env
``KUBERNETES_ENABLE_DRA``; chart value ``kubernetesDRA.enabled``, default false), when an
HPA or KEDA ScaledObject of the unit reads a dcgm-exporter series for a workload that gets
its GPUs through Dynamic Resource Allocation: a ResourceClaim(Template) of a GPU device class,
or a DRA extended resource (``deviceclass.resource.kubernetes.io/gpu.nvidia.com``, or a name
a DeviceClass of the input serves through ``extendedResourceName``). The series are followed
through the input's prometheus-adapter rules. gpu-operator values that give the exporter no
``KUBERNETES_ENABLE_DRA`` are not judged: what the operator sets is not written there.

## Why is this bad?
dcgm-exporter learns which pod holds a GPU from the kubelet's pod-resources API. It reads the
devices a device plugin allocated always, and the devices DRA allocated only with the flag on
(and only those of the driver ``gpu.nvidia.com``). Without it the series of those GPUs carry
no ``pod`` or ``namespace``: every per-pod query is empty, the adapter serves nothing for the
pods, and the HPA or trigger never scales on GPU load.

## Example
```yaml
# dcgm-exporter chart values
kubernetesDRA:
  enabled: false
```

## Use instead
```yaml
kubernetesDRA:
  enabled: true   # the chart gives the exporter a token to read ResourceSlices
```

## References
- NVIDIA/dcgm-exporter@d5e5f51: pkg/cmd/app.go (``--kubernetes-enable-dra``, env
  ``KUBERNETES_ENABLE_DRA``), internal/pkg/transformation/kubernetes.go (``toDeviceToPodsDRA``
  only with ``KubernetesEnableDRA``; ``pod``, ``namespace``, ``container`` and the ``dra_*``
  labels), internal/pkg/transformation/const.go (``DRAGPUDriverName = "gpu.nvidia.com"``),
  deployment/values.yaml (``kubernetesDRA.enabled: false``), templates/daemonset.yaml.
- KEP-5004 (DRA extended resources) and the Kubernetes docs, "Dynamic Resource Allocation".
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA,
    ClaimedGpu,
    Context,
    DcgmExporter,
    Finding,
    Inventory,
    Manifest,
    ScaledObject,
    Severity,
    abbreviated,
    as_dict,
    capitalized,
    edits,
    is_dcgm_field,
    metric_names_in_query,
    related,
)

ID = "GL605"
NAME = "exporter-dra-pods-unmapped"
SEVERITY = Severity.ERROR
SCOPE = "exporter"
FIXES = ("unsafe",)
STAGES = ("exporter",)


def check(exporter: DcgmExporter, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if exporter.dra.enabled is not False:
        return
    readers = list(_dra_workloads_read_on_dcgm(inventory))
    if not readers:
        return
    shown = ", ".join(f"{w.kind} {abbreviated(w.name)}" for w, _ in readers[:3])
    more = f" and {len(readers) - 3} more" if len(readers) > 3 else ""
    scalers = list(dict.fromkeys(s for _, s in readers))
    read = "reads" if len(scalers) == 1 else "read"
    yield ctx.finding(
        exporter.document,
        exporter.dra.path,
        f"dcgm-exporter does not map GPUs allocated through DRA to their pods "
        f"({exporter.dra.setting} is off). {capitalized(abbreviated(', '.join(scalers)))} "
        f"{read} the series of {exporter.describe()} for {shown}{more}, whose GPUs DRA "
        "allocates. Those series carry no pod "
        "or namespace, so every per-pod query of them is empty and the autoscaler never "
        "scales on GPU load.",
        _fix(exporter),
        related=[related(w, ("spec",), "gets its GPUs through DRA") for w, _ in readers[:3]],
        plan=_plan(exporter),
    )


def _fix(exporter: DcgmExporter) -> str:
    if exporter.dra.setting == "kubernetesDRA.enabled":
        return "kubernetesDRA:\n  enabled: true"
    if exporter.dra.setting == "KUBERNETES_ENABLE_DRA":
        return '- name: KUBERNETES_ENABLE_DRA\n  value: "true"'
    return "args:\n- --kubernetes-enable-dra   # beside the exporter's other arguments"


def _plan(exporter: DcgmExporter) -> edits.FixPlan | None:
    """Turn the written setting on; a setting not written is added by hand."""
    path = exporter.dra.path
    if exporter.dra.setting == "kubernetesDRA.enabled" and path[-1:] == ("enabled",):
        return edits.unsafe(edits.Replace(exporter.document, path, "true"))
    chart = exporter.chart
    if (
        exporter.dra.setting == "kubernetesDRA.enabled"
        and chart is not None
        and "kubernetesDRA" not in chart.values
    ):
        return edits.unsafe(
            edits.Insert(exporter.document, path, edits.entries(kubernetesDRA={"enabled": True}))
        )
    return None


def _dra_workloads_read_on_dcgm(inventory: Inventory) -> Iterator[tuple[Manifest, str]]:
    """(workload, autoscaler) for each autoscaler of the unit that reads dcgm-exporter series
    of a workload whose GPUs DRA allocates."""
    seen: set[int] = set()
    views: list[HPA | ScaledObject] = [*inventory.hpas, *inventory.scaled_objects]
    for view in views:
        if view.target_ref is None or not _reads_dcgm(view, inventory):
            continue
        target = inventory.resolve_target(view.namespace, view.target_ref, view.manifest)
        workload = target.manifest or target.owner
        if workload is None or id(workload) in seen:
            continue
        gpus = target.gpu_requests(inventory.gpu_names)
        if any(_through_dra(r, inventory) for r in gpus):
            seen.add(id(workload))
            kind = "HPA" if isinstance(view, HPA) else "ScaledObject"
            yield workload, f"{kind} {view.name}"


def _through_dra(request: object, inventory: Inventory) -> bool:
    if isinstance(request, ClaimedGpu):
        return not request.untold
    resource = getattr(request, "resource", "")
    return isinstance(resource, str) and inventory.gpu_names.dra_class_of(resource) is not None


def _reads_dcgm(view: HPA | ScaledObject, inventory: Inventory) -> bool:
    if isinstance(view, ScaledObject):
        return any(
            is_dcgm_field(name)
            for trigger in view.triggers
            if trigger.get("type") == "prometheus"
            for name in metric_names_in_query(str(as_dict(trigger.get("metadata")).get("query")))
        )
    for metric in view.metrics:
        if not metric.is_custom or not metric.name:
            continue
        rules = inventory.rules_exposing(metric.name, metric.api, view.manifest)
        names = [n for rule in rules for n in (rule.series_names() or [])] or [metric.name]
        if any(is_dcgm_field(name) for name in names):
            return True
    return False
