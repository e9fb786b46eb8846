"""A prometheus-adapter rule gives a GPU series a name that promises another unit.

## What it checks
The names a rule exposes, against the unit of the dcgm-exporter series behind them:

* ``DCGM_FI_DEV_FB_USED``, ``DCGM_FI_DEV_FB_FREE`` or ``DCGM_FI_DEV_FB_RESERVED`` (MiB)
  exposed as ``*_bytes``;
* a ratio (0-1) such as ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` exposed as ``*_percent``,
  ``*_percentage`` or ``*_pct``;
* a percent (0-100) such as ``DCGM_FI_DEV_GPU_UTIL`` exposed as ``*_ratio`` or
  ``*_fraction``;

unless the ``metricsQuery`` converts (``* 1048576`` or ``* 1024 * 1024``, ``* 100``,
``/ 100``).

## Why is this bad?
Whoever writes the HPA reads the metric's name, not the exporter's help text. A target of
``averageValue: 8Gi`` on ``gpu_memory_used_bytes`` that really counts MiB means 8 TiB of GPU
memory per pod: the HPA never scales out. ``gpu_busy_percent: 70`` on a 0-1 ratio never
triggers either; ``0.7`` on a 0-100 percent always does.

## Example
```yaml
- seriesQuery: 'DCGM_FI_DEV_FB_USED{exported_pod!=""}'
  name: {matches: ".*", as: "gpu_memory_bytes"}
  metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
```

## Use instead
```yaml
  name: {matches: ".*", as: "gpu_memory_bytes"}
  metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) * 1048576'
```
or name it ``gpu_memory_used_mib``.

## References
- NVIDIA/dcgm-exporter etc/default-counters.csv help texts: framebuffer "(in MiB)",
  ``DCGM_FI_DEV_GPU_UTIL`` "(in %)", ``DCGM_FI_PROF_*`` "Ratio of ...".
- Prometheus naming practices: base units, ``_bytes``, ``_ratio``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from gpulint.ruleapi import AdapterRule, Context, Finding, Inventory, Scale, Severity, lookup

ID = "GL407"
NAME = "adapter-unit-mismatch"
SEVERITY = Severity.WARNING
SCOPE = "adapter-rule"
STAGES = ("adapter-rule",)

_BYTES_NAME = re.compile(r"_bytes$", re.IGNORECASE)
_PERCENT_NAME = re.compile(r"(_percent|_percentage|_pct)$", re.IGNORECASE)
_RATIO_NAME = re.compile(r"(_ratio|_fraction)$", re.IGNORECASE)
_TIMES_MIB = re.compile(r"\*\s*(1048576|1\.048576e\+?0?6|1024\s*\*\s*1024|2\s*\^\s*20)\b")
_TIMES_100 = re.compile(r"\*\s*100(\.0*)?\b|\b100(\.0*)?\s*\*")
_DIVIDED_100 = re.compile(r"/\s*100(\.0*)?\b|\*\s*0?\.01\b")


def check(rule: AdapterRule, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if rule.generated:
        return
    query = rule.metrics_query or ""
    reported: set[str] = set()
    for series in rule.series_names() or []:
        metric = lookup(series)
        exposed = rule.name_for_series(series)
        if metric is None or not exposed or exposed in reported:
            continue
        problem = _mismatch(metric.scale, exposed, query)
        if problem is None:
            continue
        reported.add(exposed)
        what, fix = problem
        key = "as" if "as" in rule.name_block else "matches" if rule.name_block else None
        path = ("name", key) if key else ("name",) if rule.name_block else ("seriesQuery",)
        promised, _, actual = what.partition(" while the series ")
        promised = promised.split(" (")[0]  # the series' range is said in the next sentence
        where = rule.describe()
        yield ctx.finding(
            rule.document,
            rule.path_for(*path),
            f"{where[:1].upper()}{where[1:]} exposes {series} as {exposed}, a name that "
            f"promises {promised}. The series, {series} ({metric.help}), {actual}, so HPA "
            "targets written for the name are off by that factor.",
            _render_fix(fix, query.strip()),
            obj=rule.config.ref,
        )


def _mismatch(scale: Scale, exposed: str, query: str) -> tuple[str, str] | None:
    if scale is Scale.MIB and _BYTES_NAME.search(exposed) and not _TIMES_MIB.search(query):
        return (
            "bytes while the series counts MiB (1 MiB = 1048576 bytes)",
            "metricsQuery: <query * 1048576>\n"
            "# or expose it as " + _BYTES_NAME.sub("_mib", exposed),
        )
    if scale is Scale.RATIO and _PERCENT_NAME.search(exposed) and not _TIMES_100.search(query):
        return (
            "a percent (0-100) while the series is a ratio (0-1)",
            "metricsQuery: <query * 100>\n# or expose it as "
            + _PERCENT_NAME.sub("_ratio", exposed),
        )
    if scale is Scale.PERCENT and _RATIO_NAME.search(exposed) and not _DIVIDED_100.search(query):
        return (
            "a ratio (0-1) while the series is a percent (0-100)",
            "metricsQuery: <query / 100>\n# or expose it as "
            + _RATIO_NAME.sub("_percent", exposed),
        )
    return None


def _render_fix(fix: str, query: str) -> str:
    """Fill ``<query * 100>`` with the rule's query and the conversion, quoted for YAML."""
    match = re.search(r"<query ([*/] \d+)>", fix)
    if match is None:
        return fix
    converted = f"({query}) {match.group(1)}" if query else f"<<.Series>> {match.group(1)}"
    quoted = f"'{converted}'" if "'" not in converted else json.dumps(converted)
    return fix[: match.start()] + quoted + fix[match.end() :]
