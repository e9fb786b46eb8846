"""KEDA's scalingModifiers formula: the part of expr-lang a formula over numbers uses, with
expr's precedence, and a reason for what gpulint does not read."""

from __future__ import annotations

import pytest

from gpulint.replay.formula import FormulaError, parse

VALUES = {"trig_one": 3.0, "trig_two": 4.0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("trig_one + trig_two", 7.0),  # keda-docs' first example
        ("trig_one > 2 ? trig_one + trig_two : 1", 7.0),  # keda-docs' conditional example
        ("trig_one < 2 ? trig_one + trig_two : 1", 1.0),
        ("(trig_one + trig_two) / 2", 3.5),
        ("trig_one + trig_two * 2", 11.0),
        ("max(trig_one, trig_two) * 2", 8.0),
        ("min(trig_one, trig_two, 1)", 1.0),
        ("-trig_one ** 2", -9.0),  # unary minus binds looser than ** in expr
        ("2 ** 3 ** 2", 512.0),  # right-associative
        ("2 ^ 3", 8.0),
        ("trig_one % 2", 1.0),
        ("trig_one > 1 && trig_two > 5 ? 1 : 0", 0.0),
        ("trig_one > 1 or trig_two > 5 ? 1 : 0", 1.0),
        ("not (trig_one > 1) ? 1 : 2", 2.0),
        ("trig_one == 3 ? ceil(trig_two / 3) : floor(1.5)", 2.0),
        ("1.5e1", 15.0),
    ],
)
def test_formulas_evaluate_as_expr_does(text: str, expected: float) -> None:
    assert parse(text).evaluate(VALUES) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("trig_one.value", "gpulint does not read '.value' in the formula"),
        ('"x"', "gpulint does not read '\"x\"' in the formula"),
        ("trig_one +", "expected more in the formula"),
        ("sum(trig_one)", "gpulint does not evaluate the function sum()"),
        ("trig_one ?? 0", "unexpected '?' in the formula"),
        ("", "the formula is empty"),
    ],
)
def test_what_it_does_not_read_says_why(text: str, reason: str) -> None:
    with pytest.raises(FormulaError) as raised:
        parse(text)
    assert str(raised.value) == reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("trig_one > 1", "the formula gives true or false, not a number"),
        ("trig_one / (trig_two - 4)", "3 / 0 fails: float division by zero"),
        ("trig_one ? 1 : 2", "a condition of the formula is a number, not true or false"),
        ("unknown + 1", "no trigger is named unknown"),
    ],
)
def test_a_formula_that_fails_on_its_values_is_no_number(text: str, reason: str) -> None:
    with pytest.raises(FormulaError) as raised:
        parse(text).evaluate(VALUES)
    assert str(raised.value) == reason
    assert parse("trig_one + trig_two").names == frozenset(VALUES)


COMPOSITE = """
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm, namespace: ml}
spec:
  scaleTargetRef: {name: llm}
  minReplicaCount: 0
  maxReplicaCount: 10
  advanced:
    scalingModifiers: {formula: "waiting + running", target: "10", activationTarget: "40"}
  triggers:
  - type: prometheus
    name: waiting
    metadata: {serverAddress: "http://p:9090", query: "sum(waiting)", threshold: "1"}
  - type: prometheus
    name: running
    metadata: {serverAddress: "http://p:9090", query: "sum(running)", threshold: "1"}
"""


def test_the_composite_metric_drives_the_replay(tmp_path: object) -> None:
    """KEDA with scalingModifiers: active once waiting + running is above 40, then its HPA
    scales on (waiting + running) / 10 per pod; the triggers' thresholds of 1 play no part
    (on them the HPA would ask for 50 pods)."""
    from pathlib import Path

    from gpulint.engine.config import Settings
    from gpulint.engine.runner import inventory_from_paths
    from gpulint.replay.model import History
    from gpulint.replay.plan import plan
    from gpulint.replay.simulate import replay

    root = Path(str(tmp_path))
    (root / "so.yaml").write_text(COMPOSITE)
    (spec,) = plan(inventory_from_paths([str(root)], Settings())).specs
    times = [15.0 * i for i in range(9)]
    waiting = [10.0] * 4 + [30.0] * 5  # the sum is 30 (inactive), then 50 from 00:01
    running = [20.0] * 9
    run = replay(spec, History(times, [waiting, running], [[], []], [None] * 9))
    events = [(e.time, e.before, e.after) for e in run.events]
    # KEDA's poll at 60 s activates (50 > 40); the HPA then asks for ceil(50 / 10) = 5,
    # at most max(2 x 1, 4) = 4 in one sync
    assert events == [(60.0, 0, 1), (75.0, 1, 4), (90.0, 4, 5)]
    assert run.ticks[-1].value == 50.0 / 5  # drawn per pod, the composite over the replicas
    from gpulint.inventory import Inventory
    from gpulint.replay.render import render_svg, series_summary
    from gpulint.replay.report import replay_one

    history = History(times, [waiting, running], [[], []], [2] * 9)
    replayed = replay_one(spec, history, Inventory(Settings()))
    assert "composite-metric per pod against its target" in render_svg(replayed)
    # observed on 2 pods: 30 / 2 = 15, then 50 / 2 = 25
    assert "composite-metric per pod (target 10):" in series_summary(replayed)
    assert series_summary(replayed).rstrip().endswith("15..25")
