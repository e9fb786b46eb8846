"""GL603: does the prometheus-adapter's Prometheus URL reach a Prometheus of the unit (its
Service, namespace and port)?"""

from __future__ import annotations

from typing import NamedTuple

from gpulint.chain.address import ParsedUrl, PrometheusUrl, ServiceHost, parse_url
from gpulint.chain.problems import Problem
from gpulint.chain.servers import (
    PROMETHEUS_PORT,
    PrometheusServer,
    guessed_release,
    possible_fullname,
    stack_fullname,
)
from gpulint.chain.services import ServiceView
from gpulint.core.message import capitalized
from gpulint.core.quantity import abbreviated
from gpulint.engine.rule import related
from gpulint.input.chartvalues import ChartValues
from gpulint.input.document import Document
from gpulint.inventory import Inventory

# Services named like a Prometheus that are not one (or not the one queries go to).
_NOT_A_SERVER = (
    "adapter",
    "operator",
    "exporter",
    "alertmanager",
    "pushgateway",
    "kube-state",
    "blackbox",
    "grafana",
    "node",
)

# A Prometheus URL is shown whole in a message up to this length, so that it can be copied
# and compared with the one written (Service names alone reach 63 characters); only a
# crafted one is cut.
URL_SHOWN = 200


def looks_like_prometheus(service: ServiceView) -> bool:
    name = service.name.lower()
    if service.labels.get("operated-prometheus") == "true":
        return True
    if not any(word in name for word in ("prometheus", "thanos-query", "thanos-querier")):
        return False
    return not any(word in name for word in _NOT_A_SERVER)


def prometheus_services(inventory: Inventory, near: Document) -> list[ServiceView]:
    """The Services the unit's Prometheus servers answer queries on, nearest first."""
    found: list[ServiceView] = []
    for server in inventory.pipeline.servers_near(near):
        found.extend(server.services)
    for service in inventory.pipeline.all_services():
        if service.made_by is None and looks_like_prometheus(service) and service not in found:
            found.append(service)
    return found


class UrlTarget(NamedTuple):
    """What a Prometheus URL reaches in the unit."""

    service: ServiceView | None  # the Service it names, when the unit has it
    candidates: list[ServiceView]  # the unit's Prometheus Services
    problem: str | None  # why it reaches no Prometheus of the unit
    fix_url: str | None  # the URL that would
    unknown: bool = False  # gpulint cannot tell


def url_target(url: PrometheusUrl, inventory: Inventory) -> UrlTarget:
    """Does the URL name a Prometheus Service of the unit, on a port it serves?"""
    candidates = prometheus_services(inventory, url.document)
    parsed, host = url.parsed, url.service
    if parsed is None or host is None:
        return UrlTarget(None, candidates, None, None, True)
    namespace = host.namespace or url.client_namespace
    pipeline = inventory.pipeline
    named = [s for s in pipeline.services_named(host.name, namespace) if s.name_known]
    if named:
        return _named_target(named[0], parsed, candidates)
    if not candidates:
        return UrlTarget(None, candidates, None, None, True)
    elsewhere = [s for s in pipeline.services_named(host.name, None) if s.name_known]
    if elsewhere and namespace is not None:
        service = elsewhere[0]
        return UrlTarget(
            None,
            candidates,
            f"it names namespace {namespace}, but {service.describe()} is in namespace "
            f"{service.namespace}",
            _url_for(parsed.scheme, service, parsed.path),
        )
    for server in inventory.pipeline.servers_near(url.document):
        if server.chart is None:
            continue
        if server.namespace is not None and namespace is not None and server.namespace != namespace:
            continue
        chart_target = _chart_target(server, server.chart, host, parsed, namespace, candidates)
        if chart_target is not None:
            return chart_target
    return _unknown_service(url, inventory, host, parsed, namespace, candidates)


def _named_target(
    service: ServiceView, parsed: ParsedUrl, candidates: list[ServiceView]
) -> UrlTarget:
    """The URL names a Service of the unit: is the port one it serves?"""
    port = parsed.effective_port
    if service.port_number(port) is None:
        how = "" if parsed.port is not None else f", the port {parsed.scheme} dials without one"
        ports = ", ".join(p.describe() for p in service.ports) or "none"
        return UrlTarget(
            service,
            candidates,
            f"{service.describe()} has no port {port}{how} (its ports: {ports})",
            _url_for(parsed.scheme, service, parsed.path),
        )
    return UrlTarget(service, candidates, None, None)


