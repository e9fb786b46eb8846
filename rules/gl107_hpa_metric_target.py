"""An HPA metric target is missing, of the wrong type, unparseable or on the wrong scale.

## What it checks
Each entry of an HPA's ``spec.metrics`` (autoscaling/v2, v2beta2 and v2beta1):

* the target the API server requires: a ``Pods`` metric needs ``averageValue``; an ``Object``
  metric ``value`` or ``averageValue``; an ``External`` metric exactly one of them; a
  ``Resource`` metric exactly one of ``averageUtilization`` and ``averageValue``; the target
  ``type`` is one of ``Utilization``, ``Value``, ``AverageValue``; numbers are positive;
* a ``type`` that disagrees with the field that is set (``type: Value`` with ``averageValue``;
  ``Utilization`` anywhere but on a Resource metric);
* quantities Kubernetes cannot parse (``"70%"``, ``"1K"``), quantities beyond the largest one
  Kubernetes holds (2^63-1: ``1e3000000``), and an ``averageUtilization`` beyond a 32-bit
  integer;
* the scale of GPU metrics: ``m`` means thousandths, so ``averageValue: 60m`` on a 0-100
  percentage (``DCGM_FI_DEV_GPU_UTIL``) is 0.06; these are errors. A target above 1 on a 0-1
  ratio (``DCGM_FI_PROF_*``, ``*_ratio``, vLLM's KV-cache usage) or below 1 on a percentage is
  reported as a **warning**: it is almost always a scale mix-up.

When a prometheus-adapter rule serving a Pods metric sums a per-GPU dcgm-exporter series per
pod (the chart's default rules do) and the pods hold several GPUs, the range grows with them:
a ratio summed over two GPUs reaches 2, so ``1.5`` is fine and ``"60"`` is reported with the
fix ``1200m`` (60% of each GPU x 2), not ``600m``; ``70m`` on the utilization gets ``"140"``.
A target still on the one-GPU scale (``"60"`` on a summed percentage) is GL406's finding, not
this rule's: one finding per defect. With ``--prometheus``, GL805 adds no second finding for a
target this rule reports: where the values Prometheus returns prove a target above 1 on a ratio
is never reached, GL805 settles this finding (``gpulint.engine.settled``), which then says
what was observed (minimum, median, maximum, the span of history) instead of "unless its query
adds up several series per pod", and is an error.

The scale of a metric comes from what gpulint knows about exporters, ``metric-aliases`` in
``.gpulint.yaml``, and the prometheus-adapter rules in the input: a metric renamed by the
adapter (``gpu_utilization`` served from ``DCGM_FI_DEV_GPU_UTIL``) has the scale of its series,
unless the rule's ``metricsQuery`` multiplies or divides it. Template placeholders are not judged,
nor are HPAs that KEDA, KServe or Knative generated.

## Why is this bad?
The API server rejects a missing target or an unparseable quantity, so the HPA is never
created. For an Object metric the controller requires the type to match the field and
otherwise drops the metric ("invalid object metric source"); for Pods, External and Resource
metrics it goes by the field and ignores the type, so the manifest says something other than
what Kubernetes does. A target on the wrong scale is worse because nothing complains: 0.06% GPU
utilization pins the workload at ``maxReplicas``, and 50 on a 0-1 ratio is never reached, so
the workload never scales out.

## Example
```yaml
metrics:
- type: Pods
  pods:
    metric: {name: DCGM_FI_DEV_GPU_UTIL}
    target: {type: Value, averageValue: 60m}
```

## Use instead
```yaml
metrics:
- type: Pods
  pods:
    metric: {name: DCGM_FI_DEV_GPU_UTIL}
    target: {type: AverageValue, averageValue: "60"}
```

## References
- Kubernetes pkg/apis/autoscaling/validation/validation.go (``validateMetricTarget``,
  ``validatePodsSource``, ``validateObjectSource``, ``validateExternalSource``).
- Kubernetes pkg/controller/podautoscaler/horizontal.go (which field each source type reads).
- k8s.io/apimachinery resource.Quantity: suffixes ``m`` (milli) and ``k``; no ``%``.
- NVIDIA dcgm-exporter default-counters.csv: ``DCGM_FI_DEV_GPU_UTIL`` in %,
  ``DCGM_FI_PROF_*`` ratios.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any, NamedTuple

from gpulint.ruleapi import (
    CUSTOM_METRIC_TYPES,
    HPA,
    INT32_MAX,
    RESOURCE_METRIC_TYPES,
    SHOWN_CHARS,
    Context,
    Finding,
    HpaMetric,
    Inventory,
    MetricTarget,
    OversizedNumber,
    QuantityError,
    QuantityOutOfRange,
    Scale,
    Severity,
    abbreviated,
    edits,
    format_number,
    gpus_summed,
    int32_out_of_range,
    is_generated,
    is_unknown,
    metric_scale,
    off_scale,
    parse_quantity,
    paste_quantity,
    ratio_target_fix,
    shown_value,
)

ID = "GL107"
NAME = "hpa-metric-target"
SEVERITY = Severity.ERROR
SCOPE = "hpa"
FIXES = ("safe", "unsafe")
STAGES = ("autoscaler",)

METRIC_TYPES = (*RESOURCE_METRIC_TYPES, *CUSTOM_METRIC_TYPES)
TARGET_TYPES = ("Utilization", "Value", "AverageValue")
FIELD_OF_TYPE = {
    "Utilization": "averageUtilization",
    "Value": "value",
    "AverageValue": "averageValue",
}
TYPE_OF_FIELD = {field: kind for kind, field in FIELD_OF_TYPE.items()}
# A metric name in a headline is cut at this many characters (the detail names it whole).
NAME_CHARS = 32


class _Where(NamedTuple):
    hpa: HPA
    metric: HpaMetric
    target: MetricTarget

    @property
    def label(self) -> str:
        return self.describe(self.hpa, self.metric)

    @staticmethod
    def describe(hpa: HPA, metric: HpaMetric) -> str:
        """The HPA and its metric for a headline: names cut so that it stays one short line."""
        name = f" {abbreviated(metric.name, NAME_CHARS)}" if metric.name else ""
        return f"HPA {abbreviated(hpa.name)}: {metric.type} metric{name}"

    def v2_fix(self, text: str) -> str:
        """A fix written in autoscaling/v2 terms, marked so when the HPA is in v2beta1."""
        if self.hpa.version == "v2beta1":
            return "# in autoscaling/v2 (see GL109):\n" + text
        return text


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if hpa.version not in ("v2", "v2beta2", "v2beta1"):
        return  # autoscaling/v1 has only targetCPUUtilizationPercentage
    if is_generated(hpa.manifest):
        return
    for metric in hpa.metrics:
        yield from _check_metric(hpa, metric, inventory, ctx)


def _check_metric(
    hpa: HPA, metric: HpaMetric, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    if is_unknown(hpa.manifest.get(metric.path)):
        return  # the whole entry is a template action
    if metric.type not in METRIC_TYPES:
        problem = _metric_type(hpa, metric, ctx)
        if problem is not None:
            yield problem
        return
    target = metric.target
    if target is None:
        yield ctx.finding(
            hpa.manifest,
            metric.path,
            f"{_Where.describe(hpa, metric)} has no target. The API server rejects the object.",
            _target_example(metric),
        )
        return
    if is_unknown(hpa.manifest.get(target.path)):
        return  # `target: {{ toYaml .Values.target }}`
    where = _Where(hpa, metric, target)
    explicit_type = hpa.version != "v2beta1"  # v2beta1 has no type: its field names say it
    if explicit_type and not is_unknown(target.type) and target.type not in TARGET_TYPES:
        yield _target_type(where, ctx)
        return
    problem = _fields(where, ctx)
    if problem is not None:
        yield problem
        return
    if explicit_type and not is_unknown(target.type):
        mismatch = _type_mismatch(where, ctx)
        if mismatch is not None:
            yield mismatch
    yield from _values(where, inventory, ctx)


def _metric_type(hpa: HPA, metric: HpaMetric, ctx: Context) -> Finding | None:
    """A metric entry whose type is missing or none of the API's."""
    written = hpa.manifest.get((*metric.path, "type"))
    if is_unknown(written):
        return None
    if written is not None:
        what = "has an unknown type"
        why = f"Its type {_shown(written)} is none of"
    else:
        what, why = "has no type", "The type must be one of"
    return ctx.finding(
        hpa.manifest,
        (*metric.path, "type") if written is not None else metric.path,
        f"HPA {abbreviated(hpa.name)}: spec.metrics[{metric.index}] {what}. {why} "
        f"{', '.join(METRIC_TYPES)}, and the API server rejects the object.",
        "type: Pods   # with pods: {metric: {name: ...}, target: {...}}",
    )


