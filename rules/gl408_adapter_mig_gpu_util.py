"""An HPA scales MIG pods on DCGM_FI_DEV_GPU_UTIL, which MIG instances do not report.

## What it checks
An HPA whose target's pods ask for MIG slices (``nvidia.com/mig-1g.10gb`` ..., or a DRA
claim for the ``mig.nvidia.com`` device class) and whose
metric reads ``DCGM_FI_DEV_GPU_UTIL`` (or the other NVML utilization fields
``DCGM_FI_DEV_MEM_COPY_UTIL``, ``DCGM_FI_DEV_ENC_UTIL``, ``DCGM_FI_DEV_DEC_UTIL``): through
the prometheus-adapter rule that serves the metric, or directly by its name when the name is
the series' own (``DCGM_FI_DEV_GPU_UTIL``, GKE's ``prometheus.googleapis.com|...`` form or a
lowercased External name).

## Why is this bad?
DCGM does not report ``DCGM_FI_DEV_GPU_UTIL`` for MIG instances: the series is missing or
stays at 0 (NVIDIA/DCGM#80, "no plans to support DCGM_FI_DEV_GPU_UTIL for MIG instances";
NVIDIA/dcgm-exporter#216). The HPA then has no value, or a value that never rises, and never
scales out however busy the slices are. The profiling field
``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` is reported per MIG instance, as a ratio (0-1).

## Example
```yaml
# Deployment: resources: {limits: {nvidia.com/mig-3g.40gb: 1}}
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "60"}
```

## Use instead
```yaml
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_PROF_GR_ENGINE_ACTIVE}
      target: {type: AverageValue, averageValue: "0.6"}   # a ratio, not a percent
```

## References
- NVIDIA/DCGM#80, NVIDIA/dcgm-exporter#216, #50, #105: GPU_UTIL is not supported on MIG.
- NVIDIA/dcgm-exporter etc/default-counters.csv: ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, "Ratio of
  time the graphics engine is active".
- NVIDIA/k8s-device-plugin README: ``MIG_STRATEGY=mixed`` advertises ``nvidia.com/mig-*``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA,
    AdapterRule,
    Context,
    Exporter,
    Finding,
    GpuMetric,
    GpuRequest,
    HpaMetric,
    Inventory,
    Related,
    Scale,
    Severity,
    canonical_metric_name,
    format_number,
    lookup,
    mention,
    metric_names_in_query,
    related,
    requested_metric_name,
    try_quantity,
)

ID = "GL408"
NAME = "adapter-mig-gpu-util"
SEVERITY = Severity.WARNING
SCOPE = "hpa"
STAGES = ("adapter-rule",)

REPLACEMENT = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if hpa.target_ref is None:
        return
    sources = [(m, _unreported_series(m, inventory, hpa)) for m in hpa.metrics if m.is_custom]
    if not any(source for _, source in sources):
        return
    target = inventory.resolve_target(hpa.namespace, hpa.target_ref, hpa.manifest)
    migs = [r for r in target.gpu_requests(inventory.gpu_names) if r.is_mig]
    if not migs:
        return
    document = target.template_document
    links = [related(document, migs[0].container_path, "MIG request")] if document else []
    for metric, source in sources:
        if source is not None:
            series, rule = source
            yield _finding(hpa, metric, series, rule, migs, target.describe(), links, ctx)


def _unreported_series(
    metric: HpaMetric, inventory: Inventory, hpa: HPA
) -> tuple[GpuMetric, AdapterRule | None] | None:
    """The series behind the metric that MIG instances do not report, and the rule serving it."""
    name = metric.name or ""
    if not name:
        return None
    aliases = inventory.settings.metric_aliases
    rules = inventory.rules_exposing(name, metric.api, near=hpa.manifest)
    wanted = requested_metric_name(name, metric.api)
    for rule in rules:
        candidates = [
            *(rule.series_for(wanted) or []),
            *metric_names_in_query(rule.metrics_query or ""),
        ]
        for series in candidates:
            found = _unreported(lookup(series, aliases))
            if found is not None:
                return found, rule
    if not rules:
        found = _unreported(lookup(name, aliases))
        if found is not None:
            return found, None
    return None


def _unreported(metric: GpuMetric | None) -> GpuMetric | None:
    if metric is not None and metric.exporter is Exporter.DCGM and not metric.reported_on_mig:
        return metric
    return None


def _finding(
    hpa: HPA,
    metric: HpaMetric,
    series: GpuMetric,
    rule: AdapterRule | None,
    migs: list[GpuRequest],
    where: str,
    links: list[Related],
    ctx: Context,
) -> Finding:
    resources = ", ".join(sorted({r.resource for r in migs}))
    if rule is not None and metric.name == series.name:
        reads = f"It is served by {rule.describe()}. "
    elif rule is not None:
        reads = f"It reads {series.name} through {rule.describe()}. "
    elif canonical_metric_name(metric.name or "").lower() != series.name.lower():
        reads = f"It reads {series.name}. "
    else:
        reads = ""
    message = (
        f"HPA {hpa.name} scales {where}, whose pods run on MIG slices, on {metric.name}. "
        f"{reads}DCGM does not report {series.name} for MIG instances ({resources}): the "
        "series is missing or 0, so the HPA never sees the slices get busy. "
        f"{REPLACEMENT} is reported per MIG instance, as a ratio (0-1)."
    )
    new_target = ""
    target = metric.target
    if target is not None and series.scale is Scale.PERCENT:
        field = "averageValue" if target.average_value is not None else "value"
        value = try_quantity(target.average_value if field == "averageValue" else target.value)
        if value is not None:
            new_target = (
                f"\ntarget:\n  type: {target.type or 'AverageValue'}\n"
                f'  {field}: "{format_number(float(value) / 100)}"   # a ratio (0-1), not a percent'
            )
    if rule is not None:
        fix = f"# in {rule.describe()}:\n" + _replaced(rule, series.name)
        if not rule.name_block:
            # Without `name` the rule exposes the series under its own name, which changes.
            fix += f"\n# and in the HPA:\nmetric:\n  name: {REPLACEMENT}"
        fix += new_target
        link = [rule.related("adapter rule"), *links]
    else:
        name = REPLACEMENT if metric.api != "external" else REPLACEMENT.lower()
        if metric.name and "|" in metric.name:
            name = metric.name.replace(series.name, REPLACEMENT).replace(
                series.name.lower(), REPLACEMENT.lower()
            )
        fix = f"metric:\n  name: {name}" + new_target
        link = links
    return ctx.finding(hpa.manifest, metric.path, message, fix, related=link)


def _replaced(rule: AdapterRule, old: str) -> str:
    pattern = mention(old)
    lines = []
    for key in ("seriesQuery", "metricsQuery"):
        text = rule.data.get(key)
        if isinstance(text, str) and pattern.search(text):
            fixed = pattern.sub(REPLACEMENT, text)
            lines.append(f"{key}: " + (f"'{fixed}'" if "'" not in fixed else json.dumps(fixed)))
    name = rule.name_block
    matches = name.get("matches")
    if isinstance(matches, str) and old in matches:
        renamed = json.dumps(matches.replace(old, REPLACEMENT))
        as_value = name.get("as")
        as_text = f", as: {json.dumps(as_value)}" if isinstance(as_value, str) and as_value else ""
        lines.append(f"name: {{matches: {renamed}{as_text}}}")
    return "\n".join(lines) or f"read {REPLACEMENT} instead of {old}"
