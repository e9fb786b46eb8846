"""GL601: is a dcgm-exporter monitor selected by a Prometheus of the unit (its monitor
selector, namespace selector and the kube-prometheus-stack release label)?"""

from __future__ import annotations

from typing import NamedTuple

from gpulint.chain.monitors import POD_MONITOR, Monitor
from gpulint.chain.problems import Problem, indent
from gpulint.chain.servers import (
    PrometheusServer,
    Verdict,
)
from gpulint.core.message import capitalized
from gpulint.engine.rule import related
from gpulint.input.document import yaml_text
from gpulint.inventory import Inventory


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
        return f"# in Prometheus {server.name}:\nspec:\n" + indent(
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
