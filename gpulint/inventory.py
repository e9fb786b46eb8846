"""All objects of a run, indexed, with the relations rules ask about.

The inventory is the seam between where objects come from (files, an admission request, a
live cluster) and the rules. It classifies documents (Kubernetes objects, ``kind: List``
items, prometheus-adapter configurations in any of their three shapes, chart values that
configure dcgm-exporter scraping), and answers questions such as "what does this HPA scale,
and does that ask for GPUs?" or "which autoscalers claim this Deployment?".
"""

from __future__ import annotations

import functools
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from gpulint.adapter import (
    EXTERNAL,
    AdapterConfig,
    AdapterRule,
    looks_like_adapter_config,
    looks_like_adapter_values,
    requested_metric_name,
)
from gpulint.config import Settings
from gpulint.document import Document, Manifest, Path, as_dict
from gpulint.hpa import HPA, HPA_KIND, TargetRef
from gpulint.keda import ScaledObject, is_scaled_object
from gpulint.knative import (
    KnativeService,
    is_knative_service,
    revision_deployment_parent,
)
from gpulint.kserve import (
    STANDARD,
    InferenceService,
    default_mode_from_configmap,
    is_kserve_isvc,
)
from gpulint.loader import IgnoreComment, LoadedFile, LoadProblem
from gpulint.monitoring import DcgmScrape, scrapes_in_manifest, scrapes_in_values
from gpulint.workload import GpuNames, GpuRequest, PodTemplate, pod_templates
from gpulint.yamlparse import DuplicateKey, YamlError, parse_documents

Key = tuple[str, str, str]  # (kind, namespace or "", name)

# Kinds whose pod templates an autoscaler can scale (and a few that only hold pods).
WORKLOAD_KINDS = {
    "Deployment",
    "StatefulSet",
    "ReplicaSet",
    "ReplicationController",
    "DaemonSet",
    "Job",
    "CronJob",
    "Pod",
    "Rollout",
    "LeaderWorkerSet",
    "DeploymentConfig",
    "CloneSet",
}


def key_of(kind: str, namespace: str | None, name: str) -> Key:
    return (kind, namespace or "", name)


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


class Autoscaler:
    """Something that sets the replicas of a workload through an HPA."""

    __slots__ = ("hpa_name", "implicit", "kind", "manifest", "note", "path", "ref", "target")

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
    ) -> None:
        self.kind = kind
        self.manifest = manifest
        self.path = path
        self.target = target
        self.hpa_name = hpa_name
        self.implicit = implicit
        self.note = note
        self.ref = ref  # the scaleTargetRef as written (None for KServe's own)

    def __repr__(self) -> str:
        return f"Autoscaler(kind={self.kind!r}, manifest={self.manifest!r})"

    def describe(self) -> str:
        if self.kind == "KServe":
            return f"KServe's own HPA {self.hpa_name} (from InferenceService {self.manifest.name})"
        if self.kind == "ScaledObject":
            return f"KEDA ScaledObject {self.manifest.name} (HPA {self.hpa_name})"
        return f"HorizontalPodAutoscaler {self.manifest.name}"


class TargetGroup:
    """All autoscalers that claim one workload."""

    __slots__ = ("autoscalers", "target")

    def __init__(
        self,
        target: Key,
        autoscalers: list[Autoscaler],
    ) -> None:
        self.target = target
        self.autoscalers = autoscalers

    def __repr__(self) -> str:
        return f"TargetGroup(target={self.target!r}, autoscalers={self.autoscalers!r})"


