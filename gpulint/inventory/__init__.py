"""All objects of one lint unit (or one cluster), indexed, with the relations rules ask about.

The inventory is the seam between where objects come from (files and rendered output, an
admission request, a live cluster) and the rules. It receives classified documents
(``gpulint.kinds.classify``) and answers questions such as "what does this HPA scale, and does that
ask for GPUs?" or "which autoscalers claim this Deployment?". Its parts, one job each:

* ``store``: the objects, by kind/namespace/name and by rule scope;
* ``targets``: what a scaleTargetRef points at (through KServe and Knative);
* ``claims``: which autoscalers claim each workload;
* ``exposure``: which prometheus-adapter rules serve each metric name, and who reads it;
* ``devices``: the DRA ResourceClaims and ResourceClaimTemplates pods name, and who names each.
* ``pipeline``: the scrape chain before the adapter (exporters, Services, monitors, Prometheus
  servers, the URLs that query them).

Every question is answered from an index, so a run costs what its objects relate to, not the
product of their numbers; and objects can come and go (a cluster cache, an admission
overlay) at the cost of their own relations.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gpulint.chain.adapter import AdapterConfig, AdapterRule, requested_metric_name
from gpulint.chain.address import PrometheusUrl
from gpulint.chain.exporter import DcgmExporter
from gpulint.chain.monitors import Monitor
from gpulint.chain.scrapelabels import DcgmScrape
from gpulint.chain.services import EndpointState, ServiceView
from gpulint.engine.config import Settings
from gpulint.input.chartvalues import ChartValues
from gpulint.input.document import Document, Manifest, Path, as_dict
from gpulint.input.gitops import ReleaseFile
from gpulint.input.loader import IgnoreComment, LoadedFile, LoadProblem
from gpulint.input.units import RenderProblem
from gpulint.input.yamlparse import DuplicateKey
from gpulint.inventory.claims import Autoscaler, Claims, TargetGroup
from gpulint.inventory.devices import DeviceClaims
from gpulint.inventory.exposure import Consumer, Exposure
from gpulint.inventory.nearest import nearest
from gpulint.inventory.pipeline import Pipeline
from gpulint.inventory.store import Key, ObjectStore, key_of
from gpulint.inventory.targets import ResolvedTarget, TargetResolver
from gpulint.kinds.classify import Classified, classify_document, classify_manifest
from gpulint.kinds.hpa import HPA
from gpulint.kinds.keda import ScaledObject
from gpulint.kinds.knative import KnativeService, default_class_from_configmap
from gpulint.kinds.kserve import InferenceService, default_mode_from_configmap
from gpulint.kinds.registry import VIEW_SCOPES, WORKLOAD, ViewContext, build_view, spec_for
from gpulint.kinds.revisions import KPA_CLASS
from gpulint.kinds.scaletarget import TargetRef
from gpulint.kinds.scaling import ScalingRange, replicas_range
from gpulint.kinds.view import GeneratedWorkload, KindView, generator_of
from gpulint.kinds.workload import GpuNames, PodTemplate, pod_templates

if TYPE_CHECKING:
    # For annotations only: a lint of plain files does not load the renderers, nor the
    # evidence --prometheus and --cluster collect.
    from gpulint.cluster.snapshot import ClusterSnapshot
    from gpulint.input.units import RenderProblem
    from gpulint.live.snapshot import LiveSnapshot

__all__ = [
    "Autoscaler",
    "Inventory",
    "Key",
    "ResolvedTarget",
    "TargetGroup",
    "key_of",
    "nearest",
]


class Inventory:
    def __init__(self, settings: Settings | None = None, *, by_directory: bool = True) -> None:
        self.settings = settings or Settings()
        self.store = ObjectStore()
        self.device_claims = DeviceClaims(self.store)
        self.gpu_names = GpuNames(
            self.settings.gpu_resources, self.settings.gpu_device_classes, self.device_claims
        )
        self.resolver = TargetResolver(self.store)
        self.claims = Claims(self.store, self.resolver)
        self.exposure = Exposure(self.metrics_api_readers, by_directory)
        self.charts: list[ChartValues] = []  # kube-prometheus-stack, gpu-operator, dcgm-exporter
        self.release_files: dict[str, ReleaseFile] = {}  # values file -> the helmfile release
        self.pipeline = Pipeline(
            self.store,
            lambda: self.charts,
            lambda: self.release_files,
            lambda: self.adapter_configs,
            self.gpu_names,
            self._pod_owners,
            by_directory,
        )
        self.problems: list[LoadProblem] = []
        self.duplicates: list[tuple[Document | None, DuplicateKey]] = []
        self.ignore_comments: list[IgnoreComment] = []
        self.skipped: list[tuple[str, str]] = []
        self.files: list[str] = []
        self.render_problems: list[RenderProblem] = []  # units that did not render
        self.kserve_default_mode = self.settings.kserve_default_mode
        self._kserve_mode_source: Manifest | None = None
        self.knative_default_class = KPA_CLASS
        self._knative_class_source: Manifest | None = None
        self._owned: dict[int, list[Any]] = {}  # problems a ConfigMap's embedded YAML added
        self.live: LiveSnapshot | None = None  # filled by the live Prometheus check
        self.cluster: ClusterSnapshot | None = None  # filled by cluster mode

    # --- what rules iterate ------------------------------------------------------------------

    @property
    def documents(self) -> list[Document]:
        return self.store.documents.items

    @property
    def manifests(self) -> list[Manifest]:
        return self.store.manifests.items

    @property
    def workloads(self) -> list[Manifest]:
        """Objects with pod templates that have no view of their own (Deployments ...)."""
        return self.store.workloads.items

    @property
    def hpas(self) -> list[HPA]:
        return self.store.scoped["hpa"].items

    @property
    def scaled_objects(self) -> list[ScaledObject]:
        return self.store.scoped["scaledobject"].items

    @property
    def inference_services(self) -> list[InferenceService]:
        return self.store.scoped["isvc"].items

    @property
    def knative_services(self) -> list[KnativeService]:
        return self.store.scoped["knative"].items

    @property
    def adapter_configs(self) -> list[AdapterConfig]:
        return self.exposure.configs

    @property
    def dcgm_scrapes(self) -> list[DcgmScrape]:
        return self.exposure.scrapes

    def metrics_api_readers(self) -> list[KindView]:
        """The views that read the Kubernetes metrics APIs (``KindView.reads_metrics_api``),
        scope by scope: the adapter configs they see and the metrics they read."""
        return [
            view
            for views in self.store.scoped.values()
            for view in views.items
            if view.reads_metrics_api
        ]

    def items_of(self, scope: str) -> list[Any]:
        """The views of one rule scope (``hpa``, ``scaledobject``, ``isvc``, ``knative``)."""
        return self.store.scoped[scope].items

    # --- building ----------------------------------------------------------------------------

    def add_file(self, loaded: LoadedFile) -> None:
        """A loaded file: its documents, classified, and what the loader noticed."""
        self.files.append(loaded.path)
        self.problems.extend(loaded.problems)
        self.duplicates.extend(loaded.duplicates)
        self.ignore_comments.extend(loaded.ignore_comments)
        if loaded.skipped_reason:
            self.skipped.append((loaded.path, loaded.skipped_reason))
        for document in loaded.documents:
            for classified in classify_document(document, loaded.text):
                self.add(classified)

    def add_manifest(self, manifest: Manifest, text: bytes | None = None) -> None:
        """One object, classified here (the admission path classifies first, in a worker)."""
        self.add(classify_manifest(manifest, text))

    def add(self, classified: Classified) -> None:
        manifest = classified.manifest
        self.pipeline.changed()
        if classified.charts:
            self.charts.extend(classified.charts)
        for release in classified.release_files:
            self.release_files.setdefault(release.file, release)
        if manifest is None:
            self.store.add_document(classified.document)
            self.exposure.add_configs(classified.adapter_configs)
            self.exposure.add_scrapes(classified.scrapes)
            return
        self.resolver.changed()
        self.claims.changed()
        spec = spec_for(manifest)
        view = build_view(manifest, self.view_context())
        scope = spec.scope if view is not None and spec is not None else None
        workload = view is None and (
            (spec is not None and spec.role == WORKLOAD) or bool(pod_templates(manifest))
        )
        self.store.add(manifest, view, scope, workload)
        self.device_claims.added(manifest, view)
        if classified.adapter_configs:
            self.exposure.add_configs(classified.adapter_configs)
        if classified.scrapes:
            self.exposure.add_scrapes(classified.scrapes)
        owned: list[Any] = [*classified.problems, *classified.duplicates]
        self.problems.extend(classified.problems)
        self.duplicates.extend(classified.duplicates)
        if owned:
            self._owned[id(manifest)] = owned
        if classified.kserve_mode is not None:
            self._set_kserve_default_mode(classified.kserve_mode, manifest)
        if classified.knative_class is not None:
            self._set_knative_default_class(classified.knative_class, manifest)
        if view is not None:
            self._index_view(view)
        if self.claims.has_floating():
            self.claims.refresh_floating()

    def view_context(self) -> ViewContext:
        """What views are built with: the KServe default mode and version in force."""
        return ViewContext(
            self.kserve_default_mode, self.settings.kserve_version, self.knative_default_class
        )

    def _index_view(self, view: KindView) -> None:
        self.resolver.view_added(view)
        self.exposure.view_added(view)
        self.claims.view_added(view)

    def _unindex_view(self, view: KindView) -> None:
        self.resolver.view_removed(view)
        self.exposure.view_removed(view)
        self.claims.view_removed(view)

    def _set_kserve_default_mode(self, mode: str, source: Manifest | None) -> None:
        self.kserve_default_mode = mode
        self._kserve_mode_source = source
        for isvc in self.inference_services:
            isvc.default_mode = mode
        self.claims.reset_kserve()

    def _set_knative_default_class(self, klass: str, source: Manifest | None) -> None:
        """Revisions that name no class take this one; what the Knative Services read through
        the metrics APIs depends on it, so they are indexed again."""
        self._knative_class_source = source
        if klass == self.knative_default_class:
            return
        self.knative_default_class = klass
        for ksvc in self.knative_services:
            self._unindex_view(ksvc)
            ksvc.use_default_class(klass)
            self._index_view(ksvc)

    def knative_class_source(self) -> Manifest | None:
        """The config-autoscaler ConfigMap that sets Knative's default class, if any."""
        return self._knative_class_source

    # --- incremental change -------------------------------------------------------------------

    def remove_manifest(self, manifest: Manifest) -> bool:
        """Take an object out again (a watch's DELETED event, an admission overlay undone).

        Returns False when the object is not in the inventory. The cost is that of the
        object's own relations, whatever the size of the inventory.
        """
        self.resolver.changed()
        present, view = self.store.remove(manifest)
        if not present:
            return False
        self.device_claims.removed(manifest)
        self.pipeline.changed()
        if any(values.document is manifest or values.owner is manifest for values in self.charts):
            self.charts = [
                v for v in self.charts if v.document is not manifest and v.owner is not manifest
            ]
        self.claims.changed()
        if view is not None:
            self._unindex_view(view)
        if manifest.kind == "ConfigMap":
            self._remove_configmap(manifest)
        else:
            self.exposure.remove_scrapes_of(manifest)
        if self.claims.has_floating():
            self.claims.refresh_floating()
        return True

    def replace_manifest(self, old: Manifest, new: Manifest, text: bytes | None = None) -> None:
        """``new`` takes the place of ``old`` (a watch's MODIFIED event, an admission UPDATE);
        ``old`` need not be in the inventory."""
        self.remove_manifest(old)
        self.add_manifest(new, text)

    def replace(self, old: Manifest, new: Classified) -> None:
        """``replace_manifest`` for an object already classified."""
        self.remove_manifest(old)
        self.add(new)

    def _remove_configmap(self, manifest: Manifest) -> None:
        self.exposure.remove_configs_of(manifest)
        owned = self._owned.pop(id(manifest), None)
        if owned:
            gone = {id(item) for item in owned}
            self.problems = [p for p in self.problems if id(p) not in gone]
            self.duplicates = [d for d in self.duplicates if id(d) not in gone]
        if self._knative_class_source is manifest:
            klass, class_source = KPA_CLASS, None
            for candidate in self.store.by_name.get(("ConfigMap", "config-autoscaler"), []):
                found_class = default_class_from_configmap(candidate)
                if found_class is not None:
                    klass, class_source = found_class, candidate
            self._set_knative_default_class(klass, class_source)
        if self._kserve_mode_source is manifest:
            # The last inferenceservice-config still present sets the default again.
            mode, source = self.settings.kserve_default_mode, None
            for candidate in self.store.by_name.get(("ConfigMap", "inferenceservice-config"), []):
                found = default_mode_from_configmap(candidate)
                if found is not None:
                    mode, source = found, candidate
            self._set_kserve_default_mode(mode, source)

    # --- questions rules ask ------------------------------------------------------------------

    def find(
        self, kind: str, namespace: str | None, name: str, near: Document | None = None
    ) -> Manifest | None:
        """An object by kind, namespace and name (see ``ObjectStore.find``)."""
        return self.store.find(kind, namespace, name, near)

    def of_kind(self, kind: str) -> list[Manifest]:
        return self.store.of_kind(kind)

    def device_claim_users(self, claim: Manifest) -> list[Manifest]:
        """The objects whose pods name a ResourceClaim or ResourceClaimTemplate."""
        return self.device_claims.users_of(claim)

    def view_of(self, manifest: Manifest) -> KindView | None:
        """The typed view an object of the inventory is read through, if it has one."""
        return self.store.view_of(manifest)

    def judged_at_generator(self, manifest: Manifest) -> bool:
        """Was ``manifest`` (an HPA or ScaledObject read from a cluster) made by a controller
        from settings an object of the inventory holds, whose view hands them to the rules as
        the autoscaler they become (``KindView.generated_autoscalers``)? Rules judge those
        settings there, where a user writes them, and not a second time here."""
        generator = generator_of(manifest)
        if generator is None:
            return False
        found = self.store.find_in_group(
            generator.group, generator.kind, manifest.namespace, generator.name, manifest
        )
        view = self.view_of(found) if found is not None else None
        return view is not None and bool(view.generated_autoscalers())

    def inference_service_of(self, manifest: Manifest) -> InferenceService | None:
        return self.resolver.inference_service(manifest)

    def hpa_of(self, manifest: Manifest) -> HPA | None:
        """The HPA view of an object of the inventory; None for any other object."""
        found: HPA | None = self.store.scoped_view("hpa", manifest)
        return found

    def resolve_target(
        self, namespace: str | None, ref: TargetRef, near: Document | None = None
    ) -> ResolvedTarget:
        """What an autoscaler in ``namespace`` scales, with the pod templates behind it.

        ``near`` is the autoscaler's document: among copies of the same object in several
        directories, the nearest is the one it scales."""
        return self.resolver.resolve(namespace, ref, near)

    def generated_workload(
        self, namespace: str | None, name: str
    ) -> tuple[KindView, GeneratedWorkload] | None:
        """The object whose controller makes the workload ``name`` (``KindView
        .generated_workloads``), and that workload; None for a workload written out."""
        return self.resolver.generated(namespace, name)

    def isvc_for_component(
        self, namespace: str | None, name: str
    ) -> tuple[InferenceService, str] | None:
        return self.resolver.isvc_for_component(namespace, name)

    def knative_service(self, namespace: str | None, name: str) -> KnativeService | None:
        return self.resolver.knative_service(namespace, name)

    def autoscalers(self) -> Iterator[Autoscaler]:
        """Every claim on a workload's replicas, explicit or made by a controller."""
        return self.claims.all()

    def target_groups(self) -> dict[Key, TargetGroup]:
        return self.claims.target_groups()

    def claims_of(self, manifest: Manifest) -> list[Autoscaler]:
        """The claims an HPA, ScaledObject or InferenceService makes on workloads."""
        return self.claims.claims_of(manifest)

    def revision_groups(self, namespace: str | None, configuration: str) -> list[TargetGroup]:
        """Target groups of the revision Deployments (``<configuration>-NNNNN-deployment``) of
        a Knative Service or Configuration, or of a KServe component in Knative mode."""
        return self.claims.revision_groups(namespace, configuration)

    def scaling_range(self, target: Key) -> ScalingRange | None:
        """The replicas a workload can have: the range of the first autoscaler that claims
        it, else its own ``replicas``; None when the workload is not in the unit."""
        for claim in self.autoscalers_for(target):
            view = self.view_of(claim.manifest)
            found = view.scaling_range_of(target[2]) if view is not None else None
            if found is not None:
                return found
        manifest = self.find(*target)
        if manifest is None:
            return None
        return replicas_range(manifest.data.get("spec"), f"{manifest.kind} {manifest.name}")

    def views_targeting(self, target: Key) -> list[KindView]:
        """Objects that act on a workload without setting its replicas (their kind claims
        none) and name it in ``target_refs``."""
        return self.claims.targeting(target)

    def autoscalers_for(self, target: Key) -> list[Autoscaler]:
        group = self.target_groups().get(target)
        return group.autoscalers if group else []

    def metrics_read(self) -> list[tuple[str, str]]:
        """The custom and external metrics HPAs read: ``(api, name)`` with ``api``
        ``custom`` or ``external`` and the name as the HPAs write it."""
        return list(self.exposure.readers())

    def readers_of(self, api: str, name: str) -> list[KindView]:
        """The HPAs that read a metric (see ``metrics_read``)."""
        return list(self.exposure.readers().get((api, name), {}).values())

    def adapter_configs_of(self, manifest: Manifest) -> list[AdapterConfig]:
        """The prometheus-adapter configurations a ConfigMap holds."""
        return [config for config in self.adapter_configs if config.owner is manifest]

    def adapter_rules(self) -> Iterator[AdapterRule]:
        for config in self.adapter_configs:
            yield from config.all_rules()

    def rules_exposing(
        self, metric: str, api: str, near: Document | None = None
    ) -> list[AdapterRule]:
        """Adapter rules that can serve ``metric`` (see ``Exposure.rules_exposing``)."""
        return self.exposure.rules_exposing(metric, api, near)

    def served_name(self, series: str, near: Document, resource: str = "pods") -> str | None:
        """The name under which the adapter config nearest to ``near`` serves ``series`` for
        ``resource`` (``gpu_utilization`` for ``DCGM_FI_DEV_GPU_UTIL``), for fixes that
        write a metric name; None when no config of the input serves it."""
        return next((name for _, name in self.serving(series, near, resource)), None)

    def serving(
        self, series: str, near: Document, resource: str = "pods"
    ) -> Iterator[tuple[AdapterRule, str]]:
        """The custom rules of the adapter configs nearest to ``near`` that serve ``series``
        for ``resource``, each with the name it serves it under, in the configs' order."""
        for config in self.adapter_configs_near(near):
            for rule in config.rules:
                if rule.resources.label_for(resource) is None:
                    continue
                names = rule.series_names()
                if names is not None and series not in names:
                    continue
                if names is None and (
                    rule.selector is None or not rule.selector.accepts_name(series)
                ):
                    continue
                name = rule.name_for_series(series)
                if name:
                    yield rule, name

    def series_behind(self, metric: str, api: str, near: Document) -> str | None:
        """The Prometheus series the adapter serves ``metric`` from to objects near ``near``
        (``vllm:num_requests_waiting`` behind ``vllm_requests_waiting``), when its rule
        tells without Prometheus; None otherwise."""
        for rule in self.rules_exposing(metric, api, near):
            series = rule.series_for(requested_metric_name(metric, api))
            if series:
                return series[0]
        return None

    def asked_of(self, rule: AdapterRule) -> dict[str | None, Consumer]:
        """The resources the HPA metrics an adapter rule answers ask about, each with one
        HPA metric that asks it (see ``Exposure.asked_of``)."""
        return self.exposure.asked_of(rule)

    def adapter_configs_near(self, document: Document) -> list[AdapterConfig]:
        """The adapter configs that serve objects of ``document``'s file."""
        return self.exposure.configs_near(document)

    def dcgm_scrapes_near(self, document: Document) -> list[DcgmScrape]:
        """The dcgm-exporter scrape settings nearest to ``document``."""
        return self.exposure.scrapes_near(document)

    # --- the scrape chain before the adapter (answered by ``pipeline``) ---------------------

    def monitors(self) -> list[Monitor]:
        """dcgm-exporter's ServiceMonitors and PodMonitors (and a chart's)."""
        return self.pipeline.all_monitors()

    def exporters(self) -> list[DcgmExporter]:
        """The dcgm-exporter DaemonSets, written out or made by a chart."""
        return self.pipeline.all_exporters()

    def services(self) -> list[ServiceView]:
        return self.pipeline.all_services()

    def services_named(self, name: str, namespace: str | None) -> list[ServiceView]:
        """The Services of that name (in ``namespace``; None: in any)."""
        return self.pipeline.services_named(name, namespace)

    def endpoints_of(self, service: ServiceView) -> EndpointState | None:
        """What the Service's Endpoints or EndpointSlices say, when the input has them."""
        return self.pipeline.endpoints_of(service)

    def prometheus_urls(self) -> list[PrometheusUrl]:
        """Where the adapter (or KEDA) queries Prometheus."""
        return self.pipeline.all_urls()

    def recorded_series(self) -> dict[str, tuple[Manifest, Path]]:
        """Series that PrometheusRule recording rules in the input create (``record:``)."""
        found: dict[str, tuple[Manifest, Path]] = {}
        for manifest in self.of_kind("PrometheusRule"):
            if manifest.group != "monitoring.coreos.com":
                continue
            groups = as_dict(manifest.data.get("spec")).get("groups")
            for g, group in enumerate(groups if isinstance(groups, list) else []):
                rules = as_dict(group).get("rules")
                for r, rule in enumerate(rules if isinstance(rules, list) else []):
                    record = as_dict(rule).get("record")
                    if isinstance(record, str) and record not in found:
                        found[record] = (manifest, ("spec", "groups", g, "rules", r, "record"))
        return found

    def _pod_owners(self) -> Iterator[tuple[Manifest, list[PodTemplate]]]:
        """Every object with pods: workloads, and views with pod templates of their own."""
        for manifest in self.workloads:
            templates = pod_templates(manifest)
            if templates:
                yield manifest, templates
        for scope in VIEW_SCOPES:
            for view in self.items_of(scope):
                templates = view.pod_templates()
                if templates:
                    yield view.manifest, templates

    def kserve_mode_source(self) -> Manifest | None:
        return self._kserve_mode_source

    def __len__(self) -> int:
        return len(self.store.manifests)
