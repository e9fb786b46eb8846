"""The questions about the scrape chain that several rules and ``gpulint trace`` ask, answered
once: is a dcgm-exporter monitor selected by a Prometheus of the unit (GL601), do its
endpoints reach the exporter (GL602), does the adapter's URL reach a Prometheus of the unit
(GL603), can the exporter run where the GPU workloads run (GL604). GL806 names the offline
answer when Prometheus has no target; the trace marks its links with them.

Each answer is a list of ``Problem``s: where a user edits, what is wrong, the fix, and the
objects on the other side. Nothing is reported when gpulint cannot be certain (a label value
or a namespace it does not know, an exporter or Prometheus that is not in the unit).
"""

from __future__ import annotations

from typing import NamedTuple

from gpulint.chain.adapter import AdapterRule, describe_document
from gpulint.chain.exporter import (
    OPERATOR_NODE_LABEL,
    DcgmExporter,
    Placement,
    Requirement,
    Taint,
    ignored_placement,
)
from gpulint.chain.monitors import POD_MONITOR, Monitor, MonitorEndpoint
from gpulint.chain.servers import (
    PROMETHEUS_PORT,
    PrometheusServer,
    Verdict,
    guessed_release,
    possible_fullname,
    stack_fullname,
)
from gpulint.chain.services import ServiceView
from gpulint.chain.urls import ParsedUrl, PrometheusUrl, parse_url
from gpulint.core.message import capitalized
from gpulint.core.model import Related
from gpulint.core.quantity import abbreviated
from gpulint.engine.rule import related
from gpulint.input.chartvalues import GPU_OPERATOR
from gpulint.input.document import Document, Path, yaml_text
from gpulint.inventory import Inventory
from gpulint.live.snapshot import LiveSnapshot, ScrapeTarget
from gpulint.metrics.names import Exporter as MetricSource
from gpulint.metrics.names import is_dcgm_field, lookup

# A Prometheus URL is shown whole in a message up to this length, so that it can be copied
# and compared with the one written (Service names alone reach 63 characters); only a
# crafted one is cut.
URL_SHOWN = 200


def dcgm_series_read(rule: AdapterRule) -> list[str]:
    """The dcgm-exporter series an adapter rule's seriesQuery names."""
    found = []
    for name in rule.series_names() or []:
        known = lookup(name)
        if is_dcgm_field(name) or (known is not None and known.exporter is MetricSource.DCGM):
            found.append(name)
    return found


def dcgm_targets(live: LiveSnapshot, monitors: list[Monitor]) -> list[ScrapeTarget]:
    """The targets that are dcgm-exporter: in the pools of the unit's monitors, or named so."""
    targets = live.targets or []
    pools = {
        pool
        for monitor in monitors
        for endpoint in monitor.endpoints
        if (pool := monitor.scrape_pool(endpoint.position)) is not None
    }
    found = [t for t in targets if t.scrape_pool in pools]
    if found:
        return found
    return [
        t
        for t in targets
        if "dcgm"
        in " ".join(
            (t.scrape_pool, t.label("job"), t.label("service"), t.label("container"))
        ).lower()
    ]


class Problem(NamedTuple):
    document: Document
    path: Path
    message: str
    fix: str
    related: tuple[Related, ...] = ()


# --- selection (GL601) -----------------------------------------------------------------------


class Selection(NamedTuple):
    """Which Prometheus servers of the unit select a monitor."""

    selected: bool | None  # None: no Prometheus in the unit, or one gpulint cannot judge
    verdicts: list[tuple[PrometheusServer, Verdict]]


def selection(monitor: Monitor, inventory: Inventory) -> Selection:
    servers = inventory.pipeline.servers_near(monitor.document)
    verdicts = []
    unknown = not servers
    for server in servers:
        chosen = server.selection(monitor).namespaces
        keys = [*chosen.match_labels, *(e.key for e in chosen.expressions)] if chosen else []
        labels = inventory.pipeline.namespace_labels(monitor.namespace, keys)
        verdict = server.judge(monitor, labels)
        if verdict.selected is True:
            return Selection(True, [(server, verdict)])
        if verdict.selected is None:
            unknown = True
        verdicts.append((server, verdict))
    return Selection(None if unknown else False, verdicts)