class Inventory:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.gpu_names = GpuNames(self.settings.gpu_resources)
        self.documents: list[Document] = []
        self.manifests: list[Manifest] = []
        self.by_key: dict[Key, list[Manifest]] = defaultdict(list)
        self.by_name: dict[tuple[str, str], list[Manifest]] = defaultdict(list)
        self.hpas: list[HPA] = []
        self.scaled_objects: list[ScaledObject] = []
        self.inference_services: list[InferenceService] = []
        self.knative_services: list[KnativeService] = []
        self.workloads: list[Manifest] = []
        self.adapter_configs: list[AdapterConfig] = []
        self._exposures: dict[str, tuple[Any, dict[str, list[AdapterRule]], list[AdapterRule]]] = {}
        self._rule_order: dict[AdapterRule, int] = {}
        # resolve_target answers, dropped whenever an object comes or goes.
        self._resolved: dict[tuple[str | None, TargetRef, str | None], ResolvedTarget] = {}
        self.dcgm_scrapes: list[DcgmScrape] = []
        self.problems: list[LoadProblem] = []
        self.duplicates: list[tuple[Document | None, DuplicateKey]] = []
        self.ignore_comments: list[IgnoreComment] = []
        self.skipped: list[tuple[str, str]] = []
        self.files: list[str] = []
        self.kserve_default_mode = self.settings.kserve_default_mode
        self._kserve_mode_source: Manifest | None = None
        self._isvc_by_component: (
            dict[tuple[str, str], list[tuple[InferenceService, str]]] | None
        ) = None
        self._components_by_name: dict[str, dict[tuple[str, str], None]] = {}
        self._groups: dict[Key, TargetGroup] | None = None
        self.live: Any = None  # filled by the live Prometheus check
        self.cluster: Any = None  # filled by cluster mode
        # Indexes that follow objects as they come and go (a cluster cache, an admission
        # overlay), so that one change costs what relates to it, not the inventory's size.
        # Each is built on first use: a one-shot lint never pays for what it does not ask.
        self._views: dict[int, Any] = {}  # id(manifest) -> HPA, ScaledObject, ... view
        self._positions: dict[str, dict[int, int]] | None = None  # for O(1) removal
        self._claims: dict[int, list[Autoscaler]] | None = None  # by id(source manifest)
        self._raw_groups: dict[Key, TargetGroup] = {}  # claims by target, before merging
        self._identities: dict[tuple[str, str, str, Key], list[Autoscaler]] = {}
        self._unnamespaced_groups = 0
        self._floating: set[int] = set()  # claims whose target depends on other objects
        self._revision_groups: dict[tuple[str, str], dict[Key, None]] = {}
        self._metric_readers: dict[tuple[str, str], dict[int, HPA]] | None = None
        self._prometheus_rules: list[Manifest] = []
        self._owned: dict[int, list[Any]] = {}  # problems a ConfigMap's embedded YAML added

    # --- building --------------------------------------------------------------------------

    def add_file(self, loaded: LoadedFile) -> None:
        text = loaded.text
        self.files.append(loaded.path)
        self.problems.extend(loaded.problems)
        self.duplicates.extend(loaded.duplicates)
        self.ignore_comments.extend(loaded.ignore_comments)
        if loaded.skipped_reason:
            self.skipped.append((loaded.path, loaded.skipped_reason))
        for document in loaded.documents:
            self.add_document(document, text)

    def add_document(self, document: Document, text: bytes | None = None) -> None:
        data = document.data
        if not isinstance(data, dict):
            return
        api_version, kind = data.get("apiVersion"), data.get("kind")
        if isinstance(api_version, str) and isinstance(kind, str):
            items = data.get("items")
            if kind.endswith("List") and isinstance(items, list):
                for item in items:
                    if (
                        isinstance(item, dict)
                        and isinstance(item.get("apiVersion"), str)
                        and isinstance(item.get("kind"), str)
                    ):
                        self.add_manifest(
                            Manifest(
                                item,
                                document.file,
                                document.index,
                                _start_line(item, document.line),
                                document.rendered_from,
                            ),
                            text,
                        )
                return
            self.add_manifest(
                Manifest(
                    data, document.file, document.index, document.line, document.rendered_from
                ),
                text,
            )
            return
        if looks_like_adapter_config(data):
            self.documents.append(document)
            self._track("documents", document)
            self.adapter_configs.append(AdapterConfig(document, AdapterConfig.CONFIG))
            return
        classified = False
        if looks_like_adapter_values(data):
            self.adapter_configs.append(AdapterConfig(document, AdapterConfig.HELM_VALUES))
            classified = True
        else:
            for key in ("prometheus-adapter", "prometheusAdapter"):
                if looks_like_adapter_values(data.get(key)):
                    self.adapter_configs.append(
                        AdapterConfig(document, AdapterConfig.HELM_VALUES, (key,))
                    )
                    classified = True
        scrapes = scrapes_in_values(document)
        if scrapes:
            self.dcgm_scrapes.extend(scrapes)
            classified = True
        if classified:
            self.documents.append(document)
            self._track("documents", document)

    def add_manifest(self, manifest: Manifest, text: bytes | None = None) -> None:
        self._resolved.clear()
        self.documents.append(manifest)
        self.manifests.append(manifest)
        self._track("documents", manifest)
        self._track("manifests", manifest)
        self.by_key[key_of(manifest.kind, manifest.namespace, manifest.name)].append(manifest)
        self.by_name[(manifest.kind, manifest.name)].append(manifest)
        self._groups = None
        kind = manifest.kind
        if kind == "PrometheusRule" and manifest.group == "monitoring.coreos.com":
            self._prometheus_rules.append(manifest)
        view: HPA | ScaledObject | InferenceService | KnativeService | None = None
        if kind == HPA_KIND and manifest.group == "autoscaling":
            view = HPA(manifest)
            self.hpas.append(view)
            self._track("hpas", view)
        elif is_scaled_object(manifest):
            view = ScaledObject(manifest)
            self.scaled_objects.append(view)
            self._track("scaled_objects", view)
        elif is_kserve_isvc(manifest):
            view = InferenceService(manifest, self.kserve_default_mode)
            self.inference_services.append(view)
            self._track("inference_services", view)
        elif is_knative_service(manifest):
            view = KnativeService(manifest)
            self.knative_services.append(view)
            self._track("knative_services", view)
        elif kind == "ConfigMap":
            self._add_configmap(manifest, text)
        elif kind in WORKLOAD_KINDS or _has_pod_template(manifest):
            self.workloads.append(manifest)
            self._track("workloads", manifest)
        else:
            self.dcgm_scrapes.extend(scrapes_in_manifest(manifest))
        if view is not None:
            self._views[id(manifest)] = view
            self._index_view(view)
        if self._floating:
            self._refresh_floating()

    def _add_configmap(self, manifest: Manifest, text: bytes | None) -> None:
        mode = default_mode_from_configmap(manifest)
        if mode is not None:
            self._set_kserve_default_mode(mode, manifest)
        data = as_dict(manifest.data.get("data"))
        for key, value in data.items():
            if not isinstance(value, str) or not _may_hold_adapter_config(value):
                continue
            path: Path = ("data", key)
            line, column = _embedded_origin(manifest, path, text)
            try:
                parsed = list(parse_documents(value, line_offset=line, column_offset=column))
            except YamlError as error:
                problem = LoadProblem(
                    manifest.file,
                    error.line,
                    error.column,
                    f"ConfigMap {manifest.name} key {key}: {error.message}",
                )
                self.problems.append(problem)
                self._owned.setdefault(id(manifest), []).append(problem)
                continue
            for doc in parsed:
                if looks_like_adapter_config(doc.value):
                    embedded = Document(
                        doc.value, manifest.file, manifest.index, doc.line, manifest.rendered_from
                    )
                    self.adapter_configs.append(
                        AdapterConfig(embedded, AdapterConfig.CONFIGMAP, owner=manifest)
                    )
                    duplicates = [(embedded, d) for d in doc.duplicates]
                    self.duplicates.extend(duplicates)
                    if duplicates:
                        self._owned.setdefault(id(manifest), []).extend(duplicates)

    def _set_kserve_default_mode(self, mode: str, source: Manifest | None) -> None:
        self.kserve_default_mode = mode
        self._kserve_mode_source = source
        for isvc in self.inference_services:
            isvc.default_mode = mode
        if self._claims is not None:
            # Which InferenceServices get KServe's own HPA depends on the mode.
            for isvc in self.inference_services:
                self._drop_claims(isvc.manifest)
                self._set_claims(isvc)

    # --- incremental change ----------------------------------------------------------------

    def remove_manifest(self, manifest: Manifest) -> bool:
        """Take an object out again (a watch's DELETED event, an admission overlay undone).

        Returns False when the object is not in the inventory. The cost is that of the
        object's own relations, whatever the size of the inventory.
        """
        self._resolved.clear()
        positions = self._ensure_positions()
        if id(manifest) not in positions["manifests"]:
            return False
        _swap_remove(self.manifests, positions["manifests"], manifest)
        _swap_remove(self.documents, positions["documents"], manifest)
        _remove_identical(
            self.by_key, key_of(manifest.kind, manifest.namespace, manifest.name), manifest
        )
        _remove_identical(self.by_name, (manifest.kind, manifest.name), manifest)
        self._groups = None
        if manifest.kind == "PrometheusRule":
            self._prometheus_rules = [m for m in self._prometheus_rules if m is not manifest]
        view = self._views.pop(id(manifest), None)
        if view is not None:
            self._unindex_view(view)
            _swap_remove(
                getattr(self, _VIEW_LISTS[type(view)]), positions[_VIEW_LISTS[type(view)]], view
            )
        elif manifest.kind == "ConfigMap":
            self._remove_configmap(manifest)
        elif not _swap_remove(self.workloads, positions["workloads"], manifest):
            self.dcgm_scrapes = [s for s in self.dcgm_scrapes if s.document is not manifest]
        if self._floating:
            self._refresh_floating()
        return True

    def replace_manifest(self, old: Manifest, new: Manifest, text: bytes | None = None) -> None:
        """``new`` takes the place of ``old`` (a watch's MODIFIED event, an admission UPDATE);
        ``old`` need not be in the inventory."""
        self.remove_manifest(old)
        self.add_manifest(new, text)

    def _remove_configmap(self, manifest: Manifest) -> None:
        self.adapter_configs = [c for c in self.adapter_configs if c.owner is not manifest]
        owned = self._owned.pop(id(manifest), None)
        if owned:
            gone = {id(item) for item in owned}
            self.problems = [p for p in self.problems if id(p) not in gone]
            self.duplicates = [d for d in self.duplicates if id(d) not in gone]
        if self._kserve_mode_source is manifest:
            # The last inferenceservice-config still present sets the default again.
            mode, source = self.settings.kserve_default_mode, None
            for candidate in self.by_name.get(("ConfigMap", "inferenceservice-config"), []):
                found = default_mode_from_configmap(candidate)
                if found is not None:
                    mode, source = found, candidate
            self._set_kserve_default_mode(mode, source)

    def _track(self, name: str, item: Any) -> None:
        if self._positions is not None:
            items: list[Any] = getattr(self, name)
            self._positions[name][id(item)] = len(items) - 1

    def _ensure_positions(self) -> dict[str, dict[int, int]]:
        if self._positions is None:
            self._positions = {
                name: {id(item): index for index, item in enumerate(getattr(self, name))}
                for name in _POSITIONED
            }
        return self._positions

    def _index_view(self, view: HPA | ScaledObject | InferenceService | KnativeService) -> None:
        if isinstance(view, InferenceService) and self._isvc_by_component is not None:
            self._index_components(view)
        if isinstance(view, HPA) and self._metric_readers is not None:
            for key in _metrics_read(view):
                self._metric_readers.setdefault(key, {})[id(view)] = view
        if self._claims is not None and not isinstance(view, KnativeService):
            self._set_claims(view)

    def _unindex_view(self, view: HPA | ScaledObject | InferenceService | KnativeService) -> None:
        if isinstance(view, InferenceService) and self._isvc_by_component is not None:
            self._unindex_components(view)
        if isinstance(view, HPA) and self._metric_readers is not None:
            for key in _metrics_read(view):
                readers = self._metric_readers.get(key, {})
                readers.pop(id(view), None)
                if not readers:
                    self._metric_readers.pop(key, None)
        if self._claims is not None:
            self._drop_claims(view.manifest)

    # Claims (autoscaler -> target) and the target groups they form, kept per source object.

    def _claim_index(self) -> dict[int, list[Autoscaler]]:
        if self._claims is None:
            self._claims = {}
            self._raw_groups = {}
            self._identities = {}
            self._revision_groups = {}
            self._unnamespaced_groups = 0
            self._floating = set()
            for view in self._claiming_views():
                self._set_claims(view)
        return self._claims

    def _set_claims(self, view: HPA | ScaledObject | InferenceService) -> None:
        assert self._claims is not None
        claims = list(self._claims_of(view))
        self._claims[id(view.manifest)] = claims
        if claims and not isinstance(view, InferenceService) and view.namespace is None:
            # resolve_target matches an unnamespaced reference against what else is loaded
            self._floating.add(id(view.manifest))
        for claim in claims:
            self._join_group(claim)

    def _drop_claims(self, manifest: Manifest) -> None:
        if self._claims is None:
            return
        for claim in self._claims.pop(id(manifest), []):
            self._leave_group(claim)
        self._floating.discard(id(manifest))

    def _refresh_floating(self) -> None:
        for source in list(self._floating):
            view = self._views.get(source)
            if isinstance(view, HPA | ScaledObject):
                self._drop_claims(view.manifest)
                self._set_claims(view)

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
        # Explicit HPAs first, then ScaledObjects, then KServe's own, as ``autoscalers()``
        # yields them; within a kind, in the order they were added.
        rank = _CLAIM_RANK[claim.kind]
        items = group.autoscalers
        index = len(items)
        while index and _CLAIM_RANK[items[index - 1].kind] > rank:
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

    # --- questions rules ask ---------------------------------------------------------------

    def find(
        self, kind: str, namespace: str | None, name: str, near: Document | None = None
    ) -> Manifest | None:
        """An object by kind, namespace and name.

        Manifests often leave the namespace to ``kubectl -n`` or kustomize; when either side
        does not say, a unique object of that kind and name matches. When the same object is
        written in several places (one directory per environment), ``near`` picks the copy
        nearest to the document asking.
        """
        exact = self.by_key.get(key_of(kind, namespace, name))
        if exact:
            if near is not None and len(exact) > 1:
                return nearest(exact, near.file, lambda manifest: manifest.file)[0]
            return exact[0]
        candidates = self.by_name.get((kind, name), [])
        if namespace is None:
            return candidates[0] if len(candidates) == 1 else None
        unnamespaced = [m for m in candidates if m.namespace is None]
        return unnamespaced[0] if len(unnamespaced) == 1 else None

    def _component_index(self) -> dict[tuple[str, str], list[tuple[InferenceService, str]]]:
        if self._isvc_by_component is None:
            self._isvc_by_component = {}
            self._components_by_name = {}
            for isvc in self.inference_services:
                self._index_components(isvc)
        return self._isvc_by_component

    def _index_components(self, isvc: InferenceService) -> None:
        assert self._isvc_by_component is not None
        for component in isvc.components:
            name = isvc.component_name(component.name)
            key = (isvc.namespace or "", name)
            self._isvc_by_component.setdefault(key, []).append((isvc, component.name))
            self._components_by_name.setdefault(name, {})[key] = None

    def _unindex_components(self, isvc: InferenceService) -> None:
        assert self._isvc_by_component is not None
        for component in isvc.components:
            name = isvc.component_name(component.name)
            key = (isvc.namespace or "", name)
            entries = [e for e in self._isvc_by_component.get(key, []) if e[0] is not isvc]
            if entries:
                self._isvc_by_component[key] = entries
                continue
            self._isvc_by_component.pop(key, None)
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

    def resolve_target(
        self, namespace: str | None, ref: TargetRef, near: Document | None = None
    ) -> ResolvedTarget:
        """What an autoscaler in ``namespace`` scales, with the pod templates behind it.

        ``near`` is the autoscaler's document: among copies of the same object in several
        directories, the nearest is the one it scales."""
        memo_key = (namespace, ref, None if near is None else near.file)
        resolved = self._resolved.get(memo_key)
        if resolved is None:
            resolved = self._resolved[memo_key] = self._resolve_target(namespace, ref, near)
        return resolved

    def _resolve_target(
        self, namespace: str | None, ref: TargetRef, near: Document | None
    ) -> ResolvedTarget:
        kind = ref.kind or "Deployment"
        manifest = self.find(kind, namespace, ref.name, near)
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
            isvc, component_name = found
            component = isvc.component(component_name)
            templates = [component.template] if component else []
            return ResolvedTarget(key, ref, None, isvc.manifest, templates, isvc.manifest, "kserve")
        if ref.name.endswith("-default"):
            found = self.isvc_for_component(namespace, ref.name[: -len("-default")])
            if found is not None:
                isvc, component_name = found
                component = isvc.component(component_name)
                templates = [component.template] if component else []
                return ResolvedTarget(
                    key, ref, None, isvc.manifest, templates, isvc.manifest, "kserve-legacy"
                )
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
                    isvc, component_name = found
                    component = isvc.component(component_name)
                    templates = [component.template] if component else []
                    return ResolvedTarget(
                        key, ref, None, isvc.manifest, templates, isvc.manifest, "kserve-knative"
                    )
        return ResolvedTarget(key, ref)

    def knative_service(self, namespace: str | None, name: str) -> KnativeService | None:
        for kind in ("Service", "Configuration"):
            manifest = self.find(kind, namespace, name)
            if manifest is not None and is_knative_service(manifest):
                view = self._views.get(id(manifest))
                if isinstance(view, KnativeService) and view.manifest is manifest:
                    return view
        return None

    def inference_service_of(self, manifest: Manifest) -> InferenceService | None:
        view = self._views.get(id(manifest))
        return view if isinstance(view, InferenceService) and view.manifest is manifest else None

    def view_of(
        self, manifest: Manifest
    ) -> HPA | ScaledObject | InferenceService | KnativeService | None:
        """The typed view an object of the inventory is read through, if it has one."""
        view = self._views.get(id(manifest))
        return view if view is not None and view.manifest is manifest else None

    def autoscalers(self) -> Iterator[Autoscaler]:
        """Every claim on a workload's replicas, explicit or made by a controller."""
        for view in self._claiming_views():
            yield from self._claims_of(view)

    def _claiming_views(self) -> list[HPA | ScaledObject | InferenceService]:
        views: list[HPA | ScaledObject | InferenceService] = [*self.hpas, *self.scaled_objects]
        views.extend(self.inference_services)
        return views

    def _claims_of(self, view: HPA | ScaledObject | InferenceService) -> Iterator[Autoscaler]:
        if isinstance(view, HPA):
            hpa = view
            if hpa.target_ref is None or _managed_by_controller(hpa.manifest):
                return
            target = self.resolve_target(hpa.namespace, hpa.target_ref, hpa.manifest).key
            yield Autoscaler(
                "HorizontalPodAutoscaler",
                hpa.manifest,
                hpa.target_ref.path,
                target,
                hpa.name,
                ref=hpa.target_ref,
            )
        elif isinstance(view, ScaledObject):
            scaled = view
            # A ScaledObject KServe (class keda) or Knative autoscaler-keda made is counted
            # through its owner, like their HPAs.
            if scaled.target_ref is None or _managed_by_controller(scaled.manifest):
                return
            target = self.resolve_target(scaled.namespace, scaled.target_ref, scaled.manifest).key
            yield Autoscaler(
                "ScaledObject",
                scaled.manifest,
                scaled.target_ref.path,
                target,
                scaled.hpa_name,
                ref=scaled.target_ref,
            )
        else:
            isvc = view
            if isvc.mode != STANDARD or isvc.autoscaler_class not in ("hpa", "keda"):
                return
            for component in isvc.components:
                name = isvc.component_name(component.name)
                hpa_name = name if isvc.autoscaler_class == "hpa" else f"keda-hpa-{name}"
                yield Autoscaler(
                    "KServe",
                    isvc.manifest,
                    ("metadata", "annotations"),
                    key_of("Deployment", isvc.namespace, name),
                    hpa_name,
                    implicit=True,
                    note=f"autoscalerClass {isvc.autoscaler_class}",
                )

    def target_groups(self) -> dict[Key, TargetGroup]:
        """The autoscalers of each workload. The same autoscaler written in several files
        (one directory per environment) is one autoscaler in any cluster, not two."""
        if self._groups is None:
            self._claim_index()
            self._groups = (
                _merge_unnamespaced(self._raw_groups)
                if self._unnamespaced_groups
                else self._raw_groups
            )
        return self._groups

    def claims_of(self, manifest: Manifest) -> list[Autoscaler]:
        """The claims an HPA, ScaledObject or InferenceService makes on workloads."""
        return list(self._claim_index().get(id(manifest), []))

    def revision_groups(self, namespace: str | None, configuration: str) -> list[TargetGroup]:
        """Target groups of the revision Deployments (``<configuration>-NNNNN-deployment``) of
        a Knative Service or Configuration, or of a KServe component in Knative mode."""
        groups = self.target_groups()
        keys = self._revision_groups.get((namespace or "", configuration), {})
        return [groups[key] for key in keys if key in groups]

    def metrics_read(self) -> list[tuple[str, str]]:
        """The custom and external metrics HPAs read: ``(api, name)`` with ``api``
        ``custom`` or ``external`` and the name as the HPAs write it."""
        return list(self._reader_index())

    def readers_of(self, api: str, name: str) -> list[HPA]:
        """The HPAs that read a metric (see ``metrics_read``)."""
        return list(self._reader_index().get((api, name), {}).values())

    def _reader_index(self) -> dict[tuple[str, str], dict[int, HPA]]:
        if self._metric_readers is None:
            readers: dict[tuple[str, str], dict[int, HPA]] = {}
            for hpa in self.hpas:
                for key in _metrics_read(hpa):
                    readers.setdefault(key, {})[id(hpa)] = hpa
            self._metric_readers = readers
        return self._metric_readers

    def adapter_configs_of(self, manifest: Manifest) -> list[AdapterConfig]:
        """The prometheus-adapter configurations a ConfigMap holds."""
        return [config for config in self.adapter_configs if config.owner is manifest]

    def autoscalers_for(self, target: Key) -> list[Autoscaler]:
        group = self.target_groups().get(target)
        return group.autoscalers if group else []

    def adapter_rules(self) -> Iterator[AdapterRule]:
        for config in self.adapter_configs:
            yield from config.all_rules()

    def rules_exposing(
        self, metric: str, api: str, near: Document | None = None
    ) -> list[AdapterRule]:
        """Adapter rules that can serve ``metric`` on the custom or external metrics API.

        ``metric`` is the name an HPA writes; External names are matched the way the HPA
        asks for them, lowercased (``adapter.requested_metric_name``). With ``near``, when
        configs in several places expose the metric (a repository with one directory per
        cluster or environment), only the ones nearest to that document's file count.
        """
        wanted = requested_metric_name(metric, api)
        by_name, by_pattern = self._exposure_index(EXTERNAL if api == EXTERNAL else "custom")
        candidates = by_name.get(wanted, []) + by_pattern
        if by_name.get(wanted) and by_pattern:
            candidates.sort(key=self._rule_order.__getitem__)  # keep config order
        found = [rule for rule in candidates if rule.could_expose(wanted)]
        if near is not None and len(found) > 1:
            found = nearest(found, near.file, lambda rule: rule.document.file)
        return found

    def _exposure_index(self, api: str) -> tuple[dict[str, list[AdapterRule]], list[AdapterRule]]:
        """Rules by the names they are known to expose, and the rules whose names depend on
        the live series, in config order; rebuilt whenever the set of configs changes."""
        key = (api, tuple(map(id, self.adapter_configs)))
        cached = self._exposures.get(api)
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        by_name: dict[str, list[AdapterRule]] = {}
        by_pattern: list[AdapterRule] = []
        for config in self.adapter_configs:
            for rule in config.rules_for_api(api):
                self._rule_order[rule] = len(self._rule_order)
                names = rule.exposed_names()
                if names is None:
                    by_pattern.append(rule)
                for name in names or ():
                    by_name.setdefault(name, []).append(rule)
        self._exposures[api] = (key, by_name, by_pattern)
        return by_name, by_pattern

    def adapter_configs_near(self, document: Document) -> list[AdapterConfig]:
        """The adapter configs nearest to ``document`` (see rules_exposing)."""
        return nearest(self.adapter_configs, document.file, lambda config: config.document.file)

    def dcgm_scrapes_near(self, document: Document) -> list[DcgmScrape]:
        """The dcgm-exporter scrape settings nearest to ``document`` (see rules_exposing)."""
        return nearest(self.dcgm_scrapes, document.file, lambda scrape: scrape.document.file)

    def recorded_series(self) -> dict[str, tuple[Manifest, Path]]:
        """Series that PrometheusRule recording rules in the input create (``record:``)."""
        found: dict[str, tuple[Manifest, Path]] = {}
        for manifest in self._prometheus_rules:
            groups = as_dict(manifest.data.get("spec")).get("groups")
            for g, group in enumerate(groups if isinstance(groups, list) else []):
                rules = as_dict(group).get("rules")
                for r, rule in enumerate(rules if isinstance(rules, list) else []):
                    record = as_dict(rule).get("record")
                    if isinstance(record, str) and record not in found:
                        found[record] = (manifest, ("spec", "groups", g, "rules", r, "record"))
        return found

    def kserve_mode_source(self) -> Manifest | None:
        return self._kserve_mode_source

    def __len__(self) -> int:
        return len(self.manifests)


