"""The scrape chain of one unit, indexed: exporters, Services, monitors, Prometheus servers and
the URLs that query them, from objects and from the chart values that make them.

Built on first use after a change (the store's objects, the classified chart values, the
helmfile releases that name values files), then answered from indexes: Services by namespace
and name and by each of their labels, endpoints by Service, namespaces by name. A monitor's
Services are found through the index of its selector's first label, so a unit of ten thousand
apps costs what the monitor selects, not the number of Services.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import NamedTuple

from gpulint.chain.adapter import AdapterConfig
from gpulint.chain.address import PrometheusUrl
from gpulint.chain.exporter import (
    DcgmExporter,
    Placement,
    Taint,
    chart_exporter,
    exporter_of,
    placement_of_pod,
)
from gpulint.chain.monitors import (
    DCGM_CHART_PORT,
    OPERATOR_EXPORTER,
    OPERATOR_PORT,
    POD_MONITOR,
    Monitor,
    chart_monitor,
    dcgm_chart_fullname,
    dcgm_chart_namespace,
    dcgm_chart_selector_labels,
    monitor_of,
    scrapes_dcgm,
)
from gpulint.chain.servers import PrometheusServer, prometheus_of, stack_server
from gpulint.chain.services import (
    EndpointState,
    ServicePort,
    ServiceView,
    endpoint_state,
    endpoints_service,
    service_view,
)
from gpulint.chain.urls import adapter_values_url, deployment_urls
from gpulint.core.selectors import Labels, LabelSelector, labels_of
from gpulint.input.chartvalues import DCGM_EXPORTER, GPU_OPERATOR, ChartValues
from gpulint.input.document import Document, Manifest, Path
from gpulint.input.gitops import ReleaseFile
from gpulint.inventory.nearest import DirectoryIndex
from gpulint.inventory.store import ObjectStore
from gpulint.kinds.registry import VIEW_SCOPES
from gpulint.kinds.workload import GpuNames, PodTemplate

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Taints every node may carry for a while, which pods tolerate by default (the
# DefaultTolerationSeconds admission plugin) or which say nothing about GPUs.
_TRANSIENT_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")


class GpuPlacement(NamedTuple):
    """Where the pods of GPU workloads may run, one entry per distinct placement."""

    placement: Placement
    owners: list[tuple[Document, Path]]  # the pod templates (document, template path)
    taints: list[Taint]  # the taints their tolerations tell the GPU nodes carry


class Matched(NamedTuple):
    """What a selector matched: certainly, and perhaps (a label value not known)."""

    certain: list[ServiceView]
    maybe: list[ServiceView]


class Pipeline:
    def __init__(
        self,
        store: ObjectStore,
        charts: Callable[[], Iterable[ChartValues]],
        release_files: Callable[[], dict[str, ReleaseFile]],
        adapter_configs: Callable[[], list[AdapterConfig]],
        gpu_names: GpuNames,
        pod_owners: Callable[[], Iterable[tuple[Manifest, list[PodTemplate]]]],
        by_directory: bool = True,
    ) -> None:
        self.store = store
        self._charts = charts
        self._release_files = release_files
        self._adapter_configs = adapter_configs
        self.gpu_names = gpu_names
        self._pod_owners = pod_owners
        self.by_directory = by_directory
        self._built = False
        self._gpu: list[GpuPlacement] | None = None

    def changed(self) -> None:
        self._built = False
        self._gpu = None

    # --- building ----------------------------------------------------------------------------

    def _build(self) -> None:
        if self._built:
            return
        self.charts = self._installed_charts()
        self.services: list[ServiceView] = []
        self.monitors: list[Monitor] = []
        self.servers: list[PrometheusServer] = []
        self.exporters: list[DcgmExporter] = []
        self.urls: list[PrometheusUrl] = []
        self.namespaces: dict[str, dict[str, str | None]] = {}
        self._endpoints: dict[tuple[str, str], list[Manifest]] = {}
        # Services, endpoints and namespaces first: a Prometheus server adds its own Services.
        for kind, add in self._adders().items():
            for manifest in self.store.of_kind(kind):
                add(manifest)
        for scope in VIEW_SCOPES:  # autoscalers that query Prometheus themselves (KEDA)
            for view in self.store.scoped[scope].items:
                self.urls.extend(view.prometheus_urls())
        for values in self.charts:
            self._add_chart(values)
        for config in self._adapter_configs():
            url = adapter_values_url(config, self._adapter_namespace(config))
            if url is not None:
                self.urls.append(url)
        self._index_services()
        self._server_index: DirectoryIndex[PrometheusServer] | None = None
        self._exporter_index: DirectoryIndex[DcgmExporter] | None = None
        self._built = True

    def _installed_charts(self) -> list[ChartValues]:
        """The chart values, each with the release a helmfile installs it as, if one does."""
        charts: list[ChartValues] = []
        files = self._release_files()
        for values in self._charts():
            release = files.get(os.path.normpath(values.document.file))
            if release is not None and (release.chart in (None, values.chart)):
                values = values.with_install(
                    release.release, release.namespace, release.installed_by
                )
            charts.append(values)
        return charts

    def _index_services(self) -> None:
        """Services by namespace and name, by namespace, and by each of their labels."""
        self._by_key: dict[tuple[str, str], list[ServiceView]] = {}
        self._by_label: dict[tuple[str, str], list[ServiceView]] = {}
        self._by_namespace: dict[str, list[ServiceView]] = {}
        self._unnamed = [s for s in self.services if not s.name_known]
        self._dcgm_services = [
            s for s in self.services if s.name_known and "dcgm" in s.name.lower()
        ]
        for service in self.services:
            if not service.name_known:
                continue
            namespace = service.namespace or ""
            self._by_key.setdefault((namespace, service.name), []).append(service)
            self._by_namespace.setdefault(namespace, []).append(service)
            for key, value in service.labels.items():
                if value is not None:
                    self._by_label.setdefault((key, value), []).append(service)

    def _adapter_namespace(self, config: AdapterConfig) -> str | None:
        if config.release_namespace:
            return config.release_namespace
        release = self._release_files().get(os.path.normpath(config.document.file))
        return release.namespace if release is not None else None

    def _adders(self) -> dict[str, Callable[[Manifest], None]]:
        """What each kind of the scrape chain adds, in the order they are read."""
        return {
            "Service": self._add_service,
            "Endpoints": self._add_endpoints,
            "EndpointSlice": self._add_endpoints,
            "Namespace": self._add_namespace,
            "DaemonSet": self._add_exporter,
            "ServiceMonitor": self._add_monitor,
            "PodMonitor": self._add_monitor,
            "Prometheus": self._add_server,
            "Deployment": self._add_deployment_urls,
        }

    def _add_service(self, manifest: Manifest) -> None:
        service = service_view(manifest)
        if service is not None:
            self.services.append(service)

    def _add_endpoints(self, manifest: Manifest) -> None:
        owner = endpoints_service(manifest)
        if owner is not None:
            self._endpoints.setdefault((manifest.namespace or "", owner), []).append(manifest)

    def _add_namespace(self, manifest: Manifest) -> None:
        if manifest.group == "":
            self.namespaces[manifest.name] = {
                **labels_of(manifest.labels),
                NAMESPACE_NAME_LABEL: manifest.name,
            }

    def _add_exporter(self, manifest: Manifest) -> None:
        exporter = exporter_of(manifest)
        if exporter is not None:
            self.exporters.append(exporter)

    def _add_monitor(self, manifest: Manifest) -> None:
        monitor = monitor_of(manifest)
        if monitor is not None and scrapes_dcgm(monitor):
            self.monitors.append(monitor)

    def _add_server(self, manifest: Manifest) -> None:
        server = prometheus_of(manifest)
        if server is not None:
            self.servers.append(server)
            self.services.extend(server.services)

    def _add_deployment_urls(self, manifest: Manifest) -> None:
        self.urls.extend(deployment_urls(manifest))

    def _add_chart(self, values: ChartValues) -> None:
        server = stack_server(values)
        if server is not None:
            self.servers.append(server)
            self.services.extend(server.services)
        monitor = chart_monitor(values)
        if monitor is not None:
            self.monitors.append(monitor)
        exporter = chart_exporter(values)
        if exporter is not None:
            self.exporters.append(exporter)
            service = _chart_service(values, exporter)
            if service is not None:
                self.services.append(service)

    # --- questions ---------------------------------------------------------------------------

    def all_monitors(self) -> list[Monitor]:
        self._build()
        return self.monitors

    def all_servers(self) -> list[PrometheusServer]:
        self._build()
        return self.servers

    def all_exporters(self) -> list[DcgmExporter]:
        self._build()
        return self.exporters

    def all_urls(self) -> list[PrometheusUrl]:
        self._build()
        return self.urls

    def all_charts(self) -> list[ChartValues]:
        self._build()
        return self.charts

    def all_services(self) -> list[ServiceView]:
        self._build()
        return self.services

    def dcgm_services(self) -> list[ServiceView]:
        """Services named after dcgm-exporter (written out or made by a chart)."""
        self._build()
        return self._dcgm_services

    def servers_near(self, document: Document) -> list[PrometheusServer]:
        """The Prometheus servers that scrape what ``document`` declares: the nearest to its
        file in a repository, every one in a cluster."""
        self._build()
        if not self.by_directory or len(self.servers) < 2:
            return list(self.servers)
        if self._server_index is None:
            self._server_index = DirectoryIndex(self.servers, lambda s: s.document.file)
        return self._server_index.near(document.file)

    def exporters_near(self, document: Document) -> list[DcgmExporter]:
        self._build()
        if not self.by_directory or len(self.exporters) < 2:
            return list(self.exporters)
        if self._exporter_index is None:
            self._exporter_index = DirectoryIndex(self.exporters, lambda e: e.document.file)
        return self._exporter_index.near(document.file)

    def services_named(self, name: str, namespace: str | None) -> list[ServiceView]:
        """Services of that name, in ``namespace`` (any namespace when None; an object written
        without a namespace matches any)."""
        self._build()
        if namespace is None:
            return [s for (_, n), items in self._by_key.items() if n == name for s in items]
        return [*self._by_key.get((namespace, name), []), *self._by_key.get(("", name), [])]

    def namespace_labels(self, namespace: str | None, keys: Iterable[str] = ()) -> Labels | None:
        """The labels of a namespace: its Namespace object's, or only the automatic
        ``kubernetes.io/metadata.name`` when that is all ``keys`` asks for; None when unknown."""
        self._build()
        if namespace is None:
            return None
        found = self.namespaces.get(namespace)
        if found is not None:
            return found
        if set(keys) <= {NAMESPACE_NAME_LABEL}:
            return {NAMESPACE_NAME_LABEL: namespace}
        return None

    def services_selected(self, monitor: Monitor) -> Matched:
        """The Services a ServiceMonitor selects (certainly, and perhaps)."""
        self._build()
        selector = monitor.selector
        if monitor.kind == POD_MONITOR or selector is None or not selector.valid:
            return Matched([], [])
        pairs = [(k, v) for k, v in selector.match_labels.items() if v is not None]
        if pairs:
            candidates = self._by_label.get(pairs[0], [])
        elif monitor.namespaces.names:
            candidates = [
                s for n in monitor.namespaces.names for s in self._by_namespace.get(n, [])
            ]
            candidates += self._by_namespace.get("", [])
        else:
            candidates = [s for s in self.services if s.name_known]
        candidates = [*candidates, *self._unnamed]
        certain, maybe = [], []
        for service in candidates:
            covered = monitor.namespaces.covers(service.namespace, monitor.namespace)
            if covered is False:
                continue
            answer = selector.matches(service.labels)
            if answer is True and covered and service.name_known:
                certain.append(service)
            elif answer is not False:
                maybe.append(service)
        return Matched(certain, maybe)

    def exporters_behind(self, service: ServiceView) -> tuple[list[DcgmExporter], bool]:
        """The dcgm-exporter DaemonSets whose pods the Service selects, and whether some may
        be (a label or namespace not known)."""
        self._build()
        if service.selector is None:
            return [], False
        found, unsure = [], False
        for exporter in self.exporters:
            if (
                exporter.namespace is not None
                and service.namespace is not None
                and exporter.namespace != service.namespace
            ):
                continue
            answer = service.selector.matches(exporter.pod_labels)
            if answer is True and exporter.namespace is not None and service.namespace is not None:
                found.append(exporter)
            elif answer is not False:
                unsure = True
                if answer is True:
                    found.append(exporter)
        return found, unsure

    def exporters_selected(self, monitor: Monitor) -> tuple[list[DcgmExporter], bool]:
        """The dcgm-exporter pods a PodMonitor selects."""
        self._build()
        if monitor.selector is None:
            return [], False
        found, unsure = [], False
        for exporter in self.exporters:
            covered = monitor.namespaces.covers(exporter.namespace, monitor.namespace)
            if covered is False:
                continue
            answer = monitor.selector.matches(exporter.pod_labels)
            if answer is True and covered:
                found.append(exporter)
            elif answer is not False:
                unsure = True
        return found, unsure

    def endpoints_of(self, service: ServiceView) -> EndpointState | None:
        self._build()
        return endpoint_state(self._endpoints.get((service.namespace or "", service.name), []))

    def endpoint_objects(self, service: ServiceView) -> list[Manifest]:
        self._build()
        return list(self._endpoints.get((service.namespace or "", service.name), []))

    def gpu_placements(self) -> list[GpuPlacement]:
        """The distinct placements of the unit's GPU pod templates (asked once per unit)."""
        if self._gpu is not None:
            return self._gpu
        groups: dict[tuple[object, ...], GpuPlacement] = {}
        for manifest, templates in self._pod_owners():
            for template in templates:
                if not template.gpu_requests(self.gpu_names):
                    continue
                spec_path = _pod_spec_path(manifest, template)
                placement = placement_of_pod(manifest.get(spec_path), spec_path)
                taints = _taints_told(placement)
                key = (
                    tuple(sorted(placement.node_selector.items(), key=str)),
                    tuple(sorted(map(str, taints))),
                )
                group = groups.get(key)
                if group is None:
                    group = groups[key] = GpuPlacement(placement, [], taints)
                group.owners.append((manifest, template.path))
        self._gpu = list(groups.values())
        return self._gpu


