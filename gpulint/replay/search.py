"""``gpulint replay --recommend``: the setting that would have served the replayed load best.

For one autoscaler and the history already fetched, the search tries its metrics' targets
(each scaled by one factor), its behavior (each direction's stabilization window, the
scale-down policy) and, where the cluster honours the field (Kubernetes 1.35 and later), each
direction's tolerance, and keeps the one best by the objective (gpulint.replay.objective):
least time under-provisioned, then the shortest scale-up lag, within a GPU-hour budget, ties
broken by fewer flaps.

Bounded work: one coordinate at a time from the configured setting (every value of a
coordinate with the others held, the best kept; twice over), replayed at a coarse sync of
``COARSE_SYNC_S``; the best few of those are replayed at the controller's own sync period and
the best of them is the answer. A replay stops as soon as it uses more than the budget or
has been under-provisioned longer than the best so far: what follows cannot make it win.

Every setting is measured as the configured one is: time under-provisioned counts the load
above the ready pods by more than the configured tolerance, so that a wider tolerance does
not win by excusing itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import yaml

from gpulint.adoption import edits
from gpulint.input.document import Path, dig
from gpulint.replay.behavior import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    SYNC_PERIOD_S,
    TOLERANCE,
    Behavior,
    Policy,
    Tolerances,
)
from gpulint.replay.figures import Figures, measure
from gpulint.replay.model import History, ReplaySpec, Run, Tick
from gpulint.replay.nodes import NodeOptions
from gpulint.replay.objective import Objective, Verdict
from gpulint.replay.simulate import replay

COARSE_SYNC_S = 60.0
FINALISTS = 6
PASSES = 2
TARGET_FACTORS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.15, 1.3)
TOLERANCES = (0.05, TOLERANCE, 0.2, 0.3, 0.5)
UP_WINDOWS = (0.0, 30.0, 60.0, 120.0)
DOWN_WINDOWS = (60.0, 300.0, 600.0, 900.0, 1800.0)
# Scale-down policies tried beside the configured one: all at once, a pod a minute, a
# tenth a minute.
DOWN_POLICIES = (
    (Policy("Percent", 100, 15.0),),
    (Policy("Pods", 1, 60.0),),
    (Policy("Percent", 10, 60.0),),
)


class Setting(NamedTuple):
    """One point of the search: a factor on every metric's target, the tolerances, each
    direction's stabilization window and the scale-down policies (an index into the
    choices, 0 the configured ones)."""

    factor: float
    tolerance_up: float
    tolerance_down: float
    up_window: float
    down_window: float
    down_policies: float  # a whole number, to be a coordinate like the others


@dataclass
class Recommendation:
    """The search's answer for one autoscaler: the best setting's spec, replay and figures
    (the configured one's when nothing beats it), whether it is better, why, the patch to
    paste and the edits ``--fix`` makes (None where they cannot be placed in a file)."""

    spec: ReplaySpec
    run: Run
    figures: Figures
    better: bool
    why: str
    patch: str | None
    plan: edits.FixPlan | None
    replays: int  # how many replays the search ran (coarse and full)

    def as_json(self) -> dict[str, Any]:
        return {
            "patch": self.patch,
            "figures": self.figures.as_json(),
            "better": self.better,
            "why": self.why,
        }


class _Search:
    def __init__(
        self,
        spec: ReplaySpec,
        history: History,
        configured: Figures,
        objective: Objective,
        nodes: NodeOptions | None,
        tolerance_field: bool,
    ) -> None:
        self.spec = spec
        self.history = history
        self.objective = objective
        self.coarse_objective = objective
        self.configured_figures = configured
        self.nodes = nodes
        self.behavior = spec.behavior or Behavior(DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN)
        self.down_choices = (self.behavior.down.policies, *DOWN_POLICIES)
        self.tolerance_field = tolerance_field
        self.coarse: dict[Setting, tuple[float, float, float, int] | None] = {}
        self.replays = 0

    def configured(self) -> Setting:
        tolerances = self.spec.tolerances
        return Setting(
            1.0,
            tolerances.up,
            tolerances.down,
            self.behavior.up.stabilization_s,
            self.behavior.down.stabilization_s,
            0.0,
        )

    def spec_of(self, setting: Setting) -> ReplaySpec:
        metrics = tuple(
            dataclasses.replace(m, target=_target(m.target, setting.factor, m.cap))
            for m in self.spec.metrics
        )
        up = self.behavior.up._replace(stabilization_s=setting.up_window)
        down = self.behavior.down._replace(
            stabilization_s=setting.down_window,
            policies=self.down_choices[int(setting.down_policies)],
        )
        return dataclasses.replace(
            self.spec,
            metrics=metrics,
            behavior=Behavior(up, down),
            tolerances=Tolerances(setting.tolerance_down, setting.tolerance_up),
        )

    def play(
        self, setting: Setting, sync_s: float, bound: float | None, budget: float | None
    ) -> tuple[Run, Figures] | None:
        """The setting replayed and measured as the configured one is; None when it stopped
        early (over ``budget``, or under-provisioned longer than ``bound``)."""
        self.replays += 1
        spec = self.spec_of(setting)
        stop = self._stop(sync_s, bound, budget) if budget is not None else None
        run = replay(spec, self.history, sync_s, self.nodes, stop)
        if run.stopped:
            return None
        # measured with the configured tolerance: see the module's docstring
        judged = dataclasses.replace(spec, tolerances=self.spec.tolerances)
        return run, measure(judged, run, sync_s)

    def _stop(self, sync_s: float, bound: float | None, budget: float) -> Callable[[Tick], bool]:
        budget += 0.0005
        gpus = self.spec.gpus_per_pod * sync_s / 3600.0
        up = 1 + self.spec.tolerances.up
        used = 0.0
        under = 0.0

        def stop(tick: Tick) -> bool:
            nonlocal used, under
            used += tick.replicas * gpus
            load = tick.load
            if load is not None and tick.starting == 0:
                ready = tick.ready
                if (load > ready * up) if ready else load > 0:
                    under += sync_s
            return used > budget or (bound is not None and under > bound)

        return stop

    def coarse_key(
        self, setting: Setting, best: tuple[float, float, float, int] | None
    ) -> tuple[float, float, float, int] | None:
        if setting in self.coarse:
            return self.coarse[setting]
        bound = best[1] if best is not None and best[0] == 0 else None
        played = self.play(setting, COARSE_SYNC_S, bound, self.coarse_objective.budget)
        key = None if played is None else self.coarse_objective.key(played[1])
        self.coarse[setting] = key
        return key

    def coordinates(self) -> list[tuple[str, tuple[float, ...]]]:
        found = [
            ("factor", TARGET_FACTORS),
            ("down_window", DOWN_WINDOWS),
            ("down_policies", tuple(float(i) for i in range(len(self.down_choices)))),
            ("up_window", UP_WINDOWS),
        ]
        if self.tolerance_field:
            found += [("tolerance_up", TOLERANCES), ("tolerance_down", TOLERANCES)]
        return found

    def descend(self) -> list[Setting]:
        """Coordinate descent at the coarse sync; the finalists, best first. The coarse sync
        uses GPU-hours a little differently (pods live to a sync's end), so the budget there
        is the configured setting's coarse GPU-hours in the same proportion to its own."""
        current = self.configured()
        played = self.play(current, COARSE_SYNC_S, None, None)
        assert played is not None  # nothing stops a replay without a budget
        used = self.configured_figures.gpu_hours_used
        if used > 0:
            ratio = played[1].gpu_hours_used / used
            self.coarse_objective = Objective(self.objective.budget * ratio)
        best = self.coarse[current] = self.coarse_objective.key(played[1])
        for _ in range(PASSES):
            moved = False
            for name, values in self.coordinates():
                for value in values:
                    candidate = current._replace(**{name: value})
                    key = self.coarse_key(candidate, best)
                    if key is not None and (best is None or key < best):
                        current, best, moved = candidate, key, True
            if not moved:
                break
        ranked = sorted((key, setting) for setting, key in self.coarse.items() if key is not None)
        return [setting for _, setting in ranked[:FINALISTS]]


def recommend(
    spec: ReplaySpec,
    history: History,
    configured: Figures,
    objective: Objective,
    nodes: NodeOptions | None = None,
    tolerance_field: bool = True,
    gpu_hour_cost: float | None = None,
) -> Recommendation:
    """The best setting for ``spec`` over ``history`` by ``objective``, against the
    configured setting's ``configured`` figures (replayed at the controller's sync)."""
    search = _Search(spec, history, configured, objective, nodes, tolerance_field)
    start = search.configured()
    best: tuple[Setting, Run, Figures] | None = None
    for setting in search.descend():
        if setting == start:
            continue
        bound = None
        if best is not None and objective.within(best[2]):
            bound = best[2].time_under_provisioned_s
        played = search.play(setting, SYNC_PERIOD_S, bound, objective.budget)
        if played is None:
            continue
        if best is None or objective.key(played[1]) < objective.key(best[2]):
            best = (setting, *played)
    verdict = (
        objective.judge(configured, best[2])
        if best is not None
        else Verdict(False, "no better: no other setting tried stays within the budget")
    )
    if best is None or not verdict.better:
        why = f"nothing beats the configured setting (the best other one tried: {verdict.why})"
        if best is None:
            why = f"nothing beats the configured setting: {verdict.why.split(': ', 1)[1]}"
        return Recommendation(spec, Run([], []), configured, False, why, None, None, search.replays)
    setting, run, figures = best
    if gpu_hour_cost is not None:
        figures.cost = figures.gpu_hours_used * gpu_hour_cost
    winner = search.spec_of(setting)
    changes = _changes(spec, winner, setting, search.configured(), tolerance_field)
    return Recommendation(
        winner,
        run,
        figures,
        True,
        f"{verdict.why}; {_what(setting, search.configured())}",
        _patch(spec, changes),
        _plan(spec, changes),
        search.replays,
    )


def _target(target: float, factor: float, cap: float | None) -> float:
    """The target times ``factor``, a round number (whole above 10, two figures below),
    never above what a per-pod value can reach."""
    if factor == 1.0:
        return target
    value = target * factor
    value = float(round(value)) if value >= 10 else float(f"{value:.2g}")
    if cap is not None:
        value = min(value, cap)
    return value if value > 0 else target


def _what(setting: Setting, configured: Setting) -> str:
    """The changes in words."""
    said = []
    if setting.factor != configured.factor:
        said.append(f"targets x{setting.factor:g}")
    for name, label in (
        ("up_window", "scale-up window"),
        ("down_window", "scale-down window"),
    ):
        if getattr(setting, name) != getattr(configured, name):
            said.append(f"{label} {getattr(setting, name):g} s")
    if setting.down_policies != configured.down_policies:
        said.append(
            "scale-down policy " + _policies_text(DOWN_POLICIES[int(setting.down_policies) - 1])
        )
    for name, label in (("tolerance_up", "scale-up"), ("tolerance_down", "scale-down")):
        if getattr(setting, name) != getattr(configured, name):
            said.append(f"{label} tolerance {getattr(setting, name) * 100:g}%")
    return "changed: " + ", ".join(said)


def _policies_text(policies: tuple[Policy, ...]) -> str:
    return " or ".join(f"{p.value} {p.type} per {p.period_s:g} s" for p in policies)


# --- the patch and the edits -----------------------------------------------------------------


class _Change(NamedTuple):
    path: Path  # of the field in the autoscaler's document
    key: str  # its key, as pasted
    value: Any  # the new value (a mapping for the behavior)
    present: bool  # whether the field is written now (else it is added)


def _changes(
    spec: ReplaySpec,
    winner: ReplaySpec,
    setting: Setting,
    configured: Setting,
    tolerance_field: bool,
) -> list[_Change]:
    document = spec.document
    data = document.data if document is not None else None
    spec_path = spec.path[:-1]
    changes = []
    for index, (before, after) in enumerate(zip(spec.metrics, winner.metrics, strict=True)):
        if before.target == after.target:
            continue
        path = _target_path(spec, index, data)
        changes.append(_Change(path, str(path[-1]), _quantity(after.target), True))
    behavior_changed = setting._replace(factor=configured.factor) != configured
    if behavior_changed and winner.behavior is not None:
        tolerances = winner.tolerances if tolerance_field else None
        path = (
            (*spec_path, "advanced", "horizontalPodAutoscalerConfig", "behavior")
            if spec.kind == "ScaledObject"
            else (*spec_path, "behavior")
        )
        present = data is not None and dig(data, path) is not None
        behavior = _as_written(winner.behavior, dig(data, path) if data is not None else None)
        changes.append(_Change(path, "behavior", behavior_data(behavior, tolerances), present))
    return changes


def _as_written(behavior: Behavior, written: Any) -> Behavior:
    """``behavior`` with each direction's selectPolicy as the file writes it where the replay
    disabled it and the file does not: a paused-scale-in/out annotation (KEDA sets Disabled
    while it stands), which a patch must not make permanent."""
    base = Behavior.from_spec(written) or Behavior(DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN)
    up, down = behavior.up, behavior.down
    if up.select == "Disabled" and base.up.select != "Disabled":
        up = up._replace(select=base.up.select)
    if down.select == "Disabled" and base.down.select != "Disabled":
        down = down._replace(select=base.down.select)
    return Behavior(up, down)


def _target_path(spec: ReplaySpec, index: int, data: Any) -> Path:
    if spec.kind == "ScaledObject":
        return (*spec.path, index, "metadata", "threshold")
    metric = (*spec.path, index)
    kind = dig(data, (*metric, "type")) if data is not None else None
    section = {"Pods": "pods", "Object": "object", "External": "external"}.get(str(kind), "pods")
    field = "averageValue" if spec.metrics[index].target_type == "AverageValue" else "value"
    return (*metric, section, "target", field)


def _quantity(value: float) -> str:
    """A target as a quantity string: ``45``, ``0.75``."""
    return str(int(value)) if value == int(value) else f"{value:g}"


def behavior_data(behavior: Behavior, tolerances: Tolerances | None = None) -> dict[str, Any]:
    """``spec.behavior`` as YAML writes it: whole numbers as integers, and each direction's
    tolerance when given and not the controller's default."""
    data: dict[str, Any] = {}
    for name, rules, tolerance in (
        ("scaleUp", behavior.up, tolerances.up if tolerances else None),
        ("scaleDown", behavior.down, tolerances.down if tolerances else None),
    ):
        entry: dict[str, Any] = {
            "stabilizationWindowSeconds": _whole(rules.stabilization_s),
            "selectPolicy": rules.select,
            "policies": [
                {"type": p.type, "value": p.value, "periodSeconds": _whole(p.period_s)}
                for p in rules.policies
            ],
        }
        if tolerance is not None and tolerance != TOLERANCE:
            entry["tolerance"] = tolerance
        data[name] = entry
    return data


def _whole(value: float) -> int | float:
    return int(value) if value == int(value) else value


def _patch(spec: ReplaySpec, changes: list[_Change]) -> str:
    """The changes as YAML to paste, each under a comment with where it goes: the field's
    line when it is written, else the line of its nearest parent that is, the missing
    parents nested in the YAML."""
    document = spec.document
    data = document.data if document is not None else None
    parts = []
    if document is not None and spec.max_path is not None:
        # A controller makes this autoscaler from another object's settings: the paths below
        # are the made autoscaler's, and its settings are written where its maximum is.
        settings = spec.max_path[:-1]
        where = document.location(settings)
        parts.append(
            f"# {spec.kind} {spec.key} is made from {where.file}:{where.line} "
            f"({_dotted(settings)}): set the fields below there, as it names them"
        )
        document = None
    for change in changes:
        at, value = change.path, change.value
        if not change.present:
            at = change.path[:-1]
            while at and (data is None or dig(data, at) is None):
                at = at[:-1]
            for step in reversed(change.path[len(at) + 1 :]):
                value = {step: value}
        key = change.key if change.present else str(change.path[len(at)])
        if document is not None:
            location = document.location(at)
            verb = "replace" if change.present else "add under"
            parts.append(f"# {location.file}:{location.line}: {verb} {_dotted(at)}")
        else:
            parts.append(f"# {_dotted(change.path)}")
        parts.append(yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False))
    return "\n".join(part.rstrip("\n") for part in parts) + "\n"


def _dotted(path: Path) -> str:
    """``spec.metrics[0].pods.target``."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else str(step)
    return text


def _plan(spec: ReplaySpec, changes: list[_Change]) -> edits.FixPlan | None:
    """The edits of the patch, as ``gpulint lint --fix`` makes them; None for an autoscaler a
    controller makes from another object's settings (its fields are written elsewhere)."""
    document = spec.document
    if document is None or spec.max_path is not None or not changes:
        return None
    ops: list[edits.Op] = []
    for change in changes:
        if isinstance(change.value, str):
            ops.append(edits.Replace(document, change.path, f'"{change.value}"'))
        elif change.present:
            ops.append(edits.Set(document, change.path, change.value))
        else:
            ops.append(edits.Insert(document, change.path[:-1], ((change.key, change.value),)))
    return edits.unsafe(*ops)
