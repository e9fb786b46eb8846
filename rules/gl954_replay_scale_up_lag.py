"""Replayed on the load it really saw, new capacity arrives long after the demand rose.

## What it checks
With ``gpulint replay``: the longest time from a rise of demand (more pods needed at the
target than are ready) to that many pods ready, against the time one pod needs to become
ready (``--pod-ready-after``, else the pod template's probes, else 120 s). Reported when it is
more than ``factor`` times that.

## Why is this bad?
One pod start is the least any autoscaler can do; several mean the controller waited
(a scale-up stabilization window, a policy that adds one pod per minute, a target so high
that the metric crosses it late) while users waited too. On GPU pods that load a model each
step costs minutes.

## Example
```yaml
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 300
      policies:
      - {type: Pods, value: 1, periodSeconds: 300}
```

## Use instead
```yaml
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      policies:
      - {type: Pods, value: 2, periodSeconds: 60}
```

## Options
* ``factor`` (default 2): how many pod start times the lag may last.

## References
- Kubernetes pkg/controller/podautoscaler/horizontal.go: scale-up stabilization and policies.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Replayed, Severity, stamp

ID = "GL954"
NAME = "replay-scale-up-lag"
SEVERITY = Severity.WARNING
SCOPE = "autoscaler"
REQUIRES = "replay"  # runs only in gpulint replay
OPTIONS = {
    "factor": {"type": "number", "minimum": 1, "default": 2},
}


def check(replayed: Replayed, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    spec = replayed.spec
    figures = replayed.figures
    window = figures.lag_window
    start_time = spec.pod_ready_after_s
    if window is None or spec.document is None or start_time <= 0:
        return
    if figures.scale_up_lag_s <= ctx.options["factor"] * start_time:
        return
    yield ctx.finding(
        spec.document,
        spec.behavior_path,
        f"Replayed over the load it saw, {spec.kind} {spec.name} takes "
        f"{figures.scale_up_lag_s / 60:.1f} minutes from a rise of demand at "
        f"{stamp(window.start)} to the pods it needed being ready at {stamp(window.end)}, "
        f"{figures.scale_up_lag_s / start_time:.1f} times the {start_time:g} s a pod needs "
        f"to become ready ({spec.pod_ready_source})",
        "behavior:\n"
        "  scaleUp:\n"
        "    stabilizationWindowSeconds: 0\n"
        "    policies:\n"
        "    - {type: Pods, value: 2, periodSeconds: 60}   # or keep a warm pod: minReplicas",
    )
