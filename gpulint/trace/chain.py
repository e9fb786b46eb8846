"""The links from a GPU workload to the autoscaler that reads its metric, built from a unit's
inventory and the findings the rules reported on it.

A link's status:

* ``broken``: a finding of warning or error severity lies on the link's objects and belongs to
  the link's stage (GL601 on the scrape, GL603 on the Prometheus URL ...), or the cluster says
  so (a Service without a ready endpoint);
* ``unknown``: the object is not in the input, or only a live Prometheus or the cluster can
  tell; ``detail`` says what would;
* ``ok``: the object is there and nothing is wrong with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from gpulint.chain.adapter import (
    CUSTOM,
    EXTERNAL,
    AdapterRule,
    describe_document,
    requested_metric_name,
)
from gpulint.chain.monitors import Monitor
from gpulint.chain.scrape import dcgm_targets, url_target
from gpulint.chain.servers import PrometheusServer
from gpulint.chain.services import ServiceView
from gpulint.chain.urls import PrometheusUrl, keda_urls
from gpulint.core.model import Finding, Location, ObjectRef, Severity
from gpulint.engine.registry import stage_rules
from gpulint.engine.rule import TRACE_STAGES
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list
from gpulint.inventory import Inventory
from gpulint.kinds.hpa import HPA, HpaMetric, TargetRef
from gpulint.kinds.keda import ScaledObject
from gpulint.kinds.knative import KnativeService
from gpulint.kinds.kserve import InferenceService
from gpulint.metrics.names import Exporter as MetricSource
from gpulint.metrics.names import is_dcgm_field, lookup
from gpulint.metrics.promql import metric_names_in_query

STAGES = TRACE_STAGES  # the rules whose findings break each stage declare it (STAGES)
OK, BROKEN, UNKNOWN = "ok", "broken", "unknown"

# Findings about the whole unit's Prometheus, wherever they are placed.
_UNIT_RULES = {"GL806": "scrape", "GL809": "prometheus"}


class Link(NamedTuple):
    stage: str
    object: ObjectRef | None
    location: Location | None
    status: str
    findings: tuple[str, ...]
    detail: str
    severity: Severity | None = None  # of a broken link
    label: str = ""  # a short name for diagrams ("rule rules.custom[0]")


class Trace(NamedTuple):
    autoscaler: ObjectRef
    location: Location
    metric: str
    links: tuple[Link, ...]
    unit: str = ""

    def first_broken(self) -> Link | None:
        return next((link for link in self.links if link.status == BROKEN), None)

    def worst(self) -> Severity | None:
        found = [link.severity for link in self.links if link.severity is not None]
        return max(found) if found else None


class _Anchor(NamedTuple):
    """An object a link stands for, as findings name it."""

    file: str
    ref: ObjectRef | None  # None: a values document (matched by its file)
    lines: tuple[int, int] | None = None  # only findings on these lines (one adapter rule)


def _anchor(document: Document, lines: tuple[int, int] | None = None) -> _Anchor:
    ref = document.ref if isinstance(document, Manifest) else None
    return _Anchor(document.location(()).file, ref, lines)


class _Findings:
    def __init__(self, findings: Iterable[Finding]) -> None:
        self.by_file: dict[str, list[Finding]] = {}
        self.unit: dict[str, list[Finding]] = {}
        for finding in findings:
            stage = _UNIT_RULES.get(finding.rule)
            if stage is not None:
                self.unit.setdefault(stage, []).append(finding)
            else:
                self.by_file.setdefault(finding.location.file, []).append(finding)

    def on(self, stage: str, anchors: Sequence[_Anchor]) -> list[Finding]:
        rules = stage_rules()[stage]
        found: list[Finding] = list(self.unit.get(stage, []))
        for anchor in anchors:
            for finding in self.by_file.get(anchor.file, []):
                if finding.rule not in rules or finding in found:
                    continue
                if anchor.lines is not None and not (
                    anchor.lines[0] <= finding.location.line < anchor.lines[1]
                ):
                    continue
                if anchor.ref is not None and _ref_of(finding) not in (anchor.ref, None):
                    continue
                found.append(finding)
        return found


def _ref_of(finding: Finding) -> ObjectRef | None:
    ref = finding.object
    if ref is None or not ref.api_version:
        return None  # a values file: its findings are matched by file
    return ref


def _link(
    stage: str,
    document: Document | None,
    status: str,
    detail: str,
    findings: list[Finding],
    obj: ObjectRef | None = None,
    path: Path = (),
    label: str = "",
) -> Link:
    severities = [f.severity for f in findings if f.severity >= Severity.WARNING]
    if severities:
        status = BROKEN
    ref = obj if obj is not None else (describe_document(document) if document else None)
    location = document.location(path) if document is not None else None
    severity = max(severities) if severities else (Severity.ERROR if status == BROKEN else None)
    return Link(
        stage,
        ref,
        location,
        status,
        tuple(sorted({f.rule for f in findings})),
        detail,
        severity,
        label or (str(ref) if ref is not None else ""),
    )


def _made(api_version: str, kind: str, namespace: str | None, name: str | None) -> ObjectRef:
    """The object a chart or operator makes, as the link's object."""
    return ObjectRef(api_version, kind, namespace, name or "<release>-dcgm-exporter")