def _target_type(where: _Where, ctx: Context) -> Finding:
    """A target whose type is missing or none of Utilization, Value and AverageValue."""
    hpa, metric, target = where.hpa, where.metric, where.target
    if target.type is None:
        what, why = "has no target type", "The target type must be"
    else:
        what, why = "has an unknown target type", f"Its target type {target.type!r} is none of"
    expected = _expected_type(metric, target)
    # The type the set field names is the one meant; a guess for none or several fields.
    meant = metric.type == "Pods" or len(target.set_fields()) == 1
    replace: edits.Op
    if target.type is not None:
        replace = edits.Replace(hpa.manifest, target.field_path("type"), expected)
    else:
        replace = edits.Insert(hpa.manifest, target.path, edits.entries(type=expected))
    return ctx.finding(
        hpa.manifest,
        target.field_path("type") if target.type is not None else target.path,
        f"{where.label} {what}. {why} Utilization, Value or AverageValue, and the API "
        "server rejects the object.",
        f"type: {expected}",
        plan=edits.safe(replace) if meant else edits.unsafe(replace),
    )


def _target_example(metric: HpaMetric) -> str:
    if metric.type in RESOURCE_METRIC_TYPES:
        return "target:\n  type: Utilization\n  averageUtilization: 80"
    if metric.type == "Object":
        return 'target:\n  type: Value\n  value: "10"'
    return 'target:\n  type: AverageValue\n  averageValue: "70"'


