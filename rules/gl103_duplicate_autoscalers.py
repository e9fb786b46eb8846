"""Two or more autoscalers claim the same workload.

## What it checks
Every workload that more than one autoscaler scales:

* two HorizontalPodAutoscalers with the same ``scaleTargetRef``;
* an HPA and a KEDA ScaledObject (KEDA creates its own HPA ``keda-hpa-<name>``), or two
  ScaledObjects;
* an HPA or ScaledObject of yours on the Deployment KServe generates for an InferenceService
  (``<isvc>-predictor``) in Standard (RawDeployment) mode, while KServe's own autoscaler class
  is ``hpa`` (the default) or ``keda``: KServe then creates an HPA (or ScaledObject) for the
  same Deployment.

Only workloads that are in the input are judged: autoscalers of one name in a directory of
examples, for a Deployment the repository does not define, are most often alternatives (a
tutorial's "scale on queue depth instead"), and a note says the check did not run on them.

An HPA of yours that has the very name of the HPA KServe (or KEDA) generates is reported as
well: the controller takes it over and overwrites its spec. HPAs that KEDA, KServe or Knative
created themselves (ownerReference or the ``scaledobject.keda.sh/name`` label) count through
their owner, and an HPA that a ScaledObject adopts is not a second claimant: the ScaledObject
names it in ``advanced.horizontalPodAutoscalerConfig.name`` and carries
``scaledobject.keda.sh/transfer-hpa-ownership: "true"``, or the HPA carries
``validations.keda.sh/hpa-ownership: "false"``, which KEDA's webhook honours by leaving it out
of its check (KEDA then updates that HPA as its own). Each of your
autoscalers in the group gets a finding at its ``scaleTargetRef`` naming all the others.

## Why is this bad?
Since Kubernetes 1.26 the HPA controller notices that several HPAs select the same pods, sets
``ScalingActive=False`` with reason ``AmbiguousSelector`` on all of them and stops scaling
(``pods by selector ... are controlled by multiple HPAs``). Before 1.26 they overwrote each
other's replica count every 15 seconds. Two HPAs are never needed to combine metrics: one HPA
with several ``metrics`` computes a proposal per metric and acts on the largest.

## Example
```yaml
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llm
  annotations:
    serving.kserve.io/deploymentMode: Standard   # autoscalerClass defaults to hpa
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm-gpu}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm-predictor}
```

## Use instead
```yaml
metadata:
  name: llm
  annotations:
    serving.kserve.io/deploymentMode: Standard
    serving.kserve.io/autoscalerClass: external   # KServe deletes its HPA; yours scales
```
For two HPAs of your own, keep one and list every metric in it. The unsafe fix does so: it
keeps the first HPA with every metric, the largest ``maxReplicas`` and, for each direction any
of them configures, behavior at least as cautious as each one's (the longest stabilization
window, and the policies of every HPA that sets rules for the direction under
``selectPolicy: Min``); it appends the others' metrics after the kept HPA's own, which stay as
written, and deletes the others (a file left with no document is deleted).

## References
- kubernetes/kubernetes PR #112011 (v1.26): AmbiguousSelector check in the HPA controller.
- Kubernetes HPA docs, "Scaling on multiple metrics": the largest proposal wins.
- kserve hpa_reconciler.go (HPA named after the component), keda_reconciler.go; KServe docs
  "Disable HPA in Raw Deployment" (``serving.kserve.io/autoscalerClass: external``).
- kedacore/keda controllers/keda/hpa.go (``keda-hpa-<name>``); kedacore/keda#4683, #5825;
  apis/keda/v1alpha1/scaledobject_webhook.go ``verifyHpas`` and scaledobject_types.go
  (``ValidationsHpaOwnershipAnnotation``, ``ScaledObjectTransferHpaOwnershipAnnotation``) at
  kedacore/keda@8b4f083.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from gpulint.ruleapi import (
    HPA,
    HPA_OWNERSHIP_VALIDATION,
    KSERVE_CLASS_ANNOTATION,
    RESOURCE_METRIC_TYPES,
    Autoscaler,
    Context,
    Finding,
    HpaMetric,
    Inventory,
    Manifest,
    PodLabels,
    Related,
    ScaledObject,
    Severity,
    TargetGroup,
    as_dict,
    as_list,
    dcgm_labels,
    edits,
    external_class_fix,
    is_dcgm_field,
    mentions,
    plain_data,
    prometheus_address,
    related,
    series_labels,
    yaml_text,
)

ID = "GL103"
NAME = "duplicate-autoscalers"
SEVERITY = Severity.ERROR
SCOPE = "target-group"
FIXES = ("unsafe",)
STAGES = ("autoscaler",)

HPA_KIND = "HorizontalPodAutoscaler"
# Where the triggers a fix writes query when the repository names no Prometheus of its own:
# the Service prometheus-operator makes for every Prometheus (kube-prometheus-stack's).
DEFAULT_ADDRESS = "http://prometheus-operated.monitoring.svc:9090"
# A group of thousands of autoscalers on one workload gets a finding per member, each naming
# this many of the others (and how many more), so that the report grows with the group, not
# with its square.
NAMED = 5
LINKED = 10
# With no metrics the API server gives an HPA CPU 80% utilization (autoscaling/v2 defaults.go).
DEFAULT_CPU_METRIC: dict[str, Any] = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}


def _describe(autoscaler: Autoscaler) -> str:
    name = autoscaler.manifest.name
    if autoscaler.kind == "KServe":
        if autoscaler.hpa_name.startswith("keda-hpa-"):
            return (
                f"the ScaledObject {autoscaler.target[2]} that KServe creates for "
                f"InferenceService {name} ({autoscaler.note}; KEDA's HPA {autoscaler.hpa_name})"
            )
        return (
            f"the HPA {autoscaler.hpa_name} that KServe creates for InferenceService {name} "
            f"({autoscaler.note})"
        )
    if autoscaler.kind == "ScaledObject":
        return f"KEDA ScaledObject {name} (HPA {autoscaler.hpa_name})"
    return f"HorizontalPodAutoscaler {name}"


def _namespace(autoscaler: Autoscaler, group: TargetGroup) -> str:
    return autoscaler.manifest.namespace or group.target[1]


def _identity(autoscaler: Autoscaler) -> tuple[str, str | None, str]:
    manifest = autoscaler.manifest
    return (autoscaler.kind, manifest.namespace, manifest.name)


class _Unit:
    """One HPA object in the cluster and everything that writes it: the controller that
    generates it (a ScaledObject, KServe) and HPAs of yours that carry its name."""

    def __init__(self) -> None:
        self.claims: list[Autoscaler] = []

    @property
    def controller(self) -> Autoscaler | None:
        """KServe's claim first (it also rewrites a ScaledObject of the same name), then KEDA's."""
        for kind in ("KServe", "ScaledObject"):
            for claim in self.claims:
                if claim.kind == kind:
                    return claim
        return None

    def describe(self) -> str:
        lead = self.controller or self.claims[0]
        return _describe(lead)


def check(group: TargetGroup, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    claims = _distinct(group.autoscalers)
    if not _target_in_input(claims, inventory):
        return
    adopted = {
        (_namespace(a, group), so.adopts_hpa)
        for a in claims
        if a.kind == "ScaledObject"
        and (so := _scaled_object(a.manifest, inventory)) is not None
        and so.adopts_hpa
    }
    # An HPA that opts out of KEDA's ownership check, named by a ScaledObject as its HPA:
    # KEDA admits the ScaledObject and takes that HPA over (scaledobject_webhook.go verifyHpas).
    named_by_keda = {(_namespace(a, group), a.hpa_name) for a in claims if a.kind == "ScaledObject"}
    adopted |= {
        (_namespace(a, group), a.manifest.name)
        for a in claims
        if a.kind == HPA_KIND
        # exactly "false": the webhook compares the string as written
        and a.manifest.annotations.get(HPA_OWNERSHIP_VALIDATION) == "false"
        and (_namespace(a, group), a.manifest.name) in named_by_keda
    }
    claims = [
        a
        for a in claims
        if not (a.kind == HPA_KIND and (_namespace(a, group), a.manifest.name) in adopted)
    ]
    units: dict[tuple[str, str], _Unit] = {}
    for autoscaler in claims:
        units.setdefault((_namespace(autoscaler, group), autoscaler.hpa_name), _Unit())
        units[(_namespace(autoscaler, group), autoscaler.hpa_name)].claims.append(autoscaler)
    order = list(units.values())
    # Worked out at the group's first finding, once for all of them (most groups have none).
    names: list[str] = []
    links: list[tuple[Autoscaler, Related]] = []
    fix: _Fix | None = None
    for index, unit in enumerate(order):
        for autoscaler in unit.claims:
            if autoscaler.implicit:
                continue
            taken_over = unit.controller is not None and unit.controller is not autoscaler
            if len(order) < 2 and not taken_over:
                continue
            if fix is None:
                names = [each.describe() for each in order]
                # The other end of each member's finding: LINKED of them, and one more to
                # skip itself.
                links = [(claim, _link(claim)) for claim in claims[: LINKED + 1]]
                fix = _Fix(
                    _group_fix(claims, inventory),
                    _group_plan(claims, inventory),
                    *_group_roles(claims, inventory),
                )
            yield _finding(group, ctx, autoscaler, unit, index, order, names, claims, links, fix)


def _target_in_input(claims: list[Autoscaler], inventory: Inventory) -> bool:
    """Is the workload the group claims in the input (or made by an object that is)?"""
    for claim in claims:
        if claim.implicit or claim.ref is None:
            return True  # a controller's own claim: its object is in the input
        resolved = inventory.resolve_target(claim.manifest.namespace, claim.ref, claim.manifest)
        if resolved.found:
            return True
    return False


def _distinct(autoscalers: list[Autoscaler]) -> list[Autoscaler]:
    """One claim per object: the same HPA written in two files is one object."""
    seen: set[tuple[str, str | None, str]] = set()
    found = []
    for autoscaler in autoscalers:
        identity = _identity(autoscaler)
        if autoscaler.implicit or identity not in seen:
            seen.add(identity)
            found.append(autoscaler)
    return found


def _describe_target(group: TargetGroup, claims: list[Autoscaler]) -> str:
    kind, namespace, name = group.target
    text = f"{kind} {namespace + '/' if namespace else ''}{name}"
    kserve = next((a for a in claims if a.kind == "KServe"), None)
    if kserve is not None:
        text += f" (generated by InferenceService {kserve.manifest.name})"
    return text


def _finding(
    group: TargetGroup,
    ctx: Context,
    autoscaler: Autoscaler,
    unit: _Unit,
    index: int,
    order: list[_Unit],
    names: list[str],
    claims: list[Autoscaler],
    links: list[tuple[Autoscaler, Related]],
    fix: _Fix,
) -> Finding:
    target = _describe_target(group, claims)
    parts = []
    controller = unit.controller
    both_keda = controller is not None and controller.kind == autoscaler.kind == "ScaledObject"
    if controller is not None and controller is not autoscaler and both_keda:
        parts.append(
            f"{_describe(autoscaler)} asks KEDA for the HPA name {autoscaler.hpa_name}, which "
            f"ScaledObject {controller.manifest.name} already uses. KEDA's webhook rejects it "
            "('the HPA is already managed by the ScaledObject'), and without the webhook the "
            f"two overwrite the same HPA, so neither reliably scales {target}."
        )
    elif controller is not None and controller is not autoscaler:
        generated = "ScaledObject" if autoscaler.kind == "ScaledObject" else "HPA"
        maker = (
            f"KServe creates for InferenceService {controller.manifest.name} ({controller.note})"
            if controller.kind == "KServe"
            else f"KEDA creates for ScaledObject {controller.manifest.name}"
        )
        own = (
            " (CPU 80% utilization unless the InferenceService sets scaleMetric and scaleTarget)"
            if controller.kind == "KServe" and generated == "HPA"
            else ""
        )
        parts.append(
            f"{_describe(autoscaler)} has the name of the {generated} {maker} in the same "
            f"namespace. The controller takes it over and overwrites its spec with its own{own}, "
            f"so what is written here never applies to {target}."
        )
    if len(order) > 1:
        others = [name for i, name in enumerate(names) if i != index][:NAMED]
        shown = [f"this {_describe(autoscaler)}", *others]
        more = len(order) - len(shown)
        listed = _join(shown) if not more else f"{', '.join(shown)} and {more:,} more"
        parts.append(
            f"{target} is scaled by {len(order):,} autoscalers. They are {listed}; Kubernetes "
            ">= 1.26 sets ScalingActive=False (AmbiguousSelector) on every HPA of it and none "
            "scales, older versions let them overwrite each other's replica count."
        )
    shown_links = [link for other, link in links if other is not autoscaler][:LINKED]
    return ctx.finding(
        autoscaler.manifest,
        autoscaler.path,
        " ".join(parts),
        fix.text,
        related=shown_links,
        plan=fix.plan,
        deletes=fix.dropped,
        writes=fix.kept,
        fix_at_path=False,
    )


def _link(claim: Autoscaler) -> Related:
    path = claim.path if not claim.implicit else _class_path(claim.manifest)
    return related(claim.manifest, path, _describe(claim))


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _class_path(isvc: Manifest) -> tuple[str, ...]:
    if KSERVE_CLASS_ANNOTATION in isvc.annotations:
        return ("metadata", "annotations", KSERVE_CLASS_ANNOTATION)
    return ("metadata", "annotations") if isvc.annotations else ("metadata",)


def _group_fix(claims: list[Autoscaler], inventory: Inventory) -> str:
    """One fix for the whole group, the same in each member's finding: what to keep, what
    to delete, and the merged autoscaler."""
    kserve = [a for a in claims if a.kind == "KServe"]
    if kserve:
        return _kserve_fix(claims, kserve)
    hpas, scaled = _members(claims, inventory)
    if not scaled:
        return _merged_hpa_fix(hpas)
    return _merged_scaled_object_fix(hpas, scaled, inventory)


class _Fix(NamedTuple):
    """The group's one fix, the same in each member's finding: its text, its edits, the
    objects it keeps and changes and those it deletes (so that it is printed once:
    gpulint.engine.fixes)."""

    text: str
    plan: edits.FixPlan | None
    kept: list[Manifest]
    dropped: list[Manifest]


def _members(
    claims: list[Autoscaler], inventory: Inventory
) -> tuple[list[HPA], list[ScaledObject]]:
    """The group's HPAs and ScaledObjects, the one to keep first: an HPA written in
    autoscaling/v2 before one that must be converted, one that reads a custom metric (a GPU's)
    before one on CPU alone, then by name; ScaledObjects by name. The same order however the
    objects are laid out (a file, a kustomize build), so that the same one is kept."""
    hpas = [h for a in claims if (h := _hpa(a.manifest, inventory)) is not None]
    scaled = [s for a in claims if (s := _scaled_object(a.manifest, inventory)) is not None]
    hpas.sort(key=lambda h: (h.version != "v2", not any(m.is_custom for m in h.metrics), h.name))
    scaled.sort(key=lambda s: s.name)
    return hpas, scaled


def _group_roles(
    claims: list[Autoscaler], inventory: Inventory
) -> tuple[list[Manifest], list[Manifest]]:
    """The objects ``_group_fix`` keeps and changes, and those it deletes."""
    kserve = [a for a in claims if a.kind == "KServe"]
    if kserve:
        # KServe's own autoscaler steps aside; a user's HPA of its name is renamed
        taken = {k.hpa_name for k in kserve}
        renamed = [c.manifest for c in claims if c.kind != "KServe" and c.manifest.name in taken]
        return [k.manifest for k in kserve] + renamed, []
    views, objects = _members(claims, inventory)
    hpas = [h.manifest for h in views]
    scaled = [s.manifest for s in objects]
    if scaled:
        return scaled[:1], hpas + scaled[1:]
    return hpas[:1], hpas[1:]


def _kserve_fix(claims: list[Autoscaler], kserve: list[Autoscaler]) -> str:
    """KServe's own autoscaler steps aside (and a user's HPA of the name it uses is renamed)."""
    isvc = kserve[0].manifest
    text = external_class_fix(isvc.name)
    taken = {k.hpa_name for k in kserve}
    for claim in claims:
        if claim.kind != "KServe" and claim.manifest.name in taken:
            text += (
                f"\n# and rename {_describe(claim)}, which has the name of KServe's own, "
                f"so that KServe does not take it over:\n# metadata:\n"
                f"#   name: {claim.manifest.name}-gpu"
            )
    return text


def _merged_hpa_fix(hpas: list[HPA]) -> str:
    """One HPA with every metric, the largest maxReplicas and the most cautious behavior."""
    keep = hpas[0] if hpas else None
    drop = [f"HorizontalPodAutoscaler {h.name}" for h in hpas if h is not keep]
    convert = "apiVersion: autoscaling/v2\n" if keep and keep.version != "v2" else ""
    spec: dict[str, Any] = {}
    largest = _largest_max_replicas(hpas)
    if keep is not None and largest is not None and largest != keep.max_replicas:
        spec["maxReplicas"] = largest
    spec["metrics"] = _merged_metrics(hpas)
    behavior = _strictest_behavior(hpas)
    if behavior:
        spec["behavior"] = behavior
    what = "every metric (it acts on the largest proposal)"
    if "maxReplicas" in spec:
        what += ", the largest maxReplicas"
    if behavior:
        what += ", the most cautious behavior of each direction"
    kept = f"HorizontalPodAutoscaler {keep.name}" if keep else "one HPA"
    return (
        f"# keep {kept} with {what} and delete {_capped(drop) or 'the others'}:\n"
        + convert
        + yaml_text({"spec": spec})
    )


def _merged_scaled_object_fix(
    hpas: list[HPA], scaled: list[ScaledObject], inventory: Inventory
) -> str:
    """One ScaledObject with every trigger, the HPAs' metrics as triggers among them."""
    keep_so = scaled[0]
    dropped = [f"HorizontalPodAutoscaler {h.name}" for h in hpas]
    dropped += [f"ScaledObject {s.name}" for s in scaled if s is not keep_so]
    triggers = _merged_triggers(scaled)
    seen = {_canonical(t) for t in triggers}
    unsure = False
    address = prometheus_address(inventory, keep_so.manifest) or DEFAULT_ADDRESS
    for hpa in hpas:
        for converted in _triggers_for(hpa, inventory, keep_so.namespace or "default", address):
            if converted.series is not None:
                if any(_queries_series(t, converted.series) for t in triggers):
                    continue  # the ScaledObject already scales on that series
                unsure = unsure or converted.unsure
            if _canonical(converted.trigger) not in seen:
                seen.add(_canonical(converted.trigger))
                triggers.append(converted.trigger)
    text = (
        f"# keep ScaledObject {keep_so.name} with every trigger (KEDA's HPA acts on the largest) "
        f"and delete {_capped(dropped) or 'the others'}:\n"
        + yaml_text({"spec": {"triggers": triggers}})
    )
    if unsure:
        text += (
            "\n# check the labels of each query: dcgm-exporter series scraped with "
            "honorLabels: false carry exported_namespace and exported_pod"
        )
    return text


