"""An HPA has replica bounds or a behavior that the API server rejects.

## What it checks
The spec-level validation of the Kubernetes API server (pkg/apis/autoscaling/validation):

* ``minReplicas`` must be an integer >= 1; 0 is accepted only with the ``HPAScaleToZero``
  feature gate and only if the HPA has an Object or External metric. The gate is alpha and
  off by default from Kubernetes 1.16 to 1.36, beta and on by default from 1.37
  (kubernetes/kubernetes#139648), so the verdict follows ``kubernetes-version``;
* ``maxReplicas`` must be present, an integer >= 1 and >= ``minReplicas``;
* both are 32-bit integers: a number beyond 2147483647 (or written with more digits than
  any number Kubernetes reads, ``0xfff...``) is out of range;
* ``scaleTargetRef`` needs ``kind`` and ``name``;
* in ``behavior.scaleUp`` / ``behavior.scaleDown``: ``stabilizationWindowSeconds`` in 0..3600,
  ``selectPolicy`` one of ``Max``, ``Min``, ``Disabled``, ``tolerance`` a quantity >= 0, and
  ``policies`` not an empty list; each policy has ``type`` ``Pods`` or ``Percent``, an integer
  ``value`` > 0 and ``periodSeconds`` in 1..1800;
* ``tolerance`` on a Kubernetes release that ignores it (``kubernetes-version``): it is
  alpha in 1.33 and 1.34, where the gate is off by default and the API server drops the
  field without a word (a warning), and unknown before 1.33, where ``kubectl apply`` refuses
  it; from 1.35 it is on by default (KEP-4951).

Policies are validated after defaulting: leaving ``policies`` out gets Kubernetes' default
policies, but an explicit ``policies: []`` is kept and rejected. Values that are still template
placeholders (``{{ .Values.max }}``, ``${max}``) are not judged. A kustomize patch (an HPA
without ``scaleTargetRef``) is checked only for the fields it sets; HPAs that KEDA, KServe or
Knative generated are not judged.

## Why is this bad?
``kubectl apply`` (or the Helm release, or the GitOps sync) fails, and the workload is left
without the autoscaler, or with the previous version of it, until someone reads the error.

## Example
```yaml
spec:
  minReplicas: 2
  maxReplicas: 1
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 7200
      policies: []
```

## Use instead
```yaml
spec:
  minReplicas: 1
  maxReplicas: 4
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 600
      policies:
      - {type: Pods, value: 1, periodSeconds: 120}
```

## Options
``scale-to-zero-gate`` says whether your clusters run with the ``HPAScaleToZero`` feature gate.
Unset (the default), it follows ``kubernetes-version`` in ``.gpulint.yaml``: on from
Kubernetes 1.37, off before. Set it to true for clusters that turn the alpha gate on, or to
false for clusters that turn the beta gate off; with the gate on, ``minReplicas: 0`` is
accepted when an Object or External metric is present, as the API server does.

## References
- Kubernetes pkg/apis/autoscaling/validation/validation.go: ``validateHorizontalPodAutoscaler
  Spec``, ``validateScalingRules``, ``validateScalingPolicy`` (MaxStabilizationWindowSeconds
  3600, MaxPeriodSeconds 1800).
- Kubernetes pkg/apis/autoscaling/v2/defaults.go: policies are defaulted only when nil.
- KEP-4951 (kubernetes/enhancements keps/sig-autoscaling/4951-configurable-hpa-tolerance):
  HPAConfigurableTolerance alpha 1.33, beta and on by default 1.35
  (kubernetes/kubernetes#133128, kubernetes/website#52981), GA 1.37 (#140107); with the gate
  off, pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go ``dropDisabledFields``
  clears it.
- Kubernetes feature gates: HPAScaleToZero, alpha from 1.16, beta and on by default from
  1.37 (kubernetes/kubernetes#139648, pkg/features/kube_features.go; the blog post
  kubernetes/website#56290); KEP-2021 (kubernetes/enhancements@64765b4:
  keps/sig-autoscaling/2021-scale-from-zero/kep.yaml).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeGuard

from gpulint.ruleapi import (
    HPA,
    INT32_MAX,
    Context,
    Finding,
    Inventory,
    OversizedNumber,
    Path,
    Release,
    Severity,
    Versions,
    abbreviated,
    edits,
    int32_out_of_range,
    is_generated,
    is_unknown,
    shown_value,
    try_quantity,
)

ID = "GL108"
NAME = "hpa-invalid-spec"
SEVERITY = Severity.ERROR
SCOPE = "hpa"
FIXES = ("safe", "unsafe")
STAGES = ("autoscaler",)

OPTIONS = {
    "scale-to-zero-gate": {
        "type": ["boolean", "null"],
        "default": None,
        "description": "the clusters run with the HPAScaleToZero feature gate, so "
        "minReplicas: 0 is valid with an Object or External metric (unset: as "
        "kubernetes-version says, on from 1.37)",
    },
}
# HPAScaleToZero is beta and on by default from this release (kubernetes/kubernetes#139648).
SCALE_TO_ZERO_DEFAULT_ON = Release(1, 37)
# behavior.*.tolerance (KEP-4951): alpha in 1.33, beta and on by default from 1.35
# (kubernetes/kubernetes#133128, kubernetes/website#52981), GA in 1.37 (#140107).
TOLERANCE_ALPHA, TOLERANCE_DEFAULT_ON = Release(1, 33), Release(1, 35)

MAX_STABILIZATION_WINDOW_SECONDS = 3600
MAX_PERIOD_SECONDS = 1800
SELECT_POLICIES = ("Max", "Min", "Disabled")
POLICY_TYPES = ("Pods", "Percent")


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    if isinstance(value, OversizedNumber):
        return abbreviated(value)
    if isinstance(value, str):
        return f'"{abbreviated(value)}"'
    if isinstance(value, int) and not isinstance(value, bool):
        return shown_value(value)
    return abbreviated(str(value).lower())


def _as_written(value: Any, fallback: int) -> int:
    """The integer a quoted number meant ("4" -> 4), else ``fallback``."""
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit() and len(text) <= 9 and int(text) >= 1:
            return int(text)
    return fallback


def _set(hpa: HPA, path: Path, text: str, safe: bool = False) -> edits.FixPlan:
    """The fix that writes ``text`` as the value at ``path``: safe when it only says what
    the author wrote in the form the API server takes ("4" -> 4, max -> Max), unsafe when
    it picks a number for them."""
    replace = edits.Replace(hpa.manifest, path, text)
    return edits.safe(replace) if safe else edits.unsafe(replace)


def _meant_integer(value: Any) -> bool:
    return _as_written(value, 0) != 0


def _out_of_range(where: str, field: str, value: Any) -> str:
    return (
        f"{where}{field} is out of range. It is a 32-bit integer, at most {INT32_MAX}, not "
        f"{_shown(value)}; the API server rejects the object."
    )


def _written(value: Any, rule: str) -> str:
    """The detail of a value the API server rejects: what it must be and what it is."""
    return f"It must be {rule}, not {_shown(value)}; the API server rejects the object."


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if is_generated(hpa.manifest):
        return
    yield from _replicas(hpa, ctx, inventory.settings.versions)
    yield from _target_ref(hpa, ctx)
    if hpa.version in ("v2", "v2beta2"):  # the versions that have behavior
        yield from _behavior(hpa, ctx, inventory.settings.versions)


def _replicas(hpa: HPA, ctx: Context, versions: Versions) -> Iterator[Finding]:
    name = abbreviated(hpa.name)
    minimum, problem = _min_replicas(hpa, name, ctx, versions)
    if problem is not None:
        yield problem
    problem = _max_replicas(hpa, name, minimum, ctx)
    if problem is not None:
        yield problem


def _min_replicas(
    hpa: HPA, name: str, ctx: Context, versions: Versions
) -> tuple[int | None, Finding | None]:
    """The minimum the HPA keeps (None: unknown or refused) and the finding refusing it."""
    raw_min = hpa.min_replicas
    if raw_min is None:
        return 1, None
    if is_unknown(raw_min):
        return None, None
    if int32_out_of_range(raw_min):
        return None, ctx.finding(
            hpa.manifest,
            ("spec", "minReplicas"),
            _out_of_range(f"HorizontalPodAutoscaler {name}: ", "minReplicas", raw_min),
            "minReplicas: 1",
            plan=_set(hpa, ("spec", "minReplicas"), "1"),
        )
    if not _is_int(raw_min):
        return None, ctx.finding(
            hpa.manifest,
            ("spec", "minReplicas"),
            f"HorizontalPodAutoscaler {name}: minReplicas is not an integer. "
            + _written(raw_min, "an integer"),
            f"minReplicas: {_as_written(raw_min, 1)}",
            plan=_set(
                hpa, ("spec", "minReplicas"), str(_as_written(raw_min, 1)), _meant_integer(raw_min)
            ),
        )
    scales_on_objects = any(m.type in ("Object", "External") for m in hpa.metrics)
    gate_on, gate = _gate(ctx, versions)
    if raw_min > 0 or (raw_min == 0 and scales_on_objects and gate_on):
        return raw_min, None
    if raw_min == 0 and scales_on_objects:
        why = f"It needs the HPAScaleToZero feature gate, and {gate}"
    elif raw_min == 0:
        why = (
            "It is accepted only with at least one Object or External metric (and the "
            "HPAScaleToZero feature gate), and this HPA has none"
        )
    else:
        why = "It must be greater than or equal to 1"
    return None, ctx.finding(
        hpa.manifest,
        ("spec", "minReplicas"),
        f"HorizontalPodAutoscaler {name}: minReplicas {raw_min} is not allowed. {why}; "
        "the API server rejects the object.",
        "minReplicas: 1",
        plan=_set(hpa, ("spec", "minReplicas"), "1"),
    )


def _max_replicas(hpa: HPA, name: str, minimum: int | None, ctx: Context) -> Finding | None:
    """The finding refusing maxReplicas: missing, not an int32, below 1 or below the minimum."""
    raw_min, raw_max = hpa.min_replicas, hpa.max_replicas
    suggested = max(minimum or 1, 1) * 2
    if "maxReplicas" not in hpa.spec or raw_max is None:
        if hpa.is_fragment:
            return None
        return ctx.finding(
            hpa.manifest,
            ("spec",),
            f"HorizontalPodAutoscaler {name} has no maxReplicas. The API server requires it: "
            "the object is rejected.",
            f"spec:\n  maxReplicas: {suggested}",
            plan=edits.unsafe(
                edits.Insert(hpa.manifest, ("spec",), edits.entries(maxReplicas=suggested))
            ),
        )
    if is_unknown(raw_max):
        return None
    if int32_out_of_range(raw_max):
        return ctx.finding(
            hpa.manifest,
            ("spec", "maxReplicas"),
            _out_of_range(f"HorizontalPodAutoscaler {name}: ", "maxReplicas", raw_max),
            f"maxReplicas: {suggested}",
            plan=_set(hpa, ("spec", "maxReplicas"), str(suggested)),
        )
    if not _is_int(raw_max):
        return ctx.finding(
            hpa.manifest,
            ("spec", "maxReplicas"),
            f"HorizontalPodAutoscaler {name}: maxReplicas is not an integer. "
            + _written(raw_max, "an integer"),
            f"maxReplicas: {_as_written(raw_max, suggested)}",
            plan=_set(
                hpa,
                ("spec", "maxReplicas"),
                str(_as_written(raw_max, suggested)),
                _meant_integer(raw_max),
            ),
        )
    if raw_max < 1:
        return ctx.finding(
            hpa.manifest,
            ("spec", "maxReplicas"),
            f"HorizontalPodAutoscaler {name}: maxReplicas {raw_max} is not allowed. It must be "
            "greater than 0; the API server rejects the object.",
            f"maxReplicas: {suggested}",
            plan=_set(hpa, ("spec", "maxReplicas"), str(suggested)),
        )
    if minimum is None or raw_max >= minimum or (hpa.is_fragment and raw_min is None):
        return None
    return ctx.finding(
        hpa.manifest,
        ("spec", "maxReplicas"),
        f"HorizontalPodAutoscaler {name}: maxReplicas {raw_max} is less than minReplicas "
        f"{minimum}. The API server rejects the object (maxReplicas must be greater than or "
        "equal to minReplicas).",
        f"minReplicas: {raw_max}\nmaxReplicas: {minimum}   # the two were swapped",
        plan=edits.unsafe(
            edits.Replace(hpa.manifest, ("spec", "minReplicas"), str(raw_max)),
            edits.Replace(hpa.manifest, ("spec", "maxReplicas"), str(minimum)),
        )
        if raw_min is not None
        else None,
    )


def _gate(ctx: Context, versions: Versions) -> tuple[bool, str]:
    """Is HPAScaleToZero on, and (when it is off) why gpulint takes it so."""
    option = ctx.options.get("scale-to-zero-gate")
    if option is not None:
        return option is not False, "option scale-to-zero-gate is false"
    if versions.kubernetes >= SCALE_TO_ZERO_DEFAULT_ON:
        return True, ""
    hint = versions.setting_hint("kubernetes")
    return False, (
        f"the clusters run {versions.named('kubernetes')}{' ' + hint if hint else ''}, where "
        f"it is alpha and off by default (on by default from {SCALE_TO_ZERO_DEFAULT_ON}; set "
        "option scale-to-zero-gate: true if they turn it on)"
    )


def _target_ref(hpa: HPA, ctx: Context) -> Iterator[Finding]:
    ref = hpa.spec.get("scaleTargetRef")
    if ref is None or is_unknown(ref):
        return
    if not isinstance(ref, dict):
        yield ctx.finding(
            hpa.manifest,
            ("spec", "scaleTargetRef"),
            f"HorizontalPodAutoscaler {abbreviated(hpa.name)}: scaleTargetRef is not a mapping. "
            "It must be a mapping with apiVersion, kind and name; the API server rejects the "
            "object.",
            "scaleTargetRef:\n  apiVersion: apps/v1\n  kind: Deployment\n  name: <workload>",
        )
        return
    for field, example in (("kind", "Deployment"), ("name", "<workload name>")):
        value = ref.get(field)
        if isinstance(value, str) and value:
            continue
        if is_unknown(value):
            continue
        yield ctx.finding(
            hpa.manifest,
            ("spec", "scaleTargetRef", field) if field in ref else ("spec", "scaleTargetRef"),
            f"HorizontalPodAutoscaler {abbreviated(hpa.name)}: scaleTargetRef has no {field}. "
            "The API server requires it: the object is rejected.",
            f"scaleTargetRef:\n  {field}: {example}",
        )


def _behavior(hpa: HPA, ctx: Context, versions: Versions) -> Iterator[Finding]:
    behavior = hpa.spec.get("behavior")
    if not isinstance(behavior, dict):
        return
    for direction in ("scaleUp", "scaleDown"):
        rules = behavior.get(direction)
        if isinstance(rules, dict) and not is_unknown(rules):
            yield from _scaling_rules(hpa, ctx, direction, rules, versions)


def _scaling_rules(
    hpa: HPA, ctx: Context, direction: str, rules: dict[str, Any], versions: Versions
) -> Iterator[Finding]:
    base: Path = ("spec", "behavior", direction)
    where = f"HorizontalPodAutoscaler {abbreviated(hpa.name)}: behavior.{direction}"
    for problem in (
        _window(hpa, ctx, base, where, rules.get("stabilizationWindowSeconds")),
        _select_policy(hpa, ctx, base, where, rules.get("selectPolicy")),
        _tolerance(hpa, ctx, base, where, rules.get("tolerance"), versions),
    ):
        if problem is not None:
            yield problem
    if "policies" not in rules or rules.get("policies") is None:
        return
    policies = rules["policies"]
    if isinstance(policies, list) and not policies:
        yield ctx.finding(
            hpa.manifest,
            (*base, "policies"),
            f"{where}.policies is an empty list. Kubernetes fills in its default policies only "
            "when the field is left out, and the API server rejects an explicit empty list "
            "('must specify at least one Policy').",
            "# delete `policies: []` to get the default policies, or list one:\n"
            + _policy_example(direction),
            plan=edits.safe(edits.Delete(hpa.manifest, (*base, "policies"))),
        )
        return
    if not isinstance(policies, list):
        return
    for index, policy in enumerate(policies):
        if isinstance(policy, dict):
            yield from _policy(hpa, ctx, (*base, "policies", index), where, policy)


def _window(hpa: HPA, ctx: Context, base: Path, where: str, window: Any) -> Finding | None:
    window_ok = _is_int(window) and 0 <= window <= MAX_STABILIZATION_WINDOW_SECONDS
    if window is None or is_unknown(window) or window_ok:
        return None
    suggested = 600 if base[-1] == "scaleDown" else 0
    if _is_int(window) and window > MAX_STABILIZATION_WINDOW_SECONDS:
        suggested = MAX_STABILIZATION_WINDOW_SECONDS
    return ctx.finding(
        hpa.manifest,
        (*base, "stabilizationWindowSeconds"),
        f"{where}.stabilizationWindowSeconds is out of range. "
        + _written(window, f"an integer from 0 to {MAX_STABILIZATION_WINDOW_SECONDS}"),
        f"stabilizationWindowSeconds: {suggested}",
        plan=_set(hpa, (*base, "stabilizationWindowSeconds"), str(suggested)),
    )


def _select_policy(hpa: HPA, ctx: Context, base: Path, where: str, select: Any) -> Finding | None:
    if select is None or is_unknown(select) or select in SELECT_POLICIES:
        return None
    fixed = next(
        (p for p in SELECT_POLICIES if isinstance(select, str) and p.lower() == select.lower()),
        "Max",
    )
    return ctx.finding(
        hpa.manifest,
        (*base, "selectPolicy"),
        f"{where}.selectPolicy is not a policy. " + _written(select, "Max, Min or Disabled"),
        f"selectPolicy: {fixed}",
        plan=_set(
            hpa,
            (*base, "selectPolicy"),
            fixed,
            isinstance(select, str) and select.lower() == fixed.lower(),
        ),
    )


def _tolerance(
    hpa: HPA, ctx: Context, base: Path, where: str, tolerance: Any, versions: Versions
) -> Finding | None:
    if tolerance is None or is_unknown(tolerance):
        return None
    quantity = try_quantity(tolerance)
    if quantity is not None and quantity.value >= 0:
        return _tolerance_release(hpa, ctx, base, where, versions)
    return ctx.finding(
        hpa.manifest,
        (*base, "tolerance"),
        f"{where}.tolerance is not a valid tolerance. "
        + _written(tolerance, "a quantity greater than or equal to zero"),
        'tolerance: "0.1"   # the controller default: 10%',
        plan=_set(hpa, (*base, "tolerance"), '"0.1"'),
    )


def _tolerance_release(
    hpa: HPA, ctx: Context, base: Path, where: str, versions: Versions
) -> Finding | None:
    """A valid tolerance on a Kubernetes release where it does nothing: before 1.35 the
    HPAConfigurableTolerance gate is off by default and the API server drops the field
    (strategy.go ``dropDisabledFields``); before 1.33 the field does not exist."""
    release = versions.kubernetes
    if release >= TOLERANCE_DEFAULT_ON:
        return None
    hint = versions.setting_hint("kubernetes")
    runs = f"{versions.named('kubernetes')}{' ' + hint if hint else ''}"
    if release >= TOLERANCE_ALPHA:
        text = (
            f"{where}.tolerance does nothing on {runs}. The HPAConfigurableTolerance "
            f"feature gate is alpha and off by default before Kubernetes {TOLERANCE_DEFAULT_ON}, "
            "and with it off the API server drops the field without a word, so the "
            "controller keeps its cluster-wide tolerance (--horizontal-pod-autoscaler-"
            "tolerance, 10%)."
        )
        severity = Severity.WARNING
    else:
        text = (
            f"{where}.tolerance is a field {runs} does not know: it appears in Kubernetes "
            f"{TOLERANCE_ALPHA} (alpha) and is on by default from {TOLERANCE_DEFAULT_ON}. "
            "kubectl apply refuses the unknown field (strict field validation) and other "
            "clients have it dropped, so the controller keeps its cluster-wide tolerance."
        )
        severity = None
    return ctx.finding(
        hpa.manifest,
        (*base, "tolerance"),
        text,
        f"# delete tolerance, or set kubernetes-version if the clusters run "
        f"{TOLERANCE_DEFAULT_ON} or later (or turn HPAConfigurableTolerance on)",
        severity=severity,
        plan=edits.safe(edits.Delete(hpa.manifest, (*base, "tolerance"))),
    )


def _policy_example(direction: str) -> str:
    if direction == "scaleUp":
        return "policies:\n- type: Pods\n  value: 2\n  periodSeconds: 60"
    return "policies:\n- type: Pods\n  value: 1\n  periodSeconds: 120"


def _policy(
    hpa: HPA, ctx: Context, path: Path, where: str, policy: dict[str, Any]
) -> Iterator[Finding]:
    for problem in (
        _policy_type(hpa, ctx, path, where, policy),
        _policy_value(hpa, ctx, path, where, policy),
        _policy_period(hpa, ctx, path, where, policy),
    ):
        if problem is not None:
            yield problem


_REJECTED = "the API server rejects the object"


def _policy_type(
    hpa: HPA, ctx: Context, path: Path, where: str, policy: dict[str, Any]
) -> Finding | None:
    kind = policy.get("type")
    if is_unknown(kind) or kind in POLICY_TYPES:
        return None
    fixed = next(
        (t for t in POLICY_TYPES if isinstance(kind, str) and t.lower() == kind.lower()),
        "Pods",
    )
    if kind is not None:
        what = f"an unknown type. {_written(kind, 'Pods or Percent')}"
    else:
        what = f"no type. It must be Pods or Percent; {_REJECTED}."
    return ctx.finding(
        hpa.manifest,
        (*path, "type") if "type" in policy else path,
        f"{where}.policies[{path[-1]}] has {what}",
        f"type: {fixed}",
        plan=_set(
            hpa, (*path, "type"), fixed, isinstance(kind, str) and kind.lower() == fixed.lower()
        )
        if "type" in policy
        else None,
    )


def _policy_value(
    hpa: HPA, ctx: Context, path: Path, where: str, policy: dict[str, Any]
) -> Finding | None:
    value = policy.get("value")
    if int32_out_of_range(value):
        return ctx.finding(
            hpa.manifest,
            (*path, "value"),
            _out_of_range(f"{where}.policies[{path[-1]}].", "value", value),
            "value: 1",
            plan=_set(hpa, (*path, "value"), "1"),
        )
    if is_unknown(value) or (_is_int(value) and value > 0):
        return None
    rule = "an integer greater than zero"
    if value is not None:
        what = f"an invalid value. {_written(value, rule)}"
    else:
        what = f"no value. It must be {rule}; {_REJECTED}."
    return ctx.finding(
        hpa.manifest,
        (*path, "value") if "value" in policy else path,
        f"{where}.policies[{path[-1]}] has {what}",
        "value: 1",
        plan=_set(hpa, (*path, "value"), "1") if "value" in policy else None,
    )


def _policy_period(
    hpa: HPA, ctx: Context, path: Path, where: str, policy: dict[str, Any]
) -> Finding | None:
    period = policy.get("periodSeconds")
    if is_unknown(period) or (_is_int(period) and 1 <= period <= MAX_PERIOD_SECONDS):
        return None
    rule = f"an integer from 1 to {MAX_PERIOD_SECONDS}"
    if period is not None:
        what = f"an invalid periodSeconds. {_written(period, rule)}"
    else:
        what = f"no periodSeconds. It must be {rule}; {_REJECTED}."
    suggested = MAX_PERIOD_SECONDS if _is_int(period) and period > MAX_PERIOD_SECONDS else 60
    return ctx.finding(
        hpa.manifest,
        (*path, "periodSeconds") if "periodSeconds" in policy else path,
        f"{where}.policies[{path[-1]}] has {what}",
        f"periodSeconds: {suggested}",
        plan=_set(hpa, (*path, "periodSeconds"), str(suggested))
        if "periodSeconds" in policy
        else None,
    )