_T = TypeVar("_T")


def nearest(items: list[_T], file: str, file_of: Callable[[_T], str]) -> list[_T]:
    """The items whose file shares the longest directory prefix with ``file``."""
    if len(items) < 2:
        return items
    chosen = _nearest_positions(_directory_parts(file), tuple(map(file_of, items)))
    return [items[position] for position in chosen]


@functools.lru_cache(maxsize=16384)
def _nearest_positions(here: tuple[str, ...], files: tuple[str, ...]) -> tuple[int, ...]:
    """Positions of the files in ``here`` or below; else the answer for ``here``'s parent.

    Sibling directories share their parent's cached answer, so a repository with one
    directory per app costs one comparison per app and file."""
    depth = len(here)
    inside = tuple(i for i, file in enumerate(files) if _directory_parts(file)[:depth] == here)
    if inside or not here:
        return inside or tuple(range(len(files)))
    return _nearest_positions(here[:-1], files)


@functools.lru_cache(maxsize=65536)
def _directory_parts(file: str) -> tuple[str, ...]:
    return tuple(os.path.dirname(os.path.abspath(file)).split(os.sep))


def _start_line(item: Any, default: int) -> int:
    start = getattr(item, "start", 0)
    return int(start >> 20) if start else default


def _has_pod_template(manifest: Manifest) -> bool:
    return bool(pod_templates(manifest))


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


