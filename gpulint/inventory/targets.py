"""What a scaleTargetRef points at: the object itself, or what a controller generates.

An autoscaler names a Deployment; that Deployment may be written out, or be the one KServe
makes for an InferenceService component (``<isvc>-predictor``, before 0.11
``<isvc>-predictor-default``), or a Knative revision's (``<service>-00001-deployment``).
``TargetResolver`` follows all of these to the pod templates behind the name; which workloads
a controller makes, under which names, each view says (``KindView.generated_workloads``).
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
from gpulint.kinds.kserve import InferenceService
from gpulint.kinds.scaletarget import TargetRef
from gpulint.kinds.view import GeneratedWorkload, KindView
from gpulint.kinds.workload import GpuNames, GpuRequest, PodTemplate, pod_templates

# A workload a controller generates, with the object it generates it for.
Generated = tuple[KindView, GeneratedWorkload]


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
        self.via = (
            via  # object | kserve | kserve-legacy | knative-revision | kserve-knative | generated
        )

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
        self._by_generated: dict[tuple[str, str], list[Generated]] | None = None
        self._generated_by_name: dict[str, dict[tuple[str, str], None]] = {}

    def changed(self) -> None:
        """An object came or went: earlier answers may be wrong now."""
        self._resolved.clear()

    # Workloads controllers generate, by the name they give them (``generated_workloads``).

    def _generated_index(self) -> dict[tuple[str, str], list[Generated]]:
        if self._by_generated is None:
            self._by_generated = {}
            self._generated_by_name = {}
            for views in self.store.scoped.values():
                for view in views.items:
                    self.view_added(view)
        return self._by_generated

    def view_added(self, view: KindView) -> None:
        if self._by_generated is None:
            return  # built on first use
        for workload in view.generated_workloads():
            key = (view.namespace or "", workload.name)
            self._by_generated.setdefault(key, []).append((view, workload))
            self._generated_by_name.setdefault(workload.name, {})[key] = None

    def view_removed(self, view: KindView) -> None:
        if self._by_generated is None:
            return
        for workload in view.generated_workloads():
            key = (view.namespace or "", workload.name)
            entries = [e for e in self._by_generated.get(key, []) if e[0] is not view]
            if entries:
                self._by_generated[key] = entries
                continue
            self._by_generated.pop(key, None)
            keys = self._generated_by_name.get(workload.name)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._generated_by_name[workload.name]

    def generated(self, namespace: str | None, name: str) -> Generated | None:
        """The object a controller generates the workload ``name`` for, and that workload."""
        index = self._generated_index()
        found = index.get((namespace or "", name))
        if found:
            return found[-1]  # of two objects of one name, the one loaded last
        matches = [
            index[key][-1]
            for key in self._generated_by_name.get(name, {})
            if namespace is None or key[0] == ""
        ]
        return matches[0] if len(matches) == 1 else None

    def inference_service(self, manifest: Manifest) -> InferenceService | None:
        found: InferenceService | None = self.store.scoped_view("isvc", manifest)
        return found

    def isvc_for_component(
        self, namespace: str | None, name: str
    ) -> tuple[InferenceService, str] | None:
        """The InferenceService whose component KServe names ``name`` (``<isvc>-predictor``)."""
        found = self.generated(namespace, name)
        if found is None:
            return None
        isvc = self.inference_service(found[0].manifest)
        return (isvc, found[1].part) if isvc is not None else None

    def knative_service(self, namespace: str | None, name: str) -> KnativeService | None:
        for kind in ("Service", "Configuration"):
            manifest = self.store.find_in_group(KNATIVE_SERVING_GROUP, kind, namespace, name)
            if manifest is not None and is_knative_service(manifest):
                view: KnativeService | None = self.store.scoped_view("knative", manifest)
                if view is not None:
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
            # A kind with a view of its own keeps its pods there (a VLLMRuntime's container,
            # which its /scale lets an autoscaler scale).
            view = self.store.view_of(manifest)
            templates = view.pod_templates() if view is not None else pod_templates(manifest)
            return ResolvedTarget(key, ref, manifest, None, templates, manifest, "object")
        if kind != "Deployment":
            return ResolvedTarget(key, ref)
        found = self.generated(namespace, ref.name)
        if found is not None:
            return _generated(key, ref, found, "kserve" if _kserve(found) else "generated")
        if ref.name.endswith("-default"):
            # KServe before 0.11 named the Deployment <isvc>-predictor-default
            found = self.generated(namespace, ref.name[: -len("-default")])
            if found is not None and _kserve(found):
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
                found = self.generated(namespace, candidate)
                if found is not None and _kserve(found):
                    return _generated(key, ref, found, "kserve-knative")
        return ResolvedTarget(key, ref)


def _kserve(found: Generated) -> bool:
    """Made by KServe for an InferenceService component (the names it used before 0.11 and
    its Knative revisions are followed for those alone)."""
    return found[0].manifest.kind == "InferenceService"


def _generated(key: Key, ref: TargetRef, found: Generated, via: str) -> ResolvedTarget:
    view, workload = found
    return ResolvedTarget(
        key, ref, None, view.manifest, list(workload.templates), view.manifest, via
    )
