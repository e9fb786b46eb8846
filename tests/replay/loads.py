"""Recorded loads for the replay's end-to-end tests: a day at 15 s, backfilled with promtool.

Each scenario is a Deployment of tests/replay/fixtures/scenarios whose 8 pods (kube-state-
metrics says 8 replicas throughout) report ``DCGM_FI_DEV_GPU_UTIL`` as dcgm-exporter does
behind kube-prometheus-stack (the workload's pod in ``exported_pod``). The load is described
in pods' worth at the HPA's target: the 8 pods' mean is ``load x target / 8``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

DAY = 86400.0
STEP = 15.0
OBSERVED_PODS = 8
POD_HASH = "6d8f7c9b5"
DIURNAL_HOURS = [1, 1, 1, 1, 1, 1, 2, 3, 4, 5, 6, 6, 6, 6, 6, 5, 4, 3, 2, 2, 1, 1, 1, 1]
SPIKE_FIRST, SPIKE_EVERY, SPIKE_LENGTH = 1500.0, 1200.0, 120.0


def step_load(t: float) -> float:
    """2 pods' worth for 12 hours, then 5."""
    return 2.0 if t < DAY / 2 else 5.0


def diurnal_load(t: float) -> float:
    """A day's curve by the hour: 1 pod at night, 6 in the afternoon."""
    return float(DIURNAL_HOURS[min(int(t // 3600), 23)])


def spike_load(t: float) -> float:
    """1 pod's worth, with 2-minute bursts of 6 every 20 minutes from 00:25."""
    if t >= SPIKE_FIRST and (t - SPIKE_FIRST) % SPIKE_EVERY < SPIKE_LENGTH:
        return 6.0
    return 1.0


def ramp_load(t: float) -> float:
    """From 1 pod's worth up by one every 4 hours (offset half a step, so that no sample
    falls exactly on the controller's tolerance)."""
    return 1.0 + (t - STEP / 2) / 14400.0


# name -> (load, the HPA's target)
SCENARIOS: dict[str, tuple[Callable[[float], float], float]] = {
    "step": (step_load, 60.0),
    "diurnal": (diurnal_load, 60.0),
    "spikes": (spike_load, 20.0),
    "ramp": (ramp_load, 60.0),
}


def noisy_utilization(t: float, pod: int) -> float:
    """One pod's DCGM_FI_DEV_GPU_UTIL as a busy-or-idle sampler reads it: 0 or 100 at each
    sample, busy half the time, the pods independent (a fixed pseudo-random draw)."""
    return 100.0 if ((int(t // STEP) * 7919 + pod * 104729) * 2654435761) % 4093 < 2046 else 0.0


# Scenarios of the recommendation tests (tests/replay/test_recommend.py): a flat load all
# settings serve alike, and a noisy utilization of mean 50 that only a tolerance stops the
# replicas chasing.
RECOMMEND_SCENARIOS: dict[str, tuple[Callable[[float], float], float]] = {
    "flat": (lambda t: 3.0, 60.0),
}
PER_POD = {"noisy": noisy_utilization}


def pod_names(name: str) -> list[str]:
    return [f"{name}-{POD_HASH}-p{i:04d}" for i in range(OBSERVED_PODS)]


def openmetrics(
    start: float,
    scenarios: dict[str, tuple[Callable[[float], float], float]],
    per_pod: dict[str, Callable[[float, int], float]] | None = None,
) -> str:
    """The history of every scenario from ``start`` for a day, inclusive, every 15 s; and of
    each of ``per_pod``, whose pods report values of their own."""
    points = int(DAY / STEP) + 1
    lines = [
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
    ]
    for name, (load, target) in scenarios.items():
        values = [load(i * STEP) * target / OBSERVED_PODS for i in range(points)]
        for pod in pod_names(name):
            labels = (
                f'{{exported_namespace="ml",exported_pod="{pod}",gpu="0",'
                f'namespace="gpu-operator",pod="dcgm-exporter-x7k2p"}}'
            )
            for i, value in enumerate(values):
                assert math.isfinite(value) and value <= 100
                lines.append(f"DCGM_FI_DEV_GPU_UTIL{labels} {value:.6f} {start + i * STEP:.0f}")
    for name, utilization in (per_pod or {}).items():
        for index, pod in enumerate(pod_names(name)):
            labels = (
                f'{{exported_namespace="ml",exported_pod="{pod}",gpu="0",'
                f'namespace="gpu-operator",pod="dcgm-exporter-x7k2p"}}'
            )
            for i in range(points):
                value = utilization(i * STEP, index)
                lines.append(f"DCGM_FI_DEV_GPU_UTIL{labels} {value:.6f} {start + i * STEP:.0f}")
    lines += [
        "# HELP kube_deployment_status_replicas The number of replicas per deployment.",
        "# TYPE kube_deployment_status_replicas gauge",
    ]
    for name in [*scenarios, *(per_pod or {})]:
        labels = f'{{deployment="{name}",namespace="ml"}}'
        for i in range(points):
            lines.append(
                f"kube_deployment_status_replicas{labels} {OBSERVED_PODS} {start + i * STEP:.0f}"
            )
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def history_start(now: float) -> float:
    """Midnight UTC two days before ``now``: a whole day, well inside the retention."""
    return math.floor(now / DAY) * DAY - 2 * DAY


def prometheus_config() -> str:
    return '{"global": {"scrape_interval": "15s"}, "scrape_configs": []}'


def write_history(path: Path, start: float) -> None:
    path.write_text(openmetrics(start, SCENARIOS))
