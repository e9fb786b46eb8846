"""An autoscaler targets `<isvc>-predictor-default`, a Deployment name KServe stopped using in 0.11.

## What it checks
An HPA or KEDA ScaledObject whose ``scaleTargetRef`` is a Deployment named
``<isvc>-predictor-default`` (or ``-transformer-default``, ``-explainer-default``) that is not
itself part of the input.

## Why is this bad?
KServe 0.10 and earlier named the objects of an InferenceService component
``<isvc>-predictor-default``. Since 0.11 the name is ``<isvc>-predictor``; 0.11 to 0.15 kept the
old name only for objects that already existed, and 0.16 dropped even that. On a current
KServe no Deployment has the old name, so the autoscaler reports ``FailedGetScale`` and never
scales anything. Many tutorials still show the old name.

## Example
```yaml
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: triton-gpu-predictor-default
```

## Use instead
```yaml
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: triton-gpu-predictor
```
In Standard (RawDeployment) mode KServe also creates its own HPA for that Deployment unless the
InferenceService says ``serving.kserve.io/autoscalerClass: external`` (see GL103).

## References
- kserve v0.10.0 components/predictor.go (``DefaultPredictorServiceName``: ``-predictor-default``).
- kserve v0.11.0 components/predictor.go (``<isvc>-predictor``, fallback to existing objects).
- kserve v0.20 pkg/constants/constants.go ``PredictorServiceName``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint.ruleapi import (
    EXTERNAL_LINE,
    KNATIVE,
    MODE_ANNOTATION,
    STANDARD,
    Autoscaler,
    Context,
    Finding,
    InferenceService,
    Inventory,
    Related,
    Severity,
    TargetGroup,
    mode_spelling,
    related,
)

ID = "GL106"
NAME = "hpa-targets-legacy-kserve-name"
SEVERITY = Severity.WARNING
SCOPE = "target-group"
STAGES = ("workload",)

LEGACY_NAME = re.compile(r"^(?P<isvc>.+)-(?P<component>predictor|transformer|explainer)-default$")


def check(group: TargetGroup, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    for autoscaler in group.autoscalers:
        finding = _check_one(autoscaler, inventory, ctx)
        if finding is not None:
            yield finding


def _check_one(autoscaler: Autoscaler, inventory: Inventory, ctx: Context) -> Finding | None:
    ref = autoscaler.ref
    if autoscaler.implicit or ref is None or (ref.kind or "Deployment") != "Deployment":
        return None
    match = LEGACY_NAME.match(ref.name)
    if match is None:
        return None
    target = inventory.resolve_target(autoscaler.manifest.namespace, ref, autoscaler.manifest)
    if target.manifest is not None:
        return None  # the input holds a Deployment of that name: it exists where this applies
    component = match.group("component")
    isvc: InferenceService | None = None
    if target.via == "kserve-legacy" and target.owner is not None:
        isvc = inventory.inference_service_of(target.owner)
    new_name = isvc.component_name(component) if isvc else f"{match.group('isvc')}-{component}"
    isvc_name = isvc.name if isvc else match.group("isvc")
    links: list[Related] = [related(isvc.manifest)] if isvc else []
    message = (
        f"{autoscaler.describe()} targets {ref.name}, the name KServe 0.10 gave the {component} "
        f"of InferenceService {isvc_name}. Since KServe 0.11 the Deployment is "
        f"{new_name} (0.11 to 0.15 kept the old name only for objects that already existed, "
        f"0.16 dropped it), so on a current KServe no Deployment {ref.name} exists and the "
        "autoscaler never scales"
    )
    fix = f"scaleTargetRef:\n  name: {new_name}"
    writes = [autoscaler.manifest]
    if isvc is not None and isvc.mode == KNATIVE:
        message += (
            f". InferenceService {isvc.name} runs in Knative mode, where KServe creates no "
            f"Deployment {new_name} either (its revisions are {new_name}-NNNNN-deployment)"
        )
        mode = mode_spelling(STANDARD, inventory.settings.kserve_version)
        fix += (
            f"\n---\n# on InferenceService {isvc.name}: a Deployment of that name exists only in "
            "Standard mode, scaled by yours\n"
            f"metadata:\n  annotations:\n    {MODE_ANNOTATION}: {mode}\n"
            f"    {EXTERNAL_LINE}"
        )
        writes.append(isvc.manifest)
    elif isvc is not None and isvc.mode == STANDARD and isvc.autoscaler_class in ("hpa", "keda"):
        fix += (
            f"\n---\n# on InferenceService {isvc.name}: KServe's own autoscaler (class "
            f"{isvc.autoscaler_class}) claims that Deployment too\n"
            f"metadata:\n  annotations:\n    {EXTERNAL_LINE}"
        )
        writes.append(isvc.manifest)
    message += "."
    return ctx.finding(
        autoscaler.manifest, (*ref.path, "name"), message, fix, related=links, writes=writes
    )
