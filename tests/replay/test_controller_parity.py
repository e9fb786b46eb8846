"""The replay's controller against the numbers of Kubernetes' and KEDA's own controller tests.

Each case names the test it comes from: kubernetes/kubernetes
pkg/controller/podautoscaler/replica_calculator_test.go (``TestReplicaCalc*``) and
horizontal_test.go (``TestScalingWithRules``, ``TestNormalizeDesiredReplicasWithBehavior``,
``TestScaleUpOneMetricEmpty``, ``TestNoScaleDownOneMetricInvalid``), and kedacore/keda
pkg/scaling/executor/scale_scaledobjects_test.go. The inputs (pod levels, requests,
readiness, phases, targets, behavior, past events and recommendations) and the expected
replica counts are those tests' facts; CPU levels and requests are in millicores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpulint.engine.versions import Release
from gpulint.replay.activation import KedaActivation
from gpulint.replay.behavior import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Behavior,
    Policy,
    Rules,
    Tolerances,
)
from gpulint.replay.controller import HorizontalController
from gpulint.replay.replicas import (
    MetricUnavailable,
    Pod,
    max_over_metrics,
    per_pod_total_replicas,
    plain_metric_replicas,
    resource_replicas,
    usage_ratio_replicas,
)


def pods_with(
    levels: list[int | None],
    count: int,
    readiness: list[bool] | None = None,
    phases: list[str] | None = None,
    deleting: list[bool] | None = None,
    requests: list[int] | None = None,
) -> list[Pod]:
    """The test harness's pods: the i-th pod gets the i-th level (none beyond the levels)."""
    return [
        Pod(
            levels[i] if i < len(levels) else None,
            phase=(phases or ["Running"] * count)[i],
            unready=not (readiness or [True] * count)[i],
            deleting=(deleting or [False] * count)[i],
            request=(requests or [1000] * count)[i],
        )
        for i in range(count)
    ]


