"""Serving metrics by release: who exports a series, where it comes from, and the names that
were removed or renamed, with the release and the name to use instead.

Where a series comes from decides whether it exists while its workload runs no pod: a model
server's own metrics (vLLM's ``vllm:*``, Triton's ``nv_inference_*``, TGI's ``tgi_*``,
SGLang's ``sglang:*``) are scraped from its pods, and dcgm-exporter's per-GPU series carry a
pod only while the pod holds the GPU; with no pod there is no series. The llm-d endpoint
picker (EPP) runs in front of the pods and keeps exporting its queue and pool signals at zero
replicas, which is why llm-d wakes pools on them.

Renames, each with its source:

* vLLM deprecated ``vllm:gpu_cache_usage_perc`` (and ``vllm:gpu_prefix_cache_queries``,
  ``vllm:gpu_prefix_cache_hits``) for ``vllm:kv_cache_usage_perc`` (``vllm:prefix_cache_*``)
  in 0.10 (vllm-project/vllm#18354; vLLM 0.10.0's /metrics marks them DEPRECATED,
  vllm-project/production-stack#617). vLLM hides a metric deprecated in X.Y from X.Y+1 and
  removes it in X.Y+2 (its metrics docs, quoted in vllm-project/vllm#29330), and #29330
  removed these three in the 0.12 cycle (merged 2025-11-24).
* vLLM deprecated ``vllm:num_requests_swapped``, ``vllm:cpu_cache_usage_perc`` and the
  ``*_prefix_cache_hit_rate`` gauges in 0.8 with no replacement in V1 (vllm-project/vllm#14136,
  hidden by #15458).
* The llm-d EPP renamed its metrics to the ``llm_d_epp_`` prefix and writes the old names too
  for a while (deprecated, not removed): ``inference_objective_request_total`` says "Use
  llm_d_epp_request_total", ``inference_extension_scheduler_attempts_total`` became
  ``llm_d_epp_scheduler_attempts_total`` in EPP 0.9 (llm-d/llm-d-router metrics tests; the
  llm-d guides moved in llm-d/llm-d#1850 and #1880).
* dcgm-exporter's 1.x names (``dcgm_gpu_utilization`` ...) are kept in ``gpulint.metrics.names``
  with their DCGM_FI_* equivalents; GL402 reports them. dcgm-exporter 2.x names series after
  DCGM fields and writes the 1.x names, since 2.3.0, only with its 1.x compatibility file
  (NVIDIA/gpu-monitoring-tools#143).

Triton Inference Server and TGI have renamed nothing gpulint knows of.
"""

from __future__ import annotations

from typing import NamedTuple

from gpulint.metrics.names import canonical_metric_name, is_dcgm_field


class Rename(NamedTuple):
    """A series name a project stopped exporting (``removed_in``) or still writes beside its
    new name (``deprecated_in`` only)."""

    name: str
    project: str
    replacement: str | None  # None: removed with nothing in its place
    deprecated_in: str
    removed_in: str | None = None
    source: str = ""

    def describe(self) -> str:
        """``vllm:gpu_cache_usage_perc was removed in vLLM 0.12 (deprecated in 0.10)``."""
        if self.removed_in:
            return (
                f"{self.name} was removed in {self.project} {self.removed_in} (deprecated in "
                f"{self.deprecated_in})"
            )
        return f"{self.name} is deprecated since {self.project} {self.deprecated_in}"

    def instead(self) -> str:
        if self.replacement:
            return f"use {self.replacement}"
        return f"{self.project} has nothing in its place"


VLLM, EPP = "vLLM", "llm-d EPP"
_VLLM_GPU_PREFIX = "vllm-project/vllm#18354, #29330"
_VLLM_V0 = "vllm-project/vllm#14136, #15458"

