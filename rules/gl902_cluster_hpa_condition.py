"""An HPA in the cluster reports that it cannot scale (ScalingActive or AbleToScale False).

## What it checks
With ``--cluster``, the ``status.conditions`` the HPA controller wrote on each HPA:
``ScalingActive=False`` (``AmbiguousSelector``, ``FailedGetPodsMetric``,
``FailedGetObjectMetric``, ``FailedGetExternalMetric``, ``FailedGetResourceMetric``,
``InvalidSelector``, ``ScalingDisabled`` ...) and ``AbleToScale=False``
(``FailedGetScale``, ``FailedUpdateScale``). The finding quotes the condition and names the
gpulint rule that explains the cause, when one does. ``ScalingLimited`` (the desired count is
beyond min or max) is not reported: the HPA works as configured.

## Why is this bad?
The HPA exists, ``kubectl get hpa`` lists it, and nothing scales: the controller skips it on
every sync. The reason is only in the conditions (``kubectl describe hpa``) and in events that
expire after an hour. HPAs made by KEDA carry the same conditions; their fix is on the
ScaledObject.

## Example
```yaml
status:
  conditions:
  - type: ScalingActive
    status: "False"
    reason: AmbiguousSelector
    message: >-
      pods by selector app=triton are controlled by multiple HPAs:
      [ml/triton ml/keda-hpa-triton]
```

## Use instead
Remove the cause the condition names; for ``AmbiguousSelector``, keep one autoscaler per
workload (one HPA with every metric: it acts on the largest proposal).

## References
- kubernetes pkg/controller/podautoscaler/horizontal.go (the conditions and their reasons).
- Kubernetes HPA docs, "Appendix: Horizontal Pod Autoscaler status conditions".
- kubernetes/kubernetes#112011 (AmbiguousSelector, Kubernetes 1.26).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpulint.ruleapi import (
    HPA,
    Context,
    Finding,
    Inventory,
    Severity,
    as_dict,
    as_list,
    generated_by,
)

ID = "GL902"
NAME = "cluster-hpa-condition"
SEVERITY = Severity.ERROR
SCOPE = "hpa"
REQUIRES = "cluster"  # runs only with --cluster
STAGES = ("autoscaler",)

# The rules whose findings name a cause (ID -> name, as in the catalog).
RULES = {
    "GL103": "duplicate-autoscalers",
    "GL105": "hpa-targets-revision",
    "GL106": "hpa-targets-legacy-kserve-name",
    "GL108": "hpa-invalid-spec",
    "GL401": "adapter-metric-not-exposed",
    "GL403": "adapter-label-mapping",
    "GL901": "cluster-metric-unavailable",
}
_METRIC_RULES = ("GL901", "GL401", "GL403")

# reason -> (what it means, the rules that explain it)
EXPLANATIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "AmbiguousSelector": (
        "another autoscaler claims the same pods, so Kubernetes >= 1.26 stops every HPA on them",
        ("GL103",),
    ),
    "FailedGetPodsMetric": (
        "the custom metrics API gives no value of a Pods metric for its pods",
        _METRIC_RULES,
    ),
    "FailedGetObjectMetric": (
        "the custom metrics API gives no value of an Object metric",
        _METRIC_RULES,
    ),
    "FailedGetExternalMetric": (
        "the external metrics API gives no value of an External metric",
        ("GL901", "GL401"),
    ),
    "FailedGetResourceMetric": (
        "the resource metrics API (metrics-server) gives no usage for its pods, or a container "
        "has no request for the resource",
        (),
    ),
    "FailedGetContainerResourceMetric": (
        "the resource metrics API gives no usage for the container, or it has no request",
        (),
    ),
    "InvalidMetricSourceType": ("a metric has a type the controller does not know", ("GL108",)),
    "InvalidSelector": ("the target's scale has no usable pod selector", ()),
    "ScalingDisabled": (
        "the target has 0 replicas, which parks the HPA until something scales it up",
        (),
    ),
    "FailedGetScale": (
        "the HPA cannot read its target's scale: the target does not exist (a deleted Knative "
        "revision, a pre-0.11 KServe name) or has no scale subresource",
        ("GL105", "GL106"),
    ),
    "FailedUpdateScale": (
        "the HPA cannot write its target's replicas (RBAC, or an admission webhook refusing)",
        (),
    ),
}
CONDITIONS = ("ScalingActive", "AbleToScale")


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if inventory.cluster is None:
        return
    status = as_dict(hpa.manifest.data.get("status"))
    for index, condition in enumerate(as_list(status.get("conditions"))):
        condition = as_dict(condition)
        kind, state = condition.get("type"), condition.get("status")
        if kind not in CONDITIONS or state != "False":
            continue
        reason = _text(condition.get("reason")) or "no reason given"
        message = _text(condition.get("message"))
        yield ctx.finding(
            hpa.manifest,
            ("status", "conditions", index),
            _message(hpa, str(kind), reason, message),
            _fix(hpa, reason),
        )


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _message(hpa: HPA, kind: str, reason: str, message: str) -> str:
    scaled = generated_by(hpa.manifest, "ScaledObject")
    made = f" (made by KEDA for ScaledObject {scaled})" if scaled else ""
    said = f': "{message}"' if message else ""
    text = f"HPA {hpa.name}{made} reports {kind}=False, reason {reason}{said}"
    meaning, rules = EXPLANATIONS.get(reason, ("", ()))
    if meaning:
        text += f"; {meaning}"
    if rules:
        named = ", ".join(f"{r} ({RULES[r]})" for r in rules)
        text += f"; explained by {named} when it reports this HPA"
    return text + "; the controller skips it until the cause is gone"


def _fix(hpa: HPA, reason: str) -> str:
    namespace = hpa.namespace or "default"
    describe = f"kubectl describe hpa -n {namespace} {hpa.name}"
    target = hpa.target_ref.name if hpa.target_ref else "TARGET"
    kind = (hpa.target_ref.kind if hpa.target_ref else "") or "deployment"
    if reason == "AmbiguousSelector":
        return (
            "# keep one autoscaler per workload: one HPA with every metric (it acts on the "
            "largest proposal); delete the others:\n"
            f"gpulint lint --cluster -n {namespace} --select GL103"
        )
    if reason in ("FailedGetPodsMetric", "FailedGetObjectMetric", "FailedGetExternalMetric"):
        return (
            "# find the metric the API does not serve, and why:\n"
            f"gpulint lint --cluster -n {namespace} --select GL901,GL401,GL403\n{describe}"
        )
    if reason in ("FailedGetResourceMetric", "FailedGetContainerResourceMetric"):
        return (
            "# every container of the target needs a request for the resource the HPA reads:\n"
            "resources:\n  requests:\n    cpu: 500m\n"
            f"# and metrics-server must answer: kubectl top pods -n {namespace}"
        )
    if reason == "FailedGetScale":
        return (
            "# point spec.scaleTargetRef at a workload that exists:\n"
            f"kubectl get {kind.lower()} -n {namespace} {target}"
        )
    if reason == "ScalingDisabled":
        return (
            f"kubectl scale {kind.lower()} -n {namespace} {target} --replicas=1   "
            "# or delete the HPA while the workload is parked"
        )
    return describe
