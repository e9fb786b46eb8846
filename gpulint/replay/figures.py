"""What a replay measures, each figure with the stretches of time it comes from.

Each sync of the replay counts for the sync period (15 s). "Load" is the load in pods' worth
at the target (the controller's usage ratio times the ready pods):

* ``flaps``: replica changes in the opposite direction of the change before, within
  ``FLAP_WINDOW_S`` of it;
* ``time_under_provisioned_s``: the load above the ready pods by more than the tolerance
  while no pod is starting (no capacity on its way: at maxReplicas, or the controller held);
* ``time_over_provisioned_s``: above minReplicas with the load under ``FAR_UNDER`` of the
  ready pods;
* ``scale_up_lag_s``: the longest time from a rise of demand (the pods needed going above the
  ready pods) to as many ready pods as were needed then (at most maxReplicas), or as the
  load needs by then when it fell back first;
* ``gpu_hours_used``: the replicas set, times the GPUs per pod; ``gpu_hours_needed``: the
  pods the load needed (its ceiling, within minReplicas and maxReplicas), times the GPUs;
* ``time_queued_s`` (with ``--node-ready-after``): the time some pod waited for a GPU node
  (gpulint.replay.nodes); ``cost`` (with ``--gpu-hour-cost``): the GPU-hours used at that
  price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpulint.replay.behavior import SYNC_PERIOD_S
from gpulint.replay.model import ReplaySpec, Run, Tick

FLAP_WINDOW_S = 600.0  # a change reversed within 10 minutes is a flap
FAR_UNDER = 0.5  # the load under half the ready pods is far under target


@dataclass
class Window:
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class Figures:
    scale_events: int = 0
    flaps: int = 0
    time_at_max_s: float = 0.0
    time_at_min_s: float = 0.0
    time_under_provisioned_s: float = 0.0
    time_over_provisioned_s: float = 0.0
    scale_up_lag_s: float = 0.0
    gpu_hours_used: float = 0.0
    gpu_hours_needed: float = 0.0
    time_queued_s: float | None = None
    cost: float | None = None
    # where they come from, for findings and the picture
    flap_times: list[float] = field(default_factory=list)
    saturated: list[Window] = field(default_factory=list)  # at max and under-provisioned
    mismatched: list[Window] = field(default_factory=list)  # needed differs from replicas
    lag_window: Window | None = None

    def as_json(self) -> dict[str, float | int | None]:
        return {
            "scale_events": self.scale_events,
            "flaps": self.flaps,
            "time_at_max_s": self.time_at_max_s,
            "time_at_min_s": self.time_at_min_s,
            "time_under_provisioned_s": self.time_under_provisioned_s,
            "time_over_provisioned_s": self.time_over_provisioned_s,
            "scale_up_lag_s": self.scale_up_lag_s,
            "gpu_hours_used": round(self.gpu_hours_used, 3),
            "gpu_hours_needed": round(self.gpu_hours_needed, 3),
            "time_queued_s": self.time_queued_s,
            "cost": None if self.cost is None else round(self.cost, 2),
        }


def measure(
    spec: ReplaySpec,
    run: Run,
    sync_s: float = SYNC_PERIOD_S,
    gpu_hour_cost: float | None = None,
) -> Figures:
    figures = Figures(scale_events=len(run.events), time_queued_s=run.queued_s)
    _count_flaps(figures, run)
    lowest = spec.keda.min_replica_count if spec.keda is not None else spec.min_replicas
    rise: tuple[float, int] | None = None
    saturated: Window | None = None
    mismatched: Window | None = None
    for tick in run.ticks:
        if tick.replicas >= spec.max_replicas:
            figures.time_at_max_s += sync_s
        if tick.replicas <= lowest:
            figures.time_at_min_s += sync_s
        needed, under = _provisioning(figures, spec, tick, lowest, sync_s)
        # scale-up lag: from the first sync that needs more than is ready to enough ready
        wanting = needed > tick.ready and under
        if rise is None and wanting:
            rise = (tick.time, needed)
        # over when as many pods are ready as the rise needed, or as the load needs now
        if rise is not None and tick.ready >= min(rise[1], needed):
            _longest_lag(figures, rise[0], tick.time)
            rise = None
            if wanting:
                rise = (tick.time, needed)
        saturated = _extend(
            figures.saturated,
            saturated,
            tick.time,
            sync_s,
            tick.replicas >= spec.max_replicas and under and tick.starting == 0,
        )
        mismatched = _extend(
            figures.mismatched, mismatched, tick.time, sync_s, needed != tick.replicas
        )
    if rise is not None and run.ticks:
        _longest_lag(figures, rise[0], run.ticks[-1].time + sync_s)
    if gpu_hour_cost is not None:
        figures.cost = figures.gpu_hours_used * gpu_hour_cost
    return figures


def _count_flaps(figures: Figures, run: Run) -> None:
    """Scale events that reverse the one before within ``FLAP_WINDOW_S``."""
    previous = None
    for event in run.events:
        direction = 1 if event.after > event.before else -1
        if (
            previous is not None
            and direction != previous[0]
            and event.time - previous[1] <= FLAP_WINDOW_S
        ):
            figures.flaps += 1
            figures.flap_times.append(event.time)
        previous = (direction, event.time)


def _provisioning(
    figures: Figures, spec: ReplaySpec, tick: Tick, lowest: int, sync_s: float
) -> tuple[int, bool]:
    """One tick's GPU-hours, and its time under- or over-provisioned; the replicas its load
    needs and whether the ready pods are too few for it."""
    gpus = spec.gpus_per_pod
    figures.gpu_hours_used += tick.replicas * gpus * sync_s / 3600.0
    if tick.load is None:
        figures.gpu_hours_needed += tick.replicas * gpus * sync_s / 3600.0
        return tick.replicas, False
    needed = max(lowest, min(spec.max_replicas, math.ceil(tick.load - 1e-9)))
    figures.gpu_hours_needed += needed * gpus * sync_s / 3600.0
    capacity = tick.ready
    under = tick.load > capacity * (1 + spec.tolerances.up) if capacity else tick.load > 0
    if under and tick.starting == 0:
        figures.time_under_provisioned_s += sync_s
    if tick.replicas > lowest and capacity and tick.load < FAR_UNDER * capacity:
        figures.time_over_provisioned_s += sync_s
    return needed, under


def _longest_lag(figures: Figures, start: float, end: float) -> None:
    """A scale-up that took from ``start`` to ``end``: the longest so far is kept."""
    lag = end - start
    if lag > figures.scale_up_lag_s:
        figures.scale_up_lag_s = lag
        figures.lag_window = Window(start, end)


def _extend(
    into: list[Window], current: Window | None, time: float, sync_s: float, condition: bool
) -> Window | None:
    """Grow the open window while ``condition`` holds; close it (into ``into``) when not."""
    if condition:
        if current is None:
            current = Window(time, time + sync_s)
            into.append(current)
        else:
            current.end = time + sync_s
        return current
    return None