def _server_label(server: PrometheusServer) -> str:
    if server.chart is not None:
        return f"kube-prometheus-stack {server.release or server.name or ''}".strip()
    return f"Prometheus {server.name}"


# --- what the chain is made of ---------------------------------------------------------------


def _is_dcgm(names: Iterable[str]) -> bool:
    for name in names:
        known = lookup(name)
        if is_dcgm_field(name) or (known is not None and known.exporter is MetricSource.DCGM):
            return True
    return False


def _gpu_metric(series: list[str], served: bool, name: str) -> bool:
    """Is the metric dcgm-exporter's? Its series say, when an adapter rule of the input
    serves it; without one, a name that says GPU is taken to be (an adapter elsewhere, or
    the cluster's, renames DCGM_FI_DEV_GPU_UTIL as gpu_utilization)."""
    if _is_dcgm(series):
        return True
    return not served and ("gpu" in name.lower() or "dcgm" in name.lower())


class _Chain:
    def __init__(self, inventory: Inventory, findings: _Findings) -> None:
        self.inventory = inventory
        self.findings = findings
        self.pipeline = inventory.pipeline

    # --- workload --------------------------------------------------------------------------

    def workload(self, namespace: str | None, ref: TargetRef | None, near: Document) -> Link:
        if ref is None:
            return _link("workload", None, UNKNOWN, "the autoscaler has no scaleTargetRef", [])
        target = self.inventory.resolve_target(namespace, ref, near)
        shown = target.describe()
        anchors = [_anchor(near)]
        document = target.manifest or target.owner
        if document is None:
            return _link(
                "workload",
                None,
                UNKNOWN,
                f"{shown} is not in the input: add its manifest, or trace with --cluster",
                self.findings.on("workload", anchors),
                obj=ObjectRef(ref.api_version, ref.kind or "Deployment", namespace, ref.name),
            )
        anchors.append(_anchor(document))
        gpus = target.gpu_requests(self.inventory.gpu_names)
        if gpus:
            resources = sorted({g.resource for g in gpus})
            counts = [t.gpus_per_pod(self.inventory.gpu_names) for t in target.templates]
            per_pod = next((c for c in counts if c), None)
            detail = (
                f"{shown}: {per_pod if per_pod is not None else 'some'} "
                f"{', '.join(resources)} per pod"
            )
        else:
            detail = f"{shown} asks for no GPU"
        via = f" (made by {describe_document(target.owner)})" if target.owner is not None else ""
        return _link("workload", document, OK, detail + via, self.findings.on("workload", anchors))

    def workload_of(self, document: Manifest, detail: str) -> Link:
        return _link(
            "workload", document, OK, detail, self.findings.on("workload", [_anchor(document)])
        )

    # --- exporter, service, scrape ----------------------------------------------------------

    def scrape_links(self, gpu: bool, near: Document) -> list[Link]:
        if not gpu:
            why = "the metric is not a dcgm-exporter series: its exporter is not traced"
            return [
                _link(stage, None, UNKNOWN, why, []) for stage in ("exporter", "service", "scrape")
            ]
        exporters = self.pipeline.exporters_near(near)
        monitors = [m for m in self.pipeline.all_monitors()]
        links = []
        if exporters:
            exporter = exporters[0]
            placement = (
                "follows every GPU node (gpu-operator labels them)"
                if exporter.placement.follows_gpu_nodes
                else "tolerates "
                + (", ".join(str(t) for t in exporter.placement.tolerations) or "no taint")
            )
            links.append(
                _link(
                    "exporter",
                    exporter.document,
                    OK,
                    f"{exporter.describe()}; {placement}",
                    self.findings.on("exporter", [_anchor(exporter.document)]),
                    obj=_made("apps/v1", "DaemonSet", exporter.namespace, exporter.name)
                    if exporter.made_by
                    else None,
                    path=exporter.path,
                )
            )
        else:
            links.append(
                _link(
                    "exporter",
                    None,
                    UNKNOWN,
                    "no dcgm-exporter in the input (its DaemonSet, or gpu-operator or "
                    "dcgm-exporter chart values)",
                    [],
                )
            )
        links.append(self._service(monitors, exporters))
        links.append(self._scrape(monitors))
        return links

    def _service(self, monitors: list[Monitor], exporters: list[Any]) -> Link:
        services: list[ServiceView] = []
        for monitor in monitors:
            for service in self.pipeline.services_selected(monitor).certain:
                if service not in services:
                    services.append(service)
        if not services:
            services = [
                s
                for s in self.pipeline.all_services()
                if s.made_by is not None and "dcgm" in s.name.lower()
            ]
        if not services:
            detail = (
                "no Service in front of dcgm-exporter in the input"
                if exporters
                else "no dcgm-exporter Service in the input"
            )
            findings = self.findings.on("service", [_anchor(m.document) for m in monitors])
            return _link("service", None, UNKNOWN, detail, findings)
        service = services[0]
        ports = ", ".join(p.describe() for p in service.ports) or "no port"
        detail = f"{service.describe()}: {ports}"
        status = OK
        cluster = self.inventory.cluster
        if (
            cluster is not None
            and service.made_by is None
            and service.namespace
            and (service.namespace, service.name) in cluster.endpoints_read
        ):
            state = self.pipeline.endpoints_of(service)
            ready = state.ready if state is not None else 0
            detail += f"; {ready} ready endpoint{'s' * (ready != 1)} in the cluster"
            if ready == 0:
                status = BROKEN
        return _link(
            "service",
            service.document,
            status,
            detail,
            self.findings.on(
                "service", [_anchor(s.document) for s in services if s.made_by is None]
            ),
            obj=_made("v1", "Service", service.namespace, service.name)
            if service.made_by
            else None,
            path=service.path,
        )

    def _scrape(self, monitors: list[Monitor]) -> Link:
        live = self.inventory.live
        targets_text, status = "", OK
        if live is not None and live.available and live.targets is not None:
            targets = dcgm_targets(live, monitors)
            up = sum(1 for t in targets if t.health == "up")
            targets_text = f"Prometheus has {up} of {len(targets)} dcgm-exporter targets up"
            status = OK if up else BROKEN
        if not monitors:
            if targets_text:
                return _link("scrape", None, status, targets_text, self.findings.on("scrape", []))
            return _link(
                "scrape",
                None,
                UNKNOWN,
                "no ServiceMonitor or PodMonitor for dcgm-exporter in the input "
                "(--prometheus tells whether Prometheus scrapes it)",
                self.findings.on("scrape", []),
            )
        monitor = monitors[0]
        detail = monitor.describe() + (f"; {targets_text}" if targets_text else "")
        return _link(
            "scrape",
            monitor.document,
            status,
            detail,
            self.findings.on("scrape", [_anchor(m.document) for m in monitors]),
            obj=_made("monitoring.coreos.com/v1", monitor.kind, monitor.namespace, monitor.name)
            if monitor.made_by
            else None,
            path=monitor.labels_path if monitor.made_by else monitor.path,
        )

    # --- prometheus --------------------------------------------------------------------------

    def prometheus(self, url: PrometheusUrl | None, near: Document) -> Link:
        servers = self.pipeline.servers_near(near)
        anchors = [_anchor(s.document) for s in servers]
        if url is not None:
            anchors.append(_anchor(url.document))
        findings = self.findings.on("prometheus", anchors)
        server_text = servers[0].describe() if servers else ""
        if url is None:
            detail = "the URL Prometheus is queried at is not in the input"
            if server_text:
                detail = f"{server_text}; {detail}"
            status = OK if servers else UNKNOWN
            document = servers[0].document if servers else None
            label = _server_label(servers[0]) if servers else ""
            return _link("prometheus", document, status, detail, findings, label=label)
        live = self.inventory.live
        target = url_target(url, self.inventory)
        if target.service is not None:
            detail = f"{url.client} queries {url.url}: {target.service.describe()}"
            status = OK
        elif target.problem is not None:
            detail = f"{url.client} queries {url.url}: {target.problem}"
            status = OK  # broken through its finding
        else:
            detail = f"{url.client} queries {url.url}"
            status = OK if servers else UNKNOWN
            if not servers:
                detail += "; no Prometheus of the input serves it (its values or objects)"
        if live is not None:
            detail += f"; {live.url} answered" if live.available else f"; {live.url}: {live.error}"
        server = servers[0] if servers else None
        label = _server_label(server) if server is not None else ""
        if target.service is not None:
            label = f"Service {target.service.name}"
        return _link(
            "prometheus", url.document, status, detail, findings, path=url.path, label=label
        )

    def adapter_url(self, rule: AdapterRule | None) -> PrometheusUrl | None:
        urls = [u for u in self.pipeline.all_urls() if u.source != "keda"]
        if rule is not None:
            own = [u for u in urls if u.document is rule.document]
            if own:
                return own[0]
        return urls[0] if urls else None

    # --- adapter, metrics API, autoscaler ------------------------------------------------------

    def adapter(self, metric: str, api: str, near: Manifest, rules: list[AdapterRule]) -> Link:
        hpa_anchor = [_anchor(near)]
        if not rules:
            findings = self.findings.on("adapter-rule", hpa_anchor)
            status = BROKEN if findings else UNKNOWN
            detail = (
                f"no prometheus-adapter rule of the input serves {metric}"
                if self.inventory.adapter_configs
                else "the prometheus-adapter config is not in the input"
            )
            return _link("adapter-rule", None, status, detail, findings)
        rule = rules[0]
        start = rule.location().line
        later = [
            other.location().line
            for other in rule.config.all_rules()
            if not other.generated and other.location().line > start
        ]
        end = min(later) if later and not rule.generated else 1 << 30
        anchors = [_anchor(rule.document, (start, end)), *hpa_anchor]
        series = rule.series_for(requested_metric_name(metric, api))
        detail = rule.describe()
        if series:
            detail += f": {', '.join(series)} as {metric}"
        live = self.inventory.live
        evidence = live.for_rule(rule) if live is not None else None
        if evidence is not None:
            detail += f"; Prometheus has {evidence.series.count} series for its seriesQuery"
        return _link(
            "adapter-rule",
            rule.document,
            OK,
            detail,
            self.findings.on("adapter-rule", anchors),
            obj=rule.config.ref or describe_document(rule.document),
            path=rule.path,
            label=rule.describe().split(" in ", 1)[0],
        )

    def metrics_api(self, hpa: HPA, metric: HpaMetric) -> Link:
        findings = self.findings.on("metrics-api", [_anchor(hpa.manifest)])
        cluster = self.inventory.cluster
        if cluster is not None:
            probe = cluster.probe(hpa, metric.index)
            if probe is not None:
                status = BROKEN if probe.broken else (OK if probe.outcome == "served" else UNKNOWN)
                detail = f"kubectl get --raw '{probe.request}': {probe.outcome}"
                if probe.detail:
                    detail += f" ({probe.detail})"
                if probe.outcome == "served":
                    detail += f", {probe.values} value{'s' * (probe.values != 1)}"
                return _link("metrics-api", None, status, detail, findings)
        live = self.inventory.live
        if live is not None and live.available:
            for evidence in live.for_hpa(hpa, self.inventory):
                if evidence.metric is not metric:
                    continue
                if evidence.usable:
                    values = ", ".join(f"{s.value:g}" for s in evidence.usable[:4])
                    return _link(
                        "metrics-api",
                        None,
                        OK,
                        f"the adapter's query returns {len(evidence.usable)} value"
                        f"{'s' * (len(evidence.usable) != 1)} for {evidence.target} ({values})",
                        findings,
                    )
                return _link(
                    "metrics-api",
                    None,
                    UNKNOWN,
                    f"the adapter's query returns no value for {evidence.target}",
                    findings,
                )
        api = "external.metrics.k8s.io" if metric.type == "External" else "custom.metrics.k8s.io"
        namespace = hpa.namespace or "<namespace>"
        if metric.type == "External":
            path = f"/apis/{api}/v1beta1/namespaces/{namespace}/{(metric.name or '').lower()}"
        elif metric.type == "Object":
            described = metric.described_object or {}
            kind = str(described.get("kind", "<kind>")).lower() + "s"
            name = described.get("name")
            path = f"/apis/{api}/v1beta1/namespaces/{namespace}/{kind}/{name}/{metric.name}"
        else:
            path = f"/apis/{api}/v1beta1/namespaces/{namespace}/pods/*/{metric.name}"
        status = BROKEN if findings else UNKNOWN
        return _link(
            "metrics-api",
            None,
            status,
            f"only the cluster tells: kubectl get --raw '{path}' (or gpulint trace --cluster)",
            findings,
        )

    def autoscaler(self, hpa: HPA, metric: HpaMetric) -> Link:
        detail = f"{metric.type} metric {metric.name}"
        target = metric.target
        if target is not None:
            value = target.average_value if target.average_value is not None else target.value
            if value is not None:
                detail += f", target {value}"
        conditions = [
            as_dict(c)
            for c in as_list(as_dict(hpa.manifest.data.get("status")).get("conditions"))
            if as_dict(c).get("status") == "False"
        ]
        if conditions:
            detail += "; " + ", ".join(
                f"{c.get('type')}=False ({c.get('reason')})" for c in conditions[:2]
            )
        live = self.inventory.live
        if live is not None and live.available:
            for evidence in live.for_hpa(hpa, self.inventory):
                stats = evidence.observed_stats() if evidence.metric is metric else None
                if stats is not None:
                    low, median, high = stats
                    detail += f"; observed {low:g} / {median:g} / {high:g} (min / median / max)"
        return _link(
            "autoscaler",
            hpa.manifest,
            OK,
            detail,
            self.findings.on("autoscaler", [_anchor(hpa.manifest)]),
            path=metric.name_path,
        )

    def owner_autoscaler(self, document: Manifest, detail: str) -> Link:
        return _link(
            "autoscaler", document, OK, detail, self.findings.on("autoscaler", [_anchor(document)])
        )

    def unknown_metrics_api(self, detail: str) -> Link:
        return _link("metrics-api", None, UNKNOWN, detail, [])


