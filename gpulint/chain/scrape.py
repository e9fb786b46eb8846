"""The questions about the scrape chain that several rules and ``gpulint trace`` ask, answered
once: is a dcgm-exporter monitor selected by a Prometheus of the unit (GL601), do its
endpoints reach the exporter (GL602), does the adapter's URL reach a Prometheus of the unit
(GL603), can the exporter run where the GPU workloads run (GL604). GL806 names the offline
answer when Prometheus has no target; the trace marks its links with them.

Each answer is a list of ``Problem``s: where a user edits, what is wrong, the fix, and the
objects on the other side. Nothing is reported when gpulint cannot be certain (a label value
or a namespace it does not know, an exporter or Prometheus that is not in the unit).

One module answers each question: ``selection`` (GL601), ``endpoints`` (GL602), ``urltarget``
(GL603) and ``placement`` (GL604), with ``Problem`` in ``problems``; this module keeps what
the live rules and the trace ask about dcgm-exporter's series and targets, and names the
answers in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulint.chain.adapter import AdapterRule
from gpulint.chain.endpoints import endpoint_problems
from gpulint.chain.exporter import (
    DcgmExporter,
)
from gpulint.chain.monitors import POD_MONITOR, Monitor
from gpulint.chain.placement import placement_problems
from gpulint.chain.problems import Problem
from gpulint.chain.selection import Selection, selection, selection_problem
from gpulint.chain.urltarget import (
    UrlTarget,
    looks_like_prometheus,
    prometheus_services,
    url_fix,
    url_problem,
    url_target,
)
from gpulint.inventory import Inventory
from gpulint.metrics.names import Exporter as MetricSource
from gpulint.metrics.names import is_dcgm_field, lookup

if TYPE_CHECKING:
    # Named in signatures only: what Prometheus answered is the live check's, and a lint
    # without --prometheus does not pay for importing its records.
    from gpulint.live.snapshot import LiveSnapshot, ScrapeTarget


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


__all__ = [
    "Problem",
    "Selection",
    "UrlTarget",
    "dcgm_series_read",
    "dcgm_targets",
    "endpoint_problems",
    "exporters_of_monitor",
    "looks_like_prometheus",
    "placement_problems",
    "prometheus_services",
    "selection",
    "selection_problem",
    "url_fix",
    "url_problem",
    "url_target",
]
