"""GL602: do a dcgm-exporter monitor's endpoints reach the exporter (the Services it
selects, their ports, the PodMonitor's pods)?"""

from __future__ import annotations

from gpulint.chain.exporter import DcgmExporter
from gpulint.chain.monitors import POD_MONITOR, Monitor, MonitorEndpoint
from gpulint.chain.problems import Problem, indent
from gpulint.chain.services import ServicePort, ServiceView
from gpulint.core.message import capitalized
from gpulint.core.model import Related
from gpulint.core.quantity import abbreviated
from gpulint.engine.rule import related
from gpulint.input.document import Path, yaml_text
from gpulint.inventory import Inventory


def endpoint_problems(monitor: Monitor, inventory: Inventory) -> list[Problem]:
    """GL602: endpoints that scrape nothing or everything, selectors that reach no Service or
    no exporter pod, ports that do not lead to the exporter's container port."""
    if monitor.made_by is not None:
        return []  # the chart's own monitor, Service and DaemonSet agree
    if monitor.kind == POD_MONITOR:
        return _pod_monitor_problems(monitor, inventory)
    problems: list[Problem] = []
    pipeline = inventory.pipeline
    matched = pipeline.services_selected(monitor)
    services = matched.certain
    if not monitor.endpoints:
        problems.append(_no_endpoints(monitor))
    named = [e for e in monitor.endpoints if e.port or e.target_port is not None]
    for endpoint in monitor.endpoints:
        if endpoint.port is None and endpoint.target_port is None:
            problems.append(_portless(monitor, endpoint, named, services))
    if not services and not matched.maybe:
        problem = _selects_no_service(monitor, inventory)
        if problem is not None:
            problems.append(problem)
        return problems
    if matched.maybe:
        return problems  # some Service may be selected: its ports are not certain
    for endpoint in named:
        if endpoint.port is not None and not any(s.port_named(endpoint.port) for s in services):
            problems.append(_no_such_service_port(monitor, endpoint, endpoint.port, services))
    for service in services:
        problems.extend(_service_problems(monitor, service, inventory))
    return problems


def _no_endpoints(monitor: Monitor) -> Problem:
    return Problem(
        monitor.document,
        monitor.endpoints_path,
        f"{monitor.describe()} has no endpoints, so Prometheus Operator makes no scrape "
        "job for it and dcgm-exporter is never scraped",
        "endpoints:\n- port: metrics   # the name of the Service port\n  interval: 15s",
    )


def _no_such_service_port(
    monitor: Monitor, endpoint: MonitorEndpoint, port: str, services: list[ServiceView]
) -> Problem:
    """An endpoint names a Service port that no Service the monitor selects has."""
    shown = "; ".join(
        f"{s.describe()} has {', '.join(p.describe() for p in s.ports) or 'no port'}"
        for s in services[:3]
    )
    names = sorted({n for s in services for n in s.port_names()})
    return Problem(
        monitor.document,
        (*endpoint.path, "port"),
        "A dcgm-exporter scrape names a port no Service has: "
        f"{abbreviated(str(port))}. "
        f"{capitalized(monitor.describe())} endpoint {endpoint.position} scrapes the "
        f"Service port named {port}, which no Service it selects has "
        f"({shown}), so it "
        "has no target",
        f"port: {names[0]}" if len(names) == 1 else "port: <one of " + ", ".join(names) + ">",
        tuple(related(s.document, s.path, "selected Service") for s in services[:3]),
    )


def _portless(
    monitor: Monitor,
    endpoint: MonitorEndpoint,
    named: list[MonitorEndpoint],
    services: list[ServiceView],
) -> Problem:
    ports = sorted({p for s in services for p in s.port_names()})
    port = (
        ports[0] if len(ports) == 1 else (named[0].port if named and named[0].port else "metrics")
    )
    if named:
        consequence = (
            "Prometheus Operator keeps every port of every endpoint of the selected Services for "
            "it, as a scrape job of its own, so dcgm-exporter is scraped once more: each GPU "
            "series is stored twice (once without the `endpoint` label), and a sum over them "
            "doubles"
        )
        settings = {
            k: v
            for k, v in (monitor.document.get(endpoint.path) or {}).items()
            if k not in ("port", "targetPort")
        }
        fix = (
            f"# delete endpoints[{endpoint.position}]; its settings belong to the endpoint that "
            "names the port:\n" + yaml_text([{"port": port, **settings}])
        )
    else:
        consequence = (
            "Prometheus Operator then keeps every port of every endpoint of the selected Services, "
            "scraping ports that serve no metrics"
        )
        fix = f"- port: {port}   # the name of the Service port that serves /metrics"
    return Problem(
        monitor.document,
        endpoint.path,
        f"A dcgm-exporter scrape endpoint names no port. {capitalized(monitor.describe())} "
        f"endpoint {endpoint.position} has neither port nor targetPort: {consequence}",
        fix,
    )


