"""What gpulint knows about GPU metric names: who exports them, in which unit, on which scale.

Sources: NVIDIA dcgm-exporter etc/default-counters.csv and etc/1.x-compatibility-metrics.csv;
mindprince/nvidia_gpu_prometheus_exporter; utkuozdemir/nvidia_gpu_exporter; cAdvisor's
accelerator metrics; GKE system metrics; Triton's and NVIDIA NIM's own GPU metrics. Units
come from each exporter's help text.
"""

from __future__ import annotations

import enum
import functools
import re
from typing import NamedTuple


class Scale(enum.Enum):
    PERCENT = "percent (0-100)"
    RATIO = "ratio (0-1)"
    MIB = "MiB"
    BYTES = "bytes"
    BYTES_PER_SECOND = "bytes/s"
    OTHER = "other"


class Exporter(enum.Enum):
    DCGM = "dcgm-exporter"
    DCGM_1X = "dcgm-exporter 1.x compatibility names"
    MINDPRINCE = "nvidia_gpu_prometheus_exporter (legacy)"
    NVIDIA_SMI = "nvidia_gpu_exporter (nvidia-smi)"
    CADVISOR = "kubelet/cAdvisor accelerator metrics (removed in Kubernetes 1.28)"
    GKE = "GKE system metrics"
    VLLM = "vLLM"
    TRITON = "Triton Inference Server"


class GpuMetric(NamedTuple):
    name: str
    exporter: Exporter
    scale: Scale
    help: str
    enabled_by_default: bool = True
    # The dcgm-exporter metric that replaces a legacy one, and how to convert.
    dcgm_equivalent: str | None = None
    conversion: str = ""
    reported_on_mig: bool = True


def _dcgm(name: str, scale: Scale, text: str, enabled: bool = True, mig: bool = True) -> GpuMetric:
    return GpuMetric(name, Exporter.DCGM, scale, text, enabled, reported_on_mig=mig)


_O, _P, _R, _MIB = Scale.OTHER, Scale.PERCENT, Scale.RATIO, Scale.MIB

