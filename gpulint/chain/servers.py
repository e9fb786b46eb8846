"""The Prometheus servers of a unit, which monitors each selects, and the Services they serve on.

Two ways to declare one:

* a Prometheus Operator ``Prometheus`` object (monitoring.coreos.com/v1). Its
  ``serviceMonitorSelector``/``podMonitorSelector``: an empty selector matches every monitor,
  a null one matches none; ``serviceMonitorNamespaceSelector``/``podMonitorNamespaceSelector``:
  empty matches every namespace, null (the default) only the Prometheus's own
  (pkg/apis/monitoring/v1/prometheus_types.go). The operator serves it through the governing
  Service ``prometheus-operated`` (or ``spec.serviceName``), port ``web`` 9090, in its
  namespace (pkg/prometheus/server/operator.go, pkg/prometheus/common.go
  ``BuildStatefulSetService``).
* kube-prometheus-stack values. The chart renders ``serviceMonitorSelector`` as written when
  it is non-empty, else ``matchLabels: {release: <release name>}`` when
  ``serviceMonitorSelectorNilUsesHelmValues`` is true (the default), else ``{}``; the
  namespace selector as written, else ``{}`` (every namespace); PodMonitors alike
  (charts/kube-prometheus-stack templates/prometheus/prometheus.yaml, values.yaml). Its
  Service is ``<fullname>-prometheus`` on ``prometheus.service.port`` (9090), in
  ``namespaceOverride`` or the release namespace (templates/prometheus/service.yaml), beside
  ``prometheus-operated``.

kube-prometheus-stack's fullname (templates/_helpers.tpl ``kube-prometheus-stack.fullname``):
``fullnameOverride`` cut at 26 characters, else the release name cut at 26 when it contains
the chart name (``nameOverride`` or ``kube-prometheus-stack``), else
``<release>-<name>`` cut at 26; a trailing ``-`` is trimmed. So release ``kps`` serves
``kps-kube-prometheus-stack-prometheus`` and ``llm-prometheus`` serves
``llm-prometheus-kube-promet-prometheus``: "kube-prom" appears for 16-character release names
only.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.chain.monitors import MONITORING_GROUP, POD_MONITOR, Monitor
from gpulint.chain.services import ServicePort, ServiceView
from gpulint.core.selectors import Labels, LabelSelector
from gpulint.input.chartvalues import KUBE_PROMETHEUS_STACK, ChartValues
from gpulint.input.document import Document, Manifest, Path, as_dict

STACK_NAME = KUBE_PROMETHEUS_STACK
FULLNAME_LIMIT = 26
OPERATED_SERVICE = "prometheus-operated"
PROMETHEUS_PORT = 9090


def stack_fullname(
    release: str, name_override: str | None = None, fullname_override: str | None = None
) -> str:
    """``kube-prometheus-stack.fullname`` for a release."""
    if fullname_override:
        full = fullname_override[:FULLNAME_LIMIT]
    else:
        name = name_override or STACK_NAME
        full = release if name in release else f"{release}-{name}"
        full = full[:FULLNAME_LIMIT]
    return full.removesuffix("-")


def possible_fullname(fullname: str, name_override: str | None = None) -> bool:
    """Can some release name give this fullname (no fullnameOverride)? A cut name is 25 or
    26 characters long; a whole one contains the chart name, or ends with ``-<name>``."""
    name = name_override or STACK_NAME
    if not fullname or fullname.endswith("-"):
        return False
    if len(fullname) > FULLNAME_LIMIT:
        return False
    if len(fullname) >= FULLNAME_LIMIT - 1:
        return True
    return name in fullname


def guessed_release(fullname: str, name_override: str | None = None) -> str | None:
    """The release an impossible fullname was probably written for: what comes before a
    shortened chart name (``llm-prometheus-kube-prom`` -> ``llm-prometheus``)."""
    name = name_override or STACK_NAME
    for cut in range(len(name), 3, -1):
        marker = "-" + name[:cut]
        if fullname.endswith(marker) and len(fullname) > len(marker):
            return fullname[: -len(marker)]
    return None


class MonitorSelection(NamedTuple):
    """How a Prometheus picks monitors of one kind."""

    selector: LabelSelector | None  # None: it selects none
    namespaces: LabelSelector | None  # None: only its own namespace
    selector_path: Path  # where to change the selection
    namespaces_path: Path
    # What decided it: "written", "release-label" (NilUsesHelmValues), "null" (a CR without
    # a selector).
    source: str
    nil_uses_path: Path | None = None  # the NilUsesHelmValues setting, when written


class Verdict(NamedTuple):
    """Does one Prometheus select one monitor? ``selected`` None: gpulint cannot tell."""

    selected: bool | None
    reason: str  # why not (or why gpulint cannot tell)
    path: Path  # where on the Prometheus side to change it
    fix_labels: dict[str, str] | None = None  # labels that would get the monitor selected


class PrometheusServer:
    """A Prometheus Operator Prometheus, declared as an object or by kube-prometheus-stack."""

    __slots__ = (
        "chart",
        "document",
        "kind",
        "name",
        "namespace",
        "path",
        "pod_monitors",
        "release",
        "service_monitors",
        "services",
    )

    def __init__(
        self,
        kind: str,
        name: str | None,
        namespace: str | None,
        document: Document,
        path: Path,
        service_monitors: MonitorSelection,
        pod_monitors: MonitorSelection,
        services: list[ServiceView],
        release: str | None = None,
        chart: ChartValues | None = None,
    ) -> None:
        self.kind = kind  # Prometheus | kube-prometheus-stack
        self.name = name
        self.namespace = namespace
        self.document = document
        self.path = path
        self.service_monitors = service_monitors
        self.pod_monitors = pod_monitors
        self.services = services
        self.release = release
        self.chart = chart

    def __repr__(self) -> str:
        return f"PrometheusServer({self.kind} {self.namespace}/{self.name})"

    @property
    def manifest(self) -> Manifest | None:
        return self.document if self.chart is None and isinstance(self.document, Manifest) else None

    def describe(self) -> str:
        if self.chart is not None:
            release = f" (release {self.release})" if self.release else ""
            return f"the Prometheus of {self.chart.describe()}{release}"
        where = f"{self.namespace}/" if self.namespace else ""
        return f"Prometheus {where}{self.name}"

    def selection(self, monitor: Monitor) -> MonitorSelection:
        return self.pod_monitors if monitor.kind == POD_MONITOR else self.service_monitors

    def judge(self, monitor: Monitor, namespace_labels: Labels | None) -> Verdict:
        """Does this Prometheus select ``monitor``? ``namespace_labels``: the labels of the
        monitor's namespace, when known."""
        selection = self.selection(monitor)
        what = "PodMonitor" if monitor.kind == POD_MONITOR else "ServiceMonitor"
        if selection.selector is None:
            return Verdict(
                False,
                f"it has no {what[0].lower()}{what[1:]}Selector, which selects no {what}",
                selection.selector_path,
                {},
            )
        answer = selection.selector.matches(monitor.labels)
        if answer is not True:
            return self._unmatched_labels(monitor, selection, selection.selector, what, answer)
        return self._namespace_verdict(monitor, selection, what, namespace_labels)

    def _unmatched_labels(
        self,
        monitor: Monitor,
        selection: MonitorSelection,
        selector: LabelSelector,
        what: str,
        answer: bool | None,
    ) -> Verdict:
        """The monitor selector does not match the monitor's labels (or cannot tell)."""
        if answer is None:
            return Verdict(None, "a label value is not known", selection.selector_path)
        missing = selector.missing(monitor.labels)
        wanted = {k: v for k, v in missing.items() if v is not None}
        if selection.source == "release-label":
            setting = f"{what[0].lower()}{what[1:]}SelectorNilUsesHelmValues"
            shown = self.release or "<its release name>"
            if "release" not in monitor.labels:
                has = "this one has no `release` label"
            else:
                has = f"this one has release: {monitor.labels['release']}"
            reason = (
                f"it selects only {what}s labelled `release: {shown}` ({setting} is "
                f"{'true by default' if selection.nil_uses_path is None else 'true'}), and "
                f"{has}"
            )
        else:
            reason = f"its {what} selector `{selector}` does not match the labels"
        return Verdict(False, reason, selection.nil_uses_path or selection.selector_path, wanted)

    def _namespace_verdict(
        self,
        monitor: Monitor,
        selection: MonitorSelection,
        what: str,
        namespace_labels: Labels | None,
    ) -> Verdict:
        """The monitor's labels match: does the namespace selector select its namespace?"""
        if monitor.namespace is None:
            if selection.namespaces is not None and selection.namespaces.is_empty:
                return Verdict(True, "", selection.namespaces_path)
            return Verdict(None, "the monitor's namespace is not known", selection.namespaces_path)
        if selection.namespaces is None:
            if self.namespace is None:
                return Verdict(None, "its namespace is not known", selection.namespaces_path)
            if monitor.namespace != self.namespace:
                return Verdict(
                    False,
                    f"it has no {what[0].lower()}{what[1:]}NamespaceSelector, so it looks for "
                    f"{what}s in its own namespace {self.namespace} only, not in "
                    f"{monitor.namespace}",
                    selection.namespaces_path,
                )
            return Verdict(True, "", selection.namespaces_path)
        if selection.namespaces.is_empty:
            return Verdict(True, "", selection.namespaces_path)
        if namespace_labels is None:
            return Verdict(
                None,
                "the labels of the monitor's namespace are not known",
                selection.namespaces_path,
            )
        matched = selection.namespaces.matches(namespace_labels)
        if matched is False:
            return Verdict(
                False,
                f"its {what} namespace selector `{selection.namespaces}` does not match "
                f"namespace {monitor.namespace}",
                selection.namespaces_path,
            )
        return Verdict(
            matched, "" if matched else "a label value is not known", selection.namespaces_path
        )


