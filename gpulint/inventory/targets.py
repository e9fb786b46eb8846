"""What a scaleTargetRef points at: the object itself, or what a controller generates.

An autoscaler names a Deployment; that Deployment may be written out, or be the one KServe
makes for an InferenceService component (``<isvc>-predictor``, before 0.11
``<isvc>-predictor-default``), or a Knative revision's (``<service>-00001-deployment``).
``TargetResolver`` follows all of these to the pod templates behind the name.
"""

from __future__ import annotations

from gpulint.input.document import Document, Manifest
from gpulint.inventory.store import Key, ObjectStore, key_of
from gpulint.kinds.knative import (
    KNATIVE_SERVING_GROUP,
    KnativeService,
    is_knative_service,
    revision_deployment_parent,
)
from gpulint.kinds.kserve import Component, InferenceService
from gpulint.kinds.scaletarget import TargetRef
from gpulint.kinds.view import KindView
from gpulint.kinds.workload import GpuNames, GpuRequest, PodTemplate, pod_templates


class ResolvedTarget:
    """What a scaleTargetRef points at, as far as the input tells."""

    __slots__ = ("key", "manifest", "owner", "ref", "template_document", "templates", "via")

    def __init__(
        self,
        key: Key,
        ref: TargetRef,
        manifest: Manifest | None = None,
        owner: Manifest | None = None,
        templates: list[PodTemplate] | None = None,
        template_document: Document | None = None,
        via: str = "unknown",
    ) -> None:
        self.key = key
        self.ref = ref
        self.manifest = manifest
        self.owner = owner  # the InferenceService / Knative Service that generates it
        self.templates: list[PodTemplate] = [] if templates is None else templates
        self.template_document = template_document
        self.via = via  # object | kserve | kserve-legacy | knative-revision | kserve-knative

    def __repr__(self) -> str:
        return f"ResolvedTarget(key={self.key!r}, ref={self.ref!r})"

    @property
    def found(self) -> bool:
        return self.manifest is not None or self.owner is not None

    def gpu_requests(self, names: GpuNames) -> list[GpuRequest]:
        return [r for t in self.templates for r in t.gpu_requests(names)]

    def describe(self) -> str:
        kind, namespace, name = self.key
        where = f"{namespace}/" if namespace else ""
        return f"{kind} {where}{name}"


class TargetResolver:
    """Resolves scaleTargetRefs over a store; answers are kept until an object comes or goes."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._resolved: dict[tuple[str | None, TargetRef, str | None], ResolvedTarget] = {}
        self._by_component: dict[tuple[str, str], list[tuple[InferenceService, str]]] | None = None
        self._components_by_name: dict[str, dict[tuple[str, str], None]] = {}

    def changed(self) -> None:
        """An object came or went: earlier answers may be wrong now."""
        self._resolved.clear()

    # InferenceService components by the name KServe gives what it generates for them.

    def _component_index(self) -> dict[tuple[str, str], list[tuple[InferenceService, str]]]:
        if self._by_component is None:
            self._by_component = {}
            self._components_by_name = {}
            for isvc in self.store.scoped["isvc"].items:
                self.index_components(isvc)
        return self._by_component

    def view_added(self, view: KindView) -> None:
        if isinstance(view, InferenceService):  # components are found by the names KServe gives
            self.index_components(view)

    def view_removed(self, view: KindView) -> None:
        if isinstance(view, InferenceService):
            self.unindex_components(view)

    def inference_service(self, manifest: Manifest) -> InferenceService | None:
        view = self.store.view_of(manifest)
        return view if isinstance(view, InferenceService) else None

    def index_components(self, isvc: InferenceService) -> None:
        if self._by_component is None:
            return  # built on first use
        for component in isvc.components:
            name = isvc.component_name(component.name)
            key = (isvc.namespace or "", name)
            self._by_component.setdefault(key, []).append((isvc, component.name))
            self._components_by_name.setdefault(name, {})[key] = None

    def unindex_components(self, isvc: InferenceService) -> None:
        if self._by_component is None:
            return
        for component in isvc.components:
            name = isvc.component_name(component.name)
            key = (isvc.namespace or "", name)
            entries = [e for e in self._by_component.get(key, []) if e[0] is not isvc]
            if entries:
                self._by_component[key] = entries
                continue
            self._by_component.pop(key, None)
            keys = self._components_by_name.get(name)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._components_by_name[name]

    def isvc_for_component(
        self, namespace: str | None, name: str
    ) -> tuple[InferenceService, str] | None:
        """The InferenceService whose component KServe names ``name`` (``<isvc>-predictor``)."""
        index = self._component_index()
        found = index.get((namespace or "", name))
        if found:
            return found[-1]  # of two InferenceServices of one name, the one loaded last
        matches = [
            index[key][-1]
            for key in self._components_by_name.get(name, {})
            if namespace is None or key[0] == ""
        ]
        return matches[0] if len(matches) == 1 else None

    def knative_service(self, namespace: str | None, name: str) -> KnativeService | None:
        for kind in ("Service", "Configuration"):
            manifest = self.store.find_in_group(KNATIVE_SERVING_GROUP, kind, namespace, name)
            if manifest is not None and is_knative_service(manifest):
                view = self.store.view_of(manifest)
                if isinstance(view, KnativeService):
                    return view
        return None

    def resolve(
        self, namespace: str | None, ref: TargetRef, near: Document | None = None
    ) -> ResolvedTarget:
        memo_key = (namespace, ref, None if near is None else near.file)
        resolved = self._resolved.get(memo_key)
        if resolved is None:
            resolved = self._resolved[memo_key] = self._resolve(namespace, ref, near)
        return resolved

    def _resolve(
        self, namespace: str | None, ref: TargetRef, near: Document | None
    ) -> ResolvedTarget:
        kind = ref.kind or "Deployment"
        manifest = self.store.find(kind, namespace, ref.name, near)
        key = key_of(
            kind,
            namespace if namespace is not None else (manifest.namespace if manifest else None),
            ref.name,
        )
        if manifest is not None:
            return ResolvedTarget(
                key, ref, manifest, None, pod_templates(manifest), manifest, "object"
            )
        if kind != "Deployment":
            return ResolvedTarget(key, ref)
        found = self.isvc_for_component(namespace, ref.name)
        if found is not None:
            return _generated(key, ref, found, "kserve")
        if ref.name.endswith("-default"):
            found = self.isvc_for_component(namespace, ref.name[: -len("-default")])
            if found is not None:
                return _generated(key, ref, found, "kserve-legacy")
        parent = revision_deployment_parent(ref.name)
        if parent is not None:
            for candidate in (parent, parent.removesuffix("-default")):
                ksvc = self.knative_service(namespace, candidate)
                if ksvc is not None:
                    templates = [ksvc.template] if ksvc.template else []
                    return ResolvedTarget(
                        key, ref, None, ksvc.manifest, templates, ksvc.manifest, "knative-revision"
                    )
                found = self.isvc_for_component(namespace, candidate)
                if found is not None:
                    return _generated(key, ref, found, "kserve-knative")
        return ResolvedTarget(key, ref)


def _generated(
    key: Key, ref: TargetRef, found: tuple[InferenceService, str], via: str
) -> ResolvedTarget:
    isvc, component_name = found
    component: Component | None = isvc.component(component_name)
    templates = [component.template] if component else []
    return ResolvedTarget(key, ref, None, isvc.manifest, templates, isvc.manifest, via)
