"""ServiceMonitors and PodMonitors: written out, or made by the chart that installs
dcgm-exporter.

Prometheus Operator (monitoring.coreos.com/v1, pkg/apis/monitoring/v1 and
pkg/prometheus/promcfg.go):

* a ServiceMonitor selects Services by ``spec.selector`` in the namespaces of
  ``spec.namespaceSelector`` (``any: true``, ``matchNames``; by default its own namespace) and
  scrapes, per ``spec.endpoints[]``, the endpoint port the Service port ``port`` names (or the
  container port ``targetPort`` names or numbers); an endpoint with neither keeps every port of
  every endpoint, one scrape job per entry (``serviceMonitor/<ns>/<name>/<index>``);
* a PodMonitor selects pods and scrapes ``podMetricsEndpoints[].port`` (a container port name),
  ``portNumber`` or the deprecated ``targetPort``.

Monitors made by charts, with the labels a Prometheus selects them by:

* gpu-operator (``dcgmExporter.serviceMonitor.enabled``; the chart's values, or the
  ClusterPolicy it renders): ServiceMonitor ``nvidia-dcgm-exporter`` in the operator's
  namespace, labels ``app: nvidia-dcgm-exporter`` plus ``additionalLabels``, endpoint port
  ``gpu-metrics`` (assets/state-dcgm-exporter/0500_service_monitor.yaml,
  controllers/object_controls.go ``applyServiceMonitorCustomEdits``);
* the dcgm-exporter chart (``serviceMonitor.enabled``, true by default): ServiceMonitor
  ``<fullname>`` in the release namespace, the chart's labels (``app.kubernetes.io/name``,
  ``app.kubernetes.io/instance: <release>`` ...) plus ``serviceMonitor.additionalLabels``, endpoint
  port ``metrics`` (deployment/templates/service-monitor.yaml, _helpers.tpl).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.chain.scrapelabels import mentions_dcgm
from gpulint.core.selectors import LabelSelector, label_value, labels_of
from gpulint.input.chartvalues import DCGM_EXPORTER, GPU_OPERATOR, ChartValues
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list

MONITORING_GROUP = "monitoring.coreos.com"
SERVICE_MONITOR, POD_MONITOR = "ServiceMonitor", "PodMonitor"
# gpu-operator's dcgm-exporter objects (assets/state-dcgm-exporter/).
OPERATOR_EXPORTER = "nvidia-dcgm-exporter"
OPERATOR_PORT = "gpu-metrics"
DCGM_CHART_PORT = "metrics"


class NamespaceChoice(NamedTuple):
    """Where a monitor looks for Services (or pods)."""

    any: bool
    names: tuple[str, ...]  # matchNames; neither: the monitor's own namespace
    path: Path

    def covers(self, namespace: str | None, own: str | None) -> bool | None:
        """Is ``namespace`` looked in? None when a namespace is not known."""
        if self.any:
            return True
        if self.names:
            return None if namespace is None else namespace in self.names
        if namespace is None or own is None:
            return None
        return namespace == own


class MonitorEndpoint(NamedTuple):
    position: int  # its index in the list
    path: Path
    port: str | None  # a Service port name (ServiceMonitor) or a container port name
    target_port: int | str | None  # deprecated: a container port name or number
    port_number: int | None  # PodMonitor portNumber
    relabelings: bool  # relabelings or metricRelabelings are written


class Monitor:
    """One ServiceMonitor or PodMonitor."""

    __slots__ = (
        "chart",
        "document",
        "endpoints",
        "endpoints_path",
        "kind",
        "labels",
        "labels_path",
        "made_by",
        "name",
        "namespace",
        "namespaces",
        "path",
        "selector",
        "selector_path",
    )

    def __init__(
        self,
        kind: str,
        name: str | None,
        namespace: str | None,
        labels: dict[str, str | None],
        labels_path: Path,
        document: Document,
        path: Path,
        selector: LabelSelector | None,
        selector_path: Path,
        namespaces: NamespaceChoice,
        endpoints: list[MonitorEndpoint],
        endpoints_path: Path,
        made_by: str | None = None,
        chart: ChartValues | None = None,
    ) -> None:
        self.kind = kind
        self.name = name  # None: depends on a release name gpulint does not know
        self.namespace = namespace
        self.labels = labels
        self.labels_path = labels_path  # where its labels are written, or would be added
        self.document = document
        self.path = path
        self.selector = selector
        self.selector_path = selector_path
        self.namespaces = namespaces
        self.endpoints = endpoints
        self.endpoints_path = endpoints_path
        self.made_by = made_by  # "gpu-operator values ..." for a monitor a chart makes
        self.chart = chart

    def __repr__(self) -> str:
        return f"Monitor({self.kind} {self.namespace}/{self.name}, made_by={self.made_by!r})"

    @property
    def manifest(self) -> Manifest | None:
        return (
            self.document if self.made_by is None and isinstance(self.document, Manifest) else None
        )

    @property
    def shown_name(self) -> str:
        return self.name or "<release>-dcgm-exporter"

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        if self.made_by:
            return f"the {self.kind} {where}{self.shown_name} that {self.made_by} makes"
        return f"{self.kind} {where}{self.shown_name}"

    def scrape_pool(self, index: int) -> str | None:
        """The job Prometheus Operator generates for endpoint ``index`` (the scrape pool of
        ``/api/v1/targets``); None when the name or namespace is not known."""
        if self.name is None or self.namespace is None:
            return None
        prefix = "serviceMonitor" if self.kind == SERVICE_MONITOR else "podMonitor"
        return f"{prefix}/{self.namespace}/{self.name}/{index}"


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) < 6:
        return int(value)
    return None


def _endpoints(items: Any, path: Path) -> list[MonitorEndpoint]:
    found = []
    for index, item in enumerate(as_list(items)):
        entry = as_dict(item)
        port = entry.get("port")
        target = entry.get("targetPort")
        target_port: int | str | None = _number(target)
        if target_port is None and isinstance(target, str) and target:
            target_port = target
        found.append(
            MonitorEndpoint(
                index,
                (*path, index),
                port if isinstance(port, str) and port else None,
                target_port,
                _number(entry.get("portNumber")),
                bool(entry.get("relabelings") or entry.get("metricRelabelings")),
            )
        )
    return found


def _namespace_choice(data: Any, path: Path) -> NamespaceChoice:
    choice = as_dict(data)
    names = tuple(n for n in as_list(choice.get("matchNames")) if isinstance(n, str) and n)
    return NamespaceChoice(choice.get("any") is True, names, path)


def monitor_of(manifest: Manifest) -> Monitor | None:
    """A ServiceMonitor or PodMonitor object; None for anything else."""
    if manifest.kind not in (SERVICE_MONITOR, POD_MONITOR) or manifest.group != MONITORING_GROUP:
        return None
    spec = as_dict(manifest.data.get("spec"))
    key = "endpoints" if manifest.kind == SERVICE_MONITOR else "podMetricsEndpoints"
    metadata = manifest.metadata
    return Monitor(
        manifest.kind,
        manifest.name,
        manifest.namespace,
        labels_of(metadata.get("labels")),
        ("metadata", "labels") if isinstance(metadata.get("labels"), dict) else ("metadata",),
        manifest,
        ("metadata", "name"),
        LabelSelector.of(spec.get("selector")),
        ("spec", "selector"),
        _namespace_choice(spec.get("namespaceSelector"), ("spec", "namespaceSelector")),
        _endpoints(spec.get(key), ("spec", key)),
        ("spec", key) if key in spec else ("spec",),
    )


def scrapes_dcgm(monitor: Monitor) -> bool:
    """Is it dcgm-exporter's monitor (its name, labels or selector say so)?"""
    if monitor.made_by is not None:
        return True
    selector = monitor.selector
    return mentions_dcgm(
        monitor.name or "",
        dict(monitor.labels),
        dict(selector.match_labels) if selector else {},
        [e.values for e in selector.expressions] if selector else [],
    )