def _merged_triggers(scaled: list[ScaledObject]) -> list[Any]:
    """The first ScaledObject's triggers, then the others' it does not have."""
    triggers: list[Any] = list(scaled[0].triggers)
    seen = {_canonical(t) for t in triggers}
    for other in scaled[1:]:
        for trigger in other.triggers:
            if _canonical(trigger) not in seen:
                seen.add(_canonical(trigger))
                triggers.append(trigger)
    return triggers


# Groups larger than this are merged by hand: the plan would delete that many documents.
MERGED_AT_MOST = 8


def _group_plan(claims: list[Autoscaler], inventory: Inventory) -> edits.FixPlan | None:
    """``_group_fix`` as edits: the kept autoscaler rewritten, the others' documents deleted.
    Unsafe: which autoscaler stays and how the merged one scales are the author's call."""
    if len(claims) > MERGED_AT_MOST:
        return None
    kserve = [a for a in claims if a.kind == "KServe"]
    if kserve:
        return _kserve_plan(claims, kserve)
    hpas, scaled = _members(claims, inventory)
    if len(hpas) + len(scaled) != len(claims) or not claims:
        return None
    if scaled and hpas:
        return None  # the HPAs' metrics become KEDA triggers: queries to check by hand
    ops: list[edits.Op] | None
    if scaled:
        ops = [_put(scaled[0].manifest, "triggers", _merged_triggers(scaled))]
        dropped = [s.manifest for s in scaled[1:]]
    else:
        ops = _merged_hpa_ops(hpas)
        dropped = [h.manifest for h in hpas[1:]]
    if ops is None:
        return None
    ops.extend(edits.DeleteDocument(manifest) for manifest in dropped)
    return edits.unsafe(*ops)


