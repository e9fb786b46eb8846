"""Replayed on the load it really saw, the autoscaler reverses its own replica changes.

## What it checks
With ``gpulint replay``, the autoscaler's controller (Kubernetes' HPA controller, and KEDA's
activation for a ScaledObject) is replayed over the metric's history from Prometheus. A
change of replicas in the opposite direction of the change before, within 10 minutes of it,
is a flap; this rule reports an autoscaler with at least ``min-flaps`` of them, with the
stretch of time where they happened.

## Why is this bad?
Each flap on a GPU workload removes a pod that loaded a model (minutes of work, a GPU held)
and adds one back soon after, which loads it again and serves nothing meanwhile. A target
near the load's usual level with the default behavior (a scale-up every 15 s, all surplus
pods removed once the 5-minute window passes) does this on bursty traffic.

## Example
```yaml
spec:
  maxReplicas: 8
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}
      target: {type: AverageValue, averageValue: "60"}
  # no behavior: the defaults
```

## Use instead
```yaml
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      policies:
      - {type: Pods, value: 2, periodSeconds: 60}
    scaleDown:
      stabilizationWindowSeconds: 300
      policies:
      - {type: Pods, value: 1, periodSeconds: 120}
```

## Options
* ``min-flaps`` (default 2): the fewest flaps over the replayed range that are reported.

## References
- Kubernetes pkg/controller/podautoscaler/horizontal.go: stabilization windows and scaling
  policies.
- ``gpulint replay --compare-fix`` replays the behavior above beside the one in use.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Replayed, Severity, stamp

ID = "GL951"
NAME = "replay-flapping"
SEVERITY = Severity.WARNING
SCOPE = "autoscaler"
REQUIRES = "replay"  # runs only in gpulint replay
OPTIONS = {
    "min-flaps": {"type": "integer", "minimum": 1, "default": 2},
}


def check(replayed: Replayed, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    figures, spec = replayed.figures, replayed.spec
    if figures.flaps < ctx.options["min-flaps"] or spec.document is None:
        return
    first, last = figures.flap_times[0], figures.flap_times[-1]
    yield ctx.finding(
        spec.document,
        spec.behavior_path,
        f"Replayed over the load it saw, {spec.kind} {spec.name} reverses its replica "
        f"changes {figures.flaps} times within 10 minutes ({figures.scale_events} changes in "
        f"all), from {stamp(first)} to {stamp(last)}: each reversal removes a GPU pod that "
        "had loaded its model, or adds one that serves nothing for "
        f"{spec.pod_ready_after_s:g} s",
        "behavior:\n"
        "  scaleDown:\n"
        "    stabilizationWindowSeconds: 300   # longer than the gaps between bursts\n"
        "    policies:\n"
        "    - {type: Pods, value: 1, periodSeconds: 120}",
    )
