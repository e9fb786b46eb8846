"""An HPA or KEDA reads a replica count as an External metric with a ``Value`` target.

## What it checks
Metrics whose value is already a number of replicas, read against a ``Value`` target:

* an HPA's ``External`` metric with ``target.type: Value`` whose series (followed through the
  input's prometheus-adapter rules) is a replica count: llm-d's Workload Variant Autoscaler
  gauges ``wva_desired_replicas`` and ``wva_current_replicas``, or kube-state-metrics'
  ``kube_<kind>_..._replicas`` gauges;
* the HPA KServe makes for an LLMInferenceService whose ``scaling.wva.hpa`` is set: KServe
  writes it with one External metric ``wva_desired_replicas`` and a ``Value`` target of 1;
* a KEDA prometheus trigger with ``metricType: Value`` whose query reads only such gauges
  (a ScaledObject's, or the one an LLMInferenceService's ``scaling.keda`` makes).

A VariantAutoscaling of the input whose name the metric's ``variant_name`` selects is named
as the source of the count.

## Why is this bad?
For an External metric with a ``Value`` target the HPA computes
``ceil(value / target × ready pods)``, unless the ratio is within its tolerance (0.1), where
it keeps the replicas it has (kubernetes/kubernetes ``GetExternalMetricReplicas``,
``getUsageRatioReplicaCount``). With a count of wanted replicas against a target of 1, a
count of 3 with 2 pods ready asks for 6, the next sync for more, until ``maxReplicas``; a
count of 1 is a ratio of 1, within the tolerance, so the HPA keeps however many pods it has
and only a count of 0 brings it down. The GPU pods the autoscaler (WVA) sized the workload at
are never what runs. An ``AverageValue`` target of 1 asks for exactly the count
(``ceil(value / 1)``), which is how WVA's own HPA sample and KEDA's default read it.

## Example
```yaml
  metrics:
  - type: External
    external:
      metric:
        name: wva_desired_replicas
        selector: {matchLabels: {variant_name: llama-8b}}
      target: {type: Value, value: "1"}
```

## Use instead
```yaml
      target: {type: AverageValue, averageValue: "1"}
```
For a KEDA trigger, drop ``metricType: Value`` (KEDA's default is ``AverageValue``) and keep
``threshold: "1"``. For an LLMInferenceService, whose HPA KServe writes with the ``Value``
target, use the KEDA actuator (``scaling.wva.keda``), whose trigger reads the count per pod.

## References
- kubernetes/kubernetes@00067268 pkg/controller/podautoscaler/replica_calculator.go
  (``GetExternalMetricReplicas``, ``getUsageRatioReplicaCount``,
  ``GetExternalPerPodMetricReplicas``) and replica_calculator_test.go
  (``TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods``: the ratio times the ready pods).
- kserve/kserve@aaac4e2 pkg/controller/v1alpha2/llmisvc/scaling.go (``expectedHPA``: External
  ``wva_desired_replicas``, ``Value`` 1; ``prometheusTrigger``: threshold 1 per pod).
- llm-d/llm-d-workload-variant-autoscaler@b08b1c7 config/samples/hpa-integration.yaml
  (``AverageValue: "1"``), internal/constants/metrics.go (the gauges and their labels).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from gpulint.ruleapi import (
    EXTERNAL,
    HPA,
    REPLICA_GAUGES,
    VARIANT_LABEL,
    Context,
    Finding,
    GeneratedHPA,
    HpaMetric,
    Inventory,
    KindView,
    PrometheusTrigger,
    Related,
    ScaledObject,
    Severity,
    VariantAutoscaling,
    edits,
    metric_names_in_query,
    plain_data,
    related,
    try_quantity,
    yaml_text,
)

ID = "GL411"
NAME = "replica-count-value-target"
SEVERITY = Severity.ERROR
SCOPE = "autoscaler"
FIXES = ("unsafe",)
STAGES = ("autoscaler",)

# kube-state-metrics' replica gauges: kube_deployment_spec_replicas,
# kube_deployment_status_replicas_available, kube_statefulset_replicas,
# kube_horizontalpodautoscaler_status_desired_replicas ...
_KSM_REPLICAS = re.compile(r"^kube_[a-z]+_(?:spec_|status_)?(?:desired_|current_)?replicas\w*$")
_VARIANT_IN_QUERY = re.compile(VARIANT_LABEL + r'\s*=\s*"([^"]+)"')


def is_replica_count(series: str) -> bool:
    return series in REPLICA_GAUGES or _KSM_REPLICAS.match(series) is not None


def check(view: HPA | ScaledObject, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if inventory.judged_at_generator(view.manifest):
        return  # made from settings another object holds: judged there, as written
    if isinstance(view, ScaledObject):
        for trigger in view.prometheus_triggers:
            yield from _check_trigger(view, trigger, inventory, ctx)
        return
    for metric in view.metrics:
        yield from _check_metric(view, metric, inventory, ctx)


def _check_metric(
    hpa: HPA, metric: HpaMetric, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    target = metric.target
    if metric.type != "External" or not metric.name or target is None:
        return
    if target.type != "Value" or target.value is None:
        return
    quantity = try_quantity(target.value)
    if quantity is None or float(quantity) <= 0:
        return  # GL107 and GL108 judge targets that are not a positive number
    value = float(quantity)
    series = inventory.series_behind(metric.name.lower(), EXTERNAL, hpa.manifest) or metric.name
    if not is_replica_count(series):
        return
    variant = _variant(metric.selector)
    links = _variant_links(inventory, hpa, variant)
    read = f"External metric {metric.name}" + (f" ({series})" if series != metric.name else "")
    subject = f"{hpa.title} reads {read}"
    if isinstance(hpa, GeneratedHPA):
        yield _kserve_actuator(hpa, subject, value, links, ctx)
        return
    fix = {"type": "AverageValue", "averageValue": plain_data(target.value)}
    yield ctx.finding(
        hpa.manifest,
        target.field_path("type") if target.type is not None else target.path,
        f"{subject}, a number of replicas, against a Value target of {_number(value)}. "
        f"{_consequence(value)}",
        f'target:\n  type: AverageValue\n  averageValue: "{_number(value)}"',
        related=links,
        plan=edits.unsafe(edits.Set(hpa.manifest, target.path, fix)),
    )


def _kserve_actuator(
    hpa: GeneratedHPA, subject: str, value: float, links: list[Related], ctx: Context
) -> Finding:
    """The HPA KServe writes for ``scaling.wva.hpa``: its KEDA actuator instead, the HPA's
    behavior moved to where KEDA copies it into its HPA."""
    wva = hpa.spec_path[:-1]
    keda: dict[str, object] = {}
    if hpa.behavior is not None:
        keda["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": plain_data(hpa.behavior)}}
    # wva's other settings (variantCost) stay; hpa gives way to keda
    written = hpa.manifest.get(wva)
    replaced = {
        key: plain_data(value)
        for key, value in (written.items() if isinstance(written, dict) else ())
        if key != "hpa"
    }
    replaced["keda"] = keda
    shown = yaml_text({"wva": replaced}).rstrip("\n")
    return ctx.finding(
        hpa.manifest,
        hpa.spec_path,
        f"{subject}, the number of replicas WVA wants, against a Value target of "
        f"{_number(value)}. KServe writes its HPA so. {_consequence(value)}",
        "# the KEDA actuator reads the count per pod (threshold 1, KEDA's AverageValue)\n" + shown,
        related=links,
        plan=edits.unsafe(edits.Set(hpa.manifest, wva, replaced)),
        fix_at_path=False,
    )


def _check_trigger(
    scaled: ScaledObject, trigger: PrometheusTrigger, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    if trigger.metric_type != "Value":
        return
    query, threshold = trigger.query, trigger.threshold
    if query is None or threshold is None or threshold <= 0:
        return
    names = metric_names_in_query(query)
    if not names or not all(is_replica_count(name) for name in names):
        return
    match = _VARIANT_IN_QUERY.search(query)
    links = _variant_links(inventory, scaled, match.group(1) if match else None)
    path = (*trigger.path, "metricType")
    yield ctx.finding(
        scaled.manifest,
        path,
        f"Trigger {trigger.index} of ScaledObject {scaled.name} reads "
        f"{', '.join(names)}, a number of replicas, with metricType Value. With threshold "
        f"{_number(threshold)}, KEDA's HPA reads it as an External metric with a Value target "
        f"({trigger.describe()}). {_consequence(threshold)}",
        f"# delete metricType: Value (KEDA's default, AverageValue, reads the count per pod)\n"
        f'threshold: "{_number(threshold)}"',
        related=links,
        plan=edits.unsafe(edits.Delete(scaled.manifest, path)),
    )


def _consequence(target: float) -> str:
    """What the HPA does with a replica count against a Value target of ``target``."""
    asked = math.ceil(3 / target * 2)
    return (
        "The HPA then asks for ceil(value / target × ready pods) replicas: a count of 3 with "
        f"2 pods ready asks for {asked}, and a count of {_number(target)} keeps whatever "
        "runs (the ratio 1 is within the HPA's tolerance), so the workload climbs towards "
        "maxReplicas and only a count of 0 brings it down."
    )


def _number(value: float) -> str:
    return f"{value:g}"


def _variant(selector: object) -> str | None:
    labels = selector.get("matchLabels") if isinstance(selector, dict) else None
    name = labels.get(VARIANT_LABEL) if isinstance(labels, dict) else None
    return name if isinstance(name, str) and name else None


def _variant_links(inventory: Inventory, view: KindView, variant: str | None) -> list[Related]:
    """The VariantAutoscaling whose count the metric selects, when the input has it."""
    if variant is None:
        return []
    found = inventory.find("VariantAutoscaling", view.namespace, variant, view.manifest)
    if found is None:
        return []
    wva = inventory.view_of(found)
    if not isinstance(wva, VariantAutoscaling):
        return []
    return [related(found, ("spec",), f"{wva.describe()} publishes the count")]