_DCGM_METRICS = [
    _dcgm("DCGM_FI_DEV_SM_CLOCK", _O, "SM clock frequency (MHz)"),
    _dcgm("DCGM_FI_DEV_MEM_CLOCK", _O, "memory clock frequency (MHz)"),
    _dcgm("DCGM_FI_DEV_MEMORY_TEMP", _O, "memory temperature (C)"),
    _dcgm("DCGM_FI_DEV_GPU_TEMP", _O, "GPU temperature (C)"),
    _dcgm("DCGM_FI_DEV_POWER_USAGE", _O, "power draw (W)"),
    _dcgm("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", _O, "energy since boot (mJ, counter)"),
    _dcgm("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", _O, "PCIe retries (counter)"),
    # GPU_UTIL is not reported on MIG instances (NVIDIA/DCGM#80, dcgm-exporter#216).
    _dcgm("DCGM_FI_DEV_GPU_UTIL", _P, "GPU utilization (%)", mig=False),
    _dcgm("DCGM_FI_DEV_MEM_COPY_UTIL", _P, "memory copy utilization (%)", mig=False),
    _dcgm("DCGM_FI_DEV_ENC_UTIL", _P, "encoder utilization (%)", mig=False),
    _dcgm("DCGM_FI_DEV_DEC_UTIL", _P, "decoder utilization (%)", mig=False),
    _dcgm("DCGM_FI_DEV_XID_ERRORS", _O, "last XID error"),
    _dcgm("DCGM_FI_DEV_FB_FREE", _MIB, "framebuffer memory free (MiB)"),
    _dcgm("DCGM_FI_DEV_FB_USED", _MIB, "framebuffer memory used (MiB)"),
    _dcgm("DCGM_FI_DEV_FB_RESERVED", _MIB, "framebuffer memory reserved (MiB)"),
    _dcgm("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", _O, "NVLink bandwidth counters, all lanes"),
    _dcgm("DCGM_FI_DEV_VGPU_LICENSE_STATUS", _O, "vGPU license status"),
    _dcgm("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", _O, "remapped rows, uncorrectable"),
    _dcgm("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", _O, "remapped rows, correctable"),
    _dcgm("DCGM_FI_DEV_ROW_REMAP_FAILURE", _O, "row remapping failed"),
    _dcgm("DCGM_FI_PROF_GR_ENGINE_ACTIVE", _R, "ratio of time the graphics engine is active"),
    _dcgm("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", _R, "ratio of cycles the tensor pipe is active"),
    _dcgm("DCGM_FI_PROF_DRAM_ACTIVE", _R, "ratio of cycles device memory is active"),
    _dcgm("DCGM_FI_PROF_PCIE_TX_BYTES", Scale.BYTES_PER_SECOND, "PCIe transmit rate (bytes/s)"),
    _dcgm("DCGM_FI_PROF_PCIE_RX_BYTES", Scale.BYTES_PER_SECOND, "PCIe receive rate (bytes/s)"),
    # Shipped commented out in default-counters.csv: they exist once enabled.
    _dcgm("DCGM_FI_PROF_SM_ACTIVE", _R, "ratio of cycles an SM has a warp assigned", False),
    _dcgm("DCGM_FI_PROF_SM_OCCUPANCY", _R, "ratio of warps resident on an SM", False),
    _dcgm("DCGM_FI_PROF_PIPE_FP64_ACTIVE", _R, "ratio of cycles the fp64 pipes are active", False),
    _dcgm("DCGM_FI_PROF_PIPE_FP32_ACTIVE", _R, "ratio of cycles the fp32 pipes are active", False),
    _dcgm("DCGM_FI_PROF_PIPE_FP16_ACTIVE", _R, "ratio of cycles the fp16 pipes are active", False),
    _dcgm("DCGM_FI_PROF_NVLINK_TX_BYTES", Scale.BYTES_PER_SECOND, "NVLink transmit rate", False),
    _dcgm("DCGM_FI_PROF_NVLINK_RX_BYTES", Scale.BYTES_PER_SECOND, "NVLink receive rate", False),
    _dcgm("DCGM_FI_DEV_POWER_VIOLATION", _O, "power throttling (ns)", False),
    _dcgm("DCGM_FI_DEV_THERMAL_VIOLATION", _O, "thermal throttling (ns)", False),
    _dcgm("DCGM_FI_DEV_SYNC_BOOST_VIOLATION", _O, "sync-boost throttling (ns)", False),
    _dcgm("DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", _O, "board-limit throttling (ns)", False),
    _dcgm("DCGM_FI_DEV_LOW_UTIL_VIOLATION", _O, "low-utilization throttling (ns)", False),
    _dcgm("DCGM_FI_DEV_RELIABILITY_VIOLATION", _O, "reliability throttling (ns)", False),
    _dcgm("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", _O, "single-bit volatile ECC errors", False),
    _dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", _O, "double-bit volatile ECC errors", False),
    _dcgm("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", _O, "single-bit persistent ECC errors", False),
    _dcgm("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", _O, "double-bit persistent ECC errors", False),
    _dcgm("DCGM_FI_DEV_RETIRED_SBE", _O, "pages retired after single-bit errors", False),
    _dcgm("DCGM_FI_DEV_RETIRED_DBE", _O, "pages retired after double-bit errors", False),
    _dcgm("DCGM_FI_DEV_RETIRED_PENDING", _O, "pages pending retirement", False),
    _dcgm("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", _O, "NVLink flit CRC errors", False),
    _dcgm("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", _O, "NVLink data CRC errors", False),
    _dcgm("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", _O, "NVLink retries", False),
    _dcgm("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", _O, "NVLink recovery errors", False),
    _dcgm("DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", _O, "NVLink lane 0 bytes", False),
    _dcgm("DCGM_FI_DEV_GPU_UTIL_SAMPLES", _P, "GPU utilization samples", False, mig=False),
    _dcgm("DCGM_FI_DEV_MEM_COPY_UTIL_SAMPLES", _P, "memory utilization samples", False),
    _dcgm("DCGM_FI_DEV_FB_TOTAL", _MIB, "framebuffer memory total (MiB)", False),
    _dcgm("DCGM_FI_DEV_FB_USED_PERCENT", _R, "framebuffer memory used (ratio)", False),
    _dcgm("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", _O, "clock throttle reasons", False),
    _dcgm("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", _O, "clock event reasons", False),
]

_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
_FB_USED = "DCGM_FI_DEV_FB_USED"
_FB_FREE = "DCGM_FI_DEV_FB_FREE"


