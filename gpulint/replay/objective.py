"""Which of two replays of the same load is better, by one stated objective.

The objective: the least time under-provisioned, then the shortest longest scale-up lag,
within a budget of GPU-hours (by default what the configured setting used), ties broken by
fewer flaps. A setting over the budget loses to one within it whatever else it does; two
over it, the one over by less wins.

Each figure on its own is judged too, better or worse for the reader of a comparison: fewer
is better for all but the time at maxReplicas or minReplicas and the GPU-hours the load
needed, which say what happened rather than how well.
"""

from __future__ import annotations

from typing import NamedTuple

from gpulint.replay.figures import Figures

# Figures where less is better; the others are not judged.
LESS_IS_BETTER = frozenset(
    {
        "scale_events",
        "flaps",
        "time_under_provisioned_s",
        "time_over_provisioned_s",
        "scale_up_lag_s",
        "gpu_hours_used",
        "time_queued_s",
        "cost",
    }
)
# GPU-hours within this of the budget are within it (the report rounds to 3 places).
_BUDGET_SLACK = 0.0005


def figure_verdict(key: str, before: float | int | None, after: float | int | None) -> str:
    """``better``, ``worse`` or ``same`` for a figure that has a better direction, else ''."""
    if key not in LESS_IS_BETTER or before is None or after is None:
        return ""
    if after == before:
        return "same"
    return "better" if after < before else "worse"


class Verdict(NamedTuple):
    better: bool
    why: str


class Objective(NamedTuple):
    budget: float  # GPU-hours

    def key(self, figures: Figures) -> tuple[float, float, float, int]:
        """Smaller is better: the GPU-hours over the budget, the time under-provisioned,
        the longest scale-up lag, the flaps."""
        over = max(0.0, figures.gpu_hours_used - self.budget - _BUDGET_SLACK)
        return (
            over,
            figures.time_under_provisioned_s,
            figures.scale_up_lag_s,
            figures.flaps,
        )

    def within(self, figures: Figures) -> bool:
        return figures.gpu_hours_used <= self.budget + _BUDGET_SLACK

    def judge(self, before: Figures, after: Figures) -> Verdict:
        """Whether ``after`` is better than ``before`` by the objective, and why in a
        sentence."""
        budget = f"the budget of {self.budget:.2f} GPU-hours"
        uses = f"uses {after.gpu_hours_used:.2f}"
        if not self.within(after):
            if self.within(before):
                return Verdict(False, f"worse: it {uses} GPU-hours, over {budget}")
            if after.gpu_hours_used < before.gpu_hours_used:
                return Verdict(
                    True,
                    f"better: over {budget} by less ({uses} GPU-hours, against "
                    f"{before.gpu_hours_used:.2f})",
                )
            return Verdict(False, f"worse: it {uses} GPU-hours, over {budget}")
        if not self.within(before):
            return Verdict(
                True,
                f"better: within {budget} ({uses}; the setting compared with uses "
                f"{before.gpu_hours_used:.2f})",
            )
        steps = (
            ("under-provisioned", before.time_under_provisioned_s, after.time_under_provisioned_s),
            ("longest scale-up lag", before.scale_up_lag_s, after.scale_up_lag_s),
            ("flaps", before.flaps, after.flaps),
        )
        for label, was, now in steps:
            if now == was:
                continue
            change = _change(label, was, now)
            if now < was:
                return Verdict(True, f"better: {change}, within {budget} ({uses})")
            return Verdict(False, f"worse: {change}")
        return Verdict(
            False,
            "no better: the same time under-provisioned "
            f"({_duration(after.time_under_provisioned_s)}), longest scale-up lag "
            f"({_duration(after.scale_up_lag_s)}) and flaps ({after.flaps}), within {budget}",
        )


def _change(label: str, was: float, now: float) -> str:
    if label == "flaps":
        return f"{int(now)} flaps instead of {int(was)}"
    return f"{label} {_duration(now)} instead of {_duration(was)}"


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:g} s"
