"""A Standard-mode InferenceService with KServe's HPA has no maxReplicas, so it never scales.

## What it checks
Each component (predictor, transformer, explainer) of a ``serving.kserve.io``
InferenceService in Standard mode (annotation ``Standard``/``RawDeployment``, or a cluster
default of Standard) whose autoscaler class is ``hpa`` (the default) and whose
``maxReplicas`` is missing or 0. Multi-node predictors (``workerSpec``) are not checked:
KServe accepts only ``autoscalerClass: none`` for them.

## Why is this bad?
KServe's HPA reconciler sets the HPA's ``maxReplicas`` to the component's ``maxReplicas``,
raised to ``minReplicas`` when smaller, and ``minReplicas`` to at least 1. Without
``maxReplicas`` the HPA therefore gets ``maxReplicas == minReplicas`` (1 by default): it
exists, reports its metric, and never adds a replica. In Knative mode a missing
``maxReplicas`` means "no limit"; in Standard mode it means "no scaling".

## Example
```yaml
metadata:
  annotations:
    serving.kserve.io/deploymentMode: Standard
spec:
  predictor:
    minReplicas: 1          # and no maxReplicas: the HPA is pinned to 1 replica
```

## Use instead
```yaml
spec:
  predictor:
    minReplicas: 1
    maxReplicas: 4
```

## References
- kserve pkg/controller/v1beta1/inferenceservice/reconcilers/hpa/hpa_reconciler.go
  ``createHPA`` (the same since KServe 0.9).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    KSERVE_CLASS_ANNOTATION,
    Context,
    Finding,
    InferenceService,
    Inventory,
    Path,
    Severity,
)

ID = "GL304"
NAME = "kserve-max-replicas-missing"
SEVERITY = Severity.WARNING
SCOPE = "isvc"
STAGES = ("workload",)


def check(isvc: InferenceService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    source = isvc.mode_source(inventory.kserve_mode_source())
    for component, class_path in isvc.components_under_kserve_hpa():
        maximum = component.get("maxReplicas")
        if maximum not in (None, 0):
            continue
        minimum = component.get("minReplicas")
        pinned = minimum if isinstance(minimum, int) and minimum > 1 else 1
        path: Path = (*component.path, "maxReplicas") if maximum == 0 else component.path
        written = "maxReplicas: 0" if maximum == 0 else "no maxReplicas"
        hpa_name = isvc.component_name(component.name)
        chosen = "annotation" if class_path is not None else "the default"
        suggested = max(pinned * 2, 4)
        yield ctx.finding(
            isvc.manifest,
            path,
            f"The {component.name} of InferenceService {isvc.name} has {written}, so KServe's "
            f"HPA {hpa_name} never scales it. In Standard mode ({source}) with autoscalerClass "
            f"hpa ({chosen}), KServe creates that HPA with maxReplicas = minReplicas = {pinned}.",
            _nested(
                component.path,
                [
                    f"minReplicas: {pinned}",
                    f"maxReplicas: {suggested}   # the most the HPA may run",
                ],
            )
            + f"\n# or, to keep a fixed count of {pinned} without an HPA: "
            f"{KSERVE_CLASS_ANNOTATION}: none in metadata.annotations",
        )


def _nested(path: Path, lines: list[str]) -> str:
    """``lines`` as YAML under the mapping keys of ``path`` (spec, predictor ...)."""
    out = []
    for depth, step in enumerate(path):
        out.append(f"{'  ' * depth}{step}:")
    indent = "  " * len(path)
    out.extend(f"{indent}{line}" for line in lines)
    return "\n".join(out)