def _kserve_plan(claims: list[Autoscaler], kserve: list[Autoscaler]) -> edits.FixPlan | None:
    taken = {k.hpa_name for k in kserve}
    if any(c.kind != "KServe" and c.manifest.name in taken for c in claims):
        return None  # the user's HPA needs a new name too: by hand
    isvcs = list({id(k.manifest): k.manifest for k in kserve}.values())
    annotation = (("serving.kserve.io/autoscalerClass", "external"),)
    return edits.unsafe(
        *(edits.Insert(isvc, ("metadata", "annotations"), annotation) for isvc in isvcs)
    )


def _merged_hpa_ops(hpas: list[HPA]) -> list[edits.Op] | None:
    """The first HPA rewritten as ``_merged_hpa_fix`` says; None when its API version cannot
    simply be renamed to autoscaling/v2."""
    keep = hpas[0]
    ops: list[edits.Op] = []
    if keep.version != "v2":
        if keep.version not in ("v2beta2", "v2beta1"):
            return None
        ops.append(edits.Replace(keep.manifest, ("apiVersion",), "autoscaling/v2"))
    largest = _largest_max_replicas(hpas)
    if largest is not None and largest != keep.max_replicas:
        ops.append(_put(keep.manifest, "maxReplicas", largest))
    merged = _merged_metrics(hpas)
    own = as_list(keep.spec.get("metrics"))
    if keep.version == "v2" and own and merged[: len(own)] == plain_data(own):
        # the kept HPA's own metrics stay as written (comments, quoting); the others follow
        if len(merged) > len(own):
            ops.append(edits.Extend(keep.manifest, ("spec", "metrics"), tuple(merged[len(own) :])))
    else:
        ops.append(_put(keep.manifest, "metrics", merged))
    behavior = _strictest_behavior(hpas)
    own_behavior = as_dict(keep.spec.get("behavior"))
    if behavior and own_behavior:
        # a direction the kept HPA already sets as merged stays as written
        for direction, rules in behavior.items():
            if direction not in own_behavior:
                ops.append(edits.Insert(keep.manifest, ("spec", "behavior"), ((direction, rules),)))
            elif plain_data(own_behavior[direction]) != rules:
                ops.append(edits.Set(keep.manifest, ("spec", "behavior", direction), rules))
    elif behavior:
        ops.append(_put(keep.manifest, "behavior", behavior))
    return ops


