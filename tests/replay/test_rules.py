"""The replay findings GL951-GL954 on hand-made histories of the scenarios' step HPA
(tests/replay/fixtures/scenarios: minReplicas 1, maxReplicas 4, target 60, default behavior,
pods ready after 180 s); the end-to-end tests show GL951 and GL952 on recorded days."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.runner import inventory_from_paths
from gpulint.replay.behavior import DEFAULT_SCALE_DOWN, Behavior, Policy, Rules
from gpulint.replay.model import History, ReplaySpec
from gpulint.replay.plan import plan
from gpulint.replay.report import replay_one

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
HOUR = 3600


def step_spec() -> tuple[ReplaySpec, object]:
    inventory = inventory_from_paths([str(SCENARIOS)], Settings())
    spec = next(s for s in plan(inventory).specs if s.name == "step")
    return spec, inventory


def findings(spec: ReplaySpec, inventory: object, per_pod: list[float], pods: int) -> list[Finding]:
    """Replay ``per_pod`` (one value a sync, on ``pods`` pods that all reported it)."""
    times = [15.0 * i for i in range(len(per_pod))]
    history = History(times, [list(per_pod)], [[pods] * len(per_pod)], [pods] * len(per_pod))
    return replay_one(spec, history, inventory, Settings()).findings  # type: ignore[arg-type]


def test_never_scales_when_the_tolerance_swallows_the_signal() -> None:
    # One pod at 65% against 60: ratio 1.083, inside the 0.1 tolerance, for 2 hours; the
    # load needs ceil(1.083) = 2 pods, and the HPA never moves.
    spec, inventory = step_spec()
    found = findings(spec, inventory, [65.0] * (2 * HOUR // 15 + 1), 1)
    assert [f.rule for f in found] == ["GL953"]
    assert "never changes its 1 replicas" in found[0].message
    assert found[0].location.file.endswith("workloads.yaml")


def test_no_never_scales_when_the_load_fits() -> None:
    # 1 pod at 55%: ceil(55 / 60) = 1 pod needed, which it has.
    spec, inventory = step_spec()
    assert findings(spec, inventory, [55.0] * (2 * HOUR // 15 + 1), 1) == []


def test_no_never_scales_under_half_an_hour() -> None:
    spec, inventory = step_spec()
    assert findings(spec, inventory, [65.0] * (20 * 60 // 15), 1) == []


def slow_up(window: float) -> Behavior:
    return Behavior(Rules(window, "Max", (Policy("Pods", 1, 60.0),)), DEFAULT_SCALE_DOWN)


def test_scale_up_lag_over_twice_the_pod_start() -> None:
    # 1 pod at 30% for an hour, then 100%: with a 10-minute scale-up window the second pod
    # is asked for once the last recommendation of 1 (00:59:45) has left the window, at
    # 01:09:45, and is ready 180 s later: 765 s from the rise, over 2 x 180 s.
    spec, inventory = step_spec()
    spec = dataclasses.replace(spec, behavior=slow_up(600.0))
    load = [30.0] * (HOUR // 15) + [100.0] * (HOUR // 15)
    found = findings(spec, inventory, load, 1)
    assert [f.rule for f in found] == ["GL954"]
    assert "12.8 minutes" in found[0].message and "4.2 times the 180 s" in found[0].message


def test_no_scale_up_lag_with_a_prompt_scale_up() -> None:
    spec, inventory = step_spec()
    spec = dataclasses.replace(spec, behavior=slow_up(0.0))
    load = [30.0] * (HOUR // 15) + [100.0] * (HOUR // 15)
    assert findings(spec, inventory, load, 1) == []


def test_configured_severity_and_disabling_apply() -> None:
    from gpulint.core.model import Severity
    from gpulint.engine.config import RuleSettings

    spec, inventory = step_spec()
    settings = Settings()
    settings.rules["GL953"] = RuleSettings(severity=Severity.ERROR)
    times = [15.0 * i for i in range(2 * HOUR // 15 + 1)]
    history = History(times, [[65.0] * len(times)], [[1] * len(times)], [1] * len(times))
    found = replay_one(spec, history, inventory, settings).findings  # type: ignore[arg-type]
    assert [(f.rule, f.severity) for f in found] == [("GL953", Severity.ERROR)]
    settings.rules["GL953"] = RuleSettings(enabled=False)
    assert replay_one(spec, history, inventory, settings).findings == []  # type: ignore[arg-type]
