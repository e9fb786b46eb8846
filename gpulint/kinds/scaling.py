"""The replicas an autoscaled workload can have: one range, whatever sets it.

Rules about how scaling behaves (on which signal, how fast, with which bounds) only matter
when the workload can scale out. An HPA with ``minReplicas`` equal to ``maxReplicas``, an
InferenceService pinned at one replica, a Knative Service with ``min-scale = max-scale``, or
a range whose top is one (KEDA's activation, Knative's and KServe's scale to zero: they only
switch between 0 and 1, where requests are the right signal) cannot add a pod however the
load grows. ``ScalingRange`` is that range, read the way each controller reads it:

* HPA: ``minReplicas`` (default 1) to ``maxReplicas`` (Kubernetes autoscaling/v2 types.go);
* KEDA ScaledObject: ``minReplicaCount`` (default 0: KEDA itself scales to zero) to
  ``maxReplicaCount`` (default 100) (keda scaledobject_types.go, executor);
* KServe Standard mode: ``max(minReplicas, 1)`` to ``maxReplicas`` raised to the minimum,
  so no ``maxReplicas`` means fixed (hpa_reconciler.go); Knative mode: ``minReplicas`` is
  ``min-scale`` (default 1), ``maxReplicas`` ``max-scale`` (0: no bound) (utils.go
  SetAutoScalingAnnotations);
* Knative: ``min-scale`` (default 0) to ``max-scale`` (default 0, no bound) on the revision
  template (autoscaling register.go);
* a workload nothing scales: its own ``replicas`` (default 1).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.input.document import Path, as_dict
from gpulint.kinds.knative import annotation_text

MIN_SCALE = ("autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/minScale")
MAX_SCALE = ("autoscaling.knative.dev/max-scale", "autoscaling.knative.dev/maxScale")


class ScalingRange(NamedTuple):
    """``minimum`` to ``maximum`` replicas (``maximum`` None: no bound, or not known)."""

    minimum: int | None
    maximum: int | None
    by: str  # what sets it: "HorizontalPodAutoscaler web", "InferenceService llm" ...
    path: Path | None = None  # where the bound that pins it is written

    @property
    def fixed(self) -> bool:
        return (
            self.minimum is not None and self.maximum is not None and self.minimum >= self.maximum
        )

    @property
    def scales_out(self) -> bool:
        """Can the workload get more than one pod, and more than its minimum?"""
        if self.maximum is None:
            return True
        return self.maximum > 1 and not self.fixed

    def describe(self) -> str:
        if self.maximum is None:
            return f"{self.minimum if self.minimum is not None else '?'} or more replicas"
        if self.fixed:
            return f"fixed at {self.maximum} replica{'s' * (self.maximum != 1)}"
        return f"{self.minimum if self.minimum is not None else '?'} to {self.maximum} replicas"


def _int(value: Any, default: int | None) -> int | None:
    """An integer as written (a quoted annotation too); ``default`` when absent; None when it
    cannot be told (a template placeholder)."""
    if value is None:
        return default
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit() and len(text) < 12:
            return int(text)
    return None


def hpa_range(spec: dict[str, Any], by: str) -> ScalingRange:
    minimum = _int(spec.get("minReplicas"), 1)
    maximum = _int(spec.get("maxReplicas"), None)
    return ScalingRange(minimum, maximum, by, ("spec", "maxReplicas"))


def keda_range(spec: dict[str, Any], by: str) -> ScalingRange:
    minimum = _int(spec.get("minReplicaCount"), 0)
    maximum = _int(spec.get("maxReplicaCount"), 100)
    path: Path = ("spec", "maxReplicaCount") if "maxReplicaCount" in spec else ("spec",)
    return ScalingRange(minimum, maximum, by, path)


def kserve_range(component: dict[str, Any], path: Path, standard: bool, by: str) -> ScalingRange:
    written_min = _int(component.get("minReplicas"), None if not standard else 1)
    written_max = _int(component.get("maxReplicas"), None)
    if standard:
        minimum = max(written_min, 1) if written_min is not None else None
        if written_max is None or minimum is None:
            maximum = minimum if "maxReplicas" not in component else None
        else:
            maximum = max(written_max, minimum)
        return ScalingRange(minimum, maximum, by, (*path, "maxReplicas"))
    minimum = written_min if written_min is not None else 1
    maximum = None if written_max in (None, 0) else written_max
    return ScalingRange(minimum, maximum, by, (*path, "maxReplicas"))


def knative_range(annotations: dict[str, Any], path: Path, by: str) -> ScalingRange:
    def first(keys: tuple[str, ...]) -> tuple[int | None, Path | None]:
        for key in keys:
            if key in annotations:
                return _int(annotation_text(annotations[key]), None), (*path, key)
        return (0, None)

    minimum, _ = first(MIN_SCALE)
    maximum, max_path = first(MAX_SCALE)
    return ScalingRange(minimum, None if maximum == 0 else maximum, by, max_path)


def replicas_range(spec: Any, by: str) -> ScalingRange:
    replicas = _int(as_dict(spec).get("replicas"), 1)
    return ScalingRange(replicas, replicas, by, ("spec", "replicas"))