def _selects_no_service(monitor: Monitor, inventory: Inventory) -> Problem | None:
    """The selector matches no Service, while the unit has the exporter's Service (or the
    exporter) where the monitor looks."""
    pipeline = inventory.pipeline
    exporters = pipeline.exporters_near(monitor.document)
    dcgm_services = [
        s
        for s in pipeline.dcgm_services()
        if monitor.namespaces.covers(s.namespace, monitor.namespace) is not False
    ]
    if not exporters and not dcgm_services:
        return None
    if dcgm_services:
        service = dcgm_services[0]
        labels = {k: v for k, v in service.labels.items() if v is not None}
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(labels.items())) or "no labels"
        detail = f"{service.describe()} is labelled {shown}"
        fix = "selector:\n  matchLabels:\n" + indent(yaml_text(labels), 4) if labels else ""
        links: tuple[Related, ...] = (
            related(service.document, service.path, "dcgm-exporter Service"),
        )
    else:
        exporter = exporters[0]
        detail = f"no Service in front of {exporter.describe()} is in the unit"
        fix = "# a Service that selects the exporter's pods, with a named metrics port"
        links = (related(exporter.document, exporter.path, "dcgm-exporter"),)
    where = (
        "in any namespace"
        if monitor.namespaces.any
        else f"in {', '.join(monitor.namespaces.names)}"
        if monitor.namespaces.names
        else f"in its namespace {monitor.namespace}"
        if monitor.namespace
        else "in its namespace"
    )
    return Problem(
        monitor.document,
        monitor.selector_path,
        "A dcgm-exporter ServiceMonitor selects no Service. "
        f"{capitalized(monitor.describe())} selects no Service {where} (selector "
        f"`{monitor.selector if monitor.selector is not None else 'none'}`), so it has no "
        f"targets: {detail}",
        fix or "# select the labels of dcgm-exporter's Service",
        links,
    )


def _service_problems(
    monitor: Monitor, service: ServiceView, inventory: Inventory
) -> list[Problem]:
    if service.made_by is not None or service.selector is None:
        return []
    pipeline = inventory.pipeline
    exporters, unsure = pipeline.exporters_behind(service)
    same_namespace = [
        e
        for e in pipeline.exporters_near(service.document)
        if e.namespace is None or service.namespace is None or e.namespace == service.namespace
    ]
    if not exporters and not unsure and same_namespace:
        return [_service_selects_no_exporter(monitor, service, same_namespace[0])]
    if unsure:
        return []
    problems = []
    names = {e.port for e in monitor.endpoints if e.port}
    scraped = [p for p in service.ports if not names or p.name in names] or service.ports
    for port in scraped:
        problem = _wrong_target_port(service, port, exporters)
        if problem is not None:
            problems.append(problem)
    return problems


def _service_selects_no_exporter(
    monitor: Monitor, service: ServiceView, exporter: DcgmExporter
) -> Problem:
    labels = {k: v for k, v in exporter.pod_labels.items() if v is not None}
    shown = ", ".join(f"{k}: {v}" for k, v in sorted(labels.items())) or "no labels"
    return Problem(
        service.document,
        service.selector_path,
        "The Service a dcgm-exporter monitor scrapes selects no exporter pod. "
        f"{capitalized(service.describe())}, which {monitor.describe()} scrapes, selects no "
        f"dcgm-exporter pod (selector `{service.selector}`; the pods of "
        f"{exporter.describe()} are labelled {shown}), so it has no endpoints to scrape",
        "selector:\n" + indent(yaml_text(labels), 2) if labels else "",
        (related(exporter.document, exporter.path, "dcgm-exporter"),),
    )


