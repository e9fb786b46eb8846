"""A Knative revision's metric does not fit its autoscaler class.

## What it checks
The autoscaling annotations of a Knative Service/Configuration's revision template, and of a
KServe InferenceService in Knative mode (KServe copies the annotations of the
InferenceService and of each component to the revision template, and maps ``scaleMetric``
and ``scaleTarget`` to the metric and target annotations):

* KPA class (``kpa.autoscaling.knative.dev``, the default) with an
  ``autoscaling.knative.dev/metric`` other than ``concurrency`` or ``rps``;
* HPA class (``hpa.autoscaling.knative.dev``) with a custom metric (anything but ``cpu`` and
  ``memory``) and an ``autoscaling.knative.dev/target`` that is fractional, not a number, or
  missing.

A revision that names no class has the cluster's default: KPA, unless a ``config-autoscaler``
ConfigMap in the input sets ``pod-autoscaler-class`` (knative/serving
config/core/configmaps/autoscaler.yaml), as clusters that run the HPA class by default do.
Third-party autoscaler classes are left alone, as Knative does.

## Why is this bad?
The KPA only knows request concurrency and requests per second; Knative's webhook rejects
any other metric (``invalid value: ...: autoscaling.knative.dev/metric``). KServe's webhook
rejects such a ``scaleMetric`` itself, but a metric annotation on an InferenceService passes:
the Knative Service KServe creates from it is rejected, and the InferenceService never
becomes ready.

With the HPA class, Knative turns a custom metric into an HPA ``Pods`` metric whose
``averageValue`` is ``int64(target)`` (pkg/reconciler/autoscaling/hpa/resources/hpa.go; the
autoscaler-keda extension truncates its threshold the same way). A target of ``0.5`` — the
natural target for a 0–1 GPU ratio such as ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` — becomes 0, an
invalid HPA that never scales; ``2.5`` silently becomes 2. Without a target there is no
metric at all: Knative's HPA gets none (the API server then scales on CPU 80%) and
autoscaler-keda refuses the revision.

## Example
```yaml
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
        autoscaling.knative.dev/metric: DCGM_FI_PROF_GR_ENGINE_ACTIVE
        autoscaling.knative.dev/target: "0.6"     # truncated to 0
```

## Use instead
```yaml
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
        # a prometheus-adapter rule that exposes the ratio in percent (metricsQuery: 100 * ...)
        autoscaling.knative.dev/metric: gpu_engine_active_percent
        autoscaling.knative.dev/target: "60"
```

## References
- knative/serving pkg/apis/autoscaling/annotation_validation.go ``validateMetric``.
- knative/serving pkg/reconciler/autoscaling/hpa/resources/hpa.go ``MakeHPA``.
- knative-extensions/autoscaler-keda pkg/reconciler/autoscaling/hpa/resources/keda.go.
- kserve pkg/controller/v1alpha1/utils/utils.go ``SetAutoScalingAnnotations``;
  pkg/apis/serving/v1beta1/inference_service_validation.go ``validateKPAMetrics``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import NamedTuple

from gpulint.ruleapi import (
    HPA_CLASS,
    KNATIVE,
    KNATIVE_CLASS_ANNOTATION,
    KPA_METRICS,
    METRIC_ANNOTATION,
    TARGET_ANNOTATION,
    Context,
    Finding,
    InferenceService,
    Inventory,
    KnativeService,
    Manifest,
    Path,
    PodOwner,
    RevisionAutoscaling,
    Severity,
    abbreviated,
    generated_by,
    standard_mode_fix,
)

ID = "GL203"
NAME = "knative-metric-class"
SEVERITY = Severity.ERROR
SCOPE = "pod-owner"
STAGES = ("workload",)

RESOURCE_METRICS = ("cpu", "memory")


def check(owner: PodOwner, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    manifest = owner.manifest
    ksvc = inventory.view_of(manifest)
    if isinstance(ksvc, KnativeService):
        if generated_by(ksvc.manifest, "InferenceService") is None:
            subject = f"Knative {manifest.kind} {abbreviated(_name(manifest))}"
            settings = ksvc.revision_autoscaling()
            for problem in _problems(settings):
                yield from _emit(problem, settings, subject, "It", None, inventory, ctx)
        return
    isvc = inventory.inference_service_of(manifest)
    if isvc is None or isvc.mode != KNATIVE:
        return
    # Settings on the InferenceService's own metadata reach every component: report each
    # offending node once, naming the components it affects.
    found: dict[tuple[Path, str], tuple[_Problem, RevisionAutoscaling, list[str]]] = {}
    for component in isvc.components:
        settings = isvc.revision_autoscaling(component)
        for problem in _problems(settings):
            entry = found.setdefault((problem.path, problem.kind), (problem, settings, []))
            entry[2].append(component.name)
    for problem, settings, components in found.values():
        subject = f"InferenceService {abbreviated(_name(manifest))}"
        who = f"The InferenceService (Knative mode, {' and '.join(components)})"
        yield from _emit(problem, settings, subject, who, isvc, inventory, ctx)


class _Problem(NamedTuple):
    kind: str  # kpa-metric | no-target | not-a-number | truncated
    path: Path


def _problems(settings: RevisionAutoscaling) -> list[_Problem]:
    metric = settings.metric
    if metric is None:
        return []
    if settings.uses_kpa:
        if metric.value not in KPA_METRICS and metric.path is not None:
            return [_Problem("kpa-metric", metric.path)]
        return []
    if not settings.uses_hpa_class or metric.value in RESOURCE_METRICS or metric.path is None:
        return []
    target = settings.target
    if target is None:
        return [_Problem("no-target", metric.path)]
    if target.path is None or target.origin == "scaleTarget":
        # scaleTarget is an integer field of the CRD: fractions are a schema error there.
        return []
    number = _float(target.value)
    if number is None:
        return [_Problem("not-a-number", target.path)]
    if number != math.trunc(number):
        return [_Problem("truncated", target.path)]
    return []


def _emit(
    problem: _Problem,
    settings: RevisionAutoscaling,
    subject: str,
    who: str,
    isvc: InferenceService | None,
    inventory: Inventory,
    ctx: Context,
) -> Iterator[Finding]:
    """One finding: ``subject`` names the object in the headline, ``who`` opens the detail."""
    metric = settings.metric
    if metric is None:  # _problems only reports settings with a metric
        return
    document = settings.document
    where = "annotations" if isvc is not None else "spec.template.metadata.annotations"
    if problem.kind == "kpa-metric":
        if isvc is None:
            outcome = "Knative's webhook rejects the revision template (invalid value)"
        elif metric.origin == "scaleMetric":
            outcome = f'KServe\'s webhook rejects it ("[{metric.value}] is not a supported metric")'
        else:
            outcome = (
                "KServe accepts the InferenceService, but Knative rejects the Knative Service "
                "KServe creates from it, so the InferenceService never becomes ready"
            )
        if metric.value in RESOURCE_METRICS and isvc is not None:
            fix = standard_mode_fix(
                isvc,
                inventory,
                "serving.kserve.io/deploymentMode: Standard   # KServe's own HPA scales "
                f"on {metric.value} (RawDeployment before KServe 0.16; recreate the "
                "InferenceService: the mode cannot change on update)",
            )
        else:
            fix = _hpa_class_fix(where, metric.value, "70")
        yield ctx.finding(
            document,
            problem.path,
            f"{subject} scales on {abbreviated(metric.value)}, which the KPA cannot scale on. "
            f"{who} scales on {metric.value} ({metric.origin}) with the "
            f"{settings.describe_class()}, which only scales on concurrency or rps: {outcome}.",
            fix,
        )
    elif problem.kind == "no-target":
        yield ctx.finding(
            document,
            problem.path,
            f"{subject} sets no {TARGET_ANNOTATION}. {who} scales on the custom metric "
            f"{metric.value} with the Knative HPA class: without a target, Knative's HPA "
            "reconciler creates an HPA without metrics, which the API server defaults to CPU "
            '80% utilization, and autoscaler-keda refuses it ("no triggers were specified").',
            f'{TARGET_ANNOTATION}: "70"   # in the metric\'s own unit, per pod',
        )
    else:
        target = settings.target
        if target is None:
            return
        number = _float(target.value)
        if problem.kind == "not-a-number" or number is None:
            yield ctx.finding(
                document,
                problem.path,
                f"{subject}: {TARGET_ANNOTATION} is not a number. {who} sets it to "
                f"{json.dumps(target.value)}: Knative rejects the revision template (invalid "
                "value).",
                f'{TARGET_ANNOTATION}: "70"   # a plain number in the metric\'s unit',
            )
            return
        truncated = math.trunc(number)
        if truncated < 1:
            consequence = (
                "0, an invalid HPA target (averageValue must be positive), so the revision "
                "never scales on it"
            )
            severity = None
        else:
            consequence = (
                f"{truncated}: the revision scales at {truncated}, not {target.value}, "
                "without a warning"
            )
            severity = Severity.WARNING
        yield ctx.finding(
            document,
            problem.path,
            f"{subject}: {TARGET_ANNOTATION} is cut to {truncated}. {who} targets "
            f"{target.value} of the custom metric {metric.value} with the Knative HPA class, "
            f"which uses int64(target) as the Pods averageValue: the target becomes "
            f"{consequence}.",
            _scaled_fix(metric.value, number),
            severity=severity,
        )


def _hpa_class_fix(where: str, metric: str, target: str) -> str:
    indent = "    " if where == "annotations" else "        "
    head = (
        "metadata:\n  annotations:\n"
        if where == "annotations"
        else ("spec:\n  template:\n    metadata:\n      annotations:\n")
    )
    return (
        f"{head}"
        f"{indent}{KNATIVE_CLASS_ANNOTATION}: {HPA_CLASS}   # needs Knative's HPA extension\n"
        f"{indent}{METRIC_ANNOTATION}: {metric}\n"
        f'{indent}{TARGET_ANNOTATION}: "{target}"'
    )


def _scaled_fix(metric: str, number: float) -> str:
    if number < 1:
        scaled = f"{number * 100:g}"
        return (
            f'{TARGET_ANNOTATION}: "{scaled}"   # with a prometheus-adapter rule that exposes '
            f"{metric} multiplied by 100 (metricsQuery: 100 * ...) under a new name"
        )
    return f'{TARGET_ANNOTATION}: "{math.ceil(number)}"   # a whole number'


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _name(manifest: Manifest) -> str:
    return f"{manifest.namespace}/{manifest.name}" if manifest.namespace else manifest.name