# --- the traces of a unit ------------------------------------------------------------------------


def traces(inventory: Inventory, findings: Iterable[Finding], unit: str = "") -> list[Trace]:
    """One trace per autoscaler metric of the unit."""
    chain = _Chain(inventory, _Findings(findings))
    found: list[Trace] = []
    for hpa in inventory.hpas:
        found.extend(_hpa_traces(chain, hpa, unit))
    for scaled in inventory.scaled_objects:
        found.extend(_keda_traces(chain, scaled, unit))
    for service in inventory.knative_services:
        found.extend(_knative_traces(chain, service, unit))
    for isvc in inventory.inference_services:
        found.extend(_kserve_traces(chain, isvc, unit))
    return found


def _hpa_traces(chain: _Chain, hpa: HPA, unit: str) -> list[Trace]:
    found = []
    inventory = chain.inventory
    for metric in hpa.metrics:
        if not metric.is_custom or not metric.name:
            continue
        api = EXTERNAL if metric.type == "External" else CUSTOM
        rules = inventory.rules_exposing(metric.name, api, near=hpa.manifest)
        series: list[str] = [metric.name]
        if rules:
            series = rules[0].series_for(requested_metric_name(metric.name, api)) or series
        links = [
            chain.workload(hpa.namespace, hpa.target_ref, hpa.manifest),
            *chain.scrape_links(_gpu_metric(series, bool(rules), metric.name), hpa.manifest),
            chain.prometheus(chain.adapter_url(rules[0] if rules else None), hpa.manifest),
            chain.adapter(metric.name, api, hpa.manifest, rules),
            chain.metrics_api(hpa, metric),
            chain.autoscaler(hpa, metric),
        ]
        found.append(
            Trace(
                hpa.manifest.ref,
                hpa.manifest.location(metric.name_path),
                metric.name,
                tuple(links),
                unit,
            )
        )
    return found


