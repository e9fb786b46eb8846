"""Who sets a workload's replicas: autoscaler claims, grouped by the workload they claim.

An HPA claims its scaleTargetRef; a KEDA ScaledObject claims its target through the HPA KEDA
makes; an InferenceService in Standard mode with autoscaler class ``hpa`` or ``keda`` claims
the Deployment KServe generates for each component. Claims are kept per source object, so
that an object coming or going costs only its own claims.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from gpulint.input.document import Manifest, Path
from gpulint.inventory.store import Key, ObjectStore, key_of
from gpulint.inventory.targets import TargetResolver
from gpulint.kinds.knative import revision_deployment_parent
from gpulint.kinds.registry import KINDS, spec_for
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef
from gpulint.kinds.view import KindView

# The rule scopes of kinds that can claim replicas (a claim rank in the registry).
CLAIMING_SCOPES: tuple[str, ...] = tuple(
    dict.fromkeys(s.scope for s in KINDS if s.scope and s.claim_rank is not None)
)


class Autoscaler:
    """Something that sets the replicas of a workload through an HPA."""

    __slots__ = (
        "description",
        "hpa_name",
        "implicit",
        "kind",
        "manifest",
        "note",
        "path",
        "rank",
        "ref",
        "target",
    )

    def __init__(
        self,
        kind: str,
        manifest: Manifest,
        path: Path,
        target: Key,
        hpa_name: str,
        implicit: bool = False,
        note: str = "",
        ref: TargetRef | None = None,
        description: str = "",
    ) -> None:
        self.kind = kind
        self.manifest = manifest
        self.path = path
        self.target = target
        self.hpa_name = hpa_name
        self.implicit = implicit
        self.note = note
        self.ref = ref  # the scaleTargetRef as written (None for KServe's own)
        self.description = description or f"{kind} {manifest.name}"
        spec = spec_for(manifest)
        # Explicit HPAs first, then ScaledObjects, then the HPA a controller makes.
        self.rank = spec.claim_rank if spec is not None and spec.claim_rank is not None else 2

    def __repr__(self) -> str:
        return f"Autoscaler(kind={self.kind!r}, manifest={self.manifest!r})"

    def describe(self) -> str:
        return self.description


class TargetGroup:
    """All autoscalers that claim one workload."""

    __slots__ = ("autoscalers", "target")

    def __init__(self, target: Key, autoscalers: list[Autoscaler]) -> None:
        self.target = target
        self.autoscalers = autoscalers

    def __repr__(self) -> str:
        return f"TargetGroup(target={self.target!r}, autoscalers={self.autoscalers!r})"


def claims_of_view(view: KindView, resolver: TargetResolver) -> Iterator[Autoscaler]:
    """The claims one view makes, with their targets resolved."""
    for claim in view.replica_claims():
        yield Autoscaler(
            claim.kind,
            view.manifest,
            claim.path,
            _target(view, claim, resolver),
            claim.hpa_name,
            implicit=claim.implicit,
            note=claim.note,
            ref=claim.ref,
            description=claim.description,
        )


def _target(view: KindView, claim: ReplicaClaim, resolver: TargetResolver) -> Key:
    if claim.ref is not None:
        return resolver.resolve(view.namespace, claim.ref, view.manifest).key
    return key_of("Deployment", view.namespace, claim.workload or "")


def _claims_replicas(view: KindView) -> bool:
    spec = spec_for(view.manifest)
    return spec is not None and spec.claim_rank is not None


def _identity(claim: Autoscaler) -> tuple[str, str, str, Key]:
    return (claim.kind, claim.manifest.namespace or "", claim.manifest.name, claim.target)


class Claims:
    """Claims by source object and the target groups they form, built on first use."""

    def __init__(self, store: ObjectStore, resolver: TargetResolver) -> None:
        self.store = store
        self.resolver = resolver
        self._claims: dict[int, list[Autoscaler]] | None = None  # by id(source manifest)
        self._raw_groups: dict[Key, TargetGroup] = {}
        self._identities: dict[tuple[str, str, str, Key], list[Autoscaler]] = {}
        self._unnamespaced_groups = 0
        self._floating: set[int] = set()  # claims whose target depends on other objects
        self._revision_groups: dict[tuple[str, str], dict[Key, None]] = {}
        self._groups: dict[Key, TargetGroup] | None = None
        # Views of kinds that claim no replicas, by the (kind, name) their target refs name.
        self._targeting: dict[tuple[str, str], dict[int, KindView]] = {}

    @property
    def built(self) -> bool:
        return self._claims is not None

    def claiming_views(self) -> list[KindView]:
        views: list[KindView] = []
        for scope in CLAIMING_SCOPES:
            views.extend(self.store.scoped[scope].items)
        return views

    def all(self) -> Iterator[Autoscaler]:
        for view in self.claiming_views():
            yield from claims_of_view(view, self.resolver)

    def index(self) -> dict[int, list[Autoscaler]]:
        if self._claims is None:
            self._claims = {}
            self._raw_groups = {}
            self._identities = {}
            self._revision_groups = {}
            self._unnamespaced_groups = 0
            self._floating = set()
            for view in self.claiming_views():
                self.set(view)
        return self._claims

    def set(self, view: KindView) -> None:
        assert self._claims is not None
        claims = list(claims_of_view(view, self.resolver))
        self._claims[id(view.manifest)] = claims
        if any(claim.ref is not None for claim in claims) and view.namespace is None:
            # resolve_target matches an unnamespaced reference against what else is loaded
            self._floating.add(id(view.manifest))
        for claim in claims:
            self._join_group(claim)

    def drop(self, manifest: Manifest) -> None:
        if self._claims is None:
            return
        for claim in self._claims.pop(id(manifest), []):
            self._leave_group(claim)
        self._floating.discard(id(manifest))

    def view_added(self, view: KindView) -> None:
        if _claims_replicas(view):
            if self._claims is not None:
                self.set(view)
            return
        for ref in view.target_refs():
            self._targeting.setdefault((ref.kind, ref.name), {})[id(view.manifest)] = view

    def view_removed(self, view: KindView) -> None:
        self.drop(view.manifest)
        for ref in view.target_refs():
            views = self._targeting.get((ref.kind, ref.name), {})
            views.pop(id(view.manifest), None)
            if not views:
                self._targeting.pop((ref.kind, ref.name), None)

    def targeting(self, target: Key) -> list[KindView]:
        """Views of kinds that claim no replicas whose target refs resolve to ``target``."""
        kind, _, name = target
        found = []
        for view in self._targeting.get((kind, name), {}).values():
            for ref in view.target_refs():
                if self.resolver.resolve(view.namespace, ref, view.manifest).key == target:
                    found.append(view)
                    break
        return found

    def refresh_floating(self) -> None:
        """Claims written without a namespace resolve against what else is loaded."""
        for source in list(self._floating):
            view = self.store.views.get(source)
            if view is not None:
                self.drop(view.manifest)
                self.set(view)

    def has_floating(self) -> bool:
        return bool(self._floating)

    def reset_kserve(self) -> None:
        """Which InferenceServices get KServe's own HPA depends on the default mode."""
        if self._claims is None:
            return
        for isvc in self.store.scoped["isvc"].items:
            self.drop(isvc.manifest)
            self.set(isvc)

    def _join_group(self, claim: Autoscaler) -> None:
        same = self._identities.setdefault(_identity(claim), [])
        same.append(claim)
        if len(same) == 1:
            self._show_claim(claim)

    def _leave_group(self, claim: Autoscaler) -> None:
        identity = _identity(claim)
        same = self._identities.get(identity, [])
        shown = bool(same) and same[0] is claim
        same[:] = [c for c in same if c is not claim]
        if not same:
            self._identities.pop(identity, None)
        if shown:
            self._hide_claim(claim)
            if same:
                self._show_claim(same[0])

    def _show_claim(self, claim: Autoscaler) -> None:
        group = self._raw_groups.get(claim.target)
        if group is None:
            group = self._raw_groups[claim.target] = TargetGroup(claim.target, [])
            kind, namespace, name = claim.target
            if not namespace:
                self._unnamespaced_groups += 1
            parent = revision_deployment_parent(name) if kind == "Deployment" else None
            if parent is not None:
                self._revision_groups.setdefault((namespace, parent), {})[claim.target] = None
        # In rank order; within a rank, in the order they were added.
        items = group.autoscalers
        index = len(items)
        while index and items[index - 1].rank > claim.rank:
            index -= 1
        items.insert(index, claim)
        self._groups = None

    def _hide_claim(self, claim: Autoscaler) -> None:
        group = self._raw_groups.get(claim.target)
        if group is None:
            return
        group.autoscalers[:] = [c for c in group.autoscalers if c is not claim]
        if not group.autoscalers:
            del self._raw_groups[claim.target]
            kind, namespace, name = claim.target
            if not namespace:
                self._unnamespaced_groups -= 1
            parent = revision_deployment_parent(name) if kind == "Deployment" else None
            keys = self._revision_groups.get((namespace, parent or ""))
            if keys is not None:
                keys.pop(claim.target, None)
                if not keys:
                    del self._revision_groups[(namespace, parent or "")]
        self._groups = None

    def changed(self) -> None:
        self._groups = None

    def target_groups(self) -> dict[Key, TargetGroup]:
        """The autoscalers of each workload. The same autoscaler written in several files
        (one directory per environment) is one autoscaler in any cluster, not two."""
        if self._groups is None:
            self.index()
            self._groups = (
                _merge_unnamespaced(self._raw_groups)
                if self._unnamespaced_groups
                else self._raw_groups
            )
        return self._groups

    def claims_of(self, manifest: Manifest) -> list[Autoscaler]:
        return list(self.index().get(id(manifest), []))

    def revision_groups(self, namespace: str | None, configuration: str) -> list[TargetGroup]:
        groups = self.target_groups()
        keys = self._revision_groups.get((namespace or "", configuration), {})
        return [groups[key] for key in keys if key in groups]


def _merge_unnamespaced(groups: dict[Key, TargetGroup]) -> dict[Key, TargetGroup]:
    """Join claims written without a namespace to the one namespaced group of the same
    workload, as ``find`` matches objects (the namespace is left to ``kubectl -n``)."""
    namespaced: dict[tuple[str, str], list[Key]] = defaultdict(list)
    for kind, namespace, name in groups:
        if namespace:
            namespaced[(kind, name)].append((kind, namespace, name))
    merged: dict[Key, TargetGroup] = {}
    for key, group in groups.items():
        kind, namespace, name = key
        candidates = namespaced.get((kind, name), []) if not namespace else []
        if len(candidates) == 1:
            merged.setdefault(candidates[0], TargetGroup(candidates[0], []))
            merged[candidates[0]].autoscalers.extend(group.autoscalers)
        else:
            merged.setdefault(key, TargetGroup(key, []))
            merged[key].autoscalers.extend(group.autoscalers)
    return merged
