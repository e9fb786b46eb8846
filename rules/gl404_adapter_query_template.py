"""A prometheus-adapter rule's queries cannot answer for the objects the HPA asks about.

## What it checks
Each rule of a prometheus-adapter config (file, ConfigMap or chart values):

* a ``seriesQuery`` that is missing or is not a series selector;
* a ``metricsQuery`` longer than gpulint analyses (16,384 characters; a warning, since no
  rule reads it then);
* a ``metricsQuery`` that is missing, or whose ``<< >>`` template Go would refuse
  (an unclosed action, an unknown field such as ``.LabelMatchersByName``, an ``if``
  without ``end``);
* a custom rule (``rules``, ``rules.custom``) whose ``metricsQuery`` never uses
  ``<<.LabelMatchers>>``;
* a custom rule whose outer aggregation drops the label of the objects it answers for:
  ``sum(...)`` without ``by``, ``by (model)``, ``by (namespace)`` in a rule that maps pods,
  ``without (pod)`` ... and one that keeps extra labels next to them (``by (namespace, model)``).
  The objects are those the input's HPAs ask the rule about (pods for a Pods metric, the
  described object for an Object metric): a ``by (exported_namespace, exported_container)``
  serves an Object metric on the Service mapped to ``exported_container``, and fails a Pods
  metric. With no HPA of the input reading the rule, it must keep its pod label;
  a missing ``<<.LabelMatchers>>`` where the results still keep the labels the objects are
  matched by is a warning: values arrive, computed over the whole cluster each time;
* an external rule that is namespaced (the default unless ``resources.namespaced: false``)
  but maps no label to namespaces, neither in ``overrides`` nor through a ``template``.

## Why is this bad?
The adapter builds one Prometheus query per HPA request from ``metricsQuery``
(pkg/naming/metrics_query.go). ``<<.LabelMatchers>>`` is how the HPA's namespace, its pods'
names and its metric selector reach that query; without it the query reads every namespace,
and same-named pods or objects in different namespaces overwrite each other. The adapter then
matches each returned series to an object by the object's label (``<<.GroupBy>>``): a result
without it matches nothing and the HPA reports ``no metrics returned from custom metrics
API``; a result with several series per object keeps just one of them. A template Go cannot
parse stops the adapter at start-up, and a namespaced external rule without a namespace label
fails every request with ``unable to fetch metrics``.

## Example
```yaml
rules:
  custom:
  - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'
    resources:
      overrides:
        exported_namespace: {resource: namespace}
        exported_pod: {resource: pod}
    metricsQuery: 'avg(DCGM_FI_DEV_GPU_UTIL)'   # no <<.LabelMatchers>>, no by(): no pod matches
```

## Use instead
```yaml
    metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
```

## References
- kubernetes-sigs/prometheus-adapter docs/config.md ("Querying") and
  pkg/naming/metrics_query.go (``Build``, ``BuildExternal``; the template fields).
- pkg/custom-provider/series_registry.go ``MatchValuesToNames``: results are keyed by the
  resource label's value.
- docs/externalmetrics.md: namespaced external rules need a namespace mapping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import NamedTuple, Protocol

from gpulint.ruleapi import (
    EXTERNAL,
    MAX_QUERY_CHARS,
    AdapterRule,
    Context,
    Finding,
    Inventory,
    PlacedAggregation,
    Severity,
    metric_names_in_query,
    outermost_aggregations,
    querytemplate,
    top_level_text,
)

ID = "GL404"
NAME = "adapter-query-template"
SEVERITY = Severity.ERROR
SCOPE = "adapter-rule"
STAGES = ("adapter-rule",)

CUSTOM_QUERY = "metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'"
EXTERNAL_QUERY = "metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'"
NO_METRICS = '"no metrics returned from custom metrics API"'
# Aggregations that return input series unchanged, labels and all, whatever their grouping.
_LABEL_PRESERVING = ("topk", "bottomk", "limitk", "limit_ratio")
_GROUPING = re.compile(r"\b(by|without)\s*\(([^)]*)\)")
# Resources the adapter queries without a namespace (pkg/naming/resource_converter.go).
_CLUSTER_SCOPED = {"namespaces", "nodes", "persistentvolumes"}


class Report(Protocol):
    def __call__(
        self, key: str | None, message: str, fix: str, severity: Severity | None = None
    ) -> Finding: ...


class Needs(NamedTuple):
    """The labels the rule's results must keep, and for whom: the objects its HPAs ask
    about, or (no HPA in the input reads it) every object it maps."""

    labels: dict[str, str]  # label -> who needs it ("HPA web's Pods metric gpu_util")
    from_consumers: bool


def check(rule: AdapterRule, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if rule.generated:
        return

    def report(
        key: str | None, message: str, fix: str, severity: Severity | None = None
    ) -> Finding:
        path = rule.path if key is None else rule.path_for(key)
        return ctx.finding(
            rule.document,
            path,
            f"{rule.describe()}: {message}",
            fix,
            obj=rule.config.ref,
            severity=severity,
        )

    yield from _series_query(rule, report)
    oversized = rule.oversized_query
    if oversized is not None:
        yield report(
            "metricsQuery",
            f"has a metricsQuery of {oversized:,} characters, over the {MAX_QUERY_CHARS:,} "
            "gpulint analyses: it was not checked, and no rule reads it",
            "Shorten the query (recording rules in Prometheus keep adapter queries short), "
            "or check it by hand.",
            Severity.WARNING,
        )
        return
    query = rule.metrics_query
    if query is None or not query.strip():
        yield report(
            None,
            "has no metricsQuery. The adapter renders an empty query for every request "
            '("empty query produced by metrics query template")',
            EXTERNAL_QUERY if rule.kind == EXTERNAL else CUSTOM_QUERY,
        )
        return
    try:
        parsed = querytemplate.parse(query)
    except querytemplate.TemplateError as error:
        near = query[error.offset : error.offset + 30]
        if error.at_execution:
            consequence = (
                "Go parses it, but executing it fails on every request (\"can't evaluate "
                'field ... in type naming.queryTemplateArgs"), so the HPA never gets a value'
            )
        else:
            consequence = (
                "Go's text/template refuses it and the adapter exits at start-up "
                '("unable to parse metrics query template")'
            )
        yield report(
            "metricsQuery",
            f"metricsQuery is not a valid template. At character {error.offset + 1} "
            f"({json.dumps(near)}): {error}. {consequence}",
            EXTERNAL_QUERY if rule.kind == EXTERNAL else CUSTOM_QUERY,
        )
        return
    if rule.kind == EXTERNAL:
        yield from _external_namespace(rule, report)
        return
    needs = _needs(rule, inventory)
    grouping = list(_grouping(rule, query, report, needs))
    if not parsed.uses("LabelMatchers") and not parsed.uses("LabelValuesByName"):
        yield _no_label_matchers(rule, query, report, kept=not any(lost for lost, _ in grouping))
    for _, finding in grouping:
        yield finding


def _needs(rule: AdapterRule, inventory: Inventory) -> Needs | None:
    """The labels results must keep; None when the rule maps through a template."""
    resources = rule.resources
    if resources.template is not None or not resources.overrides:
        return None
    labels: dict[str, str] = {}
    for resource, consumer in inventory.asked_of(rule).items():
        label = resources.label_for(resource) if resource is not None else None
        if label is not None and label not in labels:
            metric = consumer.metric
            labels[label] = f"HPA {consumer.hpa.name}'s {metric.type} metric {metric.name}"
    if labels:
        return Needs(labels, True)
    pod_labels = [label for label, res in resources.overrides.items() if res == "pods"]
    return Needs(dict.fromkeys(pod_labels, "the pods it maps"), False)


def _no_label_matchers(rule: AdapterRule, query: str, report: Report, kept: bool) -> Finding:
    mapped = set(rule.resources.overrides.values())
    fix = f"metricsQuery: {_yaml_string(_with_label_matchers(query))}"
    if kept:
        # The adapter still finds each object's series by its label (docs/rules.md: a
        # warning): the cost is a query over the whole cluster, and the ignored selector.
        if rule.resources.template is None and mapped and mapped <= _CLUSTER_SCOPED:
            return report(
                "metricsQuery",
                "metricsQuery never uses <<.LabelMatchers>>. Its results keep the label the "
                "adapter matches objects by, so HPAs get values, but the HPA's metric selector "
                "is ignored and every request makes Prometheus compute the value of every "
                "namespace, of which the adapter keeps one",
                fix,
                Severity.WARNING,
            )
        return report(
            "metricsQuery",
            "metricsQuery never uses <<.LabelMatchers>>. Its results keep the labels the "
            "adapter matches objects by, so HPAs get values, but every request makes "
            "Prometheus compute the metric for the whole cluster, the HPA's metric selector is "
            "ignored, and same-named objects in other namespaces can overwrite each other",
            fix,
            Severity.WARNING,
        )
    if rule.resources.template is None and mapped and mapped <= _CLUSTER_SCOPED:
        return report(
            "metricsQuery",
            "metricsQuery never uses <<.LabelMatchers>>. The HPA's metric selector is "
            "ignored, every request makes Prometheus compute the value of every namespace, "
            "and the results lose the label the adapter matches objects by",
            fix,
        )
    consequence = (
        "the HPA's namespace, its pods' names and its metric selector never reach "
        "Prometheus: the query reads every namespace, and objects of the same name in "
        "different namespaces overwrite each other's values"
    )
    return report(
        "metricsQuery", f"metricsQuery never uses <<.LabelMatchers>>, so {consequence}", fix
    )


def _series_query(rule: AdapterRule, report: Report) -> Iterator[Finding]:
    series = rule.data.get("seriesQuery")
    if series is None or series == "":
        yield report(
            "seriesQuery" if "seriesQuery" in rule.data else None,
            "has no seriesQuery. The adapter asks Prometheus for an empty series selector, and "
            'the rejected query fails its whole discovery round ("unable to update list of all '
            "metrics\"), every other rule's metrics included",
            "seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=\"\"}'",
        )
    elif rule.selector_error is not None:
        yield report(
            "seriesQuery",
            f"seriesQuery {json.dumps(series)} is not a series selector Prometheus accepts. "
            f"Reason: {rule.selector_error}. The rejected query fails the adapter's whole "
            'discovery round ("unable to update list of all metrics"), every other rule\'s '
            "metrics included",
            'seriesQuery: \'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}\'',
        )


def _grouping(
    rule: AdapterRule, query: str, report: Report, needs: Needs | None
) -> Iterator[tuple[bool, Finding]]:
    """The outer aggregations must keep the label the adapter matches results to objects by:
    ``(True, finding)`` when results lose it, ``(False, finding)`` when they keep too much."""
    resources = rule.resources
    has_template = resources.template is not None
    mapped = set(resources.overrides)
    outer = outermost_aggregations(query)
    whole = len(outer) == 1 and top_level_text(query).split() == _words(outer[0])
    for item in outer:
        aggregation = item.aggregation
        if aggregation.operator in _LABEL_PRESERVING:
            continue
        labels = set(aggregation.labels)
        shown = _show(item)
        uses_group_by = any("GroupBy" in label for label in labels)
        regrouped = f"metricsQuery: {_yaml_string(_regroup(query, item))}"
        if aggregation.grouping == "without":
            dropped = sorted(labels & (set(needs.labels) if needs else mapped))
            if dropped:
                yield True, _removed(shown, dropped, needs, regrouped, report)
        elif aggregation.grouping is None:
            yield (
                True,
                report(
                    "metricsQuery",
                    f"metricsQuery's {shown} has no `by` clause, so its result keeps no label. "
                    f"The adapter cannot match it to any object: the HPA gets {NO_METRICS}",
                    regrouped,
                ),
            )
        elif uses_group_by:
            extra = sorted(label for label in labels if "GroupBy" not in label)
            if extra and whole:
                yield False, _extra_labels(query, item, extra, report)
        elif not has_template and mapped:
            verdict = _grouped_by(query, item, labels, mapped, needs, whole, regrouped, report)
            if verdict is not None:
                yield verdict


def _removed(
    shown: str, dropped: list[str], needs: Needs | None, regrouped: str, report: Report
) -> Finding:
    """``without (...)`` removes the labels the adapter matches by."""
    return report(
        "metricsQuery",
        f"metricsQuery's {shown} removes {', '.join(dropped)}. The adapter "
        f"matches results to objects by that label, so nothing matches"
        f"{_for_whom(needs, dropped)}, and the HPA gets {NO_METRICS}",
        regrouped,
    )


def _grouped_by(
    query: str,
    item: PlacedAggregation,
    labels: set[str],
    mapped: set[str],
    needs: Needs | None,
    whole: bool,
    regrouped: str,
    report: Report,
) -> tuple[bool, Finding] | None:
    """``by (...)`` written out (no resource template): it drops a label the adapter matches
    by, or keeps labels besides them."""
    lost = sorted(set(needs.labels) - labels) if needs and needs.labels else []
    if not labels & mapped:
        lost = sorted(mapped)
    if lost:
        return (
            True,
            report(
                "metricsQuery",
                f"metricsQuery's {_show(item)} drops {' and '.join(lost)}. The adapter matches "
                f"results to objects by that label, so nothing matches"
                f"{_for_whom(needs, lost)}, and the HPA gets {NO_METRICS}",
                regrouped,
            ),
        )
    if whole and labels - mapped:
        return False, _extra_labels(query, item, sorted(labels - mapped), report)
    return None


def _for_whom(needs: Needs | None, labels: list[str]) -> str:
    """``, which HPA web's Pods metric gpu_util needs`` when HPAs of the input read it."""
    if needs is None or not needs.from_consumers:
        return ""
    readers = sorted({needs.labels[label] for label in labels if label in needs.labels})
    return f" for {' and '.join(readers)}" if readers else ""