RENAMES: dict[str, Rename] = {
    rename.name: rename
    for rename in (
        Rename(
            "vllm:gpu_cache_usage_perc",
            VLLM,
            "vllm:kv_cache_usage_perc",
            "0.10",
            "0.12",
            _VLLM_GPU_PREFIX,
        ),
        Rename(
            "vllm:gpu_prefix_cache_queries",
            VLLM,
            "vllm:prefix_cache_queries",
            "0.10",
            "0.12",
            _VLLM_GPU_PREFIX,
        ),
        Rename(
            "vllm:gpu_prefix_cache_hits",
            VLLM,
            "vllm:prefix_cache_hits",
            "0.10",
            "0.12",
            _VLLM_GPU_PREFIX,
        ),
        Rename("vllm:num_requests_swapped", VLLM, None, "0.8", "0.10", _VLLM_V0),
        Rename("vllm:cpu_cache_usage_perc", VLLM, None, "0.8", "0.10", _VLLM_V0),
        Rename(
            "vllm:gpu_prefix_cache_hit_rate",
            VLLM,
            "vllm:prefix_cache_hits / vllm:prefix_cache_queries",
            "0.8",
            "0.10",
            _VLLM_V0,
        ),
        Rename(
            "inference_objective_request_total",
            EPP,
            "llm_d_epp_request_total",
            "0.9",
            None,
            "llm-d/llm-d-router metrics tests",
        ),
        Rename(
            "inference_extension_scheduler_attempts_total",
            EPP,
            "llm_d_epp_scheduler_attempts_total",
            "0.9",
            None,
            "llm-d/llm-d-router metrics tests",
        ),
    )
}
# The EPP families renamed as a whole: an old name not listed above still has its successor
# under the new prefix, whose exact name gpulint does not know.
RENAMED_FAMILIES = (("inference_objective_", EPP, "llm_d_epp_"),)

# The vLLM production-stack router exports these under vLLM's prefix from its own pod, not
# from the vLLM pods it routes to (src/vllm_router/services/metrics_service): a keep-alive on
# vllm:num_incoming_requests_total, labelled by model alone, has a value while every backend
# is at zero. (It also exports vllm:num_requests_running and vllm:num_requests_waiting per
# backend server, which, like vLLM's own, exist only while that backend runs.)
ROUTER_SERIES = frozenset(
    f"vllm:{name}"
    for name in (
        "num_incoming_requests",
        "current_qps",
        "avg_decoding_length",
        "num_prefill_requests",
        "num_decoding_requests",
        "healthy_pods_total",
        "avg_latency",
        "avg_itl",
        "input_tokens",
        "output_tokens",
        "request_errors",
    )
)

# Where a series comes from: a prefix, the project, and whether its pods serve it.
_SOURCES = (
    ("vllm:", VLLM, True),
    ("nv_inference_", "Triton Inference Server", True),
    ("nv_gpu_", "Triton Inference Server", True),
    ("tgi_", "Text Generation Inference", True),
    ("sglang:", "SGLang", True),
    ("llm_d_epp_", EPP, False),
    ("inference_objective_", EPP, False),
    ("inference_pool_", EPP, False),
    ("inference_extension_", EPP, False),
)


def renamed(series: str) -> Rename | None:
    """What gpulint knows of a series that was renamed or removed, if anything."""
    name = canonical_metric_name(series)
    known = RENAMES.get(name)
    if known is not None:
        return known
    # A counter is exposed with _total (and _created) after its name.
    for suffix in ("_total", "_created"):
        base = RENAMES.get(name.removesuffix(suffix)) if name.endswith(suffix) else None
        if base is not None:
            new = base.replacement
            return base._replace(
                name=name,
                replacement=new + suffix if new and " " not in new else new,
            )
    for old, project, new in RENAMED_FAMILIES:
        if name.startswith(old):
            return Rename(name, project, None, "0.9", None, f"the {new}* names")
    return None


def family_hint(rename: Rename) -> str:
    """For a renamed family member without a known successor: where to look."""
    for old, _, new in RENAMED_FAMILIES:
        if rename.name.startswith(old):
            return f"its successor is named {new}...: read the EPP's /metrics for the exact name"
    return ""


def project_of(series: str) -> str | None:
    """The serving project a series name belongs to, if gpulint knows it."""
    name = canonical_metric_name(series)
    return next((project for prefix, project, _ in _SOURCES if name.startswith(prefix)), None)


def from_the_pods(series: str) -> str | None:
    """Who exports a series that exists only while the workload runs pods (None: it may exist
    without them, or gpulint cannot tell): the model server scraped from its own pods, or
    dcgm-exporter, whose per-GPU series name a pod only while it holds the GPU."""
    name = canonical_metric_name(series)
    if name in ROUTER_SERIES or name.removesuffix("_total") in ROUTER_SERIES:
        return None  # the router's own, with or without backends
    for prefix, project, in_pods in _SOURCES:
        if name.startswith(prefix):
            return f"{project}'s pods" if in_pods else None
    if is_dcgm_field(name):
        return "dcgm-exporter's series of the pods' GPUs"
    return None