# The lists whose items can be taken out in O(1) (see Inventory.remove_manifest).
_POSITIONED = (
    "documents",
    "manifests",
    "hpas",
    "scaled_objects",
    "inference_services",
    "knative_services",
    "workloads",
)
_VIEW_LISTS: dict[type, str] = {
    HPA: "hpas",
    ScaledObject: "scaled_objects",
    InferenceService: "inference_services",
    KnativeService: "knative_services",
}
_CLAIM_RANK = {"HorizontalPodAutoscaler": 0, "ScaledObject": 1, "KServe": 2}


def _swap_remove(items: list[Any], positions: dict[int, int], item: Any) -> bool:
    """Remove ``item`` by moving the last item into its place; False if it is not there."""
    index = positions.pop(id(item), None)
    if index is None:
        return False
    last = items.pop()
    if last is not item:
        items[index] = last
        positions[id(last)] = index
    return True


def _remove_identical(index: dict[Any, list[Manifest]], key: Any, manifest: Manifest) -> None:
    remaining = [m for m in index.get(key, []) if m is not manifest]
    if remaining:
        index[key] = remaining
    else:
        index.pop(key, None)


def _identity(claim: Autoscaler) -> tuple[str, str, str, Key]:
    return (claim.kind, claim.manifest.namespace or "", claim.manifest.name, claim.target)


