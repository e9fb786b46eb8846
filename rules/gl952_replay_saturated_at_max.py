"""Replayed on the load it really saw, the autoscaler sits at maxReplicas under load.

## What it checks
With ``gpulint replay``: the longest stretch in which the replayed autoscaler is at
``maxReplicas`` while the load is above what the ready pods serve at the target (beyond the
controller's 10% tolerance) and no pod is on its way. Reported when that stretch lasts at
least ``min-minutes``.

## Why is this bad?
The autoscaler has done all it may: requests queue, latency grows, and the metric stays
above target for as long as the load does. Either the ceiling is too low for the demand, or
the target asks for more capacity than the GPUs can give.

## Example
```yaml
spec:
  minReplicas: 1
  maxReplicas: 2        # the load needs 4 GPU pods at 60% each, every afternoon
```

## Use instead
```yaml
spec:
  maxReplicas: 4        # what the replay says the peak needed
```

## Options
* ``min-minutes`` (default 30): the shortest saturated stretch reported.

## References
- Kubernetes HPA condition ``ScalingLimited`` with reason ``TooManyReplicas``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Replayed, Severity, stamp

ID = "GL952"
NAME = "replay-saturated-at-max"
SEVERITY = Severity.ERROR
SCOPE = "autoscaler"
REQUIRES = "replay"  # runs only in gpulint replay
OPTIONS = {
    "min-minutes": {"type": "number", "minimum": 0, "default": 30},
}


def check(replayed: Replayed, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    spec = replayed.spec
    windows = replayed.figures.saturated
    if not windows or spec.document is None:
        return
    longest = max(windows, key=lambda w: w.seconds)
    if longest.seconds < ctx.options["min-minutes"] * 60:
        return
    peak = max(
        (t.load for t in replayed.run.ticks if t.load is not None and longest.start <= t.time),
        default=float(spec.max_replicas),
    )
    needed = max(spec.max_replicas + 1, math.ceil(peak - 1e-9))
    field = "maxReplicaCount" if spec.kind == "ScaledObject" else "maxReplicas"
    path = spec.max_path or ("spec", field)
    # The maximum where it is written: spec.maxReplicas, or the settings a controller makes
    # the autoscaler from (a NIMService's spec.scale.hpa.maxReplicas).
    fix = "\n".join(f"{'  ' * depth}{step}:" for depth, step in enumerate(path[:-1]))
    yield ctx.finding(
        spec.document,
        path,
        f"Replayed over the load it saw, {spec.kind} {spec.name} sits at {field} "
        f"{spec.max_replicas} with the load above target for {longest.seconds / 60:.0f} "
        f"minutes, from {stamp(longest.start)} to {stamp(longest.end)} "
        f"({replayed.figures.time_at_max_s / 60:.0f} minutes at the maximum in all): the load "
        f"needed up to {needed} pods at the target",
        f"{fix}\n{'  ' * (len(path) - 1)}{path[-1]}: {needed}   # or lower the load per pod; "
        f"each pod holds {spec.gpus_per_pod} GPU(s)",
    )