def _cr_selection(spec: dict[str, Any], key: str) -> MonitorSelection:
    namespace_key = key.replace("Selector", "NamespaceSelector")
    selector = LabelSelector.of(spec.get(key))
    namespaces = LabelSelector.of(spec.get(namespace_key))
    return MonitorSelection(
        selector,
        namespaces,
        ("spec", key) if key in spec else ("spec",),
        ("spec", namespace_key) if namespace_key in spec else ("spec",),
        "written" if selector is not None else "null",
    )


def prometheus_of(manifest: Manifest) -> PrometheusServer | None:
    """A ``Prometheus`` object of Prometheus Operator."""
    if manifest.kind != "Prometheus" or manifest.group != MONITORING_GROUP:
        return None
    spec = as_dict(manifest.data.get("spec"))
    service_name = spec.get("serviceName")
    name = service_name if isinstance(service_name, str) and service_name else OPERATED_SERVICE
    port_name = spec.get("portName") if isinstance(spec.get("portName"), str) else "web"
    service = ServiceView(
        name,
        manifest.namespace,
        {"operated-prometheus": "true"},
        None,
        [ServicePort(port_name, PROMETHEUS_PORT, port_name, ("spec",))],
        manifest,
        ("metadata", "name"),
        made_by=f"Prometheus Operator for Prometheus {manifest.name}",
    )
    return PrometheusServer(
        "Prometheus",
        manifest.name,
        manifest.namespace,
        manifest,
        ("metadata", "name"),
        _cr_selection(spec, "serviceMonitorSelector"),
        _cr_selection(spec, "podMonitorSelector"),
        [service],
    )


