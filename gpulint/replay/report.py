"""One autoscaler's replay with its figures and findings, and the suggested fix beside it."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpulint.core.model import Finding
from gpulint.engine.registry import Selection
from gpulint.engine.runner import run
from gpulint.inventory import Inventory
from gpulint.kinds.hpa import behavior_fix
from gpulint.replay.behavior import Behavior
from gpulint.replay.figures import Figures, measure
from gpulint.replay.model import History, ReplaySpec, Run
from gpulint.replay.simulate import replay

REPLAY = "replay"  # the REQUIRES of the rules only gpulint replay runs


def stamp(seconds: float) -> str:
    """RFC 3339 in UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@dataclass
class Replayed:
    spec: ReplaySpec
    history: History
    run: Run
    figures: Figures
    findings: list[Finding] = field(default_factory=list)
    fixed: Replayed | None = None  # --compare-fix: the same load with gpulint's behavior


# A lull longer than this is not worth holding GPU pods through.
MAX_BRIDGED_LULL_S = 3600.0
DEFAULT_FIX_WINDOW_S = 300


def fix_window(run: Run) -> int:
    """The scale-down stabilization window gpulint proposes: GL102's 300 s, or longer when the
    replay shows the replicas going down and back up within the hour: the longest interval
    between two scale-ups with a scale-down between them, rounded up to the minute, so that
    the window bridges those lulls."""
    longest = 0.0
    last_up: float | None = None
    went_down = False
    for event in run.events:
        if event.after > event.before:
            if last_up is not None and went_down and event.time - last_up <= MAX_BRIDGED_LULL_S:
                longest = max(longest, event.time - last_up)
            last_up, went_down = event.time, False
        else:
            went_down = True
    return max(DEFAULT_FIX_WINDOW_S, math.ceil(longest / 60) * 60)


def fix_behavior(window: int = DEFAULT_FIX_WINDOW_S) -> Behavior:
    """The behavior gpulint proposes for GPU pods (GL102's fix), read from its own text."""
    data = yaml.safe_load(behavior_fix(window=window))
    behavior = Behavior.from_spec(data["behavior"])
    assert behavior is not None
    return behavior


def replay_one(
    spec: ReplaySpec,
    history: History,
    inventory: Inventory,
    compare_fix: bool = False,
    selection: Selection | None = None,
) -> Replayed:
    played = replay(spec, history)
    replayed = Replayed(spec, history, played, measure(spec, played))
    replayed.findings = replay_findings(replayed, inventory, selection)
    if compare_fix:
        fixed_spec = dataclasses.replace(spec, behavior=fix_behavior(fix_window(played)))
        fixed_run = replay(fixed_spec, history)
        fixed = Replayed(fixed_spec, history, fixed_run, measure(fixed_spec, fixed_run))
        fixed.findings = replay_findings(fixed, inventory, selection)
        replayed.fixed = fixed
    return replayed


def replay_findings(
    replayed: Replayed, inventory: Inventory, selection: Selection | None = None
) -> list[Finding]:
    """The findings of the rules that need a replay (``REQUIRES = "replay"``), run by the
    engine as every rule is: the configuration's enablement, severity and options,
    ``--select``/``--ignore``, suppressions, and GL799 for a rule that fails."""

    def items(scope: str) -> list[Replayed]:
        return [replayed] if scope == "autoscaler" else []

    return run(inventory, selection, items_for=items, requires=REPLAY)


def describe_behavior(behavior: Behavior | None) -> dict[str, Any] | None:
    if behavior is None:
        return None
    return {
        direction: {
            "stabilizationWindowSeconds": rules.stabilization_s,
            "selectPolicy": rules.select,
            "policies": [
                {"type": p.type, "value": p.value, "periodSeconds": p.period_s}
                for p in rules.policies
            ],
        }
        for direction, rules in (("scaleUp", behavior.up), ("scaleDown", behavior.down))
    }
