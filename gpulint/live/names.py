""" "Did you mean": the names a missing GPU metric goes by in other exporters, and how to convert.

Built on gpulint.metrics.names (exporters, scales, DCGM equivalents). One relation is added here:
on MIG instances and in NVIDIA's own guidance ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` stands in for
``DCGM_FI_DEV_GPU_UTIL`` (NVIDIA/DCGM#80), on a 0-1 scale instead of 0-100.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from gpulint.live.snapshot import Alternative
from gpulint.metrics.names import DCGM_NAMES, Exporter, GpuMetric, Scale, lookup

_STAND_INS = {
    "DCGM_FI_DEV_GPU_UTIL": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "DCGM_FI_DEV_GPU_UTIL",
}
_NO_POD_LABELS = (Exporter.MINDPRINCE, Exporter.NVIDIA_SMI)


def family(metric: GpuMetric) -> str:
    """The dcgm-exporter metric a name stands for (itself for dcgm-exporter's own names)."""
    return metric.dcgm_equivalent or metric.name


def conversion(wanted: GpuMetric | None, found: GpuMetric | None) -> str:
    """How ``found``'s values relate to ``wanted``'s, in words a user can act on."""
    if found is None:
        return "unknown unit: check its help text (/api/v1/metadata)"
    if wanted is None or wanted.scale == found.scale:
        text = f"same scale: {found.scale.value}" if wanted else found.scale.value
    elif wanted.scale == Scale.PERCENT and found.scale == Scale.RATIO:
        text = (
            "a ratio (0-1) where the other is a percent: multiply by 100 in metricsQuery, or "
            'write the HPA target as a ratio ("60" becomes "600m")'
        )
    elif wanted.scale == Scale.RATIO and found.scale == Scale.PERCENT:
        text = (
            "a percent (0-100) where the other is a ratio: divide by 100 in metricsQuery, or "
            'write the HPA target as a percent ("600m" becomes "60")'
        )
    elif {wanted.scale, found.scale} == {Scale.MIB, Scale.BYTES}:
        text = f"{found.scale.value} where the other is {wanted.scale.value}: 1 MiB = 1048576 bytes"
    else:
        text = f"{found.scale.value} where the other is {wanted.scale.value}"
    if found.exporter in _NO_POD_LABELS:
        text += f"; {found.exporter.value} writes no pod labels, so it cannot drive a Pods metric"
    elif found.exporter == Exporter.CADVISOR:
        text += "; the kubelet stopped exporting it in Kubernetes 1.28"
    return text


def alternatives_for(missing: str, present: Iterable[str]) -> list[Alternative]:
    """Names in ``present`` that a seriesQuery for ``missing`` most likely meant, best first."""
    names = [n for n in present if n and n != missing]
    wanted = lookup(missing)
    found: dict[str, Alternative] = {}

    def add(name: str, reason: str) -> None:
        if name not in found:
            metric = lookup(name)
            source = metric.exporter.value if metric else "another exporter"
            found[name] = Alternative(name, reason, source, conversion(wanted, metric))

    for name in names:
        if name.lower() == missing.lower():
            add(name, "case")
    if wanted is not None:
        wanted_family = family(wanted)
        related = {wanted_family, _STAND_INS.get(wanted_family, "")}
        same = [n for n in names if (m := lookup(n)) is not None and family(m) == wanted_family]
        stand_ins = [
            n
            for n in names
            if (m := lookup(n)) is not None and family(m) in related and n not in same
        ]
        # dcgm-exporter's own names first: that is the exporter to move to.
        for name in sorted(same, key=lambda n: (n not in DCGM_NAMES, n)):
            add(name, "family")
        for name in sorted(stand_ins):
            add(name, "family")
    for name in difflib.get_close_matches(missing, names, n=2, cutoff=0.85):
        add(name, "typo")
    return list(found.values())