def _pod_spec_path(manifest: Manifest, template: PodTemplate) -> Path:
    """Where a template's pod spec is: ``<template>.spec``, or the template itself for a
    KServe component (a PodSpec with the component's own fields) and for a Pod."""
    if not template.path:
        return ("spec",)
    nested = (*template.path, "spec")
    if isinstance(manifest.get(nested), dict):
        return nested
    return template.path


def _taints_told(placement: Placement) -> list[Taint]:
    """The taints a pod's tolerations say its nodes carry: keyed, scheduling tolerations."""
    found = []
    for toleration in placement.tolerations:
        if toleration.key is None or toleration.key.startswith(_TRANSIENT_TAINT_PREFIXES):
            continue
        if toleration.key.startswith("node-role.kubernetes.io/"):
            continue
        value = toleration.value if toleration.operator == "Equal" else None
        for effect in (toleration.effect,) if toleration.effect else ("NoSchedule",):
            if effect in ("NoSchedule", "NoExecute"):
                found.append(Taint(toleration.key, value, effect))
    return found


def _chart_service(values: ChartValues, exporter: DcgmExporter) -> ServiceView | None:
    """The Service in front of a chart-made exporter."""
    if values.chart == GPU_OPERATOR:
        return ServiceView(
            OPERATOR_EXPORTER,
            exporter.namespace,
            {"app": OPERATOR_EXPORTER},
            LabelSelector({"app": OPERATOR_EXPORTER}),
            [ServicePort(OPERATOR_PORT, 9400, 9400, exporter.path)],
            values.document,
            exporter.path,
            made_by=values.describe(),
        )
    if values.chart == DCGM_EXPORTER:
        settings = values.get("service")
        if isinstance(settings, dict) and settings.get("enable") is False:
            return None
        port = exporter.ports[0].number if exporter.ports else 9400
        name = dcgm_chart_fullname(values)
        selector = dcgm_chart_selector_labels(values)
        return ServiceView(
            name or "<release>-dcgm-exporter",
            dcgm_chart_namespace(values),
            {**selector, "app.kubernetes.io/managed-by": "Helm"},
            LabelSelector(selector),
            [ServicePort(DCGM_CHART_PORT, port, port, exporter.path)],
            values.document,
            exporter.path,
            made_by=values.describe(),
            name_known=name is not None,
        )
    return None
