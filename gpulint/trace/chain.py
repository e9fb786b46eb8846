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

import re
from collections.abc import Iterable
from typing import Any

from gpulint.chain.adapter import (
    CUSTOM,
    EXTERNAL,
    AdapterRule,
    describe_document,
    requested_metric_name,
)
from gpulint.chain.address import PrometheusUrl
from gpulint.chain.monitors import Monitor
from gpulint.chain.scrape import dcgm_targets, url_target
from gpulint.chain.services import ServiceView
from gpulint.core.model import Finding, ObjectRef, Severity
from gpulint.engine.registry import stage_rules, unit_rules
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list
from gpulint.inventory import Inventory
from gpulint.kinds.registry import VIEW_SCOPES
from gpulint.kinds.revisions import RevisionTrace
from gpulint.kinds.scaletarget import TargetRef
from gpulint.kinds.view import (
    AdapterMetric,
    AdapterTrace,
    KindView,
    QueryTrace,
    TraceSource,
)
from gpulint.live.snapshot import HpaEvidence
from gpulint.metrics.promql import metric_names_in_query
from gpulint.trace.links import (
    BROKEN,
    OK,
    UNKNOWN,
    Anchor,
    Link,
    StageFindings,
    Trace,
    anchor,
    gpu_metric,
    is_dcgm,
    link,
    made,
    server_label,
)

__all__ = ["Link", "Trace", "select", "traces"]


