"""A prometheus-adapter rule or a KEDA prometheus trigger queries a GPU series no exporter emits.

## What it checks
The metric names a prometheus-adapter rule spells out in its ``seriesQuery`` and in the
literal part of its ``metricsQuery`` (template actions such as ``<<.Series>>`` aside), and
the names in the ``query`` of every KEDA ScaledObject trigger of ``type: prometheus``:

* names of legacy GPU exporters: ``nvidia_gpu_duty_cycle`` and the other
  ``nvidia_gpu_*`` names of the retired nvidia_gpu_prometheus_exporter, the kubelet's
  ``container_accelerator_*`` metrics (removed with Kubernetes 1.28) and dcgm-exporter's 1.x
  names (``dcgm_gpu_utilization``), each with the dcgm-exporter name that replaces it and how
  the unit converts;
* ``DCGM_*`` names that are no DCGM or dcgm-exporter field at all, such as
  ``DCGM_FI_DEV_GPU_UTILIZATION``, with the field it most likely meant;
* for a KEDA trigger, a query that certainly reads no series at all: nothing but numbers,
  operators and function calls (``vector(70)``, ``time() % 3600``), unless its target is in
  the input and asks for no GPUs.

Names recorded by a PrometheusRule in the input and names listed under ``metric-aliases``
in ``.gpulint.yaml`` are known and not reported. Real DCGM fields that dcgm-exporter's
default counters file leaves out (``DCGM_FI_PROF_SM_OCCUPANCY``) are not reported: a counters
file can enable them, and ``--prometheus`` shows whether this cluster's exporter does. gpulint
does not parse PromQL: a query whose names it cannot read (a ``{__name__=~"..."}`` regex, a
syntax error) is not judged here; with ``--prometheus`` GL810 runs the trigger's query as
KEDA does and reports what Prometheus answers. A trigger's finding points at its ``query``
(the first line of its text for ``query: |``).

With ``--prometheus``, a rule whose seriesQuery finds no series is GL801's (it names what
Prometheus holds instead, with the labels those series carry); this rule then reports only
names of the rule's metricsQuery that its seriesQuery does not read.

## Why is this bad?
Prometheus has no such series. An adapter rule discovers nothing: the adapter exposes no
metric and the HPA reports ``the server could not find the metric``. A KEDA query over it
returns nothing, which KEDA reads as 0 (``ignoreNullValues`` defaults to true), so the trigger
never activates or scales out, and with ``ignoreNullValues: "false"`` every poll fails.
Nothing logs an error in the first case, because an empty answer is a valid answer. A query
that reads no series returns the same number whatever the GPUs do. The legacy exporters also
differ in units (``nvidia_gpu_memory_used_bytes`` is bytes, ``DCGM_FI_DEV_FB_USED`` MiB) and
have no pod labels, so a query cannot simply swap the name.

## Example
```yaml
rules:
- seriesQuery: 'nvidia_gpu_duty_cycle{pod!=""}'
  resources:
    overrides: {namespace: {resource: namespace}, pod: {resource: pod}}
  metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm, namespace: ml}
spec:
  scaleTargetRef: {name: llm}
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus-operated.monitoring.svc:9090
      query: avg(DCGM_FI_DEV_GPU_UTILIZATION{exported_namespace="ml"})
      threshold: "70"
```

## Use instead
```yaml
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'   # percent, like duty_cycle
---
      query: avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml"})
```

## References
- NVIDIA/dcgm-exporter etc/default-counters.csv and etc/1.x-compatibility-metrics.csv;
  NVIDIA/go-dcgm dcgm_fields.h (every DCGM field name).
- NVIDIA/gpu-monitoring-tools#143: dcgm-exporter 2.3.0's release ("Enable 1.x backwards
  compatibility") brought the 1.x names back behind the compatibility file.
- mindprince/nvidia_gpu_prometheus_exporter main.go (``nvidia_gpu_*``, no pod labels).
- Kubernetes feature gate ``DisableAcceleratorUsageMetrics`` (cAdvisor accelerator
  metrics, removed in 1.28).
- kedacore/keda pkg/scalers/prometheus_scaler.go (``ExecutePromQuery``: an empty result is 0
  with ``ignoreNullValues``, else an error).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import NamedTuple

from gpulint.ruleapi import (
    AdapterRule,
    Context,
    Exporter,
    Finding,
    GpuMetric,
    Inventory,
    PrometheusTrigger,
    Severity,
    abbreviated,
    is_dcgm_field,
    lookup,
    mention,
    metric_names_in_query,
    nearest_dcgm_name,
    reads_no_series,
)

ID = "GL402"
NAME = "adapter-unknown-gpu-series"
SEVERITY = Severity.WARNING
SCOPE = "prometheus-query"
STAGES = ("adapter-rule",)

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
        "is dcgm-exporter 1.x's name. From 2.x dcgm-exporter names series after their DCGM "
        "fields, and since 2.3.0 it writes the 1.x names only when it runs with "
        "etc/1.x-compatibility-metrics.csv; otherwise there is no such series"
    ),
}

# The same, said of a KEDA query rather than an adapter rule.
_TRIGGER_NOTE = {
    **_LEGACY_NOTE,
    Exporter.MINDPRINCE: (
        "comes from the retired nvidia_gpu_prometheus_exporter, whose series carry no pod or "
        "namespace label (only uuid and name): a query cannot pick out a workload's GPUs, and "
        "clusters that run dcgm-exporter have no such series"
    ),
}


class _Use(NamedTuple):
    name: str
    keys: tuple[str, ...]  # seriesQuery and/or metricsQuery


def check(
    item: AdapterRule | PrometheusTrigger, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    if isinstance(item, PrometheusTrigger):
        yield from _check_trigger(item, inventory, ctx)
        return
    rule = item
    if rule.generated:
        return
    live = inventory.live
    evidence = live.for_rule(rule) if live is not None else None
    # With --prometheus, a seriesQuery that finds nothing is GL801's finding, on this line, with
    # what Prometheus holds instead and the labels its series carry: one defect, one finding.
    missing = evidence is not None and evidence.missing is not None
    for use in _names(rule):
        if missing and "seriesQuery" in use.keys:
            continue
        unknown = _unknown(use.name, inventory)
        if isinstance(unknown, GpuMetric):
            yield _legacy(rule, use, unknown, ctx)
        elif unknown:
            yield _unknown_dcgm(rule, use, ctx)


def _unknown(name: str, inventory: Inventory) -> GpuMetric | bool:
    """The legacy metric ``name`` is, True for a name no DCGM field has, False when known."""
    aliases = inventory.settings.metric_aliases
    if name in aliases or name in inventory.recorded_series():
        return False
    known = lookup(name, aliases)
    if known is not None:
        # dcgm_fi_prof_gr_engine_active is a 1.x name and also a lowercased DCGM name
        # (GKE lowercases them): only the names that are 1.x's alone are reported.
        lowercased_dcgm = known.exporter is Exporter.DCGM_1X and is_dcgm_field(name.upper())
        return known if known.exporter in _LEGACY and not lowercased_dcgm else False
    return name.startswith("DCGM_") and not is_dcgm_field(name)


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


# --- KEDA prometheus triggers ------------------------------------------------------------------


def _check_trigger(
    trigger: PrometheusTrigger, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    query = trigger.query
    if query is None:
        return
    if reads_no_series(query) and _may_run_on_gpus(trigger, inventory):
        yield _trigger_finding(
            trigger,
            ctx,
            "A KEDA trigger's query reads no series. In "
            f"{trigger.describe()}, the query {_shown(query)} reads no series, so it returns the "
            "same value whatever the GPUs do and the trigger never follows the load",
            _query_line(trigger, _example_query(trigger)) + "   # a GPU series of its pods",
        )
        return
    for name in metric_names_in_query(query):
        unknown = _unknown(name, inventory)
        if isinstance(unknown, GpuMetric):
            note = _TRIGGER_NOTE.get(unknown.exporter, unknown.exporter.value)
            if unknown.dcgm_equivalent:
                advice = f"Use {unknown.dcgm_equivalent} ({unknown.conversion})."
                fix = _query_line(trigger, mention(name).sub(unknown.dcgm_equivalent, query))
                if unknown.conversion and not unknown.conversion.startswith("same"):
                    fix += f"\n# {unknown.conversion}"
            else:
                advice = (unknown.conversion or "dcgm-exporter has no direct equivalent") + "."
                fix = f"read a dcgm-exporter series instead of {name}: {advice}"
            yield _trigger_finding(
                trigger,
                ctx,
                f"A KEDA trigger reads the legacy GPU series {name}. In "
                f"{trigger.describe()}, {name} {note}. {advice}",
                fix,
            )
        elif unknown:
            message = (
                f"A KEDA trigger reads {abbreviated(name)}, which no exporter emits. In "
                f"{trigger.describe()}, the query reads {name}, which is no DCGM or "
                f"dcgm-exporter field, so no exporter emits it and the query {_empty(trigger)}"
            )
            nearest = nearest_dcgm_name(name)
            if nearest:
                target = lookup(nearest)
                unit = f", {target.help}" if target is not None else ""
                message += f". Did you mean {nearest}{unit}?"
                fix = _query_line(trigger, mention(name).sub(nearest, query))
            else:
                fix = (
                    f"replace {name} in the query with a field dcgm-exporter emits "
                    "(etc/default-counters.csv), such as DCGM_FI_DEV_GPU_UTIL"
                )
            yield _trigger_finding(trigger, ctx, message, fix)


def _may_run_on_gpus(trigger: PrometheusTrigger, inventory: Inventory) -> bool:
    """Does the trigger scale a workload that asks for GPUs, or one the input does not hold?
    A constant query on a CPU workload is no GPU autoscaling question."""
    scaled_object = trigger.scaled_object
    ref = scaled_object.target_ref
    if ref is None:
        return True
    target = inventory.resolve_target(scaled_object.namespace, ref, scaled_object.manifest)
    return not target.found or bool(target.gpu_requests(inventory.gpu_names))


def _empty(trigger: PrometheusTrigger) -> str:
    if trigger.ignore_null_values is False:
        return "finds nothing: with ignoreNullValues false every poll of the trigger fails"
    return (
        "finds nothing, which KEDA reads as 0 (ignoreNullValues defaults to true): the "
        "trigger never activates or scales out"
    )


def _trigger_finding(trigger: PrometheusTrigger, ctx: Context, message: str, fix: str) -> Finding:
    return ctx.finding(trigger.manifest, trigger.query_path, message, fix, key=False)


def _shown(query: str) -> str:
    flat = " ".join(query.split())
    return f"`{flat if len(flat) <= 200 else flat[:197] + '...'}`"


def _query_line(trigger: PrometheusTrigger, query: str) -> str:
    """``query: '...'`` (a ``|`` block for several lines), to paste into the trigger."""
    text = query.strip()
    if "\n" in text:
        return "query: |\n" + "\n".join(f"  {line}".rstrip() for line in text.splitlines())
    quoted = f"'{text}'" if "'" not in text else json.dumps(text)
    return f"query: {quoted}"


def _example_query(trigger: PrometheusTrigger) -> str:
    """A GPU query for the trigger's workload, on dcgm-exporter's series."""
    ref = trigger.scaled_object.target_ref
    matchers = []
    if trigger.scaled_object.namespace:
        matchers.append(f'exported_namespace="{trigger.scaled_object.namespace}"')
    if ref is not None:
        matchers.append(f'exported_pod=~"{ref.name}-.*"')
    return f"avg(DCGM_FI_DEV_GPU_UTIL{{{','.join(matchers)}}})"