def _legacy(
    name: str,
    exporter: Exporter,
    scale: Scale,
    text: str,
    equivalent: str | None = None,
    conversion: str = "",
) -> GpuMetric:
    return GpuMetric(name, exporter, scale, text, True, equivalent, conversion)


_LEGACY_METRICS = [
    _legacy(
        "dcgm_gpu_utilization",
        Exporter.DCGM_1X,
        _P,
        "GPU utilization (%)",
        _GPU_UTIL,
        "same scale (percent)",
    ),
    _legacy(
        "dcgm_fb_used",
        Exporter.DCGM_1X,
        _MIB,
        "framebuffer used (MiB)",
        _FB_USED,
        "same unit (MiB)",
    ),
    _legacy(
        "dcgm_fb_free",
        Exporter.DCGM_1X,
        _MIB,
        "framebuffer free (MiB)",
        _FB_FREE,
        "same unit (MiB)",
    ),
    _legacy(
        "dcgm_mem_copy_utilization",
        Exporter.DCGM_1X,
        _P,
        "memory copy utilization (%)",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "same scale (percent)",
    ),
    _legacy(
        "dcgm_fi_prof_gr_engine_active",
        Exporter.DCGM_1X,
        _R,
        "graphics engine active (ratio, although its help text says %)",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "same scale (ratio 0-1)",
    ),
    _legacy(
        "nvidia_gpu_duty_cycle",
        Exporter.MINDPRINCE,
        _P,
        "GPU duty cycle (%)",
        _GPU_UTIL,
        "same scale (percent); note this exporter has no pod labels",
    ),
    _legacy(
        "nvidia_gpu_memory_used_bytes",
        Exporter.MINDPRINCE,
        Scale.BYTES,
        "GPU memory used (bytes)",
        _FB_USED,
        "DCGM_FI_DEV_FB_USED is in MiB: multiply by 1048576 to compare with bytes",
    ),
    _legacy(
        "nvidia_gpu_memory_total_bytes",
        Exporter.MINDPRINCE,
        Scale.BYTES,
        "GPU memory total (bytes)",
        None,
        "DCGM has no total: use DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE (MiB)",
    ),
    _legacy("nvidia_gpu_num_devices", Exporter.MINDPRINCE, _O, "number of GPUs"),
    _legacy(
        "nvidia_gpu_power_usage_milliwatts",
        Exporter.MINDPRINCE,
        _O,
        "power (mW)",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM reports watts: divide milliwatts by 1000",
    ),
    _legacy(
        "nvidia_gpu_temperature_celsius",
        Exporter.MINDPRINCE,
        _O,
        "temperature (C)",
        "DCGM_FI_DEV_GPU_TEMP",
        "same unit (C)",
    ),
    _legacy("nvidia_gpu_fanspeed_percent", Exporter.MINDPRINCE, _P, "fan speed (%)"),
    _legacy(
        "nvidia_smi_utilization_gpu_ratio",
        Exporter.NVIDIA_SMI,
        _R,
        "GPU utilization (ratio 0-1)",
        _GPU_UTIL,
        "DCGM_FI_DEV_GPU_UTIL is a percent: multiply the ratio by 100",
    ),
    _legacy(
        "nvidia_smi_utilization_memory_ratio",
        Exporter.NVIDIA_SMI,
        _R,
        "memory utilization (ratio 0-1)",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL is a percent: multiply the ratio by 100",
    ),
    _legacy(
        "nvidia_smi_memory_used_bytes",
        Exporter.NVIDIA_SMI,
        Scale.BYTES,
        "GPU memory used (bytes)",
        _FB_USED,
        "DCGM_FI_DEV_FB_USED is in MiB: multiply by 1048576 to compare with bytes",
    ),
    _legacy(
        "nvidia_smi_memory_total_bytes",
        Exporter.NVIDIA_SMI,
        Scale.BYTES,
        "GPU memory total (bytes)",
    ),
    _legacy(
        "container_accelerator_duty_cycle",
        Exporter.CADVISOR,
        _P,
        "GPU duty cycle (%)",
        _GPU_UTIL,
        "same scale (percent); kubelet stopped exporting it (gate removed in 1.28)",
    ),
    _legacy(
        "container_accelerator_memory_used_bytes",
        Exporter.CADVISOR,
        Scale.BYTES,
        "GPU memory used (bytes)",
        _FB_USED,
        "DCGM_FI_DEV_FB_USED is in MiB: multiply by 1048576 to compare with bytes",
    ),
    _legacy(
        "container_accelerator_memory_total_bytes",
        Exporter.CADVISOR,
        Scale.BYTES,
        "GPU memory total (bytes)",
    ),
    # Triton's own GPU metrics (server/docs/user_guide/metrics.md), one series per GPU.
    _legacy("nv_gpu_utilization", Exporter.TRITON, _R, "GPU utilization (fraction 0-1)"),
    _legacy("nv_gpu_memory_used_bytes", Exporter.TRITON, Scale.BYTES, "GPU memory used"),
    _legacy("nv_gpu_memory_total_bytes", Exporter.TRITON, Scale.BYTES, "GPU memory total"),
    _legacy("nv_gpu_power_usage", Exporter.TRITON, _O, "GPU power draw (W)"),
    _legacy("nv_gpu_power_limit", Exporter.TRITON, _O, "GPU power limit (W)"),
    # vLLM reports KV-cache usage as a fraction ("1 means 100 percent usage") despite "_perc".
    _legacy("vllm:gpu_cache_usage_perc", Exporter.VLLM, _R, "KV-cache usage (fraction 0-1)"),
    _legacy("vllm:kv_cache_usage_perc", Exporter.VLLM, _R, "KV-cache usage (fraction 0-1)"),
    _legacy(
        "kubernetes.io/container/accelerator/duty_cycle", Exporter.GKE, _P, "GPU duty cycle (%)"
    ),
    _legacy(
        "kubernetes.io/container/accelerator/memory_used",
        Exporter.GKE,
        Scale.BYTES,
        "GPU memory used (bytes)",
    ),
    _legacy(
        "kubernetes.io/container/accelerator/memory_total",
        Exporter.GKE,
        Scale.BYTES,
        "GPU memory total (bytes)",
    ),
    _legacy("kubernetes.io/container/accelerator/request", Exporter.GKE, _O, "GPUs requested"),
]