# (test name, function computing the replicas, expected replicas)
CALCULATOR: list[tuple[str, Callable[[], int], int]] = [
    (
        "TestReplicaCalcScaleUp",
        lambda: resource_replicas(3, pods_with([300, 500, 700], 3), 30),
        5,
    ),
    (
        "TestReplicaCalcScaleUpUnreadyLessScale",
        lambda: resource_replicas(3, pods_with([300, 500, 700], 3, [False, True, True]), 30),
        4,
    ),
    (
        "TestReplicaCalcScaleUpUnreadyNoScale",
        lambda: resource_replicas(3, pods_with([400, 500, 700], 3, [True, False, False]), 30),
        3,
    ),
    (
        "TestReplicaCalcScaleUpIgnoresFailedPods",
        lambda: resource_replicas(
            2,
            pods_with(
                [500, 700],
                4,
                [True, True, False, False],
                ["Running", "Running", "Failed", "Failed"],
            ),
            30,
        ),
        4,
    ),
    (
        "TestReplicaCalcScaleUpIgnoresDeletionPods",
        lambda: resource_replicas(
            2,
            pods_with(
                [500, 700], 4, [True, True, False, False], deleting=[False, False, True, True]
            ),
            30,
        ),
        4,
    ),
    (
        "TestReplicaCalcScaleUpCM",
        lambda: plain_metric_replicas(3, pods_with([20000, 10000, 30000], 3), 15000),
        4,
    ),
    (
        "TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale",
        # readiness matters only for CPU: the unready pod's value counts
        lambda: plain_metric_replicas(
            3, pods_with([50000, 10000, 30000], 3, [True, True, False]), 15000
        ),
        6,
    ),
    (
        "TestReplicaCalcScaleUpCMObject",
        lambda: usage_ratio_replicas(3, 20000 / 15000, ready_pods=3),
        4,
    ),
    (
        "TestReplicaCalcScaleUpCMPerPodObject",
        lambda: per_pod_total_replicas(3, 20000, 5000),
        4,
    ),
    (
        "TestReplicaCalcScaleUpCMObjectIgnoresUnreadyPods",
        lambda: usage_ratio_replicas(3, 50000 / 10000, ready_pods=1),
        5,
    ),
    (
        "TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods",
        lambda: usage_ratio_replicas(3, 8600 / 4400, ready_pods=1),
        2,
    ),
    (
        "TestReplicaCalcScaleUpPerPodCMExternal",
        lambda: per_pod_total_replicas(3, 8600, 2150),
        4,
    ),
    (
        "TestReplicaCalcScaleDown",
        lambda: resource_replicas(5, pods_with([100, 300, 500, 250, 250], 5), 50),
        3,
    ),
    (
        "TestReplicaCalcScaleDownCM",
        lambda: plain_metric_replicas(5, pods_with([12000] * 5, 5), 20000),
        3,
    ),
    (
        "TestReplicaCalcScaleDownPerPodCMObject",
        lambda: per_pod_total_replicas(5, 6000, 2000),
        3,
    ),
    (
        "TestReplicaCalcScaleDownCMExternal",
        lambda: usage_ratio_replicas(5, 8600 / 14334, ready_pods=5),
        3,
    ),
    (
        "TestReplicaCalcScaleDownIncludeUnreadyPods",
        lambda: resource_replicas(
            5, pods_with([100, 300, 500, 250, 250], 5, [True, True, True, False, False]), 50
        ),
        2,
    ),
    (
        "TestReplicaCalcScaleDownExcludeUnscheduledPods",
        lambda: resource_replicas(
            5,
            pods_with(
                [100],
                5,
                [True, False, False, False, False],
                ["Running", "Pending", "Pending", "Pending", "Pending"],
            ),
            50,
        ),
        1,
    ),
    (
        "TestReplicaCalcTolerance",
        lambda: resource_replicas(
            3, pods_with([1010, 1030, 1020], 3, requests=[900, 1000, 1100]), 100
        ),
        3,
    ),
    (
        "TestReplicaCalcToleranceCM",
        lambda: plain_metric_replicas(3, pods_with([20000, 21000, 21000], 3), 20000),
        3,
    ),
    (
        "TestReplicaCalcTolerancePerPodCMObject",
        lambda: per_pod_total_replicas(4, 20166, 5000),
        4,
    ),
    (
        "TestReplicaCalcToleranceCMExternal",
        lambda: usage_ratio_replicas(3, 8600 / 8888, ready_pods=3),
        3,
    ),
    (
        "TestReplicaCalcMissingMetrics",
        lambda: resource_replicas(4, pods_with([400, 95], 4), 100),
        3,
    ),
    (
        "TestReplicaCalcMissingMetricsNoChangeEq",
        lambda: resource_replicas(2, pods_with([1000], 2), 100),
        2,
    ),
    (
        "TestReplicaCalcMissingMetricsNoChangeGt",
        lambda: resource_replicas(2, pods_with([1900], 2), 100),
        2,
    ),
    (
        "TestReplicaCalcMissingMetricsNoChangeLt",
        lambda: resource_replicas(2, pods_with([600], 2), 100),
        2,
    ),
    (
        "TestReplicaCalcMissingMetricsUnreadyChange",
        lambda: resource_replicas(3, pods_with([100, 450], 3, [False, True, True]), 50),
        3,
    ),
    (
        "TestReplicaCalcMissingMetricsUnreadyScaleDown",
        lambda: resource_replicas(4, pods_with([100, 100, 100], 4, [False, True, True, True]), 50),
        3,
    ),
    (
        # the pod without a metric counts at max(100%, 300%) of its 2-core request on the
        # scale-down (kubernetes#112178, 1.26); at 100% the replicas would fall to 1
        "TestReplicaCalcMissingMetricsScaleDownTargetOver100",
        lambda: resource_replicas(
            4,
            pods_with(
                [200, 100, 100], 4, [False, True, True, True], requests=[1000, 1000, 2000, 2000]
            ),
            300,
        ),
        2,
    ),
    (
        # TestReplicaCalcPodMetric "no change: missing metrics" (formerly
        # TestPlainMetricReplicaCalcMissingMetricsNoChangeEq): 3 of 5 pods report a mean of
        # exactly the target; the 2 without a metric are left out, not counted at 0
        "TestReplicaCalcPodMetric/no change: missing metrics",
        lambda: plain_metric_replicas(5, pods_with([20000, 19000, 21000], 5), 20000),
        5,
    ),
    (
        "TestReplicaCalcPodMetric/within default tolerance",
        lambda: plain_metric_replicas(3, pods_with([20000, 21000, 21000], 3), 20000),
        3,
    ),
    (
        # Tolerances{scaleDown: 0.1, scaleUp: 0.01}: a ratio of 1.033 leaves a 1% tolerance
        "TestReplicaCalcPodMetric/outside configurable 1% tolerance",
        lambda: plain_metric_replicas(
            3, pods_with([20000, 21000, 21000], 3), 20000, Tolerances(down=0.1, up=0.01)
        ),
        4,
    ),
    (
        "TestReplicaCalcExternalPerPodMetric/within default tolerance",
        lambda: per_pod_total_replicas(3, 8600, 2900),
        3,
    ),
    (
        "TestReplicaCalcExternalPerPodMetric/outside configurable 1% tolerance",
        lambda: per_pod_total_replicas(3, 8600, 2800, Tolerances(down=0.1, up=0.01)),
        4,
    ),
]