def selection_problem(monitor: Monitor, inventory: Inventory) -> Problem | None:
    """GL601: no Prometheus of the unit selects the monitor."""
    found = selection(monitor, inventory)
    if found.selected is not False or not found.verdicts:
        return None
    reasons = "; ".join(f"{server.describe()}: {v.reason}" for server, v in found.verdicts)
    what = "PodMonitor" if monitor.kind == POD_MONITOR else "ServiceMonitor"
    message = (
        f"No Prometheus selects the dcgm-exporter {what}. {capitalized(monitor.describe())} is "
        f"selected by no Prometheus of the unit. {capitalized(reasons)}. So Prometheus never "
        "scrapes dcgm-exporter and no GPU series reaches the adapter"
    )
    server, verdict = found.verdicts[0]
    links = tuple(
        related(s.document, v.path, "the Prometheus that does not select it")
        for s, v in found.verdicts
    )
    return Problem(
        monitor.document,
        monitor.labels_path,
        message,
        _selection_fix(monitor, server, verdict, what),
        links,
    )


def _selection_fix(monitor: Monitor, server: PrometheusServer, verdict: Verdict, what: str) -> str:
    selection_ = server.selection(monitor)
    on_monitor = "additionalLabels" if monitor.made_by else "metadata.labels"
    if selection_.source == "release-label":
        release = server.release or "<the kube-prometheus-stack release name>"
        key = "serviceMonitorSelectorNilUsesHelmValues"
        if what == "PodMonitor":
            key = "podMonitorSelectorNilUsesHelmValues"
        return (
            f"# {on_monitor} of the monitor:\nrelease: {release}\n"
            f"# or, in the kube-prometheus-stack values, select every {what}:\n"
            f"prometheus:\n  prometheusSpec:\n    {key}: false"
        )
    if selection_.selector is None:
        key = "podMonitorSelector" if what == "PodMonitor" else "serviceMonitorSelector"
        labels = {k: v for k, v in monitor.labels.items() if v is not None and k == "app"}
        selector = {"matchLabels": labels} if labels else {}
        return f"# in Prometheus {server.name}:\nspec:\n" + _indent(
            yaml_text({key: selector}) if selector else f"{key}: {{}}   # every {what}", 2
        )
    if verdict.fix_labels:
        return f"# {on_monitor} of the monitor:\n" + yaml_text(verdict.fix_labels)
    key = (
        "podMonitorNamespaceSelector" if what == "PodMonitor" else "serviceMonitorNamespaceSelector"
    )
    if server.chart is not None:
        return f"prometheus:\n  prometheusSpec:\n    {key}: {{}}   # every namespace"
    return f"# in Prometheus {server.name}:\nspec:\n  {key}: {{}}   # every namespace"


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


