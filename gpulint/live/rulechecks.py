"""The live check of prometheus-adapter rules: the series each seriesQuery finds in the
adapter's window, why a rule finds none (GL801, GL802), and its metricsQuery run for real
objects taken from those series (GL803)."""

from __future__ import annotations

import json
from collections.abc import Callable

from gpulint.chain.adapter import AdapterRule
from gpulint.live.adapterquery import (
    QueryLabels,
    mapping_for,
    render_query,
)
from gpulint.live.answers import samples_of
from gpulint.live.client import QueryRejected
from gpulint.live.lookups import Lookups
from gpulint.live.names import alternatives_for
from gpulint.live.series import summarize
from gpulint.live.snapshot import (
    MissingSeries,
    QueryCheck,
    RuleEvidence,
    SeriesSummary,
)
from gpulint.metrics.promql import metric_names_in_query
from gpulint.metrics.querytemplate import RenderUnsupported, TemplateError

# Objects a rendered query asks for when checking a rule on its own (GL803).
_SAMPLE_OBJECTS = 5


class RuleChecks(Lookups):
    """The checks of the adapter rules (steps 1-3 of ``gpulint.live.collector``)."""

    def _series_task(self, query: str, rules: list[AdapterRule]) -> Callable[[], SeriesSummary]:
        objects: list[str] = []
        namespaces: list[str] = []
        for rule in rules:
            resources = rule.resources
            for label, resource in resources.overrides.items():
                (namespaces if resource == "namespaces" else objects).append(label)
            for resource in ("pods", "namespaces"):
                mapped = resources.label_for(resource)
                if mapped:
                    (namespaces if resource == "namespaces" else objects).append(mapped)

        def task() -> SeriesSummary:
            series = self.api.series([query], self.start, self.now)
            return summarize(series, objects, namespaces)

        return task

    def _rule_task(self, evidence: RuleEvidence, preferred: str | None) -> Callable[[], None]:
        def task() -> None:
            if evidence.series.count == 0:
                evidence.missing = self._explain_missing(evidence.rule)
            else:
                evidence.query = self._check_query(evidence, preferred)

        return task

    def _explain_missing(self, rule: AdapterRule) -> MissingSeries:
        selector = rule.selector
        missing = MissingSeries()
        if selector is None:
            return missing
        name_matchers = selector.name_matchers()
        label_matchers = selector.label_matchers()
        if not name_matchers:
            labels = set(self.api.label_names(self.start, self.now))
            missing.absent_labels = [
                m.label for m in label_matchers if not m.matches("") and m.label not in labels
            ]
            return missing
        name_only = "{" + ",".join(str(m) for m in name_matchers) + "}"
        if label_matchers:
            series = self.api.series([name_only], self.start, self.now)
            missing.name_only = summarize(series, matchers=label_matchers)
            if missing.name_only.count:
                return missing
        literal = selector.literal_names() or []
        present = self.present_names()
        for name in literal:
            missing.alternatives.extend(alternatives_for(name, present))
        if missing.alternatives:
            best = missing.alternatives[0].name
            # json.dumps quotes as PromQL does (Go string syntax), for UTF-8 names too
            found = self.api.series([f"{{__name__={json.dumps(best)}}}"], self.start, self.now)
            missing.alternative_series = summarize(found)
        window = max(self.options.lookback, self.options.max_age)
        missing.last_seen = self.last_seen(literal, None if literal else name_only, window)
        return missing

    def _asked_resource(self, rule: AdapterRule) -> str | None:
        """The resource to render the query for: the one the input's HPAs ask the rule about
        (pods first), so a rule grouped for Services is tried as the HPAs will use it; None
        (the rule's own first mapping) when no HPA reads it or it maps none they ask."""
        asked = {r for r in self.inventory.asked_of(rule) if r}
        mapped = [r for r in sorted(asked) if rule.resources.label_for(r)]
        if "pods" in mapped:
            return "pods"
        return mapped[0] if mapped else None

    def _check_query(self, evidence: RuleEvidence, preferred: str | None) -> QueryCheck:
        rule, summary = evidence.rule, evidence.series
        exposed = evidence.exposed()
        if not exposed:
            return QueryCheck(
                "", skipped="no series passes the rule's name.matches and seriesFilters"
            )
        series = preferred if preferred else next(iter(exposed.values()))
        labels = mapping_for(rule, self._asked_resource(rule))
        check = QueryCheck(
            series, labels.resource, labels.object_label, labels.namespace_label, None
        )
        if not rule.metrics_query:
            check.skipped = "the rule has no metricsQuery"
            return check
        namespace, objects, why_not = _real_objects(labels, summary)
        if why_not:
            check.skipped = why_not
            return check
        check.namespace, check.objects = namespace, objects
        try:
            check.rendered = render_query(rule, labels, series, namespace, objects)
        except (TemplateError, RenderUnsupported) as error:
            check.skipped = f"gpulint cannot render the metricsQuery: {error}"
            return check
        try:
            check.samples = samples_of(self.api.query(check.rendered, self.now))
        except QueryRejected as error:
            check.error = str(error)
            return check
        if not check.samples:
            names = metric_names_in_query(check.rendered)
            present = set(self.present_names())
            check.absent_names = [n for n in names if n not in present]
            seen = [n for n in names if n in present]
            stale = [n for n in seen if n not in self.current_names(seen)]
            check.last_seen = self.last_seen(stale, None, self.options.max_age)
        return check


def _real_objects(
    labels: QueryLabels, summary: SeriesSummary
) -> tuple[str | None, list[str], str | None]:
    """A namespace and a few objects taken from the series, or why there are none."""
    if labels.resource is None:  # an external rule
        if labels.namespaced and labels.namespace_label:
            if not summary.carries(labels.namespace_label):
                return None, [], f"the series carry no {labels.namespace_label} label"
            values = summary.top_values(labels.namespace_label, 1)
            return (values[0] if values else None), [], None
        return None, [], None
    label = labels.object_label
    if label is None:
        return None, [], f"the rule maps no label to {labels.resource}"
    if not summary.carries(label):
        return None, [], f"the series carry no {label} label"
    if labels.namespaced and labels.namespace_label:
        by_namespace = summary.namespaces_of(label, labels.namespace_label)
        if not by_namespace:
            return None, [], f"no series carries both {label} and {labels.namespace_label}"
        namespace = max(sorted(by_namespace), key=lambda ns: len(by_namespace[ns]))
        return namespace, sorted(by_namespace[namespace])[:_SAMPLE_OBJECTS], None
    values = sorted(summary.values.get(label, {}))
    return None, values[:_SAMPLE_OBJECTS], None
