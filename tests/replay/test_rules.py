"""The replay findings GL951-GL954 on hand-made histories of the scenarios' step HPA
(tests/replay/fixtures/scenarios: minReplicas 1, maxReplicas 4, target 60, default behavior,
pods ready after 180 s); the end-to-end tests show GL951 and GL952 on recorded days.

One failing case of each rule also compares the whole text report of its replay, as
``gpulint replay`` prints it, with ``snapshots/<rule>.snap`` beside this file
(tests/snapshots.py); ``pytest tests/replay/test_rules.py --update-snapshots`` rewrites them.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection
from gpulint.engine.runner import inventory_from_paths
from gpulint.replay.behavior import DEFAULT_SCALE_DOWN, Behavior, Policy, Rules, Tolerances
from gpulint.replay.model import History, ReplaySpec
from gpulint.replay.plan import plan
from gpulint.replay.render import render_text
from gpulint.replay.report import Replayed, replay_one

from ..conftest import ROOT
from ..snapshots import assert_snapshot, snapshot_text

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE = "pytest tests/replay/test_rules.py --update-snapshots"
HOUR = 3600
STEP = 15.0  # the histories' step: gpulint replay's default --step, one point a sync


def step_spec() -> tuple[ReplaySpec, object]:
    inventory = inventory_from_paths([str(SCENARIOS)], Settings())
    spec = next(s for s in plan(inventory).specs if s.name == "step")
    return spec, inventory


def replayed(spec: ReplaySpec, inventory: object, per_pod: list[float], pods: int) -> Replayed:
    """Replay ``per_pod`` (one value a sync, on ``pods`` pods that all reported it)."""
    times = [STEP * i for i in range(len(per_pod))]
    history = History(times, [list(per_pod)], [[pods] * len(per_pod)], [pods] * len(per_pod))
    return replay_one(spec, history, inventory)  # type: ignore[arg-type]


def findings(spec: ReplaySpec, inventory: object, per_pod: list[float], pods: int) -> list[Finding]:
    return replayed(spec, inventory, per_pod, pods).findings


def assert_report_snapshot(request: pytest.FixtureRequest, rule: str, replay: Replayed) -> None:
    """``gpulint replay``'s text report of ``replay`` is ``snapshots/<rule>.snap``, with the
    findings' files relative to the repository (they are absolute here) as the command
    shows the paths it was given."""
    times = replay.history.times
    out = io.StringIO()
    render_text([replay], times[0], times[-1], STEP, out)
    report = out.getvalue().replace(f"{ROOT}/", "")
    source = f"tests/replay/test_rules.py::{request.node.name}"
    text = snapshot_text(source, report, UPDATE)
    assert_snapshot(request.config, SNAPSHOTS / f"{rule}.snap", text, UPDATE)


def at(per_pod: float, bursts: list[tuple[int, int]], baseline: float) -> list[float]:
    """Two hours, one value a sync: ``per_pod`` during each (start, end) in seconds,
    ``baseline`` otherwise."""
    times = range(0, 2 * HOUR + 1, int(STEP))
    return [per_pod if any(a <= t < b for a, b in bursts) else baseline for t in times]


def test_flapping_on_bursts_the_default_behavior_follows(request: pytest.FixtureRequest) -> None:
    # 2 pods at 30% (1 pod's worth) with two 6-minute bursts at 100% (3.3 pods' worth), at
    # 00:30 and 01:00: each time the HPA goes 1 -> 2 -> 4 and, 5 minutes after the burst
    # (the default scale-down window), back to 1, 8 minutes after its last scale-up.
    spec, inventory = step_spec()
    replay = replayed(spec, inventory, at(100.0, [(1800, 2160), (3600, 3960)], 30.0), 2)
    assert [f.rule for f in replay.findings] == ["GL951"]
    assert "reverses its replica changes 2 times within 10 minutes" in replay.findings[0].message
    assert_report_snapshot(request, "GL951", replay)


def test_no_flapping_on_one_burst() -> None:
    # One reversal is below min-flaps (2).
    spec, inventory = step_spec()
    assert findings(spec, inventory, at(100.0, [(1800, 2160)], 30.0), 2) == []


def test_saturated_at_max_under_a_load_over_the_ceiling(request: pytest.FixtureRequest) -> None:
    # 4 pods (maxReplicas) at 100% for 2 hours: 6.7 pods' worth at the target of 60.
    spec, inventory = step_spec()
    replay = replayed(spec, inventory, [100.0] * (2 * HOUR // 15 + 1), 4)
    assert [f.rule for f in replay.findings] == ["GL952"]
    assert "sits at maxReplicas 4" in replay.findings[0].message
    assert "up to 7 pods" in replay.findings[0].message
    assert replay.findings[0].fix.startswith("spec:\n  maxReplicas: 7")
    assert_report_snapshot(request, "GL952", replay)


def test_no_saturated_at_max_under_half_an_hour() -> None:
    spec, inventory = step_spec()
    assert findings(spec, inventory, [100.0] * (29 * 60 // 15), 4) == []


def test_never_scales_when_the_tolerance_swallows_the_signal(
    request: pytest.FixtureRequest,
) -> None:
    # One pod at 65% against 60: ratio 1.083, inside the 0.1 tolerance, for 2 hours; the
    # load needs ceil(1.083) = 2 pods, and the HPA never moves.
    spec, inventory = step_spec()
    replay = replayed(spec, inventory, [65.0] * (2 * HOUR // 15 + 1), 1)
    found = replay.findings
    assert [f.rule for f in found] == ["GL953"]
    assert "never changes its 1 replicas" in found[0].message
    assert found[0].location.file.endswith("workloads.yaml")
    assert_report_snapshot(request, "GL953", replay)


def test_the_hpa_s_own_tolerance_lets_it_act_where_the_default_swallows_the_signal() -> None:
    # The same 65% against 60 (ratio 1.083) with behavior.scaleUp.tolerance 0.05, honoured
    # from Kubernetes 1.35: the ratio leaves 0.9-1.05, so the HPA asks for 2 pods.
    spec, inventory = step_spec()
    tolerant = dataclasses.replace(spec, tolerances=Tolerances(down=0.1, up=0.05))
    replay = replayed(tolerant, inventory, [65.0] * (2 * HOUR // 15 + 1), 1)
    assert replay.findings == []
    assert [(e.before, e.after) for e in replay.run.events][:1] == [(1, 2)]
    # a wide scale-down tolerance holds 4 pods at 42% (ratio 0.7, 2.8 pods' worth), which
    # the default 10% brings down to 3
    held = dataclasses.replace(spec, tolerances=Tolerances(down=0.4, up=0.1))
    assert replayed(held, inventory, [42.0] * 240, 4).run.events == []
    assert [e.after for e in replayed(spec, inventory, [42.0] * 240, 4).run.events] == [3]


def test_no_never_scales_when_the_load_fits() -> None:
    # 1 pod at 55%: ceil(55 / 60) = 1 pod needed, which it has.
    spec, inventory = step_spec()
    assert findings(spec, inventory, [55.0] * (2 * HOUR // 15 + 1), 1) == []


def test_no_never_scales_under_half_an_hour() -> None:
    spec, inventory = step_spec()
    assert findings(spec, inventory, [65.0] * (20 * 60 // 15), 1) == []


def slow_up(window: float) -> Behavior:
    return Behavior(Rules(window, "Max", (Policy("Pods", 1, 60.0),)), DEFAULT_SCALE_DOWN)


def test_scale_up_lag_over_twice_the_pod_start(request: pytest.FixtureRequest) -> None:
    # 1 pod at 30% for an hour, then 100%: with a 10-minute scale-up window the second pod
    # is asked for once the last recommendation of 1 (00:59:45) has left the window, at
    # 01:09:45, and is ready 180 s later: 765 s from the rise, over 2 x 180 s.
    spec, inventory = step_spec()
    spec = dataclasses.replace(spec, behavior=slow_up(600.0))
    load = [30.0] * (HOUR // 15) + [100.0] * (HOUR // 15)
    replay = replayed(spec, inventory, load, 1)
    found = replay.findings
    assert [f.rule for f in found] == ["GL954"]
    assert "12.8 minutes" in found[0].message and "4.2 times the 180 s" in found[0].message
    assert_report_snapshot(request, "GL954", replay)


def test_no_scale_up_lag_with_a_prompt_scale_up() -> None:
    spec, inventory = step_spec()
    spec = dataclasses.replace(spec, behavior=slow_up(0.0))
    load = [30.0] * (HOUR // 15) + [100.0] * (HOUR // 15)
    assert findings(spec, inventory, load, 1) == []


def test_configured_severity_and_disabling_apply() -> None:
    from gpulint.core.model import Severity
    from gpulint.engine.config import RuleSettings

    settings = Settings()
    settings.rules["GL953"] = RuleSettings(severity=Severity.ERROR)
    inventory = inventory_from_paths([str(SCENARIOS)], settings)
    spec = next(s for s in plan(inventory).specs if s.name == "step")
    times = [15.0 * i for i in range(2 * HOUR // 15 + 1)]
    history = History(times, [[65.0] * len(times)], [[1] * len(times)], [1] * len(times))
    found = replay_one(spec, history, inventory).findings
    assert [(f.rule, f.severity) for f in found] == [("GL953", Severity.ERROR)]
    assert replay_one(spec, history, inventory, selection=Selection(ignore=["GL95"])).findings == []
    settings.rules["GL953"] = RuleSettings(enabled=False)
    assert replay_one(spec, history, inventory).findings == []