# --- endpoints (GL602) -----------------------------------------------------------------------


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
        problems.append(
            Problem(
                monitor.document,
                monitor.endpoints_path,
                f"{monitor.describe()} has no endpoints, so Prometheus Operator makes no scrape "
                "job for it and dcgm-exporter is never scraped",
                "endpoints:\n- port: metrics   # the name of the Service port\n  interval: 15s",
            )
        )
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
        if endpoint.port is None:
            continue
        if not any(s.port_named(endpoint.port) for s in services):
            shown = "; ".join(
                f"{s.describe()} has {', '.join(p.describe() for p in s.ports) or 'no port'}"
                for s in services[:3]
            )
            names = sorted({n for s in services for n in s.port_names()})
            problems.append(
                Problem(
                    monitor.document,
                    (*endpoint.path, "port"),
                    "A dcgm-exporter scrape names a port no Service has: "
                    f"{abbreviated(str(endpoint.port))}. "
                    f"{capitalized(monitor.describe())} endpoint {endpoint.position} scrapes the "
                    f"Service port named {endpoint.port}, which no Service it selects has "
                    f"({shown}), so it "
                    "has no target",
                    f"port: {names[0]}"
                    if len(names) == 1
                    else "port: <one of " + ", ".join(names) + ">",
                    tuple(related(s.document, s.path, "selected Service") for s in services[:3]),
                )
            )
    for service in services:
        problems.extend(_service_problems(monitor, service, inventory))
    return problems


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
        fix = "selector:\n  matchLabels:\n" + _indent(yaml_text(labels), 4) if labels else ""
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
    problems = []
    if not exporters and not unsure and same_namespace:
        exporter = same_namespace[0]
        labels = {k: v for k, v in exporter.pod_labels.items() if v is not None}
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(labels.items())) or "no labels"
        problems.append(
            Problem(
                service.document,
                service.selector_path,
                "The Service a dcgm-exporter monitor scrapes selects no exporter pod. "
                f"{capitalized(service.describe())}, which {monitor.describe()} scrapes, "
                f"selects no dcgm-exporter pod (selector `{service.selector}`; the pods of "
                f"{exporter.describe()} are labelled {shown}), so it has no endpoints to scrape",
                "selector:\n" + _indent(yaml_text(labels), 2) if labels else "",
                (related(exporter.document, exporter.path, "dcgm-exporter"),),
            )
        )
        return problems
    if unsure:
        return problems
    names = {e.port for e in monitor.endpoints if e.port}
    scraped = [p for p in service.ports if not names or p.name in names] or service.ports
    for port in scraped:
        target = port.effective_target
        wrong = [e for e in exporters if e.serves(target) is False]
        if not wrong:
            continue
        exporter = wrong[0]
        offered = (
            ", ".join(f"{p.name + ' ' if p.name else ''}{p.number}" for p in exporter.ports)
            or "none"
        )
        path: Path = (*port.path, "targetPort")
        if service.document.get(path) is None:
            path = port.path
        best = exporter.ports[0]
        fix_value = best.name if isinstance(target, str) and best.name else best.number
        problems.append(
            Problem(
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
        )
    return problems


def _target_text(target: int | str | None) -> str:
    if isinstance(target, str):
        return f"the container port named {target}"
    return f"port {target}"


def _pod_monitor_problems(monitor: Monitor, inventory: Inventory) -> list[Problem]:
    problems: list[Problem] = []
    exporters, unsure = inventory.pipeline.exporters_selected(monitor)
    for endpoint in monitor.endpoints:
        if endpoint.port is None and endpoint.port_number is None and endpoint.target_port is None:
            names = sorted({p.name for e in exporters for p in e.ports if p.name})
            port = names[0] if len(names) == 1 else "metrics"
            problems.append(
                Problem(
                    monitor.document,
                    endpoint.path,
                    f"A dcgm-exporter scrape endpoint names no port. "
                    f"{capitalized(monitor.describe())} endpoint {endpoint.position} has no port, "
                    "portNumber or targetPort: Prometheus Operator keeps every container port "
                    "of the selected pods for it",
                    f"- port: {port}   # the name of the exporter's container port",
                )
            )
    candidates = inventory.pipeline.exporters_near(monitor.document)
    if not exporters and not unsure and candidates:
        exporter = candidates[0]
        labels = {k: v for k, v in exporter.pod_labels.items() if v is not None}
        problems.append(
            Problem(
                monitor.document,
                monitor.selector_path,
                "A dcgm-exporter PodMonitor selects no exporter pod. "
                f"{capitalized(monitor.describe())} selects no dcgm-exporter pod (selector "
                f"`{monitor.selector}`; the pods of {exporter.describe()} are labelled "
                f"{', '.join(f'{k}: {v}' for k, v in sorted(labels.items())) or 'nothing'}), so "
                "it has no targets",
                "selector:\n  matchLabels:\n" + _indent(yaml_text(labels), 4) if labels else "",
                (related(exporter.document, exporter.path, "dcgm-exporter"),),
            )
        )
        return problems
    if unsure:
        return problems
    for endpoint in monitor.endpoints:
        if endpoint.port is None:
            continue
        wrong = [e for e in exporters if e.ports and e.port_named(endpoint.port) is None]
        if wrong and len(wrong) == len(exporters):
            exporter = wrong[0]
            names = [p.name for p in exporter.ports if p.name]
            problems.append(
                Problem(
                    monitor.document,
                    (*endpoint.path, "port"),
                    "A dcgm-exporter PodMonitor names a port the exporter does not have. "
                    f"{capitalized(monitor.describe())} endpoint {endpoint.position} scrapes the "
                    f"container port named {endpoint.port}, which {exporter.describe()} does not "
                    "have "
                    f"(its ports: {', '.join(names) or 'unnamed'}), so it has no target",
                    f"port: {names[0]}" if names else "# name the exporter's container port",
                    (related(exporter.document, exporter.path, "dcgm-exporter"),),
                )
            )
    return problems


def exporters_of_monitor(monitor: Monitor, inventory: Inventory) -> list[DcgmExporter]:
    """The exporters a monitor reaches (through its Services, or its pods)."""
    pipeline = inventory.pipeline
    if monitor.kind == POD_MONITOR:
        return pipeline.exporters_selected(monitor)[0]
    found: list[DcgmExporter] = []
    for service in pipeline.services_selected(monitor).certain:
        for exporter in pipeline.exporters_behind(service)[0]:
            if exporter not in found:
                found.append(exporter)
    return found


# --- the Prometheus URL (GL603) ----------------------------------------------------------------

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
        service = named[0]
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
        if host.name == "prometheus-operated":
            return UrlTarget(None, candidates, None, None, True)
        known = [s for s in server.services if s.name_known and s.name.endswith("-prometheus")]
        if not known and host.name.endswith("-prometheus"):
            fullname = host.name[: -len("-prometheus")]
            name_override = server.chart.get("nameOverride")
            override = name_override if isinstance(name_override, str) and name_override else None
            if possible_fullname(fullname, override):
                return UrlTarget(None, candidates, None, None, True)
            release = guessed_release(fullname, override)
            if release is not None:
                right = stack_fullname(release, override) + "-prometheus"
                return UrlTarget(
                    None,
                    candidates,
                    f"no release name makes kube-prometheus-stack name its Service "
                    f"{host.name}: the chart cuts `<release>-kube-prometheus-stack` at 26 "
                    f"characters, so for release {release} it is {right}",
                    _url_text(parsed.scheme, right, namespace, PROMETHEUS_PORT, parsed.path),
                )
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


# --- placement (GL604) -------------------------------------------------------------------------


def placement_problems(exporter: DcgmExporter, inventory: Inventory) -> list[Problem]:
    """GL604: the exporter cannot run on the nodes the unit's GPU workloads run on, or
    gpu-operator values place it through settings no template reads."""
    problems = []
    if exporter.chart is not None:
        for path in ignored_placement(exporter.chart):
            section, key = path[-2], path[-1]
            problems.append(
                Problem(
                    exporter.document,
                    path,
                    f"gpu-operator values set {section}.{key}, which places nothing. "
                    f"{capitalized(exporter.chart.describe())} set it, but gpu-operator's "
                    f"ClusterPolicy has no {key} for {section}"
                    + (
                        " (dcgm is the standalone DCGM host engine, off by default, not the "
                        "exporter)"
                        if section == "dcgm"
                        else ""
                    )
                    + ". gpu-operator runs dcgm-exporter on every node it labels "
                    f"{OPERATOR_NODE_LABEL}=true, which is every node with an NVIDIA GPU",
                    f"# delete {section}.{key}; to keep dcgm-exporter off a GPU node, label it:\n"
                    f"kubectl label node <node> {OPERATOR_NODE_LABEL}=false",
                )
            )
    placements = inventory.pipeline.gpu_placements()
    if not placements:
        return problems
    placement = exporter.placement
    missing: list[Taint] = []
    tainted_owners: list[tuple[Document, Path]] = []
    conflicts: list[str] = []
    conflicting_owners: list[tuple[Document, Path]] = []
    wanted: dict[str, list[str]] = {}
    for group in placements:
        untolerated = [t for t in group.taints if not placement.tolerates(t)]
        for taint in untolerated:
            if taint not in missing:
                missing.append(taint)
        if untolerated:
            tainted_owners.extend(group.owners)
        found = _selector_conflicts(placement, group.placement)
        for text in found:
            if text not in conflicts:
                conflicts.append(text)
        if found:
            conflicting_owners.extend(group.owners)
            for key, value in group.placement.node_selector.items():
                if key in placement.node_selector and value is not None:
                    wanted.setdefault(key, [])
                    if value not in wanted[key]:
                        wanted[key].append(value)
    if missing:
        shown = ", ".join(str(t) for t in missing)
        problems.append(
            Problem(
                exporter.document,
                placement.tolerations_path,
                f"dcgm-exporter does not tolerate the GPU nodes' taint {abbreviated(shown)}. "
                f"{capitalized(exporter.describe())} does not tolerate {shown}, which the nodes of "
                f"the unit's GPU workloads carry (tolerated by {_owners(tainted_owners)}). No "
                "exporter pod runs on those nodes, so their GPUs report no metrics",
                _tolerations_fix(exporter, missing),
                tuple(related(d, p, "GPU workload") for d, p in tainted_owners[:3]),
            )
        )
    if conflicts:
        problems.append(
            Problem(
                exporter.document,
                placement.node_selector_path,
                "dcgm-exporter is kept off the GPU nodes by its nodeSelector. "
                f"{capitalized(exporter.describe())} is kept off the nodes of the unit's GPU "
                "workloads: "
                f"{'; '.join(conflicts)} ({_owners(conflicting_owners)}). No exporter pod runs "
                "where those GPUs are, so they report no metrics",
                _selector_fix(wanted),
                tuple(related(d, p, "GPU workload") for d, p in conflicting_owners[:3]),
            )
        )
    return problems


def _owners(owners: list[tuple[Document, Path]]) -> str:
    names = []
    for document, _ in owners:
        ref = describe_document(document)
        text = str(ref)
        if text not in names:
            names.append(text)
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _selector_conflicts(exporter: Placement, workload: Placement) -> list[str]:
    if exporter.follows_gpu_nodes:
        return []
    found = []
    for key, value in exporter.node_selector.items():
        theirs = workload.node_selector.get(key)
        if value is not None and theirs is not None and theirs != value:
            found.append(f"its nodeSelector wants {key}={value}, the workloads' {key}={theirs}")
    if exporter.terms and all(_excludes(term, workload.node_selector) for term in exporter.terms):
        found.append(
            "its required node affinity matches no node the workloads' nodeSelector "
            f"({', '.join(f'{k}={v}' for k, v in sorted(workload.node_selector.items(), key=str))})"
            " allows"
        )
    return found


def _excludes(term: list[Requirement], labels: dict[str, str | None]) -> bool:
    """Does this node selector term rule out every node with ``labels``?"""
    for requirement in term:
        if requirement.key not in labels:
            continue
        value = labels[requirement.key]
        if value is None:
            continue
        if requirement.operator == "In" and value not in requirement.values:
            return True
        if requirement.operator == "NotIn" and value in requirement.values:
            return True
        if requirement.operator == "DoesNotExist":
            return True
    return False


def _tolerations_fix(exporter: DcgmExporter, missing: list[Taint]) -> str:
    entries = [
        {
            k: v
            for k, v in (
                ("key", t.key),
                ("operator", "Equal" if t.value is not None else "Exists"),
                ("value", t.value),
                ("effect", t.effect),
            )
            if v is not None
        }
        for t in exporter.placement.tolerations
    ]
    for taint in missing:
        entry = {"key": taint.key, "operator": "Exists", "effect": taint.effect}
        if entry not in entries:
            entries.append(entry)
    text = yaml_text({"tolerations": entries})
    if exporter.kind == GPU_OPERATOR:
        return "# the tolerations of every gpu-operator DaemonSet:\ndaemonsets:\n" + _indent(
            text, 2
        )
    return text


def _selector_fix(wanted: dict[str, list[str]]) -> str:
    if all(len(values) == 1 for values in wanted.values()):
        return yaml_text({"nodeSelector": {k: v[0] for k, v in wanted.items()}})
    expressions = [{"key": k, "operator": "In", "values": v} for k, v in wanted.items()]
    return "# the GPU workloads run on several values: drop the nodeSelector entry and use\n" + (
        yaml_text(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": expressions}]
                        }
                    }
                }
            }
        )
    )
