"""What one object touches: the items each rule scope must re-check when it changes.

An admission request brings one object; the cluster inventory around it may hold thousands.
``related_items`` picks, for every scope the engine runs, only the items that can produce a
finding about that object: its own views, the autoscalers that claim the same workload (a
Deployment that gains GPUs under a CPU-only HPA is caught from the Deployment's side), the
InferenceService components and Knative revisions it generates and the HPAs on them, for
a prometheus-adapter ConfigMap its rules and the HPAs whose metrics go through them, and for
a DRA ResourceClaimTemplate or ResourceClaim what the objects whose pods name it relate to
(a template for a GPU device class makes a CPU-only HPA on them wrong). The cost follows the
number of related objects, not the size of the cluster.

``Focus.concerns`` then keeps the findings about the object itself or naming it as a related
object: a problem of a neighbour that the object has no part in is not its author's to fix.
"""

from __future__ import annotations

from typing import Any

from gpulint.chain.adapter import AdapterConfig, AdapterRule, requested_metric_name
from gpulint.core.model import Finding, ObjectRef
from gpulint.engine.rule import SCOPES
from gpulint.engine.scopes import PodOwner, pod_owner
from gpulint.input.document import Manifest, as_dict
from gpulint.inventory import Inventory, Key, TargetGroup, key_of
from gpulint.kinds.classify import classify_manifest
from gpulint.kinds.dra import is_device_claim
from gpulint.kinds.kserve import default_mode_from_configmap
from gpulint.kinds.registry import build_view, spec_for
from gpulint.kinds.view import KindView

KSERVE_CONFIGMAP = "inferenceservice-config"
# HPAs that read one metric the same way get the same answer from the adapter: a change of
# an adapter rule is checked on this many of them (per metric type and described kind).
READERS_PER_METRIC = 3
# InferenceServices checked when the cluster's default deployment mode changes.
DEFAULT_MODE_SAMPLE = 20


class Focus:
    """``items_for`` for ``engine.run``: the related items of each scope.

    ``manifests`` are the objects whose unused suppressions are reported (the subject only).
    """

    __slots__ = ("files", "items", "manifests", "refs")

    def __init__(
        self,
        items: dict[str, list[Any]],
        manifests: list[Manifest],
        files: set[str],
        refs: set[tuple[str, str, str | None, str]],
    ) -> None:
        self.items = items
        self.manifests = manifests
        self.files = files
        self.refs = refs

    def __repr__(self) -> str:
        counts = {scope: len(items) for scope, items in self.items.items() if items}
        return f"Focus({counts})"

    def __call__(self, scope: str) -> list[Any]:
        return self.items.get(scope, [])

    def count(self) -> int:
        """How many items the rules will be handed, over all scopes."""
        return sum(len(items) for items in self.items.values())

    def select(self, findings: list[Finding]) -> list[Finding]:
        """The findings to report about the subject: its own, and those on related objects
        that name it, except where the subject already has a finding of that rule (a
        conflict between two objects is reported on both; the subject's side says it)."""
        own = [f for f in findings if f.location.file in self.files]
        rules = {f.rule for f in own}
        return [
            f
            for f in findings
            if f.location.file in self.files or (f.rule not in rules and self.concerns(f))
        ]

    def concerns(self, finding: Finding) -> bool:
        """A finding located in the subject, or naming it as a related object."""
        if finding.location.file in self.files or _ref_key(finding.object) in self.refs:
            return True
        return any(
            (related.location is not None and related.location.file in self.files)
            or _ref_key(related.ref) in self.refs
            for related in finding.related
        )


def _ref_key(ref: ObjectRef | None) -> tuple[str, str, str | None, str] | None:
    return None if ref is None else (ref.group, ref.kind, ref.namespace, ref.name)