# Lowercased names; where a legacy name differs from a dcgm-exporter one only in case
# (dcgm_fi_prof_gr_engine_active), the dcgm-exporter metric wins: GKE lowercases DCGM names.
KNOWN_METRICS: dict[str, GpuMetric] = {m.name.lower(): m for m in _LEGACY_METRICS + _DCGM_METRICS}
_EXACT_NAMES: dict[str, GpuMetric] = {m.name: m for m in _DCGM_METRICS + _LEGACY_METRICS}
DCGM_NAMES: tuple[str, ...] = tuple(m.name for m in _DCGM_METRICS)

# Series that model servers export from their own pods under generic names: scraped from
# the pod, they carry its namespace and pod labels, so the prometheus-adapter chart's default
# rules expose them as they are. Kept apart from KNOWN_METRICS: an HPA metric called
# gpu_utilization is far more often a renamed DCGM_FI_DEV_GPU_UTIL (percent) than NIM's
# ratio, so the name alone must not decide a scale. NVIDIA NIM's /v1/metrics
# (docs.nvidia.com/nim, "Observability").
POD_EXPORTED_GPU_SERIES: dict[str, str] = {
    name: "NVIDIA NIM"
    for name in (
        "gpu_utilization",
        "gpu_memory_used_bytes",
        "gpu_memory_total_bytes",
        "gpu_power_usage_watts",
        "gpu_power_limit_watts",
        "gpu_total_energy_consumption_joules",
    )
}

_GPU_WORD = re.compile(r"(?:^|[^a-z])(?:gpu|dcgm|nvidia)", re.IGNORECASE)

# Prefixes that say "this is meant to be a GPU metric" even when gpulint does not know the name.
_GPU_PREFIXES = ("dcgm_", "nvidia_gpu_", "nvidia_smi_", "container_accelerator_")


def canonical_metric_name(name: str) -> str:
    """Strip the wrappers managed Prometheus and metric adapters put around a series name.

    ``prometheus.googleapis.com|DCGM_FI_DEV_GPU_UTIL|gauge`` (GKE managed Prometheus),
    ``external.googleapis.com|prometheus|DCGM_FI_DEV_GPU_UTIL`` (Stackdriver adapter) and
    ``kubernetes.io|container|accelerator|duty_cycle`` all name a series gpulint knows.
    """
    if "|" not in name:
        return name
    parts = name.split("|")
    if parts[0] == "prometheus.googleapis.com" and len(parts) >= 2:
        return parts[1]
    if parts[0] == "external.googleapis.com" and len(parts) >= 3 and parts[1] == "prometheus":
        return parts[2]
    if parts[0] == "kubernetes.io":
        return "/".join(parts)
    return name


