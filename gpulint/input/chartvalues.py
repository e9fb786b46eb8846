"""Values of the charts that build the scrape chain: kube-prometheus-stack, gpu-operator and
dcgm-exporter, recognized by their content or by the chart a GitOps wrapper names.

A values file does not say which release installs it. The release name and namespace come
from what installs the chart: a Flux HelmRelease or an Argo CD Application that carries the
values (``gpulint.input.gitops``), or a helmfile release that lists the values file. Without them
``release`` and ``namespace`` are None and rules judge only what holds for every release.

gpu-operator's ClusterPolicy (``nvidia.com/v1``, what the chart renders from its values) has
the same shape under ``spec``, and is read the same way.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.input.document import Document, Manifest, Path, as_dict

KUBE_PROMETHEUS_STACK = "kube-prometheus-stack"
GPU_OPERATOR = "gpu-operator"
DCGM_EXPORTER = "dcgm-exporter"
CHARTS = (KUBE_PROMETHEUS_STACK, GPU_OPERATOR, DCGM_EXPORTER)

# Keys only kube-prometheus-stack's values have at the top (charts/kube-prometheus-stack
# values.yaml): its subcharts and the rule and scrape toggles.
_STACK_KEYS = (
    "prometheusOperator",
    "kube-state-metrics",
    "prometheus-node-exporter",
    "kubeStateMetrics",
    "nodeExporter",
    "defaultRules",
    "kubeApiServer",
    "kubelet",
    "kubeControllerManager",
)
# gpu-operator values beside dcgmExporter (deployments/gpu-operator/values.yaml).
_OPERATOR_KEYS = ("driver", "toolkit", "operator", "devicePlugin", "dcgm", "daemonsets", "gfd")


class ChartValues(NamedTuple):
    """The values one chart install is given, and what is known of the install."""

    chart: str  # one of CHARTS
    document: Document  # the values, positioned in their file
    base: Path  # where the chart's values start in the document (umbrella key, ``spec``)
    release: str | None = None
    namespace: str | None = None
    installed_by: str | None = None  # "HelmRelease monitoring/kps", "helmfile.yaml" ...
    owner: Manifest | None = None  # the HelmRelease, Application or ClusterPolicy

    @property
    def values(self) -> dict[str, Any]:
        return as_dict(self.document.get(self.base)) if self.base else as_dict(self.document.data)

    def get(self, *path: str) -> Any:
        node: Any = self.values
        for step in path:
            if not isinstance(node, dict) or step not in node:
                return None
            node = node[step]
        return node

    def path(self, *sub: str | int) -> Path:
        return (*self.base, *sub)

    def describe(self) -> str:
        if self.owner is not None and self.owner.kind == "ClusterPolicy":
            return f"ClusterPolicy {self.owner.name}"
        if self.installed_by:
            return f"the {self.chart} values of {self.installed_by}"
        name = self.document.file.rsplit("/", 1)[-1]
        return f"{self.chart} values {name}"

    def with_install(
        self, release: str | None, namespace: str | None, installed_by: str | None
    ) -> ChartValues:
        return self._replace(
            release=self.release or release,
            namespace=self.namespace or namespace,
            installed_by=self.installed_by or installed_by,
        )


def chart_name(reference: Any) -> str | None:
    """``kube-prometheus-stack`` for ``prometheus-community/kube-prometheus-stack``,
    ``oci://ghcr.io/.../kube-prometheus-stack`` or a chart directory path."""
    if not isinstance(reference, str) or not reference.strip():
        return None
    return reference.strip().rstrip("/").rsplit("/", 1)[-1]


def looks_like_stack_values(data: Any) -> bool:
    if not isinstance(data, dict) or "apiVersion" in data or "kind" in data:
        return False
    if isinstance(as_dict(data.get("prometheus")).get("prometheusSpec"), dict):
        return True
    return any(isinstance(data.get(key), dict) for key in _STACK_KEYS) and any(
        isinstance(data.get(key), dict) for key in ("prometheus", "alertmanager", "grafana")
    )


def looks_like_operator_values(data: Any) -> bool:
    if not isinstance(data, dict) or "apiVersion" in data or "kind" in data:
        return False
    return isinstance(data.get("dcgmExporter"), dict) and any(k in data for k in _OPERATOR_KEYS)


def looks_like_dcgm_values(data: Any) -> bool:
    if not isinstance(data, dict) or "apiVersion" in data or "kind" in data:
        return False
    image = as_dict(data.get("image"))
    texts = [image.get("repository"), data.get("nameOverride"), data.get("fullnameOverride")]
    arguments = data.get("arguments")
    if isinstance(arguments, list):
        texts.extend(arguments)
    return any(isinstance(t, str) and "dcgm" in t.lower() for t in texts)


_LOOKS = {
    KUBE_PROMETHEUS_STACK: looks_like_stack_values,
    GPU_OPERATOR: looks_like_operator_values,
    DCGM_EXPORTER: looks_like_dcgm_values,
}


def chart_values_in(
    document: Document,
    chart: str | None = None,
    release: str | None = None,
    namespace: str | None = None,
    installed_by: str | None = None,
    owner: Manifest | None = None,
) -> list[ChartValues]:
    """The chart values a values document holds: for ``chart`` when a wrapper names it, else
    as its content says (at the top, or under the chart's key in an umbrella chart)."""
    data = document.data
    if not isinstance(data, dict):
        return []
    found = []
    name = chart_name(chart)
    if name in CHARTS:
        found.append(ChartValues(name, document, (), release, namespace, installed_by, owner))
        return found
    for candidate, looks in _LOOKS.items():
        if looks(data):
            found.append(
                ChartValues(candidate, document, (), release, namespace, installed_by, owner)
            )
        elif looks(data.get(candidate)):
            found.append(
                ChartValues(
                    candidate, document, (candidate,), release, namespace, installed_by, owner
                )
            )
    return found


def cluster_policy_values(manifest: Manifest) -> ChartValues | None:
    """A gpu-operator ClusterPolicy (``nvidia.com/v1``): the values the chart rendered."""
    if manifest.kind != "ClusterPolicy" or manifest.group != "nvidia.com":
        return None
    if not isinstance(manifest.data.get("spec"), dict):
        return None
    return ChartValues(GPU_OPERATOR, manifest, ("spec",), owner=manifest)