def _query_traces(
    chain: _Chain,
    owner: Manifest,
    namespace: str | None,
    ref: TargetRef | None,
    queries: list[tuple[str, str, PrometheusUrl | None, Path]],
    autoscaler_detail: str,
    unit: str,
) -> list[Trace]:
    """Autoscalers that query Prometheus themselves (KEDA): no adapter in between."""
    found = []
    for name, query, url, path in queries:
        links = [
            chain.workload(namespace, ref, owner),
            *chain.scrape_links(_is_dcgm(metric_names_in_query(query)), owner),
            chain.prometheus(url, owner),
            chain.unknown_metrics_api(
                f"KEDA's metrics server serves it as the external metric {name}: only the "
                "cluster tells (gpulint trace --cluster reads the HPA KEDA makes)"
            ),
            chain.owner_autoscaler(owner, f"{autoscaler_detail}: {query}"),
        ]
        found.append(Trace(owner.ref, owner.location(path), name, tuple(links), unit))
    return found


def _keda_traces(chain: _Chain, scaled: ScaledObject, unit: str) -> list[Trace]:
    urls = {u.path: u for u in keda_urls(scaled.manifest)}
    queries = []
    for index, trigger in enumerate(scaled.triggers):
        if trigger.get("type") != "prometheus":
            continue
        metadata = as_dict(trigger.get("metadata"))
        query = metadata.get("query")
        path: Path = ("spec", "triggers", index)
        url = urls.get((*path, "metadata", "serverAddress"))
        if isinstance(query, str):
            queries.append((f"s{index}-prometheus", query.strip(), url, path))
    return _query_traces(
        chain,
        scaled.manifest,
        scaled.namespace,
        scaled.target_ref,
        queries,
        "KEDA prometheus trigger",
        unit,
    )