@pytest.mark.parametrize(
    ("name", "compute", "expected"), CALCULATOR, ids=[c[0] for c in CALCULATOR]
)
def test_replica_calculator(name: str, compute: Callable[[], int], expected: int) -> None:
    assert compute() == expected, name


def test_no_metric_for_any_ready_pod_is_an_error() -> None:
    # TestReplicaCalcEmptyMetrics: "did not receive metrics for any ready pods" and friends
    with pytest.raises(MetricUnavailable):
        plain_metric_replicas(3, pods_with([], 3), 100)


def rules(pods: int, pods_period: int, percent: int, percent_period: int, window: int) -> Any:
    """horizontal_test.go's generateScalingRules: a policy per non-zero value; the API
    defaults (GenerateHPAScale*Rules) fill in what is left out."""
    policies = []
    if pods:
        policies.append(Policy("Pods", pods, pods_period))
    if percent:
        policies.append(Policy("Percent", percent, percent_period))
    return policies, window


def controller(
    up: Any = None, down: Any = None, minimum: int = 1, maximum: int = 1000
) -> HorizontalController:
    up_rules = (
        Rules(float(up[1]), "Max", tuple(up[0]) or DEFAULT_SCALE_UP.policies)
        if up
        else DEFAULT_SCALE_UP
    )
    down_rules = (
        Rules(float(down[1]), "Max", tuple(down[0]) or DEFAULT_SCALE_DOWN.policies)
        if down
        else DEFAULT_SCALE_DOWN
    )
    return HorizontalController(minimum, maximum, Behavior(up_rules, down_rules))


NOW = 10_000.0


def with_events(hc: HorizontalController, up: list[int], down: list[int]) -> HorizontalController:
    """generateEventsUniformDistribution(changes, 120): the changes spread over the last
    120 s, the newest now."""
    from gpulint.replay.controller import ScaleEvent

    for changes, store in ((up, hc.up_events), (down, hc.down_events)):
        for i, change in enumerate(changes):
            delay = 120 * (len(changes) - i - 1) / len(changes)
            store.append(ScaleEvent(change, NOW - delay))
    return hc


# TestScalingWithRules (horizontal_test.go): convertDesiredReplicasWithBehaviorRate
RATE: list[tuple[str, HorizontalController, int, int, int]] = [
    # (name, controller, current, prenormalized desired, expected)
    ("scaleUp with pod policy limitation", controller(up=rules(30, 60, 0, 0, 0)), 10, 50, 40),
    ("scaleUp with percent policy limitation", controller(up=rules(0, 0, 200, 60, 0)), 10, 50, 30),
    (
        "scaleDown with percent policy larger than pod policy",
        controller(down=rules(20, 60, 1, 60, 300)),
        100,
        2,
        80,
    ),
    (
        "scaleDown with pod policy larger than percent policy",
        controller(down=rules(2, 60, 1, 60, 300)),
        100,
        2,
        98,
    ),
    (
        "scaleDown with spec MinReplicas limitation with large percent policy",
        controller(down=rules(0, 0, 100, 60, 300), minimum=5),
        10,
        2,
        5,
    ),
    ("scaleDown with pod policy limitation", controller(down=rules(5, 60, 0, 0, 300)), 10, 2, 5),
    (
        "scaleUp with spec MaxReplicas limitation with large pod policy and events",
        with_events(controller(up=rules(300, 60, 0, 0, 0), maximum=200), [1, 5, 9], []),
        100,
        500,
        200,
    ),
    (
        "scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent "
        "scale up events",
        with_events(controller(up=rules(5, 120, 0, 0, 0)), [1, 5, 9], []),
        100,
        500,
        100,
    ),
    (
        "scaleUp with pod policy and previous scale up events",
        with_events(controller(up=rules(150, 120, 0, 0, 0)), [1, 5, 9], []),
        100,
        500,
        235,
    ),
    (
        "scaleUp with percent policy and previous scale up events",
        with_events(controller(up=rules(0, 0, 200, 120, 0)), [1, 5, 9], []),
        100,
        500,
        255,
    ),
    (
        "scaleDown with default policy and previous events",
        with_events(controller(), [], [1, 5, 9]),
        10,
        5,
        5,
    ),
    (
        "scaleDown with pod policy limitation and previous events",
        with_events(controller(down=rules(5, 120, 0, 0, 300)), [], [1, 5, 9]),
        100,
        2,
        100,
    ),
    (
        "scaleDown with percent policy limitation and previous events",
        with_events(controller(down=rules(0, 0, 50, 120, 300)), [], [2, 4, 6]),
        100,
        0,
        56,
    ),
    (
        "scaleDown with previous events preventing further scale down",
        with_events(controller(down=rules(0, 0, 10, 120, 300)), [], [10, 10, 10]),
        100,
        0,
        100,
    ),
    (
        "scaleDown with with previous events still allowing more scale down",
        with_events(controller(down=rules(0, 0, 1000, 120, 300)), [], [10, 10, 10]),
        10,
        5,
        5,
    ),
]