def chart_monitor(values: ChartValues) -> Monitor | None:
    """The dcgm-exporter ServiceMonitor that gpu-operator or dcgm-exporter chart values make."""
    if values.chart == GPU_OPERATOR:
        return _operator_monitor(values)
    if values.chart == DCGM_EXPORTER:
        return _dcgm_chart_monitor(values)
    return None


def _operator_monitor(values: ChartValues) -> Monitor | None:
    exporter = as_dict(values.get("dcgmExporter"))
    monitor = as_dict(exporter.get("serviceMonitor"))
    # The chart's default for serviceMonitor.enabled changed from false to true in v26.7.0
    # (gpu-operator 2e241753f): only a written-out value says what an install does.
    if exporter.get("enabled") is False or monitor.get("enabled") is not True:
        return None
    base = values.path("dcgmExporter", "serviceMonitor")
    additional = monitor.get("additionalLabels")
    labels: dict[str, str | None] = {"app": OPERATOR_EXPORTER}
    labels.update(labels_of(additional))
    namespace = values.namespace
    return Monitor(
        SERVICE_MONITOR,
        OPERATOR_EXPORTER,
        namespace,
        labels,
        (*base, "additionalLabels") if isinstance(additional, dict) else base,
        values.document,
        base,
        LabelSelector({"app": OPERATOR_EXPORTER}),
        base,
        NamespaceChoice(False, (namespace,) if namespace else (), base),
        [MonitorEndpoint(0, base, OPERATOR_PORT, None, None, bool(monitor.get("relabelings")))],
        base,
        made_by=values.describe(),
        chart=values,
    )


