"""An AIBrix PodAutoscaler and an HPA or KEDA ScaledObject scale the same workload.

## What it checks
A workload of the input that an AIBrix PodAutoscaler (``autoscaling.aibrix.ai``) scales and
that an HPA, a KEDA ScaledObject, or another controller's autoscaler (KServe's, the NIM
operator's ...) scales too. Each of them gets a finding at its ``scaleTargetRef`` naming the
others. Two PodAutoscalers on one target are left to AIBrix, which refuses the second one
itself.

## Why is this bad?
AIBrix checks that no other PodAutoscaler controls a target
(``MultiPodAutoscalerConflict``), but nothing in it looks for an HPA or a ScaledObject:

* with ``scalingStrategy: HPA`` AIBrix makes an HPA ``<name>-hpa`` on the target; with an HPA
  of yours (or KEDA's ``keda-hpa-<name>``) two HPAs select the same pods, and Kubernetes
  1.26 and later sets ``ScalingActive=False`` (``AmbiguousSelector``) on both: none scales;
* with ``KPA`` or ``APA`` AIBrix computes the replicas itself and writes them through the
  target's ``/scale``, while the HPA writes its own every 15 seconds: each undoes the other,
  and GPU pods are started and killed while they load their model.

## Example
```yaml
apiVersion: autoscaling.aibrix.ai/v1alpha1
kind: PodAutoscaler
metadata: {name: llama-kpa}
spec:
  scalingStrategy: KPA
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llama}
  maxReplicas: 8
  metricsSources:
  - {metricSourceType: pod, targetMetric: kv_cache_usage_perc, targetValue: "0.7"}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llama}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llama}
  maxReplicas: 8
```

## Use instead
Keep one of them: put the metric the HPA reads into the PodAutoscaler's ``metricsSources``
(it takes several) and delete the HPA, or delete the PodAutoscaler.

## References
- vllm-project/aibrix@e3e10f9 pkg/controller/podautoscaler/podautoscaler_controller.go
  (``checkNoMultiPodAutoscalerConflict``, ``reconcileCustomPA``, ``updateScale``) and
  hpa_resources.go (``makeHPAWithBounds``: ``<name>-hpa``).
- kubernetes/kubernetes PR #112011 (v1.26): AmbiguousSelector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from gpulint.ruleapi import (
    AIBrixPodAutoscaler,
    Autoscaler,
    Context,
    Finding,
    Inventory,
    Severity,
    TargetGroup,
    related,
)

ID = "GL131"
NAME = "aibrix-podautoscaler-beside-autoscaler"
SEVERITY = Severity.ERROR
SCOPE = "target-group"
STAGES = ("autoscaler",)

PODAUTOSCALER = "PodAutoscaler"


def check(group: TargetGroup, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    pas = [a for a in group.autoscalers if a.kind == PODAUTOSCALER]
    others = [a for a in group.autoscalers if a.kind != PODAUTOSCALER]
    if not pas or not others or not _target_in_input(pas, inventory):
        return
    kind, namespace, name = group.target
    target = f"{kind} {namespace + '/' if namespace else ''}{name}"
    for pa in pas:
        view = inventory.view_of(pa.manifest)
        if not isinstance(view, AIBrixPodAutoscaler):
            continue
        how = _how(view)
        yours = [o for o in others if not o.implicit]
        # One fix for the pair, printed once: the PodAutoscaler stays, the others go (their
        # metrics can be listed under its metricsSources).
        fix = (
            f"# delete {', '.join(o.describe() for o in yours) or 'the other autoscaler'}: "
            f"PodAutoscaler {view.name} scales {target} (list what they read under its "
            "metricsSources if it should scale on that too)"
        )
        for other in yours:
            yield ctx.finding(
                other.manifest,
                other.path,
                f"{_short(other)} scales {target}, which {view.describe()} scales too. "
                f"{how(other)} AIBrix refuses a second PodAutoscaler on a target, but does not "
                "look for HPAs or ScaledObjects.",
                fix,
                related=[related(pa.manifest, pa.path, view.describe())],
                deletes=[o.manifest for o in yours],
                fix_at_path=False,
            )
        named = ", ".join(_short(o) for o in others)
        yield ctx.finding(
            pa.manifest,
            pa.path,
            f"{view.describe()} scales {target}, which {named} scale"
            f"{'s' if len(others) == 1 else ''} too. {how(others[0])} AIBrix refuses a "
            "second PodAutoscaler on a target, but does not look for HPAs or ScaledObjects.",
            fix,
            related=[related(o.manifest, o.path, o.describe()) for o in others[:10]],
            deletes=[o.manifest for o in yours],
            fix_at_path=False,
        )


def _short(autoscaler: Autoscaler) -> str:
    """``ScaledObject deepseek``: kind and name, for a headline (the message says the rest)."""
    if autoscaler.implicit:
        return autoscaler.describe()
    return f"{autoscaler.manifest.kind} {autoscaler.manifest.name}"


def _how(view: AIBrixPodAutoscaler) -> Callable[[Autoscaler], str]:
    """What happens between the PodAutoscaler and another autoscaler, by its strategy."""
    if view.strategy == "HPA":

        def through_hpa(other: Autoscaler) -> str:
            return (
                f"AIBrix makes the HPA {view.name}-hpa on it, so two HPAs select the same pods: "
                "Kubernetes >= 1.26 sets ScalingActive=False (AmbiguousSelector) on both and "
                "none scales."
            )

        return through_hpa

    def through_scale(other: Autoscaler) -> str:
        return (
            f"AIBrix's {view.strategy or 'controller'} writes the replicas through the "
            f"workload's /scale from its own metrics while {other.describe()} writes its own "
            "every 15 seconds: each undoes the other, so GPU pods are started and killed "
            "while they load their model."
        )

    return through_scale


def _target_in_input(pas: list[Autoscaler], inventory: Inventory) -> bool:
    """Only workloads the input defines (or a controller of the input makes) are judged: a
    directory of examples holds alternatives for workloads it does not define."""
    for pa in pas:
        if pa.ref is not None:
            found = inventory.resolve_target(pa.manifest.namespace, pa.ref, pa.manifest)
            if found.found:
                return True
    return False