def _expected_type(metric: HpaMetric, target: MetricTarget) -> str:
    """The type that matches what the controller reads for this metric."""
    if metric.type == "Pods":
        return "AverageValue"
    fields = target.set_fields()
    if len(fields) == 1:
        return TYPE_OF_FIELD[fields[0]]
    return "Utilization" if metric.type in RESOURCE_METRIC_TYPES else "AverageValue"


def _fields(where: _Where, ctx: Context) -> Finding | None:
    """Fields the API server requires or forbids for this metric type."""
    metric, target, hpa = where.metric, where.target, where.hpa
    fields = target.set_fields()
    rejected = "the API server rejects the object"
    if metric.type == "Pods":
        if target.average_value is not None:
            return None
        written = dict(target.written_as)
        names = [written.get(f, f) for f in fields]
        verb = "is" if len(names) == 1 else "are"
        also = f" ({' and '.join(names)} {verb} not read for Pods)" if names else ""
        moved = target.value if target.value is not None else target.average_utilization
        number = _shown(moved) if moved is not None else '"70"'
        return ctx.finding(
            hpa.manifest,
            target.path,
            f"{where.label} has no target averageValue. A Pods metric is compared as an "
            f"average per pod{also}, and without averageValue {rejected} ('must specify a "
            "positive target averageValue').",
            where.v2_fix(f"type: AverageValue\naverageValue: {number}   # per pod"),
        )
    if metric.type in RESOURCE_METRIC_TYPES:
        wanted = {"averageUtilization", "averageValue"}
        chosen = [f for f in fields if f in wanted]
        if len(chosen) == 1:
            return None
        if not chosen:
            text = "has no target value. It sets neither averageUtilization nor averageValue"
            fix = "type: Utilization\naverageUtilization: 80"
        else:
            text = "has two target values. It sets both averageUtilization and averageValue"
            fix = "# keep one of them, for example:\ntype: Utilization\naverageUtilization: 80"
        path = target.path if not chosen else target.field_path("averageValue")
        return ctx.finding(
            hpa.manifest, path, f"{where.label} {text}; {rejected}.", where.v2_fix(fix)
        )
    chosen = [f for f in fields if f in ("value", "averageValue")]
    if metric.type == "External" and len(chosen) == 2:
        return ctx.finding(
            hpa.manifest,
            target.field_path("value"),
            f"{where.label} has two target values. It sets both value and averageValue; "
            f"{rejected} ('may not set both a target value for metric and a per-pod target').",
            where.v2_fix(
                "# keep one: averageValue (the total divided by the number of pods) or value "
                "(the total)\ntype: AverageValue\naverageValue: " + _shown(target.average_value)
            ),
        )
    if not chosen:
        return ctx.finding(
            hpa.manifest,
            target.path,
            f"{where.label} has no target value. It sets neither value nor averageValue; "
            f"{rejected}.",
            where.v2_fix(_target_example(metric)),
        )
    return None


