"""How many GPUs an HPA's Pods metric adds up per pod.

dcgm-exporter writes one series per GPU, labelled with the pod that holds it
(NVIDIA/dcgm-exporter internal/pkg/transformation/kubernetes.go). A prometheus-adapter rule
whose query is ``sum(<series>) by (...)`` therefore serves, per pod, the sum over that pod's
GPUs: a 0-100 percentage reaches 200 on a two-GPU pod, a 0-1 ratio 2. GL406 reports a target
still on the one-GPU scale; GL107 judges the scale of a target (and writes its fix) against
the summed range, so that the two agree on what the right target is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulint.metrics.names import Exporter, GpuMetric, Scale, lookup
from gpulint.metrics.promql import metric_names_in_query, placed_aggregations, top_level_text

if TYPE_CHECKING:
    from gpulint.chain.adapter import AdapterRule
    from gpulint.inventory import Inventory, ResolvedTarget
    from gpulint.kinds.hpa import HPA, HpaMetric
    from gpulint.kinds.workload import PodTemplate

# The largest value one GPU's series takes on each bounded scale.
ONE_GPU_MAX = {Scale.PERCENT: 100.0, Scale.RATIO: 1.0}


def summed_gpu_series(rule: AdapterRule, name: str) -> tuple[str, GpuMetric, int] | None:
    """(series, what it is, offset of the ``sum``) when the rule's whole query is one
    ``sum ... by`` over a per-GPU dcgm-exporter series on a bounded scale."""
    query = rule.metrics_query
    if not query:
        return None
    placed = [p for p in placed_aggregations(query) if p.depth == 0]
    words = top_level_text(query).split()
    if len(placed) != 1 or placed[0].aggregation.operator != "sum" or words[:1] != ["sum"]:
        return None
    if words not in (["sum", "by"], ["sum"]):
        return None  # combined with something else (a division by the GPU count, say)
    candidates = rule.series_for(name) or []
    candidates += [n for n in metric_names_in_query(query) if n not in candidates]
    for series in candidates:
        metric = lookup(series)
        if metric is not None and metric.exporter is Exporter.DCGM and metric.scale in ONE_GPU_MAX:
            return series, metric, placed[0].start
    return None


def gpus_per_pod(target: ResolvedTarget, inventory: Inventory) -> tuple[int, PodTemplate | None]:
    """The most GPUs a pod of ``target`` holds (0 when unknown), and the template asking."""
    best: tuple[int, PodTemplate | None] = (0, None)
    for template in target.templates:
        count = template.gpus_per_pod(inventory.gpu_names)
        if count is not None and count > best[0]:
            best = (count, template)
    return best


def gpus_summed(hpa: HPA, metric: HpaMetric, inventory: Inventory) -> int:
    """How many GPU series ``metric`` adds up per pod of the HPA's target: the GPUs a pod holds
    when an adapter rule serving it sums a per-GPU series (GL406's test), else 1."""
    if metric.type != "Pods" or not metric.name or hpa.target_ref is None:
        return 1
    rules = inventory.rules_exposing(metric.name, metric.api, near=hpa.manifest)
    if not any(summed_gpu_series(rule, metric.name) is not None for rule in rules):
        return 1
    target = inventory.resolve_target(hpa.namespace, hpa.target_ref, hpa.manifest)
    return max(gpus_per_pod(target, inventory)[0], 1)
