"""An adapter rule's metricsQuery fails, returns nothing, or returns no per-object values.

## What it checks
With ``--prometheus``, gpulint renders each rule's ``metricsQuery`` exactly as the adapter
does, with ``<<.Series>>`` a series the rule found, ``<<.LabelMatchers>>`` a real namespace
and real pods (or other objects) taken from those series, and ``<<.GroupBy>>`` the resource
label, and runs it as an instant query. The objects are of the kind the input's HPAs ask the
rule about (pods for a Pods metric, the described object's kind for an Object metric), or
the rule's first mapping when no HPA of the input reads it.

It reports a query that Prometheus rejects, one that returns nothing (saying whether a
metric it reads has no series or went stale), and, for custom (Pods/Object) rules, one whose
results lack the group-by label.

## Why is this bad?
The adapter hands each result to the object named by its resource label. A query that
fails gives the HPA "unable to fetch metrics from custom metrics API"; an empty one gives "no
metrics returned from custom metrics API"; and ``sum(...)`` without ``by (<<.GroupBy>>)``
returns one number for the whole cluster that belongs to no pod, which the adapter logs as
"none of the results ... matched the resource name".

## Example
```yaml
rules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'
  resources:
    overrides:
      exported_namespace: {resource: namespace}
      exported_pod: {resource: pod}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'   # one value, no pod
```

## Use instead
```yaml
  metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
```

## References
- prometheus-adapter pkg/naming/metrics_query.go (template fields) and docs/config.md.
- kubernetes-sigs/prometheus-adapter#150 (results that match no resource).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    EXTERNAL,
    AdapterRule,
    Context,
    Finding,
    Inventory,
    LiveSnapshot,
    QueryCheck,
    Severity,
    ago,
    code,
    listing,
    rule_label,
)

ID = "GL803"
NAME = "live-query-broken"
SEVERITY = Severity.ERROR
SCOPE = "adapter-rule"
REQUIRES = "live"  # runs only with --prometheus
STAGES = ("adapter-rule",)
# A metricsQuery Prometheus rejects, or that drops <<.GroupBy>>, answers no HPA it serves.
EXPLAINS = ("GL804",)

GAUGE_QUERY = "metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'"
COUNTER_QUERY = "metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'"
EXTERNAL_QUERY = "metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'"


def check(rule: AdapterRule, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    live: LiveSnapshot | None = inventory.live
    evidence = live.for_rule(rule) if live is not None else None
    if live is None or evidence is None or evidence.query is None:
        return
    query = evidence.query
    if not query.ran:
        return
    path = (*rule.path, "metricsQuery")
    where = _for_what(query)
    rendered = code(query.rendered)
    template = _template_for(rule, query)
    if query.error is not None:
        yield ctx.finding(
            rule.document,
            path,
            f"metricsQuery of {rule_label(rule)} fails in Prometheus when rendered {where}: "
            f"{query.error} (rendered: {rendered})",
            f"# fix the PromQL; a working shape for {query.series_name}:\n{template}",
        )
        return
    if not query.samples:
        fix = f"# read the series the rule discovers, through <<.Series>>:\n{template}"
        if _same_query(template, rule.metrics_query):
            fix = _data_fix(query)
        yield ctx.finding(
            rule.document,
            path,
            f"metricsQuery of {rule_label(rule)} returns nothing when rendered {where}, "
            f"although the seriesQuery finds those series: {_why_empty(query, live)} "
            f"(rendered: {rendered})",
            fix,
        )
        return
    label = query.object_label
    if rule.kind == EXTERNAL or label is None:
        return
    without = [s for s in query.samples if not s.label(label)]
    if without:
        kept = sorted({k for s in without for k, _ in s.labels if k != "__name__"})
        shape = f"with only {', '.join(kept)}" if kept else "with no labels at all"
        yield ctx.finding(
            rule.document,
            path,
            f"metricsQuery of {rule_label(rule)} returns {len(without)} of "
            f"{len(query.samples)} series without the label {label} ({shape}) when rendered "
            f"{where}: the adapter matches results to {query.resource} by {label} "
            f"(<<.GroupBy>>), so these values belong to no object and the HPA gets "
            f"'no metrics returned from custom metrics API' (rendered: {rendered})",
            f"# keep the group-by label:\n{template}",
        )


def _for_what(query: QueryCheck) -> str:
    parts = []
    if query.namespace:
        parts.append(f"namespace {query.namespace}")
    if query.objects:
        parts.append(f"{query.resource} {listing(query.objects)}")
    return "for " + " and ".join(parts) if parts else "for the whole cluster"


def _why_empty(query: QueryCheck, live: LiveSnapshot) -> str:
    if query.absent_names:
        names = ", ".join(query.absent_names)
        return (
            f"it reads {names}, which has no series (the query names another metric than "
            "<<.Series>>)"
        )
    if query.last_seen:
        latest = max(query.last_seen.values())
        names = listing(sorted(query.last_seen))
        return (
            f"{names} stopped: its last sample is {ago(latest, live.evaluated_at)}, so "
            "Prometheus has no current value (the exporter no longer writes it)"
        )
    return "its functions or hard-coded matchers filter every series out"


def _template_for(rule: AdapterRule, query: QueryCheck) -> str:
    if rule.kind == EXTERNAL:
        return EXTERNAL_QUERY
    if query.series_name.endswith("_total"):
        return COUNTER_QUERY
    return GAUGE_QUERY


def _same_query(template: str, query: str | None) -> bool:
    """Would the proposed metricsQuery be the one already written?"""
    proposed = template.partition(":")[2].strip().strip("'")
    return " ".join(proposed.split()) == " ".join((query or "").split())


def _data_fix(query: QueryCheck) -> str:
    """The query is the right shape: what to look at instead."""
    if query.last_seen:
        names = ", ".join(sorted(query.last_seen))
        return (
            f"# the query is right; {names} stopped being written: check that the exporter "
            "pods run on the GPU nodes and that Prometheus still scrapes them (its Targets page)"
        )
    return (
        "# the query is right; check the labels of the series it reads against the hard-coded "
        "matchers and the label the rule maps to the object"
    )
