"""A Prometheus URL as a part of the autoscaling path writes it: its parts, or why no HTTP
client can use it, and the in-cluster Service its host names.

Cluster DNS (Kubernetes docs, "DNS for Services and Pods"): ``<service>.<namespace>.svc``
(optionally followed by the cluster domain, ``cluster.local`` by default) names a Service; a
bare ``<service>`` resolves in the namespace of the pod that dials it, and ``<service>.<ns>``
through the pod's DNS search path. Without a port, ``http`` dials 80 and ``https`` 443.
"""

from __future__ import annotations

import ipaddress
from typing import NamedTuple
from urllib.parse import urlsplit

from gpulint.input.document import Document, Manifest, Path


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