def _put(manifest: Manifest, key: str, value: Any) -> edits.Op:
    """``spec.<key>`` set to ``value``: the entry rewritten, or added."""
    if key in as_dict(manifest.get(("spec",))):
        return edits.Set(manifest, ("spec", key), value)
    return edits.Insert(manifest, ("spec",), ((key, value),))


def _capped(names: list[str]) -> str:
    if len(names) <= NAMED + 1:
        return _join(names) if names else ""
    return f"{', '.join(names[:NAMED])} and {len(names) - NAMED:,} more"


def _canonical(value: Any) -> str:
    import json

    return json.dumps(plain_data(value), sort_keys=True, default=str)


def _largest_max_replicas(hpas: list[HPA]) -> int | None:
    values = [h.max_replicas for h in hpas if isinstance(h.max_replicas, int)]
    return max(values) if values else None


# Kubernetes' behavior where an HPA sets none for a direction (HPA docs, "Default Behavior";
# pkg/apis/autoscaling/v2/defaults.go): up at once, by 4 pods or 100% per 15 s, the larger;
# down after 300 s, by 100% per 15 s.
DEFAULT_BEHAVIOR: dict[str, dict[str, Any]] = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ],
        "selectPolicy": "Max",
    },
    "scaleDown": {
        "stabilizationWindowSeconds": 300,
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        "selectPolicy": "Max",
    },
}


