"""The Prometheus URLs a unit's autoscaling path queries, and the in-cluster Service each names.

* prometheus-adapter chart values: the Deployment gets
  ``--prometheus-url={{ tpl .Values.prometheus.url . }}{{ if .Values.prometheus.port }}:{{
  .Values.prometheus.port }}{{ end }}{{ .Values.prometheus.path }}``, with the defaults
  ``url: http://prometheus.default.svc``, ``port: 9090``, ``path: ""``
  (charts/prometheus-adapter templates/deployment.yaml, values.yaml). A port written in ``url``
  as well gives ``http://host:9090:9090``, which no HTTP client can dial.
* a prometheus-adapter Deployment written out: its container's ``--prometheus-url`` argument
  (kubernetes-sigs/prometheus-adapter cmd/adapter/adapter.go).
* a KEDA ``prometheus`` trigger's ``metadata.serverAddress`` (kedacore/keda
  pkg/scalers/prometheus_scaler.go), queried by KEDA's operator pod.

The URLs themselves, parsed, and the Service a host names: ``gpulint.chain.address``.
"""

from __future__ import annotations

from gpulint.chain.adapter import AdapterConfig
from gpulint.chain.address import PrometheusUrl
from gpulint.input.document import Manifest, Path, as_dict, as_list
from gpulint.kinds.workload import pod_templates

ADAPTER_FLAG = "--prometheus-url"
CHART_DEFAULT_PORT = 9090


def adapter_values_url(config: AdapterConfig, namespace: str | None) -> PrometheusUrl | None:
    """The URL the prometheus-adapter chart renders from these values; None when the values
    do not write ``prometheus.url`` (other values files may)."""
    if config.form != AdapterConfig.HELM_VALUES:
        return None
    root = (
        as_dict(config.document.get(config.base)) if config.base else as_dict(config.document.data)
    )
    prometheus = as_dict(root.get("prometheus"))
    url = prometheus.get("url")
    if not isinstance(url, str) or not url.strip():
        return None
    port = prometheus.get("port", CHART_DEFAULT_PORT)
    path = prometheus.get("path", "")
    base: Path = (*config.base, "prometheus")
    text = url.strip()
    if port not in (None, "", 0, False):
        text += f":{port}"
    if isinstance(path, str):
        text += path
    return PrometheusUrl(
        text,
        config.document,
        (*base, "url"),
        "adapter-values",
        _adapter_client(config),
        namespace,
        config.wrapper,
        (*base, "port") if "port" in prometheus else None,
    )


def _adapter_client(config: AdapterConfig) -> str:
    if config.wrapper is not None:
        where = f"{config.wrapper.namespace}/" if config.wrapper.namespace else ""
        return (
            f"the prometheus-adapter values of {config.wrapper.kind} {where}{config.wrapper.name}"
        )
    return f"prometheus-adapter values {config.document.file.rsplit('/', 1)[-1]}"


def is_adapter_deployment(manifest: Manifest) -> bool:
    if manifest.kind != "Deployment":
        return False
    for template in pod_templates(manifest):
        for container in template.containers:
            image = container.data.get("image")
            if isinstance(image, str) and "prometheus-adapter" in image:
                return True
            if any(
                isinstance(a, str) and a.startswith(ADAPTER_FLAG)
                for a in as_list(container.data.get("args"))
            ):
                return True
    return False


def deployment_urls(manifest: Manifest) -> list[PrometheusUrl]:
    """``--prometheus-url`` of a prometheus-adapter Deployment's containers."""
    if not is_adapter_deployment(manifest):
        return []
    found = []
    for template in pod_templates(manifest):
        for container in template.containers:
            for key in ("args", "command"):
                items = as_list(container.data.get(key))
                for index, item in enumerate(items):
                    if not isinstance(item, str):
                        continue
                    value: str | None = None
                    path: Path = (*container.path, key, index)
                    if item.startswith(ADAPTER_FLAG + "="):
                        value = item[len(ADAPTER_FLAG) + 1 :]
                    elif item == ADAPTER_FLAG and index + 1 < len(items):
                        following = items[index + 1]
                        value = following if isinstance(following, str) else None
                        path = (*container.path, key, index + 1)
                    if value:
                        where = f"{manifest.namespace}/" if manifest.namespace else ""
                        found.append(
                            PrometheusUrl(
                                value.strip().strip("\"'"),
                                manifest,
                                path,
                                "adapter-deployment",
                                f"prometheus-adapter Deployment {where}{manifest.name}",
                                manifest.namespace,
                                manifest,
                            )
                        )
    return found