def _wrong_target_port(
    service: ServiceView, port: ServicePort, exporters: list[DcgmExporter]
) -> Problem | None:
    """A Service port that forwards to a port the exporter does not expose."""
    target = port.effective_target
    wrong = [e for e in exporters if e.serves(target) is False]
    if not wrong:
        return None
    exporter = wrong[0]
    offered = (
        ", ".join(f"{p.name + ' ' if p.name else ''}{p.number}" for p in exporter.ports) or "none"
    )
    path: Path = (*port.path, "targetPort")
    if service.document.get(path) is None:
        path = port.path
    best = exporter.ports[0]
    fix_value = best.name if isinstance(target, str) and best.name else best.number
    return Problem(
        service.document,
        path,
        "The dcgm-exporter Service forwards to a port the exporter does not expose. "
        f"{capitalized(service.describe())} port {port.describe()} forwards to "
        f"{_target_text(target)}"
        f", which {exporter.describe()} does not expose (its container ports: {offered}), "
        "so the scrape of it fails",
        f"targetPort: {fix_value}",
        (related(exporter.document, exporter.path, "dcgm-exporter"),),
    )


def _target_text(target: int | str | None) -> str:
    if isinstance(target, str):
        return f"the container port named {target}"
    return f"port {target}"


def _pod_monitor_problems(monitor: Monitor, inventory: Inventory) -> list[Problem]:
    problems: list[Problem] = []
    exporters, unsure = inventory.pipeline.exporters_selected(monitor)
    for endpoint in monitor.endpoints:
        if endpoint.port is None and endpoint.port_number is None and endpoint.target_port is None:
            problems.append(_pod_endpoint_without_port(monitor, endpoint, exporters))
    candidates = inventory.pipeline.exporters_near(monitor.document)
    if not exporters and not unsure and candidates:
        problems.append(_pod_monitor_selects_no_exporter(monitor, candidates[0]))
        return problems
    if unsure:
        return problems
    for endpoint in monitor.endpoints:
        if endpoint.port is None:
            continue
        wrong = [e for e in exporters if e.ports and e.port_named(endpoint.port) is None]
        if wrong and len(wrong) == len(exporters):
            problems.append(_no_such_container_port(monitor, endpoint, endpoint.port, wrong[0]))
    return problems


def _pod_endpoint_without_port(
    monitor: Monitor, endpoint: MonitorEndpoint, exporters: list[DcgmExporter]
) -> Problem:
    names = sorted({p.name for e in exporters for p in e.ports if p.name})
    port = names[0] if len(names) == 1 else "metrics"
    return Problem(
        monitor.document,
        endpoint.path,
        f"A dcgm-exporter scrape endpoint names no port. "
        f"{capitalized(monitor.describe())} endpoint {endpoint.position} has no port, "
        "portNumber or targetPort: Prometheus Operator keeps every container port "
        "of the selected pods for it",
        f"- port: {port}   # the name of the exporter's container port",
    )


def _pod_monitor_selects_no_exporter(monitor: Monitor, exporter: DcgmExporter) -> Problem:
    labels = {k: v for k, v in exporter.pod_labels.items() if v is not None}
    return Problem(
        monitor.document,
        monitor.selector_path,
        "A dcgm-exporter PodMonitor selects no exporter pod. "
        f"{capitalized(monitor.describe())} selects no dcgm-exporter pod (selector "
        f"`{monitor.selector}`; the pods of {exporter.describe()} are labelled "
        f"{', '.join(f'{k}: {v}' for k, v in sorted(labels.items())) or 'nothing'}), so "
        "it has no targets",
        "selector:\n  matchLabels:\n" + indent(yaml_text(labels), 4) if labels else "",
        (related(exporter.document, exporter.path, "dcgm-exporter"),),
    )


def _no_such_container_port(
    monitor: Monitor, endpoint: MonitorEndpoint, port: str, exporter: DcgmExporter
) -> Problem:
    names = [p.name for p in exporter.ports if p.name]
    return Problem(
        monitor.document,
        (*endpoint.path, "port"),
        "A dcgm-exporter PodMonitor names a port the exporter does not have. "
        f"{capitalized(monitor.describe())} endpoint {endpoint.position} scrapes the "
        f"container port named {port}, which {exporter.describe()} does not "
        "have "
        f"(its ports: {', '.join(names) or 'unnamed'}), so it has no target",
        f"port: {names[0]}" if names else "# name the exporter's container port",
        (related(exporter.document, exporter.path, "dcgm-exporter"),),
    )
