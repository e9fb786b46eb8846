"""The HPA controller's settings: the kube-controller-manager flags' defaults (sync period,
tolerance, downscale stabilization) and ``spec.behavior`` after the API server's defaulting
(kubernetes: pkg/apis/autoscaling/v2/defaults.go, ``GenerateHPAScaleUpRules``,
``GenerateHPAScaleDownRules``)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from gpulint.core.quantity import try_quantity
from gpulint.engine.versions import Release

# kube-controller-manager: --horizontal-pod-autoscaler-sync-period default 15s.
SYNC_PERIOD_S = 15.0


# --horizontal-pod-autoscaler-tolerance default 0.1: a ratio within 0.9..1.1 changes nothing.
TOLERANCE = 0.1

# behavior.scaleUp/scaleDown.tolerance replaces the flag per HPA and direction once the
# HPAConfigurableTolerance gate is on: by default from Kubernetes 1.35 (KEP-4951; beta in
# kubernetes/kubernetes#133128, GA in 1.37 #140107). Before, the API server drops the field.
TOLERANCE_FIELD_FROM = Release(1, 35)


class Tolerances(NamedTuple):
    """The ratios around 1 within which the controller keeps the replicas
    (replica_calculator.go ``Tolerances.isWithin``; ``tolerancesForHpa`` in horizontal.go
    takes each direction's from ``spec.behavior`` when set, else the flag's)."""

    down: float = TOLERANCE
    up: float = TOLERANCE

    def within(self, ratio: float) -> bool:
        return 1.0 - self.down <= ratio <= 1.0 + self.up

    @classmethod
    def from_spec(cls, behavior: Any, kubernetes: Release) -> Tolerances:
        """The HPA's tolerances on a cluster running ``kubernetes``."""
        if not isinstance(behavior, dict) or kubernetes < TOLERANCE_FIELD_FROM:
            return cls()
        return cls(_tolerance(behavior.get("scaleDown")), _tolerance(behavior.get("scaleUp")))

    def describe(self) -> str:
        """``10%``, or ``5% up, 20% down`` when they differ."""
        if self.up == self.down:
            return f"{self.up * 100:g}%"
        return f"{self.up * 100:g}% up, {self.down * 100:g}% down"


DEFAULT_TOLERANCES = Tolerances()


def _tolerance(rules: Any) -> float:
    """A direction's ``tolerance`` (a quantity, at least 0), else the flag's default."""
    quantity = try_quantity(rules.get("tolerance")) if isinstance(rules, dict) else None
    if quantity is None or quantity.value < 0:
        return TOLERANCE
    return float(quantity)


# --horizontal-pod-autoscaler-downscale-stabilization default 5m (HPAs without behavior).
DOWNSCALE_STABILIZATION_S = 300.0


class Policy(NamedTuple):
    type: str  # "Pods" or "Percent"
    value: int
    period_s: float


class Rules(NamedTuple):
    """One direction of ``spec.behavior`` after the API server's defaulting."""

    stabilization_s: float
    select: str  # "Max", "Min" or "Disabled"
    policies: tuple[Policy, ...]


# pkg/apis/autoscaling/v2/defaults.go: scaleUp window 0, Max of (4 Pods, 100 Percent) per 15 s;
# scaleDown window 300 s (the controller flag), 100 Percent per 15 s.
DEFAULT_SCALE_UP = Rules(0.0, "Max", (Policy("Pods", 4, 15.0), Policy("Percent", 100, 15.0)))


DEFAULT_SCALE_DOWN = Rules(DOWNSCALE_STABILIZATION_S, "Max", (Policy("Percent", 100, 15.0),))


def rules_from(data: Any, default: Rules) -> Rules:
    """A ``scaleUp``/``scaleDown`` mapping with the API server's defaults filled in: a field
    that is not set takes the default's (GenerateHPAScaleUpRules / GenerateHPAScaleDownRules
    keep the policies given, or use the default policies when there are none)."""
    if not isinstance(data, dict):
        return default
    window = _number(data.get("stabilizationWindowSeconds"))
    stabilization = window if window is not None else default.stabilization_s
    select = data.get("selectPolicy")
    policies = []
    for entry in data.get("policies") or []:
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        value, period = _number(entry.get("value")), _number(entry.get("periodSeconds"))
        if kind in ("Pods", "Percent") and value is not None and period is not None:
            policies.append(Policy(str(kind), int(value), float(period)))
    return Rules(
        stabilization,
        select if select in ("Max", "Min", "Disabled") else "Max",
        tuple(policies) or default.policies,
    )


class Behavior(NamedTuple):
    up: Rules
    down: Rules

    @classmethod
    def from_spec(cls, behavior: Any) -> Behavior | None:
        """None when the HPA has no behavior: defaults.go leaves a nil behavior nil and the
        controller then takes its older path (normalizeDesiredReplicas)."""
        if not isinstance(behavior, dict):
            return None
        return cls(
            rules_from(behavior.get("scaleUp"), DEFAULT_SCALE_UP),
            rules_from(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN),
        )


def _number(value: Any) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past float64, as a cluster's JSON can hold one
        return None
    return number if math.isfinite(number) else None
