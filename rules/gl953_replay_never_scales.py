"""Replayed on the load it really saw, the autoscaler never changes the replicas it needed to.

## What it checks
With ``gpulint replay``: the replayed controller made no replica change over the whole
range, yet the load needed another number of pods at the target (within ``minReplicas`` and
``maxReplicas``) for at least ``min-minutes`` in all.

## Why is this bad?
The autoscaler is there but does nothing. The usual causes: the controller's tolerance (no
change while the ratio of metric to target is within 0.9-1.1, or within the HPA's own
``behavior.*.tolerance``) swallows the signal at few replicas (at one pod a ratio of 1.09
asks for 2 pods and gets none); a target the metric never reaches (a percentage target on a
0-1 ratio); or a stabilization window longer than the load's swings.

## Example
```yaml
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_busy}          # DCGM_FI_PROF_GR_ENGINE_ACTIVE, 0-1
      target: {type: AverageValue, averageValue: "60"}
```

## Use instead
```yaml
      target: {type: AverageValue, averageValue: "600m"}
```

## Options
* ``min-minutes`` (default 30): the least time, in all, that the load needed other replicas.

## References
- kube-controller-manager ``--horizontal-pod-autoscaler-tolerance`` (default 0.1), replaced per
  HPA by ``behavior.scaleUp/scaleDown.tolerance`` from Kubernetes 1.35 (KEP-4951).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Replayed, Severity, stamp

ID = "GL953"
NAME = "replay-never-scales"
SEVERITY = Severity.WARNING
SCOPE = "autoscaler"
REQUIRES = "replay"  # runs only in gpulint replay
OPTIONS = {
    "min-minutes": {"type": "number", "minimum": 0, "default": 30},
}


def check(replayed: Replayed, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    spec = replayed.spec
    figures = replayed.figures
    if figures.scale_events or spec.document is None or not figures.mismatched:
        return
    total = sum(w.seconds for w in figures.mismatched)
    if total < ctx.options["min-minutes"] * 60:
        return
    first, last = figures.mismatched[0].start, figures.mismatched[-1].end
    replicas = replayed.run.ticks[0].replicas if replayed.run.ticks else spec.min_replicas
    tolerances = spec.tolerances  # behavior.*.tolerance where the release honours it
    yield ctx.finding(
        spec.document,
        spec.path,
        f"Replayed over the load it saw, {spec.kind} {spec.name} never changes its "
        f"{replicas} replicas, although the load needed another number of pods at the target "
        f"for {total / 60:.0f} minutes between {stamp(first)} and {stamp(last)}: the "
        f"controller's {tolerances.describe()} tolerance, a target the metric does not reach, "
        "or a long stabilization window holds it",
        "# set the target where the metric moves: the ratio of metric to target must leave "
        f"{1 - tolerances.down:g}-{1 + tolerances.up:g} for the HPA to act (see gpulint "
        "replay's picture of the metric)",
    )