def _type_mismatch(where: _Where, ctx: Context) -> Finding | None:
    metric, target, hpa = where.metric, where.target, where.hpa
    kind = target.type
    if metric.type == "Pods":
        if kind == "AverageValue":
            return None
        if kind == "Utilization":
            why = (
                "Type Utilization exists only for Resource metrics (a percentage of the pods' "
                "requests); a Pods metric is always compared as an average value per pod"
            )
        else:
            why = (
                f"Type {kind} does not match the field that is set (averageValue); for a Pods "
                "metric Kubernetes compares averageValue per pod whatever the type says, so "
                "the type misleads whoever tunes this target"
            )
        return ctx.finding(
            hpa.manifest,
            target.field_path("type"),
            f"{where.label} has the wrong target type. {why}.",
            "type: AverageValue",
            plan=edits.safe(edits.Replace(hpa.manifest, target.field_path("type"), "AverageValue")),
        )
    field = FIELD_OF_TYPE.get(str(kind))
    fields = target.set_fields()
    if metric.type in RESOURCE_METRIC_TYPES:
        allowed = ("averageUtilization", "averageValue")
    else:
        allowed = ("value", "averageValue")
    if field in fields and field in allowed:
        return None
    chosen = next(f for f in fields if f in allowed)
    expected = TYPE_OF_FIELD[chosen]
    if metric.type == "Object":
        consequence = (
            f"for an Object metric the controller requires the type to match: with type {kind} "
            f"and {chosen} it reports 'invalid object metric source' and the HPA does not use "
            "this metric"
        )
    else:
        meaning = {
            "averageUtilization": "a percentage of the pods' requests",
            "averageValue": "the total divided by the number of pods",
            "value": "the total, scaled by the current number of pods",
        }[chosen]
        consequence = (
            f"Kubernetes goes by the field and compares {chosen} ({meaning}) whatever the type "
            "says, so the type misleads whoever tunes this target"
        )
    return ctx.finding(
        hpa.manifest,
        target.field_path("type"),
        f"{where.label} has the wrong target type. Type {kind} does not match the field that "
        f"is set ({chosen}); {consequence}.",
        f"type: {expected}",
        plan=edits.safe(edits.Replace(hpa.manifest, target.field_path("type"), expected)),
    )


