"""One autoscaler's replay with its figures and findings, and the suggested fix beside it."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import yaml

from gpulint.core.model import Finding
from gpulint.engine.registry import Selection
from gpulint.engine.runner import run
from gpulint.inventory import Inventory
from gpulint.kinds.hpa import behavior_fix
from gpulint.replay.behavior import TOLERANCE_FIELD_FROM, Behavior
from gpulint.replay.figures import Figures, measure
from gpulint.replay.model import History, ReplaySpec, Run
from gpulint.replay.nodes import NodeOptions
from gpulint.replay.objective import Objective, Verdict
from gpulint.replay.search import Recommendation, behavior_data, recommend
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
    verdict: Verdict | None = None  # --compare-fix: is the fix better, by the objective
    recommendation: Recommendation | None = None  # --recommend


@dataclass(frozen=True)
class ReplayOptions:
    """What a replay does beside replaying the configured setting."""

    compare_fix: bool = False
    recommend: bool = False
    budget: float | None = None  # GPU-hours; None: what the configured setting used
    nodes: NodeOptions | None = None
    gpu_hour_cost: float | None = None


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
    options: ReplayOptions | None = None,
) -> Replayed:
    options = options or ReplayOptions(compare_fix=compare_fix)
    nodes, cost = options.nodes, options.gpu_hour_cost
    played = replay(spec, history, nodes=nodes)
    replayed = Replayed(spec, history, played, measure(spec, played, gpu_hour_cost=cost))
    replayed.findings = replay_findings(replayed, inventory, selection)
    budget = options.budget if options.budget is not None else replayed.figures.gpu_hours_used
    objective = Objective(budget)
    if options.compare_fix:
        fixed_spec = dataclasses.replace(spec, behavior=fix_behavior(fix_window(played)))
        fixed_run = replay(fixed_spec, history, nodes=nodes)
        fixed = Replayed(
            fixed_spec, history, fixed_run, measure(fixed_spec, fixed_run, gpu_hour_cost=cost)
        )
        fixed.findings = replay_findings(fixed, inventory, selection)
        replayed.fixed = fixed
        replayed.verdict = objective.judge(replayed.figures, fixed.figures)
    if options.recommend:
        replayed.recommendation = recommend(
            spec,
            history,
            replayed.figures,
            objective,
            nodes,
            tolerance_field=inventory.settings.versions.kubernetes >= TOLERANCE_FIELD_FROM,
            gpu_hour_cost=cost,
        )
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


def behavior_yaml(behavior: Behavior | None, flow: bool = False) -> str:
    """``behavior:`` as YAML to paste under an HPA's spec, whole numbers as integers
    (``flow``: its value on one line)."""
    if behavior is None:
        return "behavior: null\n"
    data = {"behavior": behavior_data(behavior)}
    if flow:
        value = yaml.safe_dump(data["behavior"], sort_keys=False, default_flow_style=True)
        return f"behavior: {value.strip()}\n"
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
