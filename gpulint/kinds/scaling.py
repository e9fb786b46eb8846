"""The replicas an autoscaled workload can have: one range, whatever sets it.

Rules about how scaling behaves (on which signal, how fast, with which bounds) only matter
when the workload can scale out. An HPA with ``minReplicas`` equal to ``maxReplicas``, an
InferenceService pinned at one replica, a Knative Service with ``min-scale = max-scale``, or
a range whose top is one (KEDA's activation, Knative's and KServe's scale to zero: they only
switch between 0 and 1, where requests are the right signal) cannot add a pod however the
load grows. ``ScalingRange`` is that range; each kind's view reads it the way its controller
does (``KindView.scaling_range_of``; the HPA, KEDA, KServe and Knative views say how). A
workload nothing scales has its own ``replicas`` (default 1).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.input.document import Path, as_dict


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


def replica_count(value: Any, default: int | None) -> int | None:
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


def replicas_range(spec: Any, by: str) -> ScalingRange:
    replicas = replica_count(as_dict(spec).get("replicas"), 1)
    return ScalingRange(replicas, replicas, by, ("spec", "replicas"))