def _values(where: _Where, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    metric, target, hpa = where.metric, where.target, where.hpa
    utilization = target.average_utilization
    if int32_out_of_range(utilization):
        yield ctx.finding(
            hpa.manifest,
            target.field_path("averageUtilization"),
            f"{where.label} has a target out of range. Its averageUtilization "
            f"{_shown(utilization)} is out of range: it is a 32-bit integer, at most {INT32_MAX}; "
            "the API server rejects the object.",
            "averageUtilization: 80",
        )
    elif utilization is not None and not is_unknown(utilization):
        integer = isinstance(utilization, int) and not isinstance(utilization, bool)
        if not integer or utilization < 1:
            yield ctx.finding(
                hpa.manifest,
                target.field_path("averageUtilization"),
                f"{where.label} has an invalid target. Its averageUtilization "
                f"{_shown(utilization)} must be a whole percentage of the pods' requests, at "
                "least 1; the API server rejects the object.",
                f"averageUtilization: {_suggest_utilization(utilization)}",
            )
    read = _field_read(metric, target)
    for field, raw in (("value", target.value), ("averageValue", target.average_value)):
        if raw is None or is_unknown(raw):
            continue
        try:
            quantity = parse_quantity(raw)
        except QuantityOutOfRange as error:
            yield ctx.finding(
                hpa.manifest,
                target.field_path(field),
                f"{where.label} has a target out of range. Its {field} {error}; a larger one "
                "is capped or overflows, so the target is not the number written.",
                f'{field}: "1"',
            )
            continue
        except QuantityError as error:
            yield ctx.finding(
                hpa.manifest,
                target.field_path(field),
                f"{where.label} has an invalid target. Its {field} {error}; the API server "
                "rejects the object.",
                f"{field}: {_suggest_quantity(raw)}",
            )
            continue
        if quantity.value <= 0:
            yield ctx.finding(
                hpa.manifest,
                target.field_path(field),
                f"{where.label} has a target of zero or less. Its {field} {_shown(raw)} must be "
                "positive; the API server rejects the object.",
                f'{field}: "1"',
            )
            continue
        if field == read and metric.is_custom and metric.name:
            yield from _scale(where, field, raw, quantity.value, quantity.suffix, inventory, ctx)


def _field_read(metric: HpaMetric, target: MetricTarget) -> str | None:
    """The field the controller takes the target from (horizontal.go)."""
    if metric.type == "Pods":
        return "averageValue"
    if metric.type == "Object":
        return "value" if target.type == "Value" and target.value is not None else "averageValue"
    if metric.type == "External":
        return "averageValue" if target.average_value is not None else "value"
    return None


def _scale(
    where: _Where,
    field: str,
    raw: Any,
    value: Decimal,
    suffix: str,
    inventory: Inventory,
    ctx: Context,
) -> Iterator[Finding]:
    metric, hpa = where.metric, where.hpa
    assert metric.name is not None
    judged = metric_scale(metric, inventory, hpa)
    if judged is None or not off_scale(hpa, metric, field, value, inventory, judged):
        return
    scale, basis = judged
    via = f" (prometheus-adapter serves it from {basis})" if basis != metric.name else ""
    path = where.target.field_path(field)
    shown = _shown(raw)
    # Summed per pod over several GPUs, the metric reaches that many times its one-GPU range;
    # the meant target is scaled the same way, so that the fix does not draw GL406.
    gpus = gpus_summed(hpa, metric, inventory)
    summed = f" summed over {gpus} GPUs per pod" if gpus > 1 else ""
    if scale is Scale.PERCENT:
        if suffix == "m":
            # "70m" for 70; "700m" is 0.7 and cannot mean 700%: it meant 70% as a fraction.
            thousand = value * 1000
            per_gpu = thousand if thousand <= 100 else value * 100
            meant = format_number(per_gpu * gpus)
            yield ctx.finding(
                hpa.manifest,
                path,
                f"{where.label} targets less than 1%. Its {field} {shown} is "
                f"{format_number(value)} (the m suffix means thousandths), but {metric.name} is a "
                f"percentage from 0 to 100{via}{summed}: any load at all exceeds the target and "
                f"the HPA scales out to maxReplicas; {meant} was probably meant"
                f"{_per_gpu(per_gpu, gpus)}.",
                f'{field}: "{meant}"',
                plan=edits.unsafe(edits.Replace(hpa.manifest, path, f'"{meant}"')),
            )
        else:
            meant = format_number(value * 100 * gpus)
            yield ctx.finding(
                hpa.manifest,
                path,
                f"{where.label} targets less than 1%. Its {field} {shown} is below 1, but "
                f"{metric.name} is a percentage from 0 to 100{via}{summed}: almost any load "
                f"exceeds the target and the HPA scales out to maxReplicas; if {shown} was meant "
                f"as a fraction, write {meant}{_per_gpu(value * 100, gpus)}.",
                f'{field}: "{meant}"',
                severity=Severity.WARNING,
                plan=edits.unsafe(edits.Replace(hpa.manifest, path, f'"{meant}"')),
            )
    else:
        if gpus > 1:
            yield _summed_ratio(where, field, shown, value, gpus, via, ctx)
            return
        ratio = paste_quantity(float(value) / 100) if value <= 100 else None
        hint = f"; if {format_number(value)}% was meant, write {ratio}" if ratio else ""
        yield ctx.finding(
            hpa.manifest,
            path,
            f"{where.label} targets above 1 on a 0-1 scale. Its {field} {shown} is above 1, "
            f"but {metric.name} is a ratio from 0 to 1{via}: unless its query adds up several "
            f"series per pod, the metric never reaches the target, so the HPA never scales "
            f"out{hint}.",
            ratio_target_fix(field, float(value)) if ratio else f'{field}: "700m"   # 0.7',
            severity=Severity.WARNING,
            plan=edits.unsafe(edits.Replace(hpa.manifest, path, f'"{ratio}"')) if ratio else None,
        )


def _per_gpu(per_gpu: Decimal, gpus: int) -> str:
    """How a target summed over several GPUs was computed, for the message."""
    return f" ({format_number(per_gpu)} per GPU x {gpus} GPUs)" if gpus > 1 else ""


def _summed_ratio(
    where: _Where, field: str, shown: str, value: Decimal, gpus: int, via: str, ctx: Context
) -> Finding:
    """A target above the range of a 0-1 ratio summed over ``gpus`` GPUs per pod."""
    metric, hpa = where.metric, where.hpa
    ratio = paste_quantity(float(value) / 100 * gpus) if value <= 100 else None
    hint = (
        f"; if {format_number(value)}% of each GPU was meant, write {ratio} "
        f"({format_number(value / 100)} x {gpus} GPUs)"
        if ratio
        else ""
    )
    fix = (
        f'{field}: "{ratio}"   # {format_number(value)}% of each of {gpus} GPUs'
        if ratio
        else f'{field}: "{gpus}"   # every GPU fully busy'
    )
    path = where.target.field_path(field)
    return ctx.finding(
        hpa.manifest,
        path,
        f"{where.label} targets above {gpus} on a 0-1 scale summed over {gpus} GPUs per pod. "
        f"Its {field} {shown} is above {gpus}, but {metric.name} is a ratio from 0 to 1{via} "
        f"and the adapter adds up the {gpus} GPUs of each pod, so the metric never reaches the "
        f"target and the HPA never scales out{hint}.",
        fix,
        severity=Severity.WARNING,
        plan=edits.unsafe(edits.Replace(hpa.manifest, path, f'"{ratio}"')) if ratio else None,
    )


def _shown(value: Any) -> str:
    if isinstance(value, OversizedNumber):
        return abbreviated(value)
    if isinstance(value, str):
        return f'"{abbreviated(value)}"'
    if isinstance(value, int) and not isinstance(value, bool):
        return shown_value(value)
    return abbreviated(str(value))


def _suggest_quantity(raw: Any) -> str:
    if isinstance(raw, str) and len(raw) <= SHOWN_CHARS:
        text = raw.strip()
        if text.endswith("%"):
            return f'"{text[:-1].strip()}"'
        if text.endswith("K"):
            return f'"{text[:-1]}k"'
    return '"1"'


def _suggest_utilization(raw: Any) -> str:
    if isinstance(raw, str):
        digits = raw.strip().rstrip("%").strip()
        if digits.isdigit() and len(digits) <= 9 and int(digits) >= 1:
            return digits
    if isinstance(raw, float) and 1 <= raw <= INT32_MAX:
        return str(round(raw))
    return "80"