@pytest.mark.parametrize(
    ("name", "hc", "current", "desired", "expected"), RATE, ids=[r[0] for r in RATE]
)
def test_scaling_with_rules(
    name: str, hc: HorizontalController, current: int, desired: int, expected: int
) -> None:
    assert hc.convert_with_behavior_rate(NOW, current, desired) == expected, name


# TestNormalizeDesiredReplicasWithBehavior (horizontal_test.go):
# stabilizeRecommendationWithBehaviors
STABILIZE: list[tuple[str, list[tuple[int, float]], int, int, int, int, int, list[int]]] = [
    # (name, recommendations (value, seconds ago), current, desired, up window, down window,
    #  expected, expected stored recommendations)
    ("empty recommendations for scaling down", [], 100, 5, 0, 0, 5, [5]),
    ("simple scale down stabilization", [(4, 120), (5, 60)], 100, 3, 0, 180, 5, [4, 5, 3]),
    ("simple scale up stabilization", [(4, 120), (5, 60)], 1, 7, 300, 0, 4, [4, 5, 7]),
    ("no scale down stabilization", [(1, 120), (2, 60)], 100, 3, 300, 0, 3, [1, 2, 3]),
    (
        "no scale down stabilization, reuse recommendation element",
        [(10, 600), (9, 540)],
        100,
        3,
        0,
        0,
        3,
        [10, 3],
    ),
    (
        "scale down stabilization, reuse one of obsolete recommendation element",
        [(10, 600), (4, 60), (5, 120), (9, 540)],
        100,
        3,
        0,
        180,
        5,
        [10, 4, 5, 3],
    ),
    (
        "scale up stabilization, reuse one of obsolete recommendation element",
        [(10, 6000), (6, 60), (5, 120), (9, 180)],
        1,
        100,
        300,
        0,
        5,
        [100, 6, 5, 9],
    ),
]


@pytest.mark.parametrize(
    ("name", "recs", "current", "desired", "up", "down", "expected", "stored"),
    STABILIZE,
    ids=[s[0] for s in STABILIZE],
)
def test_stabilization_windows(
    name: str,
    recs: list[tuple[int, float]],
    current: int,
    desired: int,
    up: int,
    down: int,
    expected: int,
    stored: list[int],
) -> None:
    behavior = Behavior(
        Rules(float(up), "Max", DEFAULT_SCALE_UP.policies),
        Rules(float(down), "Max", DEFAULT_SCALE_DOWN.policies),
    )
    hc = HorizontalController(1, 1000, behavior)
    hc.recommendations = [(value, NOW - ago) for value, ago in recs]
    assert hc.stabilize_with_behavior(NOW, current, desired) == expected, name
    assert [value for value, _ in hc.recommendations] == stored