class _Collector:
    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self.items: dict[str, dict[int, Any]] = {scope: {} for scope in SCOPES}

    def add(self, scope: str, item: Any) -> None:
        if item is not None:
            self.items[scope].setdefault(id(item), item)

    def add_view(self, view: KindView | None) -> None:
        spec = spec_for(view.manifest) if view is not None else None
        if view is not None and spec is not None and spec.scope is not None:
            self.add(spec.scope, view)
            for scope, item in view.scope_items():
                self.add(scope, item)

    def add_group(self, group: TargetGroup | None) -> None:
        """A workload's target group and every autoscaler in it."""
        if group is None:
            return
        self.add("target-group", group)
        for autoscaler in group.autoscalers:
            if not autoscaler.implicit:
                self.add_view(self.inventory.view_of(autoscaler.manifest))
        self.add_targeting(group.target)

    def add_groups_of(self, key: Key) -> None:
        self.add_group(self.inventory.target_groups().get(key))
        self.add_targeting(key)

    def add_targeting(self, key: Key) -> None:
        """Objects that act on the workload without setting its replicas."""
        for view in self.inventory.views_targeting(key):
            self.add_view(view)

    def add_generated(self, namespace: str | None, name: str) -> None:
        """The groups of what a controller names ``name``: the Deployment KServe makes for a
        component in Standard mode (and its pre-0.11 ``-default`` form) and the revision
        Deployments Knative makes for a Service or Configuration."""
        for candidate in (name, f"{name}-default"):
            self.add_groups_of(key_of("Deployment", namespace, candidate))
            for group in self.inventory.revision_groups(namespace, candidate):
                self.add_group(group)

    def add_adapter_rules(self, rules: list[AdapterRule]) -> None:
        for rule in rules:
            self.add("adapter-rule", rule)
            self.add("prometheus-query", rule)

    def add_readers(self, rules: list[AdapterRule]) -> None:
        """HPAs that read a metric one of ``rules`` can expose: a few of each way of reading
        it (metric type and described object), since the adapter answers those alike."""
        if not rules:
            return
        for api, name in self.inventory.metrics_read():
            wanted = requested_metric_name(name, api)
            if not any(_serves(rule, api) and rule.could_expose(wanted) for rule in rules):
                continue
            taken: dict[tuple[str, Any], int] = {}
            for hpa in self.inventory.readers_of(api, name):
                ways = {
                    (m.type, as_dict(m.described_object).get("kind"))
                    for m in hpa.adapter_reads()
                    if m.api == api and m.name == name
                }
                if any(taken.get(way, 0) < READERS_PER_METRIC for way in ways):
                    self.add("metrics-reader", hpa)
                    spec = spec_for(hpa.manifest)
                    if spec is not None and spec.scope == "hpa":
                        self.add("hpa", hpa)
                    for way in ways:
                        taken[way] = taken.get(way, 0) + 1

    def focus(self, subject: Manifest | None, previous: Manifest | None) -> Focus:
        items = {scope: list(found.values()) for scope, found in self.items.items()}
        items["inventory"] = [self.inventory]
        manifests = [subject] if subject is not None else []
        files = {m.file for m in (subject, previous) if m is not None}
        refs = {
            (m.group, m.kind, m.namespace, m.name) for m in (subject, previous) if m is not None
        }
        return Focus(items, manifests, files, refs)


def _serves(rule: AdapterRule, api: str) -> bool:
    return (rule.kind == "external") == (api == "external")


def related_items(
    inventory: Inventory, manifest: Manifest | None, previous: Manifest | None = None
) -> Focus:
    """The items of each scope that relate to ``manifest``, an object of ``inventory``.

    ``previous`` is the version the object replaces (an update) or the object that was taken
    out (a deletion, with ``manifest`` None): what related to it is looked at too, so that an
    adapter rule removed from a ConfigMap brings in the HPAs that read through it.
    """
    collector = _Collector(inventory)
    subject = manifest if manifest is not None else previous
    if subject is not None and subject.kind == "ConfigMap":
        _collect_configmap(collector, inventory, manifest, previous)
    elif subject is not None and is_device_claim(subject):
        # Findings name the claim they come through (rule.claim_links): those are kept.
        for user in inventory.device_claim_users(subject):
            _collect(collector, inventory, user, member=True)
    elif manifest is not None:
        _collect(collector, inventory, manifest, member=True)
    elif previous is not None:
        _collect(collector, inventory, previous, member=False)
    return collector.focus(manifest, previous)


