"""Prometheus cannot be reached or answers with an error; the live rules were skipped.

## What it checks
With ``--prometheus``, whether the live check got its answers: a refused connection, a
name that does not resolve, no answer within ``--prometheus-timeout`` (one budget for the
whole check), an HTTP error, or a body that is not the Prometheus API (a login page, a
proxy's error page, malformed JSON). The finding is a warning; with
``--require-prometheus`` it is an error and gpulint exits with 1.

The admission webhook (``gpulint serve --prometheus``) never answers a review with this
finding: the person applying an HPA cannot fix the monitoring stack. A failed background
refresh takes the live rules out until the next one succeeds, and the operator sees it in
``/metrics`` (``gpulint_webhook_prometheus_refresh_failures_total``, the snapshot's age),
``/readyz`` (which stays ready) and the logs.

## Why is this bad?
When Prometheus does not answer, GL801-GL806 and GL810-GL812 cannot run, and a clean report
would say nothing about the autoscaling path. The finding makes the gap visible;
``--require-prometheus`` makes CI fail on it.

## Example
```
gpulint lint --prometheus http://prometheus.monitoring:9090 deploy/   # from a laptop
```

## Use instead
```
kubectl -n monitoring port-forward svc/prometheus-operated 9090 &
gpulint lint --prometheus http://localhost:9090 --require-prometheus deploy/
```
Behind an authenticating proxy, pass ``--prometheus-header 'Authorization=Bearer <token>'``
(Mimir/Cortex tenants: ``--prometheus-header X-Scope-OrgID=<tenant>``).

## References
- Prometheus HTTP API: response envelope (``status``, ``errorType``, ``error``).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    Context,
    Document,
    Finding,
    Inventory,
    LiveSnapshot,
    Location,
    Path,
    Severity,
)

ID = "GL809"
NAME = "prometheus-unreachable"
SEVERITY = Severity.WARNING
SCOPE = "inventory"
REQUIRES = "live"  # runs only with --prometheus
STAGES = ("prometheus",)
STAGE_REACH = "unit"  # about the unit's Prometheus: every trace of the unit goes through it


def check(inventory: Inventory, _: Inventory, ctx: Context) -> Iterator[Finding]:
    live: LiveSnapshot | None = inventory.live
    if live is None or live.available:
        return
    severity = Severity.ERROR if live.required else SEVERITY
    message = (
        f"Prometheus at {live.url} could not be used: {live.error}; the live rules "
        "GL801-GL806 and GL810-GL812 were skipped, so the adapter rules, HPAs and KEDA "
        "prometheus triggers were not checked against it"
    )
    if live.required:
        message += " (--require-prometheus)"
    fix = (
        f'curl -s \'{live.url}/api/v1/query?query=up\'   # must answer "status":"success"\n'
        "# from outside the cluster: kubectl -n monitoring port-forward svc/<prometheus> 9090\n"
        "# behind a proxy: --prometheus-header 'Authorization=Bearer <token>'; "
        "more time: --prometheus-timeout 60"
    )
    anchor = _anchor(inventory)
    if anchor is not None:
        document, path = anchor
        yield ctx.finding(document, path, message, fix, severity=severity)
        return
    finding = ctx.at(Location(live.url, 1, 1), message, fix)
    yield finding._replace(severity=severity)


def _anchor(inventory: Inventory) -> tuple[Document, Path] | None:
    """Where the check would have started: the adapter's own Prometheus URL (Helm values),
    else the first seriesQuery, else the first HPA metric served by an adapter, else the
    first KEDA prometheus trigger's serverAddress."""
    for config in inventory.adapter_configs:
        if config.prometheus_url is not None:
            return config.document, (*config.base, "prometheus", "url")
    for rule in inventory.adapter_rules():
        if not rule.generated and rule.series_query is not None:
            return rule.document, (*rule.path, "seriesQuery")
    for hpa in inventory.hpas:
        for metric in hpa.metrics:
            if metric.is_custom:
                return hpa.manifest, metric.name_path
    for scaled_object in inventory.scaled_objects:
        for trigger in scaled_object.prometheus_triggers:
            return trigger.manifest, (*trigger.path, "metadata", "serverAddress")
    return None
