"""AIBrix PodAutoscaler: what it scales, and the HPA its HPA strategy makes.

Facts (vllm-project/aibrix@e3e10f9, v0.7.0 and later):

* ``autoscaling.aibrix.ai/v1alpha1`` PodAutoscaler (api/autoscaling/v1alpha1/
  podautoscaler_types.go): ``scaleTargetRef`` (a core/v1 ObjectReference), ``minReplicas``
  (1 when unset: pkg/utils/paschedules ``BaseBounds``), ``maxReplicas``, ``metricsSources``
  (``metricSourceType`` pod, resource, custom, external or domain; ``targetMetric``;
  ``targetValue`` as a string) and ``scalingStrategy`` HPA, KPA or APA.
* ``scalingStrategy: HPA`` makes an HPA ``<name>-hpa`` on the same target
  (pkg/controller/podautoscaler/hpa_resources.go ``makeHPAWithBounds``): ``targetMetric`` cpu
  becomes a Resource cpu Utilization metric of ``ceil(targetValue)``, memory a Resource memory
  AverageValue of ``targetValue`` MiB, any other name a Pods metric of that name (read through
  the custom metrics API, whatever the ``metricSourceType``) with an AverageValue of
  ``targetValue`` truncated to an integer; its behavior comes from the PodAutoscaler's
  annotations (``buildHPABehavior``), not from a field.
* KPA and APA compute the replicas in AIBrix's controller and write them through the target's
  ``/scale`` subresource (podautoscaler_controller.go ``reconcileCustomPA``, ``updateScale``).
* AIBrix refuses a second PodAutoscaler on a target (condition
  ``MultiPodAutoscalerConflict``, ``checkNoMultiPodAutoscalerConflict``); nothing in AIBrix
  looks for an HPA or a KEDA ScaledObject on it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from gpulint.input.document import Manifest, Path, as_dict, as_list
from gpulint.kinds.generated import GeneratedHPA
from gpulint.kinds.hpa import HpaMetric, MetricTarget
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef, named_target
from gpulint.kinds.scaling import ScalingRange, replica_count
from gpulint.kinds.view import KindView, TraceSource

AIBRIX_GROUP = "autoscaling.aibrix.ai"
PODAUTOSCALER_KIND = "PodAutoscaler"
STRATEGIES = ("HPA", "KPA", "APA")
# Where AIBrix writes what targetValue means for its HPA's metrics (hpa_resources.go).
_MIB = 1024 * 1024


def _target_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


class AIBrixPodAutoscaler(KindView):
    """An AIBrix PodAutoscaler. Of the kinds protocol it answers ``replica_claims`` (its
    ``scaleTargetRef``), ``scaling_range_of`` and, with the HPA strategy,
    ``generated_autoscalers`` (the HPA ``<name>-hpa``), the metrics that HPA reads through
    prometheus-adapter and their traces."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        spec = as_dict(manifest.data.get("spec"))
        self.spec = spec
        self.target_ref: TargetRef | None = named_target(spec)
        strategy = spec.get("scalingStrategy")
        self.strategy = strategy if isinstance(strategy, str) else ""
        self.sources: list[dict[str, Any]] = [
            s for s in as_list(spec.get("metricsSources")) if isinstance(s, dict)
        ]
        self._hpa = self._generated_hpa() if self.strategy == "HPA" else None
        self.reads_metrics_api = self._hpa is not None and bool(self._hpa.adapter_reads())

    def scaling_range(self) -> ScalingRange:
        minimum = replica_count(self.spec.get("minReplicas"), 1)
        maximum = replica_count(self.spec.get("maxReplicas"), None)
        return ScalingRange(
            minimum, maximum, f"AIBrix PodAutoscaler {self.name}", ("spec", "maxReplicas")
        )

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        strategy = f" ({self.strategy})" if self.strategy else ""
        return f"AIBrix PodAutoscaler {where}{self.name}{strategy}"

    @property
    def hpa(self) -> GeneratedHPA | None:
        """The HPA ``<name>-hpa`` of the HPA strategy."""
        return self._hpa

    def _generated_hpa(self) -> GeneratedHPA | None:
        if self.target_ref is None:
            return None
        metrics = [
            metric
            for index, source in enumerate(self.sources)
            if (metric := _hpa_metric(index, source)) is not None
        ]
        return GeneratedHPA(
            self.manifest,
            f"{self.name}-hpa",
            self.target_ref,
            {},
            ("spec",),
            self.scaling_range(),
            metrics=metrics,
            behavior_written=False,
            metric_name_key="targetMetric",
        )

    # --- the kind protocol (gpulint.kinds.view) ---------------------------------------------

    def replica_claims(self) -> list[ReplicaClaim]:
        if self.target_ref is None or self.generator() is not None:
            return []
        hpa = f"{self.name}-hpa" if self.strategy == "HPA" else self.name
        return [
            ReplicaClaim(
                PODAUTOSCALER_KIND,
                self.target_ref.path,
                hpa,
                self.describe(),
                ref=self.target_ref,
                note=self.strategy,
            )
        ]

    def scaling_range_of(self, workload: str) -> ScalingRange | None:
        return self.scaling_range()

    def generated_autoscalers(self) -> list[KindView]:
        return [self._hpa] if self._hpa is not None else []

    def adapter_reads(self) -> list[Any]:
        return list(self._hpa.adapter_reads()) if self._hpa is not None else []

    def scope_items(self) -> Iterator[tuple[str, Any]]:
        if self._hpa is not None:
            yield "autoscaler", self._hpa
            yield "metrics-reader", self._hpa

    def trace_sources(self) -> list[TraceSource]:
        return self._hpa.trace_sources() if self._hpa is not None else []


def _hpa_metric(index: int, source: dict[str, Any]) -> HpaMetric | None:
    """The HPA metric the HPA strategy makes of one metrics source (hpa_resources.go)."""
    name = source.get("targetMetric")
    number = _target_number(source.get("targetValue"))
    if not isinstance(name, str) or not name or number is None:
        return None  # AIBrix refuses the PodAutoscaler ("failed to parse target value")
    path: Path = ("spec", "metricsSources", index)
    written = (("averageValue", "targetValue"), ("averageUtilization", "targetValue"))
    lowered = name.lower()
    if lowered == "cpu":
        target = MetricTarget("Utilization", None, None, math.ceil(number), path, written)
        kind = "Resource"
    elif lowered == "memory":
        target = MetricTarget("AverageValue", None, int(number) * _MIB, None, path, written)
        kind = "Resource"
    else:
        target = MetricTarget("AverageValue", None, int(number), None, path, written)
        kind = "Pods"
    shown = lowered if kind == "Resource" else name
    return HpaMetric(index, kind, path, shown, (*path, "targetMetric"), target)


def is_aibrix_podautoscaler(manifest: Manifest) -> bool:
    return manifest.kind == PODAUTOSCALER_KIND and manifest.group == AIBRIX_GROUP