def _collect(collector: _Collector, inventory: Inventory, subject: Manifest, member: bool) -> None:
    """What an object relates to, read through its view's protocol: the workloads it claims
    (their target groups), the adapter rules its metrics go through, and what a controller
    generates for it; an object without a view, the groups of the workload it is."""
    view = inventory.view_of(subject) if member else _standalone_view(inventory, subject)
    if member:
        collector.add_view(view)
        if subject.kind != "ConfigMap":
            collector.add("pod-owner", pod_owner(subject, view))
    if view is None:
        collector.add_groups_of(key_of(subject.kind, subject.namespace, subject.name))
        return
    for target in _claimed_targets(inventory, view, member):
        collector.add_group(_group_with(inventory, target, subject))
        collector.add_targeting(target)
    for name, api in view.adapter_metrics():
        collector.add_adapter_rules(inventory.rules_exposing(name, api, subject))
    for name in view.generated_names():
        collector.add_generated(subject.namespace, name)


def _claimed_targets(inventory: Inventory, view: KindView, member: bool) -> list[Key]:
    """The workloads an object's scaleTargetRefs name (what a controller makes for it is
    followed by name, ``add_generated``); for a kind that claims no replicas, those its
    target refs name."""
    spec = spec_for(view.manifest)
    if spec is None or spec.claim_rank is None:
        refs = view.target_refs()
    elif member:
        return [c.target for c in inventory.claims_of(view.manifest) if c.ref is not None]
    else:
        refs = [claim.ref for claim in view.replica_claims() if claim.ref is not None]
    return [inventory.resolve_target(view.namespace, ref, view.manifest).key for ref in refs]


def _collect_configmap(
    collector: _Collector,
    inventory: Inventory,
    configmap: Manifest | None,
    previous: Manifest | None,
) -> None:
    """An adapter ConfigMap: its configs and rules, and the HPAs reading through the rules
    that changed. KServe's inferenceservice-config: when the default deployment mode changes,
    the InferenceServices that do not name their own mode."""
    configs = inventory.adapter_configs_of(configmap) if configmap is not None else []
    for config in configs:
        collector.add("adapter-config", config)
        collector.add_adapter_rules(list(config.all_rules()))
    before = _configs_of(previous) if previous is not None else []
    collector.add_readers(_changed_rules(before, configs))
    subject = configmap if configmap is not None else previous
    if subject is None or subject.name != KSERVE_CONFIGMAP:
        return
    modes = {
        default_mode_from_configmap(m) if m is not None else None for m in (configmap, previous)
    }
    if len(modes) == 1:
        return  # the default mode stays what it was
    found = 0
    for isvc in inventory.inference_services:
        if isvc.mode_is_explicit:
            continue
        collector.add("isvc", isvc)
        collector.add("pod-owner", PodOwner(isvc.manifest, isvc.pod_templates()))
        for component in isvc.components:
            collector.add_generated(isvc.namespace, isvc.component_name(component.name))
        found += 1
        if found == DEFAULT_MODE_SAMPLE:
            break


def _changed_rules(before: list[AdapterConfig], after: list[AdapterConfig]) -> list[AdapterRule]:
    """Rules added, removed or changed between two versions of a ConfigMap's configs."""
    old = [rule for config in before for rule in config.all_rules()]
    new = [rule for config in after for rule in config.all_rules()]
    old_data = [(rule.kind, rule.data) for rule in old]
    new_data = [(rule.kind, rule.data) for rule in new]
    return [r for r in new if (r.kind, r.data) not in old_data] + [
        r for r in old if (r.kind, r.data) not in new_data
    ]


def _standalone_view(inventory: Inventory, manifest: Manifest) -> KindView | None:
    """A view of an object that is not (or no longer) in the inventory."""
    return build_view(manifest, inventory.view_context())


def _configs_of(configmap: Manifest) -> list[AdapterConfig]:
    return classify_manifest(configmap).adapter_configs


def _group_with(inventory: Inventory, target: Key, subject: Manifest) -> TargetGroup | None:
    groups = inventory.target_groups()
    group = groups.get(target)
    if group is not None or target[1]:
        return group
    # An autoscaler written without a namespace joins the one namespaced group of its
    # workload (inventory.claims._merge_unnamespaced); only objects from files lack a namespace.
    for candidate in groups.values():
        if any(a.manifest is subject for a in candidate.autoscalers):
            return candidate
    return None