def lookup(name: str, aliases: dict[str, str] | None = None) -> GpuMetric | None:
    """The GPU metric a name refers to, case-insensitively (GKE lowercases External names)."""
    canonical = canonical_metric_name(name)
    if aliases:
        target = aliases.get(canonical) or aliases.get(canonical.lower())
        if target:
            canonical = target
    return _EXACT_NAMES.get(canonical) or KNOWN_METRICS.get(canonical.lower())


def looks_like_gpu_metric(name: str) -> bool:
    lowered = canonical_metric_name(name).lower()
    return lowered.startswith(_GPU_PREFIXES) or lowered in KNOWN_METRICS


def names_a_gpu(name: str) -> bool:
    """Does a metric name say it is about GPUs (``gpu_utilization``, ``avg_gpu_util``)?"""
    return looks_like_gpu_metric(name) or bool(_GPU_WORD.search(canonical_metric_name(name)))


def exporter_of_series(name: str) -> str | None:
    """Who is known to export a series of exactly this name, if anyone gpulint knows."""
    metric = _EXACT_NAMES.get(name)
    if metric is not None:
        return metric.exporter.value
    if is_dcgm_field(name):
        return Exporter.DCGM.value
    return POD_EXPORTED_GPU_SERIES.get(name)


def nearest_dcgm_name(name: str) -> str | None:
    """The dcgm-exporter name a misspelt one most likely meant."""
    import difflib  # only for a name that is not dcgm-exporter's: difflib costs start-up

    candidates = {n.lower(): n for n in DCGM_NAMES}
    match = difflib.get_close_matches(name.lower(), candidates, n=1, cutoff=0.75)
    return candidates[match[0]] if match else None


@functools.cache
def dcgm_field_names() -> frozenset[str]:
    """Every DCGM field and dcgm-exporter field name: what a counters file can enable
    (data/dcgm-fields.csv, from NVIDIA/go-dcgm dcgm_fields.h and NVIDIA/dcgm-exporter)."""
    from importlib import resources  # only for a name outside the known table

    text = resources.files("gpulint").joinpath("data/dcgm-fields.csv").read_text("utf-8")
    names = {line.strip() for line in text.splitlines() if line.startswith("DCGM_")}
    return frozenset(names | set(DCGM_NAMES))


class ExporterCounter(NamedTuple):
    field: str
    type: str  # gauge | counter
    enabled_in: tuple[str, ...]  # the counters files that enable it


@functools.cache
def exporter_counters() -> tuple[ExporterCounter, ...]:
    """The counters dcgm-exporter's shipped counters files enable, in the files' order
    (data/dcgm-exporter-counters.csv, from NVIDIA/dcgm-exporter etc/default-counters.csv and
    etc/dcp-metrics-included.csv)."""
    import csv  # only where the list is asked for
    from importlib import resources

    text = resources.files("gpulint").joinpath("data/dcgm-exporter-counters.csv")
    rows = [r for r in text.read_text("utf-8").splitlines() if r and not r.startswith("#")]
    return tuple(
        ExporterCounter(row["field"], row["type"], tuple(row["enabled_in"].split()))
        for row in csv.DictReader(rows)
    )


def is_dcgm_field(name: str) -> bool:
    """Could dcgm-exporter emit a series of this exact name (with the right counters file)?"""
    return name in dcgm_field_names()


_RATIO_NAME = re.compile(r"(_ratio|_fraction)$", re.IGNORECASE)
_PERCENT_NAME = re.compile(
    r"(_percent|_percentage|_pct|_util|_utilization|duty_cycle)$", re.IGNORECASE
)


def scale_of(name: str, aliases: dict[str, str] | None = None) -> Scale | None:
    """The scale of a metric by what gpulint knows, else by the conventions of its name."""
    metric = lookup(name, aliases)
    if metric is not None:
        return metric.scale
    lowered = canonical_metric_name(name).lower()
    if lowered.startswith("dcgm_fi_prof_"):
        return Scale.RATIO
    if _RATIO_NAME.search(lowered):
        return Scale.RATIO
    if _PERCENT_NAME.search(lowered):
        return Scale.PERCENT
    return None