def _metrics_read(hpa: HPA) -> list[tuple[str, str]]:
    """``(api, name)`` of the custom and external metrics an HPA reads."""
    return list(dict.fromkeys((m.api, m.name) for m in hpa.metrics if m.is_custom and m.name))


def is_generated_autoscaler(manifest: Manifest) -> bool:
    """An HPA or ScaledObject that KEDA, KServe or Knative made (found in cluster dumps): what
    it says is fixed on its owner, not on the object itself."""
    return _managed_by_controller(manifest)


def _managed_by_controller(manifest: Manifest) -> bool:
    """HPAs and ScaledObjects that KEDA, KServe or Knative created (their owner is counted
    instead)."""
    for owner in manifest.owner_references:
        kind = owner.get("kind")
        if kind in ("ScaledObject", "InferenceService", "PodAutoscaler"):
            return True
    return "scaledobject.keda.sh/name" in manifest.labels


def _may_hold_adapter_config(value: str) -> bool:
    return "seriesQuery" in value or "resourceRules" in value or "externalRules" in value


def _embedded_origin(manifest: Manifest, path: Path, text: bytes | None) -> tuple[int, int]:
    """(line offset, column offset) of the first line of a string value in its file.

    For a block scalar (``config.yaml: |``) the content starts on the next line, indented;
    gpulint reads that indentation from the file. For other styles the value's own position
    is the best it can do.
    """
    location = manifest.location(path, key=False)
    value_line, value_column = location.line, location.column
    if text is not None:
        lines = text.split(b"\n")
        index = value_line - 1
        if 0 <= index < len(lines):
            indicator = lines[index][value_column - 1 : value_column]
            if indicator in (b"|", b">"):
                for follow in range(index + 1, len(lines)):
                    stripped = lines[follow].lstrip(b" ")
                    if stripped:
                        return follow, len(lines[follow]) - len(stripped)
    return value_line - 1, value_column - 1