class _Chain:
    def __init__(self, inventory: Inventory, findings: StageFindings) -> None:
        self.inventory = inventory
        self.findings = findings
        self.pipeline = inventory.pipeline

    # --- workload --------------------------------------------------------------------------

    def workload(
        self,
        namespace: str | None,
        ref: TargetRef | None,
        near: Document,
        own: Anchor | None = None,
    ) -> Link:
        """``own``: the anchor of the autoscaler's part of ``near`` (``_own_anchor``)."""
        if ref is None:
            return link("workload", None, UNKNOWN, "the autoscaler has no scaleTargetRef", [])
        target = self.inventory.resolve_target(namespace, ref, near)
        shown = target.describe()
        anchors = [own or anchor(near)]
        document = target.manifest or target.owner
        if document is None:
            return link(
                "workload",
                None,
                UNKNOWN,
                f"{shown} is not in the input: add its manifest, or trace with --cluster",
                self.findings.on("workload", anchors),
                obj=ObjectRef(ref.api_version, ref.kind or "Deployment", namespace, ref.name),
            )
        if document is not near:
            anchors.append(anchor(document))
        findings = self.findings.on("workload", anchors)
        refuted = _refuting(findings, near)
        if refuted is not None:
            # The target was found only by a name lint says nothing answers to (a KServe
            # predictor's old name, a revision's Deployment): say that, not who would make it.
            return link("workload", document, OK, f"{shown}: {refuted.headline}", findings)
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
        return link("workload", document, OK, detail + via, findings)

    def workload_of(self, document: Manifest, detail: str) -> Link:
        return link(
            "workload", document, OK, detail, self.findings.on("workload", [anchor(document)])
        )

    # --- exporter, service, scrape ----------------------------------------------------------

    def scrape_links(
        self, gpu: bool, near: Document, source: tuple[Manifest, str] | None = None
    ) -> list[Link]:
        if not gpu:
            why = "the metric is not a dcgm-exporter series: its exporter is not traced"
            links = [
                link(stage, None, UNKNOWN, why, []) for stage in ("exporter", "service", "scrape")
            ]
            if source is not None:
                # What the input says of where the series comes from (KindView.metric_source).
                document, said = source
                links[0] = link(
                    "exporter", document, OK, said, self.findings.on("exporter", [anchor(document)])
                )
            return links
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
            findings = self.findings.on("exporter", [anchor(exporter.document)])
            # What lint says of the exporter's placement, beside what the inventory says.
            said = "".join(f"; {f.headline}" for f in findings if f.severity >= Severity.WARNING)
            links.append(
                link(
                    "exporter",
                    exporter.document,
                    OK,
                    f"{exporter.describe()}; {placement}{said}",
                    findings,
                    obj=made("apps/v1", "DaemonSet", exporter.namespace, exporter.name)
                    if exporter.made_by
                    else None,
                    path=exporter.path,
                )
            )
        else:
            links.append(
                link(
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
        services = self._dcgm_services(monitors)
        if not services:
            detail = (
                "no Service in front of dcgm-exporter in the input"
                if exporters
                else "no dcgm-exporter Service in the input"
            )
            findings = self.findings.on("service", [anchor(m.document) for m in monitors])
            return link("service", None, UNKNOWN, detail, findings)
        service = services[0]
        ports = ", ".join(p.describe() for p in service.ports) or "no port"
        detail = f"{service.describe()}: {ports}"
        ready = self._ready_endpoints(service)
        if ready is not None:
            detail += f"; {ready} ready endpoint{'s' * (ready != 1)} in the cluster"
        return link(
            "service",
            service.document,
            BROKEN if ready == 0 else OK,
            detail,
            self.findings.on(
                "service", [anchor(s.document) for s in services if s.made_by is None]
            ),
            obj=made("v1", "Service", service.namespace, service.name) if service.made_by else None,
            path=service.path,
        )

    def _dcgm_services(self, monitors: list[Monitor]) -> list[ServiceView]:
        """The Services the monitors select, else those a chart made for dcgm-exporter."""
        services: list[ServiceView] = []
        for monitor in monitors:
            for service in self.pipeline.services_selected(monitor).certain:
                if service not in services:
                    services.append(service)
        if services:
            return services
        return [
            s
            for s in self.pipeline.all_services()
            if s.made_by is not None and "dcgm" in s.name.lower()
        ]

    def _ready_endpoints(self, service: ServiceView) -> int | None:
        """Ready endpoints of a Service the cluster was asked about; None when not asked."""
        cluster = self.inventory.cluster
        if (
            cluster is None
            or service.made_by is not None
            or not service.namespace
            or (service.namespace, service.name) not in cluster.endpoints_read
        ):
            return None
        state = self.pipeline.endpoints_of(service)
        return state.ready if state is not None else 0

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
                return link("scrape", None, status, targets_text, self.findings.on("scrape", []))
            return link(
                "scrape",
                None,
                UNKNOWN,
                "no ServiceMonitor or PodMonitor for dcgm-exporter in the input "
                "(--prometheus tells whether Prometheus scrapes it)",
                self.findings.on("scrape", []),
            )
        monitor = monitors[0]
        detail = monitor.describe() + (f"; {targets_text}" if targets_text else "")
        return link(
            "scrape",
            monitor.document,
            status,
            detail,
            self.findings.on("scrape", [anchor(m.document) for m in monitors]),
            obj=made("monitoring.coreos.com/v1", monitor.kind, monitor.namespace, monitor.name)
            if monitor.made_by
            else None,
            path=monitor.labels_path if monitor.made_by else monitor.path,
        )

    # --- prometheus --------------------------------------------------------------------------

    def prometheus(self, url: PrometheusUrl | None, near: Document) -> Link:
        servers = self.pipeline.servers_near(near)
        anchors = [anchor(s.document) for s in servers]
        if url is not None:
            anchors.append(anchor(url.document))
        findings = self.findings.on("prometheus", anchors)
        server_text = servers[0].describe() if servers else ""
        if url is None:
            detail = "the URL Prometheus is queried at is not in the input"
            if server_text:
                detail = f"{server_text}; {detail}"
            status = OK if servers else UNKNOWN
            document = servers[0].document if servers else None
            label = server_label(servers[0]) if servers else ""
            return link("prometheus", document, status, detail, findings, label=label)
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
        label = server_label(server) if server is not None else ""
        if target.service is not None:
            label = f"Service {target.service.name}"
        return link(
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
        hpa_anchor = [anchor(near)]
        if not rules:
            findings = self.findings.on("adapter-rule", hpa_anchor)
            status = BROKEN if findings else UNKNOWN
            detail = (
                f"no prometheus-adapter rule of the input serves {metric}"
                if self.inventory.adapter_configs
                else "the prometheus-adapter config is not in the input"
            )
            return link("adapter-rule", None, status, detail, findings)
        rule = rules[0]
        start = rule.location().line
        later = [
            other.location().line
            for other in rule.config.all_rules()
            if not other.generated and other.location().line > start
        ]
        end = min(later) if later and not rule.generated else 1 << 30
        anchors = [anchor(rule.document, (start, end), rule.path), *hpa_anchor]
        series = rule.series_for(requested_metric_name(metric, api))
        detail = rule.describe()
        if series:
            detail += f": {', '.join(series)} as {metric}"
        live = self.inventory.live
        evidence = live.for_rule(rule) if live is not None else None
        if evidence is not None:
            detail += f"; Prometheus has {evidence.series.count} series for its seriesQuery"
        return link(
            "adapter-rule",
            rule.document,
            OK,
            detail,
            self.findings.on("adapter-rule", anchors),
            obj=rule.config.ref or describe_document(rule.document),
            path=rule.path,
            label=rule.describe().split(" in ", 1)[0],
        )

    def metrics_api(self, hpa: KindView, metric: AdapterMetric) -> Link:
        findings = self.findings.on("metrics-api", [anchor(hpa.manifest)])
        told = self._probed(hpa, metric, findings) or self._live(hpa, metric, findings)
        if told is not None:
            return told
        return link(
            "metrics-api",
            None,
            BROKEN if findings else UNKNOWN,
            "only the cluster tells: kubectl get --raw "
            f"'{_metrics_api_path(hpa, metric)}' (or gpulint trace --cluster)",
            findings,
        )

    def _probed(self, hpa: KindView, metric: AdapterMetric, findings: list[Finding]) -> Link | None:
        """What the cluster's metrics API answered for the metric (cluster mode)."""
        cluster = self.inventory.cluster
        probe = (
            cluster.probe(hpa.namespace, hpa.name, metric.index) if cluster is not None else None
        )
        if probe is None:
            return None
        status = BROKEN if probe.broken else (OK if probe.outcome == "served" else UNKNOWN)
        detail = f"kubectl get --raw '{probe.request}': {probe.outcome}"
        if probe.detail:
            detail += f" ({probe.detail})"
        if probe.outcome == "served":
            detail += f", {probe.values} value{'s' * (probe.values != 1)}"
        return link("metrics-api", None, status, detail, findings)

    def _evidence(self, autoscaler: KindView) -> list[HpaEvidence]:
        """What ``--prometheus`` collected about the autoscaler's metrics (HPAs only: the
        adapter's queries are rendered for HPAs)."""
        live = self.inventory.live
        hpa = self.inventory.hpa_of(autoscaler.manifest)
        if live is None or not live.available or hpa is None:
            return []
        return live.for_hpa(hpa, self.inventory)

    def _live(self, hpa: KindView, metric: AdapterMetric, findings: list[Finding]) -> Link | None:
        """What the adapter's query returned from a live Prometheus (``--prometheus``)."""
        for evidence in self._evidence(hpa):
            if evidence.metric is not metric:
                continue
            if not evidence.usable:
                detail = f"the adapter's query returns no value for {evidence.target}"
                return link("metrics-api", None, UNKNOWN, detail, findings)
            count = len(evidence.usable)
            values = ", ".join(f"{s.value:g}" for s in evidence.usable[:4])
            detail = (
                f"the adapter's query returns {count} value{'s' * (count != 1)} for "
                f"{evidence.target} ({values})"
            )
            return link("metrics-api", None, OK, detail, findings)
        return None

    def autoscaler(self, hpa: KindView, metric: AdapterMetric, own: Anchor) -> Link:
        detail = f"{metric.type} metric {metric.name}"
        target = metric.target
        if target is not None:
            value = target.average_value if target.average_value is not None else target.value
            if value is not None:
                detail += f", target {value}"
        # The conditions of an HPA written out; those of an object an HPA is made from are not
        # the HPA's.
        status = as_dict(hpa.manifest.data.get("status")) if hpa.written_at is None else {}
        conditions = [
            as_dict(c)
            for c in as_list(status.get("conditions"))
            if as_dict(c).get("status") == "False"
        ]
        if conditions:
            detail += "; " + ", ".join(
                f"{c.get('type')}=False ({c.get('reason')})" for c in conditions[:2]
            )
        for evidence in self._evidence(hpa):
            stats = evidence.observed_stats() if evidence.metric is metric else None
            if stats is not None:
                low, median, high = stats
                detail += f"; observed {low:g} / {median:g} / {high:g} (min / median / max)"
        return link(
            "autoscaler",
            hpa.manifest,
            OK,
            detail,
            self.findings.on("autoscaler", [own]),
            path=metric.name_path,
        )

    def owner_autoscaler(self, document: Manifest, detail: str) -> Link:
        return link(
            "autoscaler", document, OK, detail, self.findings.on("autoscaler", [anchor(document)])
        )

    def query_autoscaler(self, document: Manifest, detail: str, trigger: Path, own: Anchor) -> Link:
        """A KEDA trigger: the autoscaler itself queries Prometheus, so the findings on its
        query (which an adapter rule's would be) break this link, and only this trigger's."""
        query = self.findings.on("adapter-rule", [anchor(document, path=trigger)])
        findings = self.findings.on("autoscaler", [own])
        return link("autoscaler", document, OK, detail, findings + query, path=trigger)

    def unknown_metrics_api(self, detail: str) -> Link:
        return link("metrics-api", None, UNKNOWN, detail, [])


# --- the traces of a unit ------------------------------------------------------------------------


def _refuting(findings: list[Finding], autoscaler: Document) -> Finding | None:
    """A finding that says the autoscaler's scaleTargetRef names no workload that exists."""
    if not isinstance(autoscaler, Manifest):
        return None
    for finding in findings:
        on_target = finding.path[:2] == ("spec", "scaleTargetRef")
        if on_target and finding.object == autoscaler.ref and finding.severity >= Severity.WARNING:
            return finding
    return None


def _metrics_api_path(hpa: KindView, metric: AdapterMetric) -> str:
    """The request the HPA controller makes for the metric (custom/external metrics API)."""
    api = "external.metrics.k8s.io" if metric.type == "External" else "custom.metrics.k8s.io"
    base = f"/apis/{api}/v1beta1/namespaces/{hpa.namespace or '<namespace>'}"
    if metric.type == "External":
        return f"{base}/{(metric.name or '').lower()}"
    if metric.type == "Object":
        described = metric.described_object or {}
        kind = str(described.get("kind", "<kind>")).lower() + "s"
        return f"{base}/{kind}/{described.get('name')}/{metric.name}"
    return f"{base}/pods/*/{metric.name}"


def traces(inventory: Inventory, findings: Iterable[Finding], unit: str = "") -> list[Trace]:
    """One trace per autoscaler metric of the unit, from each view's trace sources."""
    chain = _Chain(inventory, StageFindings(findings, stage_rules(), unit_rules()))
    found: list[Trace] = []
    for scope in VIEW_SCOPES:
        for view in inventory.items_of(scope):
            for source in view.trace_sources():
                found.append(_trace(chain, view, source, unit))
    return found


def _trace(chain: _Chain, view: KindView, source: TraceSource, unit: str) -> Trace:
    if isinstance(source, AdapterTrace):
        return _adapter_trace(chain, view, source, unit)
    if isinstance(source, QueryTrace):
        return _query_trace(chain, view, source, unit)
    return _revision_trace(chain, view.manifest, source, unit)


def _adapter_trace(chain: _Chain, view: KindView, source: AdapterTrace, unit: str) -> Trace:
    """A metric read through prometheus-adapter (an HPA's Pods, Object or External metric)."""
    inventory = chain.inventory
    metric, owner = source.metric, view.manifest
    name = metric.name or ""
    api = EXTERNAL if metric.type == "External" else CUSTOM
    rules = inventory.rules_exposing(name, api, near=owner)
    series: list[str] = [name]
    if rules:
        series = rules[0].series_for(requested_metric_name(name, api)) or series
    selector = metric.selector if isinstance(metric.selector, dict) else {}
    labels = {str(key): str(value) for key, value in as_dict(selector.get("matchLabels")).items()}
    # The HPA itself, or the one a controller makes from the view's settings (named as the
    # cluster names it, for the metrics API's answer).
    hpa = source.autoscaler
    own = _own_anchor(view, hpa.written_at)
    links = [
        chain.workload(view.namespace, source.ref, owner, own),
        *chain.scrape_links(
            gpu_metric(series, bool(rules), name), owner, _published(inventory, series[0], labels)
        ),
        chain.prometheus(chain.adapter_url(rules[0] if rules else None), owner),
        chain.adapter(name, api, owner, rules),
        chain.metrics_api(hpa, metric),
        chain.autoscaler(hpa, metric, own),
    ]
    return Trace(owner.ref, owner.location(metric.name_path), name, tuple(links), unit)


def _query_trace(chain: _Chain, view: KindView, source: QueryTrace, unit: str) -> Trace:
    """An autoscaler that queries Prometheus itself (KEDA): no adapter in between."""
    owner = view.manifest
    names = metric_names_in_query(source.query)
    labels = dict(_MATCHER.findall(source.query))
    published = next(
        (found for name in names if (found := _published(chain.inventory, name, labels))), None
    )
    own = _own_anchor(view, source.within)
    links = [
        chain.workload(view.namespace, source.ref, owner, own),
        *chain.scrape_links(is_dcgm(names), owner, published),
        chain.prometheus(source.url, owner),
        chain.unknown_metrics_api(
            f"KEDA's metrics server serves it as the external metric {source.name}: only the "
            "cluster tells (gpulint trace --cluster reads the HPA KEDA makes)"
        ),
        chain.query_autoscaler(owner, f"{source.detail}: {source.query}", source.path, own),
    ]
    return Trace(owner.ref, owner.location(source.path), source.name, tuple(links), unit)


def _revision_trace(chain: _Chain, owner: Manifest, source: RevisionTrace, unit: str) -> Trace:
    """A Knative revision on the HPA class: Knative makes a Pods metric of that name."""
    inventory = chain.inventory
    metric = source.metric
    rules = inventory.rules_exposing(metric, CUSTOM, near=owner)
    series = (rules[0].series_for(metric) if rules else None) or [metric]
    links = [
        chain.workload_of(owner, f"{describe_document(owner)}: its revisions' pods"),
        *chain.scrape_links(gpu_metric(series, bool(rules), metric), owner),
        chain.prometheus(chain.adapter_url(rules[0] if rules else None), owner),
        chain.adapter(metric, CUSTOM, owner, rules),
        chain.unknown_metrics_api(
            f"Knative's HPA reads the Pods metric {metric} of each revision: only the cluster tells"
        ),
        chain.owner_autoscaler(owner, f"Knative HPA class, metric {metric}"),
    ]
    return Trace(owner.ref, owner.location(source.path), metric, tuple(links), unit)


def _own_anchor(view: KindView, written_at: Path | None) -> Anchor:
    """The view's object as the anchor of one of its autoscalers, written at ``written_at``:
    where the object holds several (``KindView.generated_autoscalers``), the findings on the
    others' parts are not this one's."""
    parts = tuple(
        made.written_at for made in view.generated_autoscalers() if made.written_at is not None
    )
    if len(parts) < 2 or written_at is None:
        return anchor(view.manifest)
    return anchor(view.manifest, part=written_at, parts=parts)


# A label matcher written as name="value" in a query (what the trace asks the kinds about).
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"]*)"')


def _published(
    inventory: Inventory, series: str, labels: dict[str, str]
) -> tuple[Manifest, str] | None:
    """An object of the input that says where ``series`` comes from (a VariantAutoscaling,
    an InferencePool: ``KindView.metric_source``), with what it says."""
    for scope in VIEW_SCOPES:
        for view in inventory.items_of(scope):
            said = view.metric_source(series, labels)
            if said is not None:
                return view.manifest, said
    return None


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