def _extra_labels(query: str, item: PlacedAggregation, extra: list[str], report: Report) -> Finding:
    return report(
        "metricsQuery",
        f"metricsQuery's {_show(item)} also keeps {', '.join(extra)}, so each object gets one "
        "series per value of it. The adapter keeps only one of them, whichever it reads last",
        f"metricsQuery: {_yaml_string(_regroup(query, item))}",
    )


def _external_namespace(rule: AdapterRule, report: Report) -> Iterator[Finding]:
    resources = rule.resources
    if resources.namespaced is False or resources.label_for("namespaces") is not None:
        return
    yield report(
        "resources" if "resources" in rule.data else None,
        "is namespaced, but no label maps to namespaces. The adapter adds the HPA's namespace "
        "to <<.LabelMatchers>> (resources.namespaced is not false), so every request fails "
        '("unable to fetch metrics")',
        "resources:\n  overrides:\n    namespace: {resource: namespace}\n"
        "# or, for a metric that belongs to no namespace:\n"
        "# resources:\n#   namespaced: false",
    )


# --- fixes -----------------------------------------------------------------------------------


def _words(item: PlacedAggregation) -> list[str]:
    grouping = item.aggregation.grouping
    return [item.aggregation.operator, *([grouping] if grouping else [])]


def _show(item: PlacedAggregation) -> str:
    aggregation = item.aggregation
    if aggregation.grouping is None:
        return f"{aggregation.operator}(...)"
    return f"{aggregation.operator}(...) {aggregation.grouping} ({', '.join(aggregation.labels)})"