def _stack_selection(values: ChartValues, key: str) -> MonitorSelection:
    spec_path = ("prometheus", "prometheusSpec")
    spec = as_dict(values.get(*spec_path))
    nil_key = f"{key}NilUsesHelmValues"
    namespace_key = key.replace("Selector", "NamespaceSelector")
    written = spec.get(key)
    nil_uses = spec.get(nil_key, True)
    nil_path = values.path(*spec_path, nil_key) if nil_key in spec else None
    base = (
        values.path(*spec_path)
        if spec_path[1] in as_dict(values.get("prometheus"))
        else (values.path("prometheus") if "prometheus" in values.values else values.path())
    )
    namespaces = LabelSelector.of(spec.get(namespace_key)) or LabelSelector({})
    namespaces_path = values.path(*spec_path, namespace_key) if namespace_key in spec else base
    if isinstance(written, dict) and written:
        selector = LabelSelector.of(written)
        return MonitorSelection(
            selector, namespaces, values.path(*spec_path, key), namespaces_path, "written"
        )
    # ``{{ if .Values...NilUsesHelmValues }}``: Go template truth.
    if nil_uses not in (False, None, 0, "", "false"):
        selector = LabelSelector({"release": values.release})
        return MonitorSelection(
            selector, namespaces, nil_path or base, namespaces_path, "release-label", nil_path
        )
    return MonitorSelection(
        LabelSelector({}),
        namespaces,
        values.path(*spec_path, key) if key in spec else base,
        namespaces_path,
        "written",
        nil_path,
    )


