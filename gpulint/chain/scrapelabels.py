"""How dcgm-exporter is scraped, which decides whether a GPU series' ``pod`` is the workload's.

With ``honor_labels: false`` (the ServiceMonitor default and the dcgm-exporter chart value),
Prometheus renames the exporter's own ``pod``/``namespace``/``container`` labels to
``exported_pod``/``exported_namespace``/``exported_container`` and sets ``pod``/``namespace`` to
the exporter's pod (prometheus.io configuration docs, ``honor_labels``; prometheus-operator
promcfg.go). GKE managed Prometheus (PodMonitoring) keeps the exporter's labels.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.input.document import Document, Manifest, Path, as_dict, as_list

POD_LABELS = ("pod", "namespace", "container")


class DcgmScrape(NamedTuple):
    """One place that configures how dcgm-exporter is scraped."""

    document: Document
    path: Path
    honor_labels: bool
    explicit: bool  # honorLabels written out (False: the default applies)
    relabels_pod_labels: bool  # relabelings touch pod/namespace labels: gpulint cannot tell
    description: str
    release: str | None = None  # the Helm release that makes it, when a wrapper says

    @property
    def pod_label(self) -> str:
        """The label that names the workload's pod in the stored series."""
        return "pod" if self.honor_labels else "exported_pod"

    @property
    def namespace_label(self) -> str:
        return "namespace" if self.honor_labels else "exported_namespace"


def mentions_dcgm(*values: Any) -> bool:
    """Does any name, key or value in ``values`` (nested mappings and lists) say dcgm?"""
    for value in values:
        if isinstance(value, dict):
            if mentions_dcgm(*value.keys(), *value.values()):
                return True
        elif isinstance(value, list):
            if mentions_dcgm(*value):
                return True
        elif isinstance(value, str) and "dcgm" in value.lower():
            return True
    return False


def _touches_pod_labels(endpoint: dict[str, Any]) -> bool:
    for key in ("relabelings", "metricRelabelings", "metricRelabeling"):
        for item in as_list(endpoint.get(key)):
            text = str(item)
            if "exported_pod" in text or "exported_namespace" in text or "labelmap" in text:
                return True
            target = as_dict(item).get("targetLabel")
            if target in POD_LABELS:
                return True
    return False


def scrapes_in_manifest(manifest: Manifest) -> list[DcgmScrape]:
    """ServiceMonitor / PodMonitor / GMP PodMonitoring objects that scrape dcgm-exporter."""
    kind, group = manifest.kind, manifest.group
    spec = as_dict(manifest.data.get("spec"))
    if kind in ("ServiceMonitor", "PodMonitor") and group == "monitoring.coreos.com":
        if not mentions_dcgm(manifest.name, manifest.labels, as_dict(spec.get("selector"))):
            return []
        key = "endpoints" if kind == "ServiceMonitor" else "podMetricsEndpoints"
        found = []
        for index, endpoint in enumerate(as_list(spec.get(key))):
            endpoint = as_dict(endpoint)
            honor = endpoint.get("honorLabels")
            path: Path = ("spec", key, index)
            found.append(
                DcgmScrape(
                    manifest,
                    (*path, "honorLabels") if "honorLabels" in endpoint else path,
                    honor is True,
                    "honorLabels" in endpoint,
                    _touches_pod_labels(endpoint),
                    f"{kind} {manifest.name}",
                )
            )
        return found
    if kind in ("PodMonitoring", "ClusterPodMonitoring") and group == "monitoring.googleapis.com":
        if not mentions_dcgm(manifest.name, manifest.labels, as_dict(spec.get("selector"))):
            return []
        return [DcgmScrape(manifest, ("spec",), True, False, False, f"{kind} {manifest.name}")]
    return []


def scrapes_in_values(document: Document, chart: str | None = None) -> list[DcgmScrape]:
    """dcgm-exporter chart values and gpu-operator chart values that turn on a ServiceMonitor.

    ``chart`` is the chart the values are for, when a GitOps wrapper names it."""
    data = as_dict(document.data)
    found = []
    operator = data.get("dcgmExporter")
    if isinstance(operator, dict) and (
        chart == "gpu-operator"
        or any(k in data for k in ("driver", "toolkit", "operator", "devicePlugin", "dcgm"))
    ):
        monitor = as_dict(operator.get("serviceMonitor"))
        if monitor.get("enabled") is True and operator.get("enabled", True) is not False:
            found.append(
                _values_scrape(
                    document,
                    ("dcgmExporter", "serviceMonitor"),
                    monitor,
                    "gpu-operator values dcgmExporter.serviceMonitor",
                )
            )
    chart_monitor = data.get("serviceMonitor")
    dcgm_values = isinstance(chart_monitor, dict) and (
        chart == "dcgm-exporter" or _is_dcgm_chart_values(data)
    )
    if dcgm_values and as_dict(chart_monitor).get("enabled", True) is not False:
        found.append(
            _values_scrape(
                document,
                ("serviceMonitor",),
                as_dict(chart_monitor),
                "dcgm-exporter values serviceMonitor",
            )
        )
    return found


def _is_dcgm_chart_values(data: dict[str, Any]) -> bool:
    image = as_dict(data.get("image"))
    return mentions_dcgm(
        image.get("repository"),
        data.get("arguments"),
        data.get("nameOverride"),
        data.get("fullnameOverride"),
    )


def _values_scrape(
    document: Document, path: Path, monitor: dict[str, Any], description: str
) -> DcgmScrape:
    honor = monitor.get("honorLabels")
    return DcgmScrape(
        document,
        (*path, "honorLabels") if "honorLabels" in monitor else path,
        honor is True,
        "honorLabels" in monitor,
        _touches_pod_labels(monitor),
        description,
    )