def _strictest_behavior(hpas: list[HPA]) -> dict[str, Any]:
    """For each direction some HPA sets, rules at least as cautious as each HPA's: the longest
    stabilization window, and the policies of every HPA that sets rules for the direction (the
    defaults where its rules list none) under ``selectPolicy: Min``, so that the smallest
    change any of them allows wins; ``Disabled`` when one of them disables the direction."""
    found: dict[str, Any] = {}
    for direction, default in DEFAULT_BEHAVIOR.items():
        set_rules = [as_dict(as_dict(h.spec.get("behavior")).get(direction)) for h in hpas]
        if not any(set_rules):
            continue
        window, policies, disabled = 0, [], False
        for own in set_rules:
            rules = {**default, **plain_data(own)}
            seconds = rules["stabilizationWindowSeconds"]
            if isinstance(seconds, int) and not isinstance(seconds, bool):
                window = max(window, seconds)
            if not own:
                # Kubernetes' default policies are the fastest: under Min they change nothing
                continue
            disabled = disabled or rules.get("selectPolicy") == "Disabled"
            for policy in as_list(rules.get("policies")) or default["policies"]:
                if policy not in policies:
                    policies.append(policy)
        written = [plain_data(own) for own in set_rules if own]
        same = all(rules == written[0] for rules in written)
        if same and {**default, **written[0]}["stabilizationWindowSeconds"] == window:
            found[direction] = written[0]  # one HPA's rules, or the same in each: kept as is
            continue
        merged: dict[str, Any] = {"stabilizationWindowSeconds": window}
        if disabled:
            merged["selectPolicy"] = "Disabled"
        else:
            merged["policies"] = policies
            if len(policies) > 1:
                merged["selectPolicy"] = "Min"
        found[direction] = merged
    return found


