"""All objects of a run, indexed, with the relations rules ask about.

The inventory is the seam between where objects come from (files, an admission request, a
live cluster) and the rules. It classifies documents (Kubernetes objects, ``kind: List``
items, prometheus-adapter configurations in any of their three shapes, chart values that
configure dcgm-exporter scraping), and answers questions such as "what does this HPA scale,
and does that ask for GPUs?" or "which autoscalers claim this Deployment?".
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, TypeVar

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
    is_knative_owned,
    is_knative_service,
    revision_deployment_parent,
)
from gpulint.kserve import (
    COMPONENTS,
    KNATIVE,
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


class EmbeddedProblem(NamedTuple):
    """A YAML error inside a string (a ConfigMap's embedded adapter config)."""

    owner: Manifest
    problem: LoadProblem


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
        self.dcgm_scrapes: list[DcgmScrape] = []
        self.problems: list[LoadProblem] = []
        self.duplicates: list[tuple[Document | None, DuplicateKey]] = []
        self.ignore_comments: list[IgnoreComment] = []
        self.skipped: list[tuple[str, str]] = []
        self.files: list[str] = []
        self.kserve_default_mode = self.settings.kserve_default_mode
        self._kserve_mode_source: Manifest | None = None
        self._isvc_by_component: dict[tuple[str, str], tuple[InferenceService, str]] | None = None
        self._groups: dict[Key, TargetGroup] | None = None
        self.live: Any = None  # filled by the live Prometheus check
        self.cluster: Any = None  # filled by cluster mode

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

    def add_manifest(self, manifest: Manifest, text: bytes | None = None) -> None:
        self.documents.append(manifest)
        self.manifests.append(manifest)
        self.by_key[key_of(manifest.kind, manifest.namespace, manifest.name)].append(manifest)
        self.by_name[(manifest.kind, manifest.name)].append(manifest)
        self._groups = None
        self._isvc_by_component = None
        kind = manifest.kind
        if kind == HPA_KIND and manifest.group == "autoscaling":
            self.hpas.append(HPA(manifest))
        elif is_scaled_object(manifest):
            self.scaled_objects.append(ScaledObject(manifest))
        elif is_kserve_isvc(manifest):
            self.inference_services.append(InferenceService(manifest, self.kserve_default_mode))
        elif is_knative_service(manifest):
            self.knative_services.append(KnativeService(manifest))
        elif kind == "ConfigMap":
            self._add_configmap(manifest, text)
        elif kind in WORKLOAD_KINDS or _has_pod_template(manifest):
            self.workloads.append(manifest)
        else:
            self.dcgm_scrapes.extend(scrapes_in_manifest(manifest))

    def _add_configmap(self, manifest: Manifest, text: bytes | None) -> None:
        mode = default_mode_from_configmap(manifest)
        if mode is not None:
            self.kserve_default_mode = mode
            self._kserve_mode_source = manifest
            for isvc in self.inference_services:
                isvc.default_mode = mode
        data = as_dict(manifest.data.get("data"))
        for key, value in data.items():
            if not isinstance(value, str) or not _may_hold_adapter_config(value):
                continue
            path: Path = ("data", key)
            line, column = _embedded_origin(manifest, path, text)
            try:
                parsed = list(parse_documents(value, line_offset=line, column_offset=column))
            except YamlError as error:
                self.problems.append(
                    LoadProblem(
                        manifest.file,
                        error.line,
                        error.column,
                        f"ConfigMap {manifest.name} key {key}: {error.message}",
                    )
                )
                continue
            for doc in parsed:
                if looks_like_adapter_config(doc.value):
                    embedded = Document(
                        doc.value, manifest.file, manifest.index, doc.line, manifest.rendered_from
                    )
                    self.adapter_configs.append(
                        AdapterConfig(embedded, AdapterConfig.CONFIGMAP, owner=manifest)
                    )
                    self.duplicates.extend((embedded, d) for d in doc.duplicates)

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

    def _component_index(self) -> dict[tuple[str, str], tuple[InferenceService, str]]:
        if self._isvc_by_component is None:
            index: dict[tuple[str, str], tuple[InferenceService, str]] = {}
            for isvc in self.inference_services:
                for component in isvc.components:
                    name = isvc.component_name(component.name)
                    index[(isvc.namespace or "", name)] = (isvc, component.name)
            self._isvc_by_component = index
        return self._isvc_by_component

    def isvc_for_component(
        self, namespace: str | None, name: str
    ) -> tuple[InferenceService, str] | None:
        """The InferenceService whose component KServe names ``name`` (``<isvc>-predictor``)."""
        index = self._component_index()
        found = index.get((namespace or "", name))
        if found is not None:
            return found
        matches = [
            v for (ns, n), v in index.items() if n == name and (namespace is None or ns == "")
        ]
        return matches[0] if len(matches) == 1 else None

    def resolve_target(
        self, namespace: str | None, ref: TargetRef, near: Document | None = None
    ) -> ResolvedTarget:
        """What an autoscaler in ``namespace`` scales, with the pod templates behind it.

        ``near`` is the autoscaler's document: among copies of the same object in several
        directories, the nearest is the one it scales."""
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
                for ksvc in self.knative_services:
                    if ksvc.manifest is manifest:
                        return ksvc
        return None

    def inference_service_of(self, manifest: Manifest) -> InferenceService | None:
        for isvc in self.inference_services:
            if isvc.manifest is manifest:
                return isvc
        return None

    def autoscalers(self) -> Iterator[Autoscaler]:
        """Every claim on a workload's replicas, explicit or made by a controller."""
        for hpa in self.hpas:
            if hpa.target_ref is None or _managed_by_controller(hpa.manifest):
                continue
            target = self.resolve_target(hpa.namespace, hpa.target_ref, hpa.manifest).key
            yield Autoscaler(
                "HorizontalPodAutoscaler",
                hpa.manifest,
                hpa.target_ref.path,
                target,
                hpa.name,
                ref=hpa.target_ref,
            )
        for scaled in self.scaled_objects:
            # A ScaledObject KServe (class keda) or Knative autoscaler-keda made is counted
            # through its owner, like their HPAs.
            if scaled.target_ref is None or _managed_by_controller(scaled.manifest):
                continue
            target = self.resolve_target(scaled.namespace, scaled.target_ref, scaled.manifest).key
            yield Autoscaler(
                "ScaledObject",
                scaled.manifest,
                scaled.target_ref.path,
                target,
                scaled.hpa_name,
                ref=scaled.target_ref,
            )
        for isvc in self.inference_services:
            if isvc.mode != STANDARD or isvc.autoscaler_class not in ("hpa", "keda"):
                continue
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
        if self._groups is None:
            groups: dict[Key, TargetGroup] = {}
            seen: set[tuple[str, str, str, Key]] = set()
            for autoscaler in self.autoscalers():
                # The same object written in several files (one directory per environment)
                # is one autoscaler in any cluster, not two.
                identity = (
                    autoscaler.kind,
                    autoscaler.manifest.namespace or "",
                    autoscaler.manifest.name,
                    autoscaler.target,
                )
                if identity in seen:
                    continue
                seen.add(identity)
                group = groups.setdefault(autoscaler.target, TargetGroup(autoscaler.target, []))
                group.autoscalers.append(autoscaler)
            self._groups = _merge_unnamespaced(groups)
        return self._groups

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
        found = []
        for config in self.adapter_configs:
            for rule in config.rules_for_api(EXTERNAL if api == EXTERNAL else "custom"):
                if rule.could_expose(wanted):
                    found.append(rule)
        if near is not None and len(found) > 1:
            found = nearest(found, near.file, lambda rule: rule.document.file)
        return found

    def adapter_configs_near(self, document: Document) -> list[AdapterConfig]:
        """The adapter configs nearest to ``document`` (see rules_exposing)."""
        return nearest(self.adapter_configs, document.file, lambda config: config.document.file)

    def dcgm_scrapes_near(self, document: Document) -> list[DcgmScrape]:
        """The dcgm-exporter scrape settings nearest to ``document`` (see rules_exposing)."""
        return nearest(self.dcgm_scrapes, document.file, lambda scrape: scrape.document.file)

    def recorded_series(self) -> dict[str, tuple[Manifest, Path]]:
        """Series that PrometheusRule recording rules in the input create (``record:``)."""
        found: dict[str, tuple[Manifest, Path]] = {}
        for manifest in self.manifests:
            if manifest.kind != "PrometheusRule" or manifest.group != "monitoring.coreos.com":
                continue
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

    def workload_views(self) -> Iterable[Manifest]:
        return self.workloads

    def is_knative_owned(self, manifest: Manifest) -> bool:
        return is_knative_owned(manifest)

    def knative_mode_isvcs(self) -> list[InferenceService]:
        return [i for i in self.inference_services if i.mode == KNATIVE]

    def components_of(self, isvc: InferenceService) -> list[str]:
        return [c.name for c in isvc.components if c.name in COMPONENTS]

    def __len__(self) -> int:
        return len(self.manifests)


_T = TypeVar("_T")


def nearest(items: list[_T], file: str, file_of: Callable[[_T], str]) -> list[_T]:
    """The items whose file shares the longest directory prefix with ``file``."""
    if len(items) < 2:
        return items
    here = os.path.dirname(os.path.abspath(file)).split(os.sep)

    def shared(item: _T) -> int:
        there = os.path.dirname(os.path.abspath(file_of(item))).split(os.sep)
        depth = 0
        for a, b in zip(here, there, strict=False):
            if a != b:
                break
            depth += 1
        return depth

    best = max(shared(item) for item in items)
    return [item for item in items if shared(item) == best]


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
