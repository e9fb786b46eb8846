"""KEDA's activation of a ScaledObject: scale to zero after the cooldown, from zero when a
trigger is active (kedacore/keda: pkg/scaling/executor/scale_scaledobjects.go ``RequestScale``,
``scaleToZeroOrIdle``, ``scaleFromZeroOrIdle``; scale_executor.go ``defaultCooldownPeriod``,
``defaultInitialCooldownPeriod``; withtriggers_types.go ``defaultPollingInterval``;
scaledobject_types.go ``GetHPAMinReplicas``)."""

from __future__ import annotations

from dataclasses import dataclass

# KEDA: pkg/scaling/executor/scale_executor.go and withtriggers_types.go.
KEDA_COOLDOWN_S = 300.0


KEDA_INITIAL_COOLDOWN_S = 0.0


KEDA_POLLING_INTERVAL_S = 30.0


@dataclass
class KedaActivation:
    """RequestScale for a ScaledObject: the 0 <-> 1 step the HPA cannot take.

    Active (a trigger's value above its activationThreshold): from 0 (or below minimum with
    idleReplicaCount) to max(minReplicaCount, 1), and lastActiveTime is now. Inactive: to
    idleReplicaCount (or minReplicaCount 0) once lastActiveTime + cooldownPeriod has passed
    (or, with no lastActiveTime, creation + initialCooldownPeriod); below minReplicaCount
    without idle replicas, up to minReplicaCount."""

    min_replica_count: int = 0
    idle_replica_count: int | None = None
    cooldown_s: float = KEDA_COOLDOWN_S
    initial_cooldown_s: float = KEDA_INITIAL_COOLDOWN_S
    created: float = 0.0
    last_active: float | None = None

    def request_scale(self, now: float, current: int, active: bool) -> int:
        minimum = self.min_replica_count
        idle = self.idle_replica_count
        if active:
            if (idle is not None and current < minimum) or current == 0:
                self.last_active = now
                return minimum if minimum > 0 else 1
            self.last_active = now
            return current
        if (idle is not None and current > idle) or (current > 0 and minimum == 0):
            if self.last_active is None:
                due = self.created + self.initial_cooldown_s < now
            else:
                due = self.last_active + self.cooldown_s < now
            if due:
                return idle if idle is not None else minimum
            return current
        if idle is None and current < minimum:
            return minimum
        return current


def hpa_min_replicas(min_replica_count: int | None) -> int:
    """GetHPAMinReplicas: the HPA KEDA generates has minReplicas of at least 1."""
    return min_replica_count if min_replica_count is not None and min_replica_count > 0 else 1