def _merged_metrics(hpas: list[HPA]) -> list[Any]:
    merged: list[Any] = []
    seen: set[str] = set()
    for hpa in hpas:
        entries = hpa.metrics_in_v2() or ([DEFAULT_CPU_METRIC] if hpa.defaults_to_cpu else [])
        for entry in entries:
            key = _canonical(entry)
            if key not in seen:
                seen.add(key)
                merged.append(entry)
    return merged


class _Converted(NamedTuple):
    """A KEDA trigger standing for an HPA metric: the Prometheus series its query reads (None
    for cpu and memory), and whether its labels are gpulint's guess (a dcgm-exporter series
    whose scrape the repository does not show)."""

    trigger: dict[str, Any]
    series: str | None = None
    unsure: bool = False


def _triggers_for(hpa: HPA, inventory: Inventory, namespace: str, address: str) -> list[_Converted]:
    """KEDA triggers that stand for an HPA's metrics, querying ``address``."""
    triggers: list[_Converted] = []
    if hpa.defaults_to_cpu:
        cpu = {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "80"}}
        triggers.append(_Converted(cpu))
    for metric in hpa.metrics:
        target = metric.target
        if metric.type in RESOURCE_METRIC_TYPES and metric.name in ("cpu", "memory") and target:
            if target.average_utilization is not None:
                kind, value = "Utilization", target.average_utilization
            else:
                kind, value = "AverageValue", target.average_value
            trigger: dict[str, Any] = {
                "type": metric.name,
                "metricType": kind,
                "metadata": {"value": str(value)},
            }
            if metric.type == "ContainerResource":
                entry = as_dict(as_list(hpa.spec.get("metrics"))[metric.index])
                name = as_dict(entry.get("containerResource")).get("container")
                if isinstance(name, str):
                    trigger["metadata"]["containerName"] = name
            triggers.append(_Converted(trigger))
        elif metric.is_custom and metric.name:
            per_pod = target is None or target.value is None or metric.type == "Pods"
            threshold = (target.average_value if per_pod else target.value) if target else None
            query, series, unsure = _query_for(hpa, metric, inventory, namespace)
            converted: dict[str, Any] = {"type": "prometheus"}
            if not per_pod:
                converted["metricType"] = "Value"  # KEDA's default is AverageValue (per pod)
            converted["metadata"] = {
                "serverAddress": address,
                "query": query,
                "threshold": str(threshold if threshold is not None else 1),
            }
            triggers.append(_Converted(converted, series, unsure))
    return triggers


