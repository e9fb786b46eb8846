"""Kubernetes Services and the endpoints behind them, as the scrape chain reads them.

A Service selects pods by ``spec.selector`` (a plain map; none: its endpoints are managed by
hand) and exposes ``spec.ports[]``: ``port`` (what clients dial), ``name`` (what a
ServiceMonitor endpoint's ``port`` names) and ``targetPort`` (a container port number or a
container port *name*; the port number when omitted). Kubernetes core/v1 types.go
``ServicePort``; the EndpointSlice controller resolves a named targetPort per pod.

Services also come from charts and operators gpulint does not render: gpu-operator's
``nvidia-dcgm-exporter`` (assets/state-dcgm-exporter/0400_service.yaml), the dcgm-exporter
chart's ``<fullname>`` (deployment/templates/service.yaml), kube-prometheus-stack's
``<fullname>-prometheus`` and Prometheus Operator's governing ``prometheus-operated``. Those
are ``ServiceView``s with ``made_by`` set and the document and path of what makes them.

Readiness: an EndpointSlice (discovery.k8s.io/v1) lists endpoints with
``conditions.ready`` (nil means ready); an Endpoints object lists ``subsets[].addresses`` (ready)
and ``notReadyAddresses``. EndpointSlices name their Service in the label
``kubernetes.io/service-name``; Endpoints share the Service's name.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.core.selectors import LabelSelector, labels_of
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
DISCOVERY_GROUP = "discovery.k8s.io"


class ServicePort(NamedTuple):
    name: str | None
    port: int | None
    target_port: int | str | None  # as written; None: the same as ``port``
    path: Path  # where the entry is written (or made)

    @property
    def effective_target(self) -> int | str | None:
        return self.target_port if self.target_port is not None else self.port

    def describe(self) -> str:
        shown = f"{self.name} " if self.name else ""
        return f"{shown}{self.port}"


class ServiceView:
    """One Service: written out (or read from a cluster), or made by a chart or operator."""

    __slots__ = (
        "document",
        "headless",
        "labels",
        "made_by",
        "name",
        "name_known",
        "namespace",
        "path",
        "ports",
        "selector",
        "selector_path",
    )

    def __init__(
        self,
        name: str,
        namespace: str | None,
        labels: dict[str, str | None],
        selector: LabelSelector | None,
        ports: list[ServicePort],
        document: Document,
        path: Path,
        made_by: str | None = None,
        selector_path: Path = (),
        headless: bool = False,
        name_known: bool = True,
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.labels = labels
        self.selector = selector
        self.ports = ports
        self.document = document
        self.path = path  # where a finding about the Service goes
        self.made_by = made_by  # "gpu-operator values" ...; None: written out
        self.selector_path = selector_path or path
        self.headless = headless
        # False: the name depends on a release name gpulint does not know (``name`` then shows
        # its pattern, ``<fullname>-prometheus``).
        self.name_known = name_known

    def __repr__(self) -> str:
        return f"ServiceView({self.namespace}/{self.name}, made_by={self.made_by!r})"

    @property
    def manifest(self) -> Manifest | None:
        return (
            self.document if self.made_by is None and isinstance(self.document, Manifest) else None
        )

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        made = f" (made by {self.made_by})" if self.made_by else ""
        return f"Service {where}{self.name}{made}"

    def port_named(self, name: str) -> ServicePort | None:
        return next((p for p in self.ports if p.name == name), None)

    def port_number(self, number: int) -> ServicePort | None:
        return next((p for p in self.ports if p.port == number), None)

    def port_names(self) -> list[str]:
        return [p.name for p in self.ports if p.name]


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) < 6:
        return int(value)
    return None


def _target(value: Any) -> int | str | None:
    number = _int(value)
    if number is not None:
        return number
    return value if isinstance(value, str) and value else None


def service_view(manifest: Manifest) -> ServiceView | None:
    """A core ``v1`` Service object; None for anything else (a Knative Service)."""
    if manifest.kind != "Service" or manifest.group != "":
        return None
    spec = as_dict(manifest.data.get("spec"))
    ports = []
    for index, item in enumerate(as_list(spec.get("ports"))):
        entry = as_dict(item)
        name = entry.get("name")
        ports.append(
            ServicePort(
                name if isinstance(name, str) and name else None,
                _int(entry.get("port")),
                _target(entry.get("targetPort")),
                ("spec", "ports", index),
            )
        )
    has_selector = isinstance(spec.get("selector"), dict) and bool(spec.get("selector"))
    return ServiceView(
        manifest.name,
        manifest.namespace,
        labels_of(manifest.labels),
        LabelSelector.of_map(spec.get("selector")) if has_selector else None,
        ports,
        manifest,
        ("metadata", "name"),
        selector_path=("spec", "selector") if has_selector else ("spec",),
        headless=spec.get("clusterIP") == "None",
    )


class EndpointState(NamedTuple):
    """What the endpoints of one Service say: ready and not-ready addresses, and the ports."""

    ready: int
    not_ready: int
    ports: tuple[tuple[str | None, int | None], ...]  # (name, port number) of the endpoints
    source: str  # "EndpointSlice" | "Endpoints"

    def port_named(self, name: str | None) -> bool:
        return any(n == name for n, _ in self.ports)


def endpoints_service(manifest: Manifest) -> str | None:
    """The Service an Endpoints or EndpointSlice object belongs to."""
    if manifest.kind == "Endpoints" and manifest.group == "":
        return manifest.name
    if manifest.kind == "EndpointSlice" and manifest.group == DISCOVERY_GROUP:
        value = manifest.labels.get(SERVICE_NAME_LABEL)
        return value if isinstance(value, str) and value else None
    return None


def endpoint_state(manifests: list[Manifest]) -> EndpointState | None:
    """The endpoints of one Service from its EndpointSlices (preferred) or Endpoints object;
    None when there are none of either."""
    slices = [m for m in manifests if m.kind == "EndpointSlice"]
    if slices:
        ready = not_ready = 0
        ports: list[tuple[str | None, int | None]] = []
        for item in slices:
            for endpoint in as_list(item.data.get("endpoints")):
                conditions = as_dict(as_dict(endpoint).get("conditions"))
                # EndpointConditions.Ready: nil "should be interpreted as ready".
                if conditions.get("ready") is False:
                    not_ready += 1
                else:
                    ready += 1
            for port in as_list(item.data.get("ports")):
                entry = as_dict(port)
                name = entry.get("name")
                ports.append(
                    (name if isinstance(name, str) and name else None, _int(entry.get("port")))
                )
        return EndpointState(ready, not_ready, tuple(dict.fromkeys(ports)), "EndpointSlice")
    objects = [m for m in manifests if m.kind == "Endpoints"]
    if not objects:
        return None
    ready = not_ready = 0
    ports = []
    for subset in as_list(objects[0].data.get("subsets")):
        entry = as_dict(subset)
        ready += len(as_list(entry.get("addresses")))
        not_ready += len(as_list(entry.get("notReadyAddresses")))
        for port in as_list(entry.get("ports")):
            written = as_dict(port)
            name = written.get("name")
            number = _int(written.get("port"))
            ports.append((name if isinstance(name, str) and name else None, number))
    return EndpointState(ready, not_ready, tuple(dict.fromkeys(ports)), "Endpoints")
