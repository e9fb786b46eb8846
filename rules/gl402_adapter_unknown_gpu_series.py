"""A prometheus-adapter rule queries a GPU series that no current exporter emits.

## What it checks
The metric names a rule spells out in its ``seriesQuery`` and in the literal part of its
``metricsQuery`` (template actions such as ``<<.Series>>`` aside):

* names of legacy GPU exporters: ``nvidia_gpu_duty_cycle`` and the other
  ``nvidia_gpu_*`` names of the retired nvidia_gpu_prometheus_exporter, the kubelet's
  ``container_accelerator_*`` metrics (removed with Kubernetes 1.28) and dcgm-exporter's 1.x
  names (``dcgm_gpu_utilization``), each with the dcgm-exporter name that replaces it and how
  the unit converts;
* ``DCGM_*`` names that are no DCGM or dcgm-exporter field at all, such as
  ``DCGM_FI_DEV_GPU_UTILIZATION``, with the field it most likely meant.

Names recorded by a PrometheusRule in the input and names listed under ``metric-aliases``
in ``.gpulint.yaml`` are known and not reported.

## Why is this bad?
Prometheus has no such series, so the rule discovers nothing: the adapter exposes no metric
and the HPA reports ``the server could not find the metric``. Nothing logs an error, because
an empty series list is a valid answer. The legacy exporters also differ in units
(``nvidia_gpu_memory_used_bytes`` is bytes, ``DCGM_FI_DEV_FB_USED`` MiB) and have no pod
labels, so a rule cannot simply swap the name.

## Example
```yaml
rules:
- seriesQuery: 'nvidia_gpu_duty_cycle{pod!=""}'
  resources:
    overrides: {namespace: {resource: namespace}, pod: {resource: pod}}
  metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
```

## Use instead
```yaml
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'   # percent, like duty_cycle
```

## References
- NVIDIA/dcgm-exporter etc/default-counters.csv and etc/1.x-compatibility-metrics.csv;
  NVIDIA/go-dcgm dcgm_fields.h (every DCGM field name).
- mindprince/nvidia_gpu_prometheus_exporter main.go (``nvidia_gpu_*``, no pod labels).
- Kubernetes feature gate ``DisableAcceleratorUsageMetrics`` (cAdvisor accelerator
  metrics, removed in 1.28).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import NamedTuple

from gpulint.adapter import AdapterRule
from gpulint.gpumetrics import Exporter, GpuMetric, is_dcgm_field, lookup, nearest_dcgm_name
from gpulint.inventory import Inventory
from gpulint.model import Finding, Severity
from gpulint.promql import mention, metric_names_in_query
from gpulint.rule import Context

ID = "GL402"
NAME = "adapter-unknown-gpu-series"
SEVERITY = Severity.WARNING
SCOPE = "adapter-rule"

_LEGACY = (Exporter.MINDPRINCE, Exporter.CADVISOR, Exporter.DCGM_1X)
_LEGACY_NOTE = {
    Exporter.MINDPRINCE: (
        "comes from the retired nvidia_gpu_prometheus_exporter. Its series carry no pod or "
        "namespace label (only uuid and name): the rule cannot attach them to pods, and "
        "clusters that run dcgm-exporter have no such series"
    ),
    Exporter.CADVISOR: (
        "is a cAdvisor accelerator metric. The kubelet stopped serving them in Kubernetes "
        "1.28 (feature gate DisableAcceleratorUsageMetrics): newer clusters have no such series"
    ),
    Exporter.DCGM_1X: (
        "is dcgm-exporter 1.x's name. Today's dcgm-exporter emits it only when it runs with "
        "etc/1.x-compatibility-metrics.csv, otherwise there is no such series"
    ),
}


class _Use(NamedTuple):
    name: str
    keys: tuple[str, ...]  # seriesQuery and/or metricsQuery


def check(rule: AdapterRule, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if rule.generated:
        return
    recorded = inventory.recorded_series()
    aliases = inventory.settings.metric_aliases
    for use in _names(rule):
        name = use.name
        if name in recorded or name in aliases:
            continue
        known = lookup(name, aliases)
        if known is not None:
            # dcgm_fi_prof_gr_engine_active is a 1.x name and also a lowercased DCGM name
            # (GKE lowercases them): only the names that are 1.x's alone are reported.
            lowercased_dcgm = known.exporter is Exporter.DCGM_1X and is_dcgm_field(name.upper())
            if known.exporter in _LEGACY and not lowercased_dcgm:
                yield _legacy(rule, use, known, ctx)
            continue
        if name.startswith("DCGM_") and not is_dcgm_field(name):
            yield _unknown_dcgm(rule, use, ctx)


def _names(rule: AdapterRule) -> list[_Use]:
    found: dict[str, list[str]] = {}
    for name in rule.series_names() or []:
        found.setdefault(name, []).append("seriesQuery")
    query = rule.metrics_query
    if query:
        for name in metric_names_in_query(query):
            keys = found.setdefault(name, [])
            if "metricsQuery" not in keys:
                keys.append("metricsQuery")
    return [_Use(name, tuple(keys)) for name, keys in found.items()]


def _where(use: _Use) -> str:
    return " and ".join(use.keys)


def _reads(use: _Use) -> str:
    return f"{_where(use)} read{'s' if len(use.keys) == 1 else ''} {use.name}"


def _replaced(rule: AdapterRule, use: _Use, new: str) -> str:
    """``seriesQuery: '...'`` / ``metricsQuery: '...'`` lines with the name replaced."""
    pattern = mention(use.name)
    lines = []
    for key in use.keys:
        text = rule.data.get(key)
        if isinstance(text, str):
            fixed = pattern.sub(new, text)
            quoted = f"'{fixed}'" if "'" not in fixed and "\n" not in fixed else json.dumps(fixed)
            lines.append(f"{key}: {quoted}")
    return "\n".join(lines)


def _legacy(rule: AdapterRule, use: _Use, metric: GpuMetric, ctx: Context) -> Finding:
    note = _LEGACY_NOTE.get(metric.exporter, metric.exporter.value)
    if metric.dcgm_equivalent:
        advice = f"Use {metric.dcgm_equivalent} ({metric.conversion})."
        fix = _replaced(rule, use, metric.dcgm_equivalent)
        if metric.conversion and not metric.conversion.startswith("same"):
            fix += f"\n# {metric.conversion}"
    else:
        advice = (metric.conversion or "dcgm-exporter has no direct equivalent") + "."
        fix = f"read a dcgm-exporter series instead of {use.name}: {advice}"
    return ctx.finding(
        rule.document,
        rule.path_for(use.keys[0]),
        f"{rule.describe()}: {_reads(use)}, which {note}. {advice}",
        fix,
        obj=rule.config.ref,
    )


def _unknown_dcgm(rule: AdapterRule, use: _Use, ctx: Context) -> Finding:
    nearest = nearest_dcgm_name(use.name)
    message = (
        f"{rule.describe()}: {_reads(use)}, which is no DCGM or dcgm-exporter field. No "
        "exporter emits it, so the rule exposes nothing"
    )
    if nearest:
        target = lookup(nearest)
        unit = f", {target.help}" if target is not None else ""
        message += f". Did you mean {nearest}{unit}?"
        fix = _replaced(rule, use, nearest)
    else:
        fix = (
            f"replace {use.name} in {_where(use)} with a field dcgm-exporter emits "
            "(etc/default-counters.csv), such as DCGM_FI_DEV_GPU_UTIL"
        )
    return ctx.finding(rule.document, rule.path_for(use.keys[0]), message, fix, obj=rule.config.ref)