def _regroup(query: str, item: PlacedAggregation) -> str:
    """The query with this aggregation grouped ``by (<<.GroupBy>>)`` (``le`` kept)."""
    aggregation = item.aggregation
    keep = [label for label in aggregation.labels if label == "le"]
    clause = f"by ({', '.join(['<<.GroupBy>>', *keep])})"
    if aggregation.grouping is None:
        return f"{query[: item.end]} {clause}{query[item.end :]}"
    for match in _GROUPING.finditer(query, item.start, item.end):
        labels = tuple(s.strip() for s in match.group(2).split(",") if s.strip())
        if match.group(1) == aggregation.grouping and labels == aggregation.labels:
            return query[: match.start()] + clause + query[match.end() :]
    return query


# A metric name as ``promql.mention`` finds one (not part of a longer name), or the series
# template action, and the brace of a selector right after it.
_SERIES_AT = re.compile(r"(<<\.Series>>|(?<![\w:])[a-zA-Z_:][\w:]*)(\{)?")


def _with_label_matchers(query: str) -> str:
    """The query with ``<<.LabelMatchers>>`` in the selector of each series it reads: one
    pass over the query, whatever the number of names in it."""
    names = {*metric_names_in_query(query), "<<.Series>>"}

    def insert(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            return match.group(0)
        if match.group(2):
            return match.group(0) + "<<.LabelMatchers>>,"
        return match.group(0) + "{<<.LabelMatchers>>}"

    fixed = _SERIES_AT.sub(insert, query)
    return fixed.replace("<<.LabelMatchers>>,}", "<<.LabelMatchers>>}")


def _yaml_string(text: str) -> str:
    return f"'{text}'" if "'" not in text and "\n" not in text else json.dumps(text)