_BUILT_IN_METRICS = ("cpu", "memory", "concurrency", "rps")


def _knative_traces(chain: _Chain, service: KnativeService, unit: str) -> list[Trace]:
    revision = service.revision_autoscaling()
    metric = revision.metric.value if revision.metric is not None else None
    if not revision.uses_hpa_class or metric is None or metric in _BUILT_IN_METRICS:
        return []
    return [_revision_trace(chain, service.manifest, metric, revision.metric, unit)]


def _revision_trace(chain: _Chain, owner: Manifest, metric: str, setting: Any, unit: str) -> Trace:
    """A Knative revision on the HPA class: Knative makes a Pods metric of that name."""
    inventory = chain.inventory
    rules = inventory.rules_exposing(metric, CUSTOM, near=owner)
    series = (rules[0].series_for(metric) if rules else None) or [metric]
    path: Path = setting.path or () if setting is not None else ()
    links = [
        chain.workload_of(owner, f"{describe_document(owner)}: its revisions' pods"),
        *chain.scrape_links(_gpu_metric(series, bool(rules), metric), owner),
        chain.prometheus(chain.adapter_url(rules[0] if rules else None), owner),
        chain.adapter(metric, CUSTOM, owner, rules),
        chain.unknown_metrics_api(
            f"Knative's HPA reads the Pods metric {metric} of each revision: only the cluster tells"
        ),
        chain.owner_autoscaler(owner, f"Knative HPA class, metric {metric}"),
    ]
    return Trace(owner.ref, owner.location(path), metric, tuple(links), unit)