def stack_service_name(values: ChartValues) -> str | None:
    """``<fullname>-prometheus``; None when it depends on a release name gpulint does not know."""
    fullname_override = values.get("fullnameOverride")
    name_override = values.get("nameOverride")
    name = name_override if isinstance(name_override, str) and name_override else None
    if isinstance(fullname_override, str) and fullname_override:
        return stack_fullname("", name, fullname_override) + "-prometheus"
    if values.release is None:
        return None
    return stack_fullname(values.release, name) + "-prometheus"


def stack_namespace(values: ChartValues) -> str | None:
    override = values.get("namespaceOverride")
    return override if isinstance(override, str) and override else values.namespace


def stack_port(values: ChartValues) -> int:
    port = as_dict(as_dict(values.get("prometheus")).get("service")).get("port")
    return port if isinstance(port, int) and not isinstance(port, bool) else PROMETHEUS_PORT


def stack_server(values: ChartValues) -> PrometheusServer | None:
    """The Prometheus kube-prometheus-stack values declare (None with prometheus.enabled: false
    or agent mode, which serves no queries)."""
    if values.chart != KUBE_PROMETHEUS_STACK:
        return None
    prometheus = as_dict(values.get("prometheus"))
    if prometheus.get("enabled") is False or prometheus.get("agentMode") is True:
        return None
    namespace = stack_namespace(values)
    anchor = values.path("prometheus") if "prometheus" in values.values else values.path()
    services = []
    name = stack_service_name(values)
    service_settings = as_dict(prometheus.get("service"))
    if service_settings.get("enabled") is not False:
        services.append(
            ServiceView(
                name or "<fullname>-prometheus",
                namespace,
                {},
                None,
                [ServicePort("http-web", stack_port(values), 9090, anchor)],
                values.document,
                anchor,
                made_by=values.describe(),
                name_known=name is not None,
            )
        )
    services.append(
        ServiceView(
            OPERATED_SERVICE,
            namespace,
            {"operated-prometheus": "true"},
            None,
            [ServicePort("http-web", PROMETHEUS_PORT, "http-web", anchor)],
            values.document,
            anchor,
            made_by=f"Prometheus Operator for {values.describe()}",
        )
    )
    return PrometheusServer(
        KUBE_PROMETHEUS_STACK,
        name[: -len("-prometheus")] if name else None,
        namespace,
        values.document,
        anchor,
        _stack_selection(values, "serviceMonitorSelector"),
        _stack_selection(values, "podMonitorSelector"),
        services,
        values.release,
        values,
    )