def _chart_target(
    server: PrometheusServer,
    chart: ChartValues,
    host: ServiceHost,
    parsed: ParsedUrl,
    namespace: str | None,
    candidates: list[ServiceView],
) -> UrlTarget | None:
    """A Prometheus of kube-prometheus-stack whose Service name the URL may mean: unknown
    (the release name is not in the unit), or a name no release gives it; None when the URL
    does not look like the chart's Service."""
    if host.name == "prometheus-operated":
        return UrlTarget(None, candidates, None, None, True)
    known = [s for s in server.services if s.name_known and s.name.endswith("-prometheus")]
    if known or not host.name.endswith("-prometheus"):
        return None
    fullname = host.name[: -len("-prometheus")]
    name_override = chart.get("nameOverride")
    override = name_override if isinstance(name_override, str) and name_override else None
    if possible_fullname(fullname, override):
        return UrlTarget(None, candidates, None, None, True)
    release = guessed_release(fullname, override)
    if release is None:
        return None
    right = stack_fullname(release, override) + "-prometheus"
    return UrlTarget(
        None,
        candidates,
        f"no release name makes kube-prometheus-stack name its Service "
        f"{host.name}: the chart cuts `<release>-kube-prometheus-stack` at 26 "
        f"characters, so for release {release} it is {right}",
        _url_text(parsed.scheme, right, namespace, PROMETHEUS_PORT, parsed.path),
    )


def _unknown_service(
    url: PrometheusUrl,
    inventory: Inventory,
    host: ServiceHost,
    parsed: ParsedUrl,
    namespace: str | None,
    candidates: list[ServiceView],
) -> UrlTarget:
    """The URL names a Service the unit does not create: the Prometheus Services it does."""
    known = [s for s in candidates if s.name_known]
    if not known:
        return UrlTarget(None, candidates, None, None, True)
    for server in inventory.pipeline.servers_near(url.document):
        if server.namespace is None and any(s.name == host.name for s in server.services):
            return UrlTarget(None, candidates, None, None, True)
    best = next((s for s in known if s.namespace == namespace), known[0])
    where = f"{namespace}/" if namespace else ""
    shown = ", ".join(_address(s) for s in known[:3])
    return UrlTarget(
        None,
        candidates,
        f"it names Service {where}{host.name}, which the unit does not create; its Prometheus "
        f"is served by {shown}",
        _url_for(parsed.scheme, best, parsed.path),
    )


def _address(service: ServiceView) -> str:
    port = service.ports[0].port if service.ports else None
    where = f".{service.namespace}.svc" if service.namespace else ".<namespace>.svc"
    return f"{service.name}{where}{':' + str(port) if port else ''}"


def _url_for(scheme: str, service: ServiceView, path: str) -> str:
    port = service.ports[0].port if service.ports else PROMETHEUS_PORT
    return _url_text(scheme, service.name, service.namespace, port, path)


def _url_text(scheme: str, name: str, namespace: str | None, port: int | None, path: str) -> str:
    where = f".{namespace}.svc" if namespace else ".<namespace>.svc"
    return f"{scheme}://{name}{where}{':' + str(port) if port else ''}{path}"


def url_problem(url: PrometheusUrl, inventory: Inventory) -> Problem | None:
    """GL603: the URL cannot be dialled, or names no Prometheus Service of the unit."""
    if url.problem is not None:
        if url.problem == "it is a template":
            return None
        right = "http://<service>.<namespace>.svc:9090"
        problem = url.problem
        if url.problem.startswith("it has two ports") and url.source == "adapter-values":
            written = url.document.get(url.path)
            problem += (
                ": prometheus.url has a port and the chart appends prometheus.port "
                f"({'as written' if url.port_path else 'default 9090'}) to it"
            )
            if isinstance(written, str):
                head, _, port = written.strip().rpartition(":")
                if port.rstrip("/").isdigit():
                    right = f"{head}:{port.rstrip('/')}"
        return Problem(
            url.document,
            url.path,
            f"The Prometheus URL {abbreviated(url.url, URL_SHOWN)} is not a URL an HTTP client "
            "can use. "
            f"{capitalized(url.client)} queries Prometheus there. {capitalized(problem)}",
            url_fix(url, right),
        )
    target = url_target(url, inventory)
    if target.problem is None:
        return None
    links = tuple(
        related(s.document, s.path, "Prometheus Service")
        for s in target.candidates[:3]
        if s.name_known
    )
    return Problem(
        url.document,
        url.port_path if url.port_path is not None and "port" in target.problem else url.path,
        f"The Prometheus URL {abbreviated(url.url, URL_SHOWN)} reaches no Prometheus of the unit. "
        f"{capitalized(url.client)} queries it. {capitalized(target.problem)}",
        url_fix(url, target.fix_url or "http://<service>.<namespace>.svc:9090"),
        links,
    )


def url_fix(url: PrometheusUrl, right: str) -> str:
    if url.source == "adapter-values":
        parsed = parse_url(right)
        if isinstance(parsed, ParsedUrl):
            base = f"{parsed.scheme}://{parsed.host}"
            lines = ["prometheus:", f"  url: {base}"]
            if parsed.port is not None:
                lines.append(f"  port: {parsed.port}")
            if parsed.path:
                lines.append(f"  path: {parsed.path}")
            return "\n".join(lines)
        return f"prometheus:\n  url: {right}"
    if url.source == "keda":
        return f"serverAddress: {right}"
    return f"- --prometheus-url={right}"
