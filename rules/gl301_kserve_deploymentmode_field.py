"""The KServe deployment mode is written as a field, where KServe never reads it.

## What it checks
A ``deploymentMode`` key anywhere in the ``spec`` of a ``serving.kserve.io``
InferenceService (``spec.predictor.deploymentMode``, ``spec.deploymentMode``, inside a
component's containers ...), and the annotation key ``serving.kserve.io/deploymentMode``
written anywhere other than ``metadata.annotations`` (directly under ``metadata``, in
``metadata.labels``, in a component's ``annotations`` or ``labels``). OME's ``ome.io``
InferenceService, a different project with the same kind, is not checked.

## Why is this bad?
KServe takes the mode from one place only: the InferenceService's annotation
``serving.kserve.io/deploymentMode`` (or, without it, the cluster default in the
``inferenceservice-config`` ConfigMap, Knative on a default install). The CRD has
``deploymentMode`` only in ``status``. A ``deploymentMode`` field is dropped, rejected by
strict field validation, or stored unread, depending on the CRD variant installed; in every
case the InferenceService runs in the default mode, usually Knative with the KPA scaling on
request concurrency, while its author expects a plain Deployment with an HPA.

## Example
```yaml
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: triton
spec:
  predictor:
    deploymentMode: RawDeployment      # not a field
    model:
      modelFormat: {name: triton}
```

## Use instead
```yaml
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: triton
  annotations:
    serving.kserve.io/deploymentMode: Standard   # RawDeployment before KServe 0.16
spec:
  predictor:
    model:
      modelFormat: {name: triton}
```

## References
- kserve pkg/constants/constants.go (``DeploymentMode`` annotation key);
  pkg/apis/serving/v1beta1/inference_service_status.go (``deploymentMode`` in status only).
- kserve pkg/controller/v1beta1/inferenceservice/utils/utils.go ``GetDeploymentMode``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpulint.ruleapi import (
    MODE_ANNOTATION,
    MODE_VALUES,
    STANDARD,
    Context,
    Finding,
    InferenceService,
    Inventory,
    Path,
    Severity,
    edits,
    mode_note,
    mode_spelling,
    related,
    standard_mode_fix,
)

ID = "GL301"
NAME = "kserve-deploymentmode-field"
SEVERITY = Severity.ERROR
SCOPE = "isvc"
FIXES = ("safe", "unsafe")
STAGES = ("workload",)


def check(isvc: InferenceService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    data = isvc.manifest.data
    misplaced: list[tuple[Path, Any]] = list(_keys(data.get("spec"), ("spec",), "deploymentMode"))
    metadata = data.get("metadata")
    if isinstance(metadata, dict):
        if MODE_ANNOTATION in metadata:
            misplaced.append((("metadata", MODE_ANNOTATION), metadata[MODE_ANNOTATION]))
        labels = metadata.get("labels")
        if isinstance(labels, dict) and MODE_ANNOTATION in labels:
            misplaced.append((("metadata", "labels", MODE_ANNOTATION), labels[MODE_ANNOTATION]))
    misplaced.extend(_keys(data.get("spec"), ("spec",), MODE_ANNOTATION))
    source = isvc.mode_source(inventory.kserve_mode_source())
    plan = _plan(isvc, misplaced, inventory)
    needs = _switch(isvc, misplaced)
    if needs and plan is not None:
        bare = standard_mode_fix(isvc, inventory, MODE_ANNOTATION)
        if bare != f"metadata:\n  annotations:\n    {MODE_ANNOTATION}":
            plan = None  # Standard mode needs more of it than the annotation: by hand
    for path, value in sorted(misplaced, key=lambda item: isvc.manifest.location(item[0]).line):
        written = _dotted(path)
        status_note = (
            " (the CRD has deploymentMode only in status)" if path[-1] == "deploymentMode" else ""
        )
        if isvc.mode_is_explicit:
            outcome = (
                f"the annotation in metadata.annotations is what counts, so it runs in "
                f"{isvc.mode} mode"
            )
            links = [related(isvc.manifest, ("metadata", "annotations", MODE_ANNOTATION))]
        else:
            outcome = f"it runs in {isvc.mode} mode ({source})"
            links = []
        yield ctx.finding(
            isvc.manifest,
            path,
            f"InferenceService {isvc.name} sets {written}, which KServe never reads. The mode "
            f"comes only from the {MODE_ANNOTATION} annotation in metadata.annotations"
            f"{status_note}; {outcome}.",
            _fix(isvc, inventory, value, written, needs),
            related=links,
            plan=plan,
        )


def _plan(
    isvc: InferenceService, misplaced: list[tuple[Path, Any]], inventory: Inventory
) -> edits.FixPlan | None:
    """Every misplaced key deleted and, unless the annotation is already there, the mode they
    name written as the annotation. Safe when that is the mode it runs in now (nothing
    changes but the dead key); unsafe when it switches the mode; none when the switch would
    hand GPU pods to an autoscaler that needs its own fix (GL303, GL306: by hand)."""
    if not misplaced:
        return None
    ops: list[edits.Op] = [edits.Delete(isvc.manifest, path) for path, _ in misplaced]
    if isvc.mode_is_explicit:
        return edits.safe(*ops)
    named = {MODE_VALUES[v] for _, v in misplaced if isinstance(v, str) and v in MODE_VALUES}
    if len(named) != 1:
        return None  # no mode, or several: which one is meant is the author's call
    meant = next(iter(named))
    mode = mode_spelling(meant, inventory.settings.kserve_version)
    annotations = ("metadata", "annotations")
    ops.append(edits.Insert(isvc.manifest, annotations, ((MODE_ANNOTATION, mode),)))
    if meant == isvc.mode:
        return edits.safe(*ops)
    if any(c.template.gpu_requests(inventory.gpu_names) for c in isvc.components):
        return None
    return edits.unsafe(*ops)


def _keys(node: Any, path: Path, wanted: str) -> Iterator[tuple[Path, Any]]:
    """Every ``wanted`` mapping key below ``node``, with its path and value."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == wanted:
                yield (*path, key), value
            else:
                yield from _keys(value, (*path, key), wanted)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _keys(item, (*path, index), wanted)


def _dotted(path: Path) -> str:
    text = ""
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += f".{step}" if text else step
    return text


def _switch(isvc: InferenceService, misplaced: list[tuple[Path, Any]]) -> bool:
    """Does writing the mode the misplaced keys name switch the InferenceService to Standard
    mode?"""
    named = {MODE_VALUES[v] for _, v in misplaced if isinstance(v, str) and v in MODE_VALUES}
    meant = next(iter(named)) if len(named) == 1 else STANDARD
    return not isvc.mode_is_explicit and meant == STANDARD and isvc.mode != STANDARD


def _fix(
    isvc: InferenceService, inventory: Inventory, value: Any, written: str, switch: bool
) -> str:
    version = inventory.settings.kserve_version
    meant = value if isinstance(value, str) and value in MODE_VALUES else STANDARD
    mode = mode_spelling(meant, version)
    note = f"   # {mode_note(version, inventory.settings.versions.defaulted('kserve'))}"
    line = f"{MODE_ANNOTATION}: {mode}{note}"
    if switch:
        return f"{standard_mode_fix(isvc, inventory, line)}\n# and delete {written}"
    return f"metadata:\n  annotations:\n    {line}\n# and delete {written}"
