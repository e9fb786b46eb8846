"""Prometheus has no active target for dcgm-exporter, or its targets are down.

## What it checks
With ``--prometheus``, when the unit deploys dcgm-exporter, declares its ServiceMonitor or
PodMonitor, or has an adapter rule on its series: the active targets Prometheus lists
(``/api/v1/targets``). dcgm-exporter's targets are those in the scrape pools Prometheus
Operator makes for the unit's monitors (``serviceMonitor/<namespace>/<name>/<endpoint>``), or,
without such a pool, targets whose pool, job or Service name says dcgm. It reports:

* no such target at all. When an offline rule explains why (GL601: no Prometheus selects the
  monitor; GL602: its selector, ports or Service lead nowhere), the finding names it;
* targets whose ``health`` is not ``up``, with their ``scrapeUrl`` and ``lastError``.

Front-ends that do not list targets (Thanos Query, Mimir) leave this rule out, with a note.

## Why is this bad?
Everything after the scrape depends on it: without an up target there is no ``DCGM_FI_*``
series, the adapter's rules discover nothing (GL801) and every HPA on a GPU metric gets "no
metrics returned from custom metrics API". A down target on some nodes leaves the GPUs of the
pods there without metrics. ``/api/v1/targets`` says which of the two it is, and why
(``connection refused``, ``context deadline exceeded``, a 404 on the path).

## Example
```
gpulint lint --prometheus http://localhost:9090 deploy/
# the Prometheus selects ServiceMonitors labelled release=kps; dcgm-exporter's has none
```

## Use instead
```
curl -s 'http://localhost:9090/api/v1/targets?state=active' \
  | jq '.data.activeTargets[] | select(.scrapePool | test("dcgm")) | {scrapeUrl, health, lastError}'
```
and fix what the offline finding (GL601, GL602, GL604) names.

## References
- Prometheus HTTP API, "Targets" (``activeTargets``: ``scrapePool``, ``scrapeUrl``,
  ``health``, ``lastError``).
- prometheus-operator pkg/prometheus/promcfg.go: job ``serviceMonitor/<ns>/<name>/<index>``.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    Context,
    Document,
    Finding,
    Inventory,
    LiveSnapshot,
    Monitor,
    Path,
    Severity,
    dcgm_series_read,
    dcgm_targets,
    endpoint_problems,
    selection_problem,
)

ID = "GL806"
NAME = "live-exporter-not-scraped"
SEVERITY = Severity.ERROR
SCOPE = "inventory"
REQUIRES = "live"  # runs only with --prometheus
STAGES = ("scrape",)
STAGE_REACH = "unit"  # about the unit's Prometheus: every trace of the unit goes through it


def check(inventory: Inventory, _: Inventory, ctx: Context) -> Iterator[Finding]:
    live: LiveSnapshot | None = inventory.live
    if live is None or not live.available or live.targets is None:
        return
    monitors = inventory.monitors()
    anchor = _anchor(inventory, monitors)
    if anchor is None:
        return
    document, path = anchor
    found = dcgm_targets(live, monitors)
    if not found:
        pools = [pool for m in monitors if (pool := m.scrape_pool(0)) is not None]
        looked = f"in scrape pool {pools[0]} or " if pools else ""
        yield ctx.finding(
            document,
            path,
            f"Prometheus at {live.url} has no active target for dcgm-exporter. None of its "
            f"{live.targets_total} targets is {looked}named after dcgm, so no GPU series is "
            f"scraped{_explanation(inventory, monitors)}",
            f"curl -s '{live.url}/api/v1/targets?state=active' | jq -r "
            "'.data.activeTargets[].scrapePool' | sort -u\n"
            "# then fix what keeps the monitor out (its labels against the Prometheus "
            "selector, its ports)",
        )
        return
    down = [t for t in found if t.health != "up"]
    if not down:
        return
    shown = "; ".join(
        f"{t.scrape_url or t.scrape_pool}: {t.last_error or t.health}" for t in down[:3]
    )
    more = f" and {len(down) - 3} more" if len(down) > 3 else ""
    yield ctx.finding(
        document,
        path,
        f"{len(down)} of {len(found)} dcgm-exporter targets of Prometheus at {live.url} "
        f"{'is' if len(down) == 1 else 'are'} down ({shown}{more}), so the GPUs behind "
        f"{'it report' if len(down) == 1 else 'them report'} no metrics",
        f"curl -s '{down[0].scrape_url or '<scrapeUrl>'}' | head   # from a pod in the cluster\n"
        "# a refused connection: the Service's targetPort or the exporter's listen port "
        "(GL602); a timeout: a NetworkPolicy between Prometheus and the exporter",
    )


def _anchor(inventory: Inventory, monitors: list[Monitor]) -> tuple[Document, Path] | None:
    """Where the scrape is declared: the monitor, else the exporter, else the adapter rule
    that reads its series."""
    if monitors:
        return monitors[0].document, monitors[0].path
    exporters = inventory.exporters()
    if exporters:
        return exporters[0].document, exporters[0].path
    for rule in inventory.adapter_rules():
        if not rule.generated and dcgm_series_read(rule):
            return rule.document, (*rule.path, "seriesQuery")
    return None


def _explanation(inventory: Inventory, monitors: list[Monitor]) -> str:
    for monitor in monitors:
        problem = selection_problem(monitor, inventory)
        if problem is not None:
            return f"; GL601 explains it: {_first_sentence(problem.message)}"
    for monitor in monitors:
        problems = endpoint_problems(monitor, inventory)
        if problems:
            return f"; GL602 explains it: {_first_sentence(problems[0].message)}"
    return ""


def _first_sentence(text: str) -> str:
    head, _, _ = text.partition(". ")
    return head