def test_scale_down_and_the_first_recommendation() -> None:
    # TestScaleDown and TestScaleDownStabilizeInitialSize (horizontal_test.go): CPU says 3 of
    # 5 pods (min 2, max 6, no behavior). With recommendations already stored (an empty
    # list) the HPA scales to 3; the first time the controller sees the HPA it records the 5
    # replicas as a recommendation, and the 5-minute window holds them.
    cpu_says = resource_replicas(5, pods_with([100, 300, 500, 250, 250], 5), 50)
    assert cpu_says == 3
    seen_before = HorizontalController(2, 6, None, seen=True)
    assert seen_before.reconcile(NOW, 5, cpu_says) == 3
    for fast in (False, True):
        first = HorizontalController(2, 6, None, fast=fast)
        assert first.reconcile(NOW, 5, cpu_says) == 5
        assert first.reconcile(NOW + 300, 5, cpu_says) == 5  # the window includes its edge
        assert first.reconcile(NOW + 315, 5, cpu_says) == 3


# The version boundaries of the model (gpulint.engine.versions, kubernetes-version).
TOLERANCE_BEHAVIOR = {"scaleUp": {"tolerance": "0.01"}}
VERSIONED: list[tuple[str, Callable[[], int], int]] = [
    (
        # behavior.*.tolerance is dropped by the API server before 1.35 (KEP-4951 beta)
        "TestReplicaCalcExternalPerPodMetric/outside configurable 1% tolerance @1.34",
        lambda: per_pod_total_replicas(
            3, 8600, 2800, Tolerances.from_spec(TOLERANCE_BEHAVIOR, Release(1, 34))
        ),
        3,
    ),
    (
        "TestReplicaCalcExternalPerPodMetric/outside configurable 1% tolerance @1.35",
        lambda: per_pod_total_replicas(
            3, 8600, 2800, Tolerances.from_spec(TOLERANCE_BEHAVIOR, Release(1, 35))
        ),
        4,
    ),
]


@pytest.mark.parametrize(("name", "compute", "expected"), VERSIONED, ids=[c[0] for c in VERSIONED])
def test_version_boundaries(name: str, compute: Callable[[], int], expected: int) -> None:
    assert compute() == expected, name


def test_scale_up_one_metric_empty() -> None:
    # TestScaleUpOneMetricEmpty: CPU says 4 (levels 300/400/500 of 1.0, target 30), the
    # External metric fails; a scale-up still happens (min 2, max 6, 3 replicas).
    cpu_says = resource_replicas(3, pods_with([300, 400, 500], 3), 30)
    desired = max_over_metrics(3, [cpu_says, None])
    hc = HorizontalController(2, 6, None)
    assert hc.reconcile(NOW, 3, desired) == 4


def test_no_scale_down_one_metric_invalid() -> None:
    # TestNoScaleDownOneMetricInvalid: CPU alone would go from 5 to 3; with another metric
    # invalid the HPA does not scale down (min 2, max 6).
    cpu_says = resource_replicas(5, pods_with([100, 300, 500, 250, 250], 5), 50)
    assert cpu_says == 3
    hc = HorizontalController(2, 6, None)
    assert hc.reconcile(NOW, 5, max_over_metrics(5, [cpu_says, None])) == 5


# KEDA: pkg/scaling/executor/scale_scaledobjects_test.go (RequestScale)
KEDA: list[tuple[str, KedaActivation, int, bool, int]] = [
    # (test, ScaledObject, current replicas, triggers active, expected replicas)
    ("TestScaleToMinReplicasWhenNotActive", KedaActivation(min_replica_count=0), 10, False, 0),
    (
        "TestScaleToMinReplicasFromLowerInitialReplicaCount",
        KedaActivation(min_replica_count=5),
        1,
        False,
        5,
    ),
    ("TestScaleFromMinReplicasWhenActive", KedaActivation(min_replica_count=0), 0, True, 1),
    (
        "TestScaleToIdleReplicasWhenNotActive",
        KedaActivation(min_replica_count=5, idle_replica_count=0),
        10,
        False,
        0,
    ),
    (
        "TestScaleFromIdleToMinReplicasWhenActive",
        KedaActivation(min_replica_count=5, idle_replica_count=0),
        0,
        True,
        5,
    ),
]


@pytest.mark.parametrize(
    ("name", "so", "current", "active", "expected"), KEDA, ids=[k[0] for k in KEDA]
)
def test_keda_request_scale(
    name: str, so: KedaActivation, current: int, active: bool, expected: int
) -> None:
    # The tests' ScaledObjects have no lastActiveTime and were created before now, so the
    # initial cooldown (0 s by default) has passed.
    so.created = NOW - 1
    assert so.request_scale(NOW, current, active) == expected, name


