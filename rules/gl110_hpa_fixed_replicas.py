"""An HPA has minReplicas equal to maxReplicas, so it never changes the replica count.

## What it checks
A HorizontalPodAutoscaler whose ``minReplicas`` (1 when left out) equals ``maxReplicas``.
A kustomize patch (an HPA without ``scaleTargetRef``) is not judged on its own, and neither is
an HPA that such a patch in the input overrides, nor an HPA that KEDA, KServe or Knative
generated (KServe's min = max = 1 is GL304's finding on the InferenceService).

## Why is this bad?
With ``minReplicas == maxReplicas`` the controller can only ever ask for that one count: the
metrics are fetched and evaluated every 15 seconds and never change anything. That is usually
a leftover (a base that an overlay was meant to widen, or a test value) and a GPU workload that
was expected to scale out under load stays at its fixed size. If a fixed size is what you
want, ``spec.replicas`` on the workload says it more plainly.

## Example
```yaml
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: vllm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  minReplicas: 1
  maxReplicas: 1
```

## Use instead
```yaml
  minReplicas: 1
  maxReplicas: 4   # the most GPU replicas you can pay for
```

## References
- Kubernetes HPA docs, "Algorithm details": desired replicas are clamped to
  [minReplicas, maxReplicas].
- Kubernetes autoscaling/v2 defaults.go: minReplicas defaults to 1.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA,
    HPA_KIND,
    Context,
    Finding,
    Inventory,
    Severity,
    is_generated,
    key_of,
)

ID = "GL110"
NAME = "hpa-fixed-replicas"
SEVERITY = Severity.INFO
SCOPE = "hpa"


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _patched_elsewhere(hpa: HPA, inventory: Inventory) -> bool:
    """Another document of the input is a patch of this HPA that sets its replica bounds."""
    key = key_of(HPA_KIND, hpa.namespace, hpa.name)
    for other in inventory.hpas:
        if other is hpa or not other.is_fragment:
            continue
        if key_of(HPA_KIND, other.namespace, other.name) != key:
            continue
        if "maxReplicas" in other.spec or "minReplicas" in other.spec:
            return True
    return False


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if hpa.is_fragment or "maxReplicas" not in hpa.spec or is_generated(hpa.manifest):
        return
    maximum = _count(hpa.max_replicas)
    minimum = 1 if hpa.min_replicas is None else _count(hpa.min_replicas)
    if maximum is None or minimum is None or maximum < 1 or minimum != maximum:
        return
    if _patched_elsewhere(hpa, inventory):
        return
    written = "minReplicas" if hpa.min_replicas is not None else "minReplicas (default 1)"
    target = hpa.target_ref.name if hpa.target_ref else "its target"
    message = (
        f"HorizontalPodAutoscaler {hpa.name} has {written} equal to maxReplicas ({maximum}): "
        f"it keeps {target} at {maximum} replica{'s' if maximum != 1 else ''} and never scales"
    )
    fix = (
        f"maxReplicas: {max(2 * maximum, maximum + 1)}   # the most replicas the workload may use\n"
        f"# or, for a fixed size, delete the HPA and set spec.replicas: {maximum} on {target}"
    )
    yield ctx.finding(hpa.manifest, ("spec", "maxReplicas"), message, fix)