def _query_for(
    hpa: HPA, metric: HpaMetric, inventory: Inventory, namespace: str
) -> tuple[str, str, bool]:
    """The query that reads what the adapter serves the HPA: the series behind the metric's
    name, summed over the HPA's namespace (and over its target's pods, for a Pods metric), with
    the labels the adapter's rule maps to them; whether those labels are a guess."""
    name = metric.name or ""
    series = inventory.series_behind(name, metric.api, hpa.manifest) or name
    rule = next(iter(inventory.rules_exposing(name, metric.api, hpa.manifest)), None)
    labels = series_labels(rule) if rule is not None else None
    unsure = False
    if is_dcgm_field(series):
        found = dcgm_labels(inventory, hpa.manifest)
        if found is not None:
            labels = found
        elif labels is None:
            labels, unsure = PodLabels("exported_namespace", "exported_pod"), True
    if labels is None:
        labels = PodLabels("namespace", "pod")
    matchers = f'{labels.namespace}="{hpa.namespace or namespace}"'
    if metric.type == "Pods" and labels.pod is not None and hpa.target_ref is not None:
        matchers += f',{labels.pod}=~"{hpa.target_ref.name}-.*"'
    return f"sum({series}{{{matchers}}})", series, unsure


def _queries_series(trigger: Any, series: str) -> bool:
    """A trigger whose query already reads ``series``."""
    query = as_dict(as_dict(trigger).get("metadata")).get("query")
    return isinstance(query, str) and mentions(query, series)


def _hpa(manifest: Manifest, inventory: Inventory) -> HPA | None:
    view = inventory.view_of(manifest)
    return view if isinstance(view, HPA) else None


def _scaled_object(manifest: Manifest, inventory: Inventory) -> ScaledObject | None:
    view = inventory.view_of(manifest)
    return view if isinstance(view, ScaledObject) else None