def test_keda_cooldown_holds_until_it_passes() -> None:
    # scaleToZeroOrIdle: lastActiveTime + cooldownPeriod (300 s by default) must be before now
    so = KedaActivation(min_replica_count=0, last_active=NOW - 200)
    assert so.request_scale(NOW, 3, False) == 3
    assert so.request_scale(NOW + 101, 3, False) == 0


def test_parity_table_size() -> None:
    kubernetes = len(CALCULATOR) + len(RATE) + len(STABILIZE) + 2
    assert kubernetes >= 20 and len(KEDA) >= 5


def test_uniform_pods_shortcut_is_the_calculator() -> None:
    """The replay's shortcut for identical ready pods and Pending ones gives what
    calcPlainMetricReplicas gives for the pods themselves, over a grid of cases."""
    from gpulint.replay.replicas import uniform_pods_replicas

    for current in (1, 2, 3, 5, 8):
        for ready in range(1, current + 1):
            pending = current - ready
            for value in (0.0, 5.0, 33.3, 54.0, 59.9, 60.0, 66.0, 66.1, 75.0, 100.0, 250.0):
                pods = [Pod(value)] * ready + [Pod(None, phase="Pending")] * pending
                expected = plain_metric_replicas(current, pods, 60.0)
                assert uniform_pods_replicas(current, ready, pending, value, 60.0) == expected, (
                    current,
                    ready,
                    value,
                )


@pytest.mark.parametrize("behavior", [None, "default", "windows"])
def test_fast_windows_answer_as_the_stored_recommendations(behavior: str | None) -> None:
    """The replay keeps the windows' extremes in monotonic queues; over a long random run
    they give what the controller's scan of its stored recommendations gives."""
    import random

    chosen = {
        None: None,
        "default": Behavior(DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN),
        "windows": Behavior(
            Rules(60.0, "Max", (Policy("Pods", 2, 60.0),)),
            Rules(600.0, "Min", (Policy("Pods", 1, 120.0), Policy("Percent", 50, 60.0))),
        ),
    }[behavior]
    rng = random.Random(20261205)
    scanned = HorizontalController(1, 20, chosen)
    fast = HorizontalController(1, 20, chosen, fast=True)
    replicas = [5, 5]
    for step in range(20000):
        now = step * 15.0
        desired = max(0, min(30, replicas[0] + rng.randint(-4, 4)))
        if rng.random() < 0.2:
            desired = rng.randint(0, 25)
        answers = [
            hc.reconcile(now, current, desired)
            for hc, current in zip((scanned, fast), replicas, strict=True)
        ]
        assert answers[0] == answers[1], step
        replicas = answers


def _zero_spec(metric_type: str, target_type: str) -> Any:
    from gpulint.replay.model import ReplayMetric, ReplaySpec

    metric = ReplayMetric("queue", metric_type, target_type, 10.0, "q")
    return ReplaySpec(
        "HorizontalPodAutoscaler", "ml", "web", "Deployment", "web", 0, 8, None,
        (metric,), 60.0, "test", 1,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("metric_type", "target_type", "expected"),
    [("External", "Value", 3), ("Object", "AverageValue", 3), ("Pods", "AverageValue", 0)],
)
def test_min_replicas_zero_scales_from_zero(
    metric_type: str, target_type: str, expected: int
) -> None:
    """minReplicas 0 (HPAScaleToZero, on by default from 1.37): at 0 replicas the controller
    still computes; an Object or External metric of 25 against 10 proposes ceil(2.5) = 3
    (getUsageRatioReplicaCount and GetExternalPerPodMetricReplicas at 0 replicas), a Pods
    metric has no pod to read and stays at 0."""
    from gpulint.replay.model import History
    from gpulint.replay.simulate import replay

    times = [i * 15.0 for i in range(5)]
    history = History(times, [[25.0] * 5], [[0] * 5 if metric_type == "Pods" else []], [0] * 5)
    run = replay(_zero_spec(metric_type, target_type), history)
    first = run.events[0].after if run.events else run.ticks[0].replicas
    assert (run.events[0].before if run.events else 0) == 0
    assert first == expected