def _kserve_traces(chain: _Chain, isvc: InferenceService, unit: str) -> list[Trace]:
    found: list[Trace] = []
    for component in isvc.components:
        if isvc.mode == "Knative":
            revision = isvc.revision_autoscaling(component)
            metric = revision.metric.value if revision.metric is not None else None
            if revision.uses_hpa_class and metric is not None and metric not in _BUILT_IN_METRICS:
                found.append(_revision_trace(chain, isvc.manifest, metric, revision.metric, unit))
            continue
        if isvc.autoscaler_class != "keda":
            continue
        auto_scaling = as_dict(component.get("autoScaling"))
        queries = []
        for index, entry in enumerate(as_list(auto_scaling.get("metrics"))):
            item = as_dict(entry)
            source = as_dict(item.get("external") or item.get("podmetric"))
            settings = as_dict(source.get("metric"))
            query = settings.get("query")
            if settings.get("backend") != "prometheus" or not isinstance(query, str):
                continue
            path: Path = (*component.path, "autoScaling", "metrics", index)
            address = settings.get("serverAddress")
            url = (
                PrometheusUrl(
                    address,
                    isvc.manifest,
                    (
                        *path,
                        "external" if "external" in item else "podmetric",
                        "metric",
                        "serverAddress",
                    ),
                    "keda",
                    f"InferenceService {isvc.name} {component.name} metric {index}",
                    None,
                    isvc.manifest,
                )
                if isinstance(address, str) and address
                else None
            )
            queries.append((f"s{index}-prometheus", query.strip(), url, path))
        found.extend(
            _query_traces(
                chain,
                isvc.manifest,
                isvc.namespace,
                TargetRef("Deployment", isvc.component_name(component.name), "apps/v1", ()),
                queries,
                "KServe KEDA autoscaler",
                unit,
            )
        )
    return found


def select(found: list[Trace], wanted: str | None) -> list[Trace]:
    """``--autoscaler NAMESPACE/NAME`` (or NAME)."""
    if not wanted:
        return found
    namespace, _, name = wanted.rpartition("/")
    return [
        t
        for t in found
        if t.autoscaler.name == name
        and (not namespace or t.autoscaler.namespace in (namespace, None))
    ]