def dcgm_chart_name(values: ChartValues) -> str:
    override = values.get("nameOverride")
    return override if isinstance(override, str) and override else DCGM_EXPORTER


def dcgm_chart_fullname(values: ChartValues) -> str | None:
    """``dcgm-exporter.fullname``: fullnameOverride, else the release name when it contains
    the chart name, else ``<release>-<name>``, cut at 63 characters."""
    override = values.get("fullnameOverride")
    if isinstance(override, str) and override:
        return override[:63].removesuffix("-")
    if values.release is None:
        return None
    name = dcgm_chart_name(values)
    full = values.release if name in values.release else f"{values.release}-{name}"
    return full[:63].removesuffix("-")


def dcgm_chart_selector_labels(values: ChartValues) -> dict[str, str | None]:
    name = dcgm_chart_name(values)
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/instance": values.release,
        "app.kubernetes.io/component": name,
    }


def dcgm_chart_namespace(values: ChartValues) -> str | None:
    override = values.get("namespaceOverride")
    return override if isinstance(override, str) and override else values.namespace


def _dcgm_chart_monitor(values: ChartValues) -> Monitor | None:
    monitor = values.get("serviceMonitor")
    if monitor is not None and not isinstance(monitor, dict):
        return None
    monitor = as_dict(monitor)
    if monitor.get("enabled", True) is False:
        return None
    base = values.path("serviceMonitor") if "serviceMonitor" in values.values else values.path()
    additional = monitor.get("additionalLabels")
    labels: dict[str, str | None] = {
        **dcgm_chart_selector_labels(values),
        "helm.sh/chart": None,
        "app.kubernetes.io/version": None,
        "app.kubernetes.io/managed-by": "Helm",
    }
    labels.update(labels_of(additional))
    namespace = dcgm_chart_namespace(values)
    return Monitor(
        SERVICE_MONITOR,
        dcgm_chart_fullname(values),
        namespace,
        labels,
        (*base, "additionalLabels") if isinstance(additional, dict) else base,
        values.document,
        base,
        LabelSelector(dcgm_chart_selector_labels(values)),
        base,
        NamespaceChoice(False, (namespace,) if namespace else (), base),
        [MonitorEndpoint(0, base, DCGM_CHART_PORT, None, None, bool(monitor.get("relabelings")))],
        base,
        made_by=values.describe(),
        chart=values,
    )


def release_label(monitor: Monitor) -> str | None:
    """The value of the monitor's ``release`` label (kube-prometheus-stack's default
    selector), when it has one."""
    return label_value(monitor.labels.get("release")) if "release" in monitor.labels else None
