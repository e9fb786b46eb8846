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

Cluster DNS (Kubernetes docs, "DNS for Services and Pods"): ``<service>.<namespace>.svc``
(optionally followed by the cluster domain, ``cluster.local`` by default) names a Service; a
bare ``<service>`` resolves in the namespace of the pod that dials it, and ``<service>.<ns>``
through the pod's DNS search path. Without a port, ``http`` dials 80 and ``https`` 443.
"""

from __future__ import annotations

import ipaddress
from typing import NamedTuple
from urllib.parse import urlsplit

from gpulint.chain.adapter import AdapterConfig
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list
from gpulint.kinds.workload import pod_templates

ADAPTER_FLAG = "--prometheus-url"
CHART_DEFAULT_PORT = 9090


class ParsedUrl(NamedTuple):
    scheme: str
    host: str
    port: int | None  # as written; None: the scheme's default
    path: str

    @property
    def effective_port(self) -> int:
        if self.port is not None:
            return self.port
        return 443 if self.scheme == "https" else 80


def parse_url(text: str) -> ParsedUrl | str:
    """The URL's parts, or why no HTTP client can use it."""
    stripped = text.strip()
    if "{{" in stripped:
        return "it is a template"
    try:
        parts = urlsplit(stripped)
    except ValueError as error:
        return str(error)
    if parts.scheme not in ("http", "https"):
        return f"its scheme is {parts.scheme or 'missing'}, not http or https"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    host, _, port_text = netloc.rpartition(":") if ":" in netloc else (netloc, "", "")
    if host.startswith("[") or not host:
        return "it has no host name gpulint can read"
    if ":" in host:
        return f"it has two ports ({netloc})"
    if port_text and not port_text.isdigit():
        return f"its port `{port_text}` is not a number"
    port = int(port_text) if port_text else None
    if port is not None and not 0 < port < 65536:
        return f"its port {port} is out of range"
    return ParsedUrl(parts.scheme, host.lower(), port, parts.path)


class ServiceHost(NamedTuple):
    """An in-cluster Service name in a URL's host."""

    name: str
    namespace: str | None  # None: the namespace of the pod that dials it
    qualified: bool  # written with .svc: certainly a Service name


def service_host(host: str) -> ServiceHost | None:
    """The Service a host name names; None for an IP address, localhost or an outside name."""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if host == "localhost":
        return None
    labels = host.split(".")
    if "svc" in labels:
        index = labels.index("svc")
        if index == 2:
            return ServiceHost(labels[0], labels[1], True)
        return None
    if len(labels) == 1:
        return ServiceHost(labels[0], None, False)
    if len(labels) == 2:
        return ServiceHost(labels[0], labels[1], False)
    return None


class PrometheusUrl:
    """One URL a part of the autoscaling path queries Prometheus at."""

    __slots__ = (
        "client",
        "client_namespace",
        "document",
        "owner",
        "parsed",
        "path",
        "port_path",
        "problem",
        "source",
        "url",
    )

    def __init__(
        self,
        url: str,
        document: Document,
        path: Path,
        source: str,
        client: str,
        client_namespace: str | None,
        owner: Manifest | None = None,
        port_path: Path | None = None,
    ) -> None:
        self.url = url
        self.document = document
        self.path = path  # where the URL is written
        self.source = source  # adapter-values | adapter-deployment | keda
        self.client = client  # "prometheus-adapter values prometheus-adapter.yaml" ...
        self.client_namespace = client_namespace  # where a bare host name resolves
        self.owner = owner
        self.port_path = port_path  # where the port is written apart (chart values)
        parsed = parse_url(url)
        self.parsed: ParsedUrl | None = parsed if isinstance(parsed, ParsedUrl) else None
        self.problem: str | None = parsed if isinstance(parsed, str) else None

    def __repr__(self) -> str:
        return f"PrometheusUrl({self.url!r}, {self.source})"

    @property
    def service(self) -> ServiceHost | None:
        return service_host(self.parsed.host) if self.parsed is not None else None


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


def keda_urls(manifest: Manifest) -> list[PrometheusUrl]:
    """``serverAddress`` of a ScaledObject's prometheus triggers (KEDA's operator dials it, so a
    bare host name resolves in KEDA's namespace, not the ScaledObject's)."""
    if manifest.kind != "ScaledObject" or manifest.group != "keda.sh":
        return []
    found = []
    triggers = as_list(as_dict(manifest.data.get("spec")).get("triggers"))
    for index, trigger in enumerate(triggers):
        entry = as_dict(trigger)
        if entry.get("type") != "prometheus":
            continue
        address = as_dict(entry.get("metadata")).get("serverAddress")
        if isinstance(address, str) and address.strip():
            found.append(
                PrometheusUrl(
                    address.strip(),
                    manifest,
                    ("spec", "triggers", index, "metadata", "serverAddress"),
                    "keda",
                    f"ScaledObject {manifest.name} trigger {index}",
                    None,
                    manifest,
                )
            )
    return found
