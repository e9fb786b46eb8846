"""Ask Prometheus what the live rules need to know, and store it on ``inventory.live``.

The plan, for the adapter rules, HPAs and KEDA ScaledObjects in the inventory:

1. one ``/api/v1/series`` call per distinct seriesQuery, over the window the adapter itself
   discovers series in (its ``--metrics-max-age``, 10 minutes by default), as the adapter
   shares calls between rules with the same seriesQuery;
2. for each rule whose seriesQuery matches nothing: the same metric names without the label
   matchers, the metric names that exist now (did you mean), and when the names were last
   seen within the look-back window;
3. for each rule with series: its metricsQuery rendered for a real namespace and real objects
   taken from those series, run as an instant query;
4. for each HPA metric that an adapter rule serves: where the HPA target's pods appear in any
   series, the rendered query for that namespace and those pods, and the values it returned
   over the look-back window;
5. for each KEDA prometheus trigger: its query as KEDA's scaler sends it (namespace,
   queryParameters, customHeaders), within what KEDA waits for it; when it gives one value,
   its values over the look-back window; when it gives none, why (names gone or stale, the
   label matcher that excludes every series).
6. when the unit deploys or scrapes dcgm-exporter (or reads its series): the active scrape
   targets (``/api/v1/targets``), for GL806.

Steps 2-5 run a few requests at a time; everything shares one deadline. A failure to reach
or read Prometheus becomes ``snapshot.error`` (GL809), never an exception. The triggers are
checked each on its own (``workers.run_each``): a query that fails, times out or gets an
unreadable answer is that trigger's evidence (GL810), and the others still run.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from gpulint.chain.adapter import CUSTOM, EXTERNAL, AdapterRule, canonical_resource
from gpulint.chain.scrape import dcgm_series_read
from gpulint.inventory import Inventory
from gpulint.kinds.hpa import HPA, HpaMetric
from gpulint.kinds.keda import PrometheusTrigger, prometheus_triggers
from gpulint.live.adapterquery import (
    QueryLabels,
    go_quote,
    mapping_for,
    matches_pattern,
    pod_name_pattern,
    render_query,
)
from gpulint.live.client import Deadline, PrometheusAPI, PrometheusError, QueryRejected
from gpulint.live.kedaquery import TriggerRequest, read_answer, request_for, same_server
from gpulint.live.names import alternatives_for
from gpulint.live.options import LiveOptions, format_duration
from gpulint.live.series import sightings, summarize
from gpulint.live.snapshot import (
    BAD_ANSWER,
    HTTP_ERROR,
    MAX_TARGETS,
    POD_LABELS,
    UNREACHABLE,
    Answer,
    HpaEvidence,
    LiveSnapshot,
    MissingSeries,
    QueryCheck,
    RuleEvidence,
    Sample,
    ScrapeTarget,
    SeriesSummary,
    TriggerEvidence,
)
from gpulint.live.workers import run_all, run_each
from gpulint.metrics.promql import metric_names_in_query, selectors_in_query
from gpulint.metrics.querytemplate import RenderUnsupported, TemplateError

# Objects a rendered query asks for when checking a rule on its own (GL803).
_SAMPLE_OBJECTS = 5
# Pods an HPA query asks for at most (a Deployment at maxReplicas).
_MAX_PODS = 200
# A KEDA trigger's query may take what KEDA waits for it and this much more (the way from
# here to Prometheus may be longer than KEDA's) before gpulint stops waiting for it.
_TRIGGER_GRACE = 2.0
# The look-back values of a trigger's query: one subquery, bounded on its own.
_HISTORY_WITHIN = 10.0
# Selectors of a query that finds nothing, looked at one by one.
_MAX_SELECTORS = 4
# Valid JSON in a shape no Prometheus-compatible API sends.
_NOT_THE_API = (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError)


def collect(inventory: Inventory, options: LiveOptions) -> LiveSnapshot:
    """Run the live check; the snapshot's ``error`` says why it could not."""
    started = time.monotonic()
    snapshot = LiveSnapshot(
        options.url, options.required, options.lookback, options.max_age, time.time()
    )
    deadline = Deadline(options.timeout)
    api = PrometheusAPI(options.url, options.headers, deadline)
    try:
        _Collector(inventory, options, api, snapshot).run()
    except PrometheusError as error:
        _fail(snapshot, str(error), error.reason)
    except _NOT_THE_API as error:
        _fail(
            snapshot,
            f"answered something that is not the Prometheus API ({_shown(error)})",
            BAD_ANSWER,
        )
    finally:
        api.close()
        snapshot.requests = api.requests
        snapshot.elapsed = time.monotonic() - started
    return snapshot


def _fail(snapshot: LiveSnapshot, message: str, reason: str) -> None:
    snapshot.error = message
    snapshot.error_reason = reason
    snapshot.rules.clear()
    snapshot.hpas.clear()
    snapshot.triggers.clear()
    snapshot.targets = None


class _Collector:
    def __init__(
        self,
        inventory: Inventory,
        options: LiveOptions,
        api: PrometheusAPI,
        snapshot: LiveSnapshot,
    ) -> None:
        self.inventory = inventory
        self.options = options
        self.api = api
        self.snapshot = snapshot
        self.now = snapshot.evaluated_at
        self.start = self.now - options.max_age
        self._names: list[str] | None = None
        self._names_lock = threading.Lock()

    # --- plan --------------------------------------------------------------------------------

    def run(self) -> None:
        self._run_rules()
        if wants_targets(self.inventory):
            self._collect_targets()

    def _run_rules(self) -> None:
        rules = [
            r
            for r in self.inventory.adapter_rules()
            if not r.generated and r.series_query and r.selector is not None
        ]
        generated = any(r.generated for r in self.inventory.adapter_rules())
        if generated:
            self.snapshot.notes.append(
                "the prometheus-adapter chart's default rules (rules.default) are not checked "
                "live: they match every series with a namespace label"
            )
        triggers = self._plan_triggers()
        if not rules and not triggers:
            # Nothing to check, but --require-prometheus still needs an answer.
            self._probe()
            self.snapshot.notes.append(
                "no prometheus-adapter rule or KEDA prometheus trigger in the input: nothing "
                "to check against Prometheus"
            )
            return
        if rules:
            self._check_adapter(rules)
        else:
            # A Prometheus that does not answer at all is GL809, not a finding per trigger.
            self._probe()
        if triggers:
            self._check_triggers(triggers)
        checked = []
        if rules:
            hpas = len(self.snapshot.hpas)
            checked.append(f"{len(rules)} adapter rule{'s' * (len(rules) != 1)}")
            checked.append(f"{hpas} HPA metric{'s' * (hpas != 1)}")
        if triggers:
            checked.append(f"{len(triggers)} KEDA prometheus trigger{'s' * (len(triggers) != 1)}")
        listed = (
            checked[0] if len(checked) == 1 else ", ".join(checked[:-1]) + " and " + checked[-1]
        )
        self.snapshot.notes.append(
            f"live check: {listed} checked against {self.options.url} "
            f"(look-back {format_duration(self.options.lookback)})"
        )

    def _probe(self) -> None:
        """Does the server answer the API at all? A refusal of ``vector(1)`` is no PromQL
        problem: it is the server's (GL809)."""
        try:
            self.api.query("vector(1)", self.now)
        except QueryRejected as error:
            raise PrometheusError(f"/api/v1/query refused vector(1): {error}", HTTP_ERROR) from None

    def _check_adapter(self, rules: list[AdapterRule]) -> None:
        by_query: dict[str, list[AdapterRule]] = {}
        for rule in rules:
            by_query.setdefault((rule.series_query or "").strip(), []).append(rule)
        queries = list(by_query)
        summaries = run_all(
            [self._series_task(q, by_query[q]) for q in queries],
            self.options.concurrency,
            self.api.deadline,
        )
        for query, summary in zip(queries, summaries, strict=True):
            for rule in by_query[query]:
                self.snapshot.rules[rule] = RuleEvidence(rule, summary)
        hpas = self._plan_hpas(rules)
        preferred = {id(e.rule): e.series_name for e in hpas}
        tasks: list[Callable[[], None]] = []
        for rule in rules:
            evidence = self.snapshot.rules[rule]
            tasks.append(self._rule_task(evidence, preferred.get(id(rule))))
        for hpa_evidence in hpas:
            tasks.append(self._hpa_task(hpa_evidence))
        run_all(tasks, self.options.concurrency, self.api.deadline)
        self.snapshot.hpas = hpas

    def _collect_targets(self) -> None:
        """The active scrape targets, asked last; a front-end that does not serve them
        (Thanos Query, Mimir: an error status, or another answer) leaves GL806 out, with a
        note, and what was learned stands. No answer in time is the check's failure."""
        try:
            answer = self.api.active_targets()
        except PrometheusError as error:
            if error.reason not in (HTTP_ERROR, BAD_ANSWER):
                raise
            self.snapshot.targets_error = str(error)
            self.snapshot.notes.append(
                f"{self.options.url} does not list its scrape targets ({error}): GL806 skipped"
            )
            return
        targets = []
        for item in answer[:MAX_TARGETS]:
            labels = item.get("labels")
            targets.append(
                ScrapeTarget(
                    str(item.get("scrapePool") or ""),
                    str(item.get("scrapeUrl") or ""),
                    str(item.get("health") or "unknown"),
                    str(item.get("lastError") or "")[:300],
                    tuple(
                        sorted(
                            (str(k), str(v))
                            for k, v in (labels.items() if isinstance(labels, dict) else [])
                        )
                    ),
                )
            )
        self.snapshot.targets = targets
        self.snapshot.targets_total = len(answer)

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

    def _plan_hpas(self, rules: list[AdapterRule]) -> list[HpaEvidence]:
        exposed = {id(r): self.snapshot.rules[r].exposed() for r in rules}
        planned: list[HpaEvidence] = []
        for hpa in self.inventory.hpas:
            for metric in hpa.metrics:
                if not metric.is_custom or not metric.name:
                    continue
                api = EXTERNAL if metric.type == "External" else CUSTOM
                # The HPA lowercases External metric names when it asks for them
                # (kubernetes/kubernetes#72996); the adapter matches names exactly.
                wanted = metric.name.lower() if api == EXTERNAL else metric.name
                for rule in rules:
                    if rule.kind != api:
                        continue
                    series = exposed[id(rule)].get(wanted)
                    if series:
                        planned.append(self._hpa_evidence(hpa, metric, rule, series))
                        break
        return planned

    def _hpa_evidence(
        self, hpa: HPA, metric: HpaMetric, rule: AdapterRule, series: str
    ) -> HpaEvidence:
        target = "the HPA's target"
        if hpa.target_ref is not None:
            resolved = self.inventory.resolve_target(hpa.namespace, hpa.target_ref)
            target = resolved.describe()
        evidence = HpaEvidence(hpa, metric, rule, series, target)
        if metric.type == "Pods" and hpa.target_ref is not None:
            pattern, human = pod_name_pattern(hpa.target_ref.kind, hpa.target_ref.name)
            evidence.pod_pattern, evidence.pod_names = pattern, human
        return evidence

    # --- shared lookups ------------------------------------------------------------------------

    def present_names(self) -> list[str]:
        """Metric names with series in the adapter's window (one call, shared)."""
        with self._names_lock:
            if self._names is None:
                self._names = self.api.label_values("__name__", self.start, self.now)
            return self._names

    def current_names(self, names: list[str]) -> set[str]:
        """The names among ``names`` that have a sample now (not stale, not gone)."""
        if not names:
            return set()
        pattern = "|".join(re.escape(n) for n in names)
        try:
            data = self.api.query(f'count by (__name__) ({{__name__=~"{pattern}"}})', self.now)
        except QueryRejected:
            return set(names)
        return {s.label("__name__") for s in _samples(data)}

    def last_seen(self, names: list[str], selector: str | None, window: float) -> dict[str, float]:
        """When each name (or ``selector``) last had a sample within ``window``, to a step.

        ``count_over_time(x[step])`` ignores staleness markers, so a subquery of it finds the
        last step with a sample even when the series went stale one scrape later;
        ``timestamp()`` of a function's result is the step's time.
        """
        step = int(max(15, window / 360))
        parts = []
        keyed = [(name, f"{{__name__={go_quote(name)}}}") for name in names]
        if selector is not None:
            keyed.append((selector, selector))
        for key, expression in keyed:
            inner = f"timestamp(count_over_time({expression}[{step}s]))"
            parts.append(
                f"label_replace(max(max_over_time({inner}[{int(window)}s:{step}s])), "
                f'"gpulint_name", {go_quote(key)}, "", "")'
            )
        if not parts:
            return {}
        try:
            data = self.api.query(" or ".join(parts), self.now)
        except QueryRejected:
            return {}
        found: dict[str, float] = {}
        expressions = dict(keyed)
        for sample in _samples(data):
            key = sample.label("gpulint_name")
            if key in expressions and math.isfinite(sample.value):
                exact = self._last_sample(expressions[key], step, sample.value)
                found[key] = sample.value if exact is None else exact
        for key in names:
            if key not in found:
                # Samples newer than the last whole step: the subquery's steps end before them.
                recent = self._last_sample(expressions[key], step, self.now)
                if recent is not None:
                    found[key] = recent
        return found

    def _last_sample(self, expression: str, step: int, around: float) -> float | None:
        """The exact time of the last raw sample in the step that ends at ``around``."""
        try:
            data = self.api.query(f"{expression}[{step}s]", around)
        except QueryRejected:
            return None
        times = [
            float(point[0])
            for item in data.get("result", [])
            if isinstance(item, dict)
            for point in item.get("values") or []
            if isinstance(point, list) and point
        ]
        return max(times, default=None)

    # --- rules -------------------------------------------------------------------------------

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
            check.samples = _samples(self.api.query(check.rendered, self.now))
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

    # --- HPAs --------------------------------------------------------------------------------

    def _hpa_task(self, evidence: HpaEvidence) -> Callable[[], None]:
        def task() -> None:
            metric = evidence.metric
            if metric.type == "Pods":
                self._check_pods_metric(evidence)
            elif metric.type == "Object":
                self._check_object_metric(evidence)
            else:
                self._check_external_metric(evidence)

        return task

    def _check_pods_metric(self, evidence: HpaEvidence) -> None:
        labels = mapping_for(evidence.rule, "pods")
        evidence.object_label, evidence.namespace_label = (
            labels.object_label,
            labels.namespace_label,
        )
        pattern = evidence.pod_pattern
        if pattern is None:
            evidence.skipped = "the HPA has no scaleTargetRef"
            return
        if labels.object_label is None:
            evidence.skipped = "the rule maps no label to pods"
            return
        # The healthy case first: the rule's own series name the target's pods.
        known = self.snapshot.rules[evidence.rule].series
        by_namespace = known.namespaces_of(labels.object_label, labels.namespace_label or "")
        if not labels.namespace_label:
            by_namespace = {"": known.objects_in(labels.object_label, None, "")}
        candidates = {
            namespace: sorted(p for p in pods if matches_pattern(pattern, p))
            for namespace, pods in by_namespace.items()
        }
        namespace = evidence.hpa.namespace
        if namespace is None:
            found = sorted(ns for ns, pods in candidates.items() if pods and ns)
            namespace = found[0] if len(found) == 1 else "default"
        evidence.namespace = namespace
        pods = candidates.get(namespace if labels.namespace_label else "", [])[:_MAX_PODS]
        if pods:
            evidence.objects = pods
            self._run_hpa_query(evidence, labels, pods, pattern)
            if evidence.usable or evidence.error or evidence.skipped:
                return
        # No value for the pods: find where they appear, under any label, in any metric.
        pod_labels = list(dict.fromkeys((*POD_LABELS, labels.object_label)))
        matches = [f"{{{label}=~{go_quote(pattern)}}}" for label in pod_labels]
        seen = sightings(self.api.series(matches, self.start, self.now), pod_labels)
        # A series found through exported_pod also carries pod (the exporter's): keep only
        # the labels that hold the target's pods.
        evidence.sightings = [s for s in seen if matches_pattern(pattern, s.pod)]
        if evidence.hpa.namespace is None:
            namespaces = sorted({s.namespace for s in evidence.sightings if s.namespace})
            evidence.namespace = namespaces[0] if len(namespaces) == 1 else "default"
        if not pods:
            # The adapter asks for the pods the cluster has; the series show their names.
            in_namespace = {s.pod for s in evidence.sightings if s.namespace == evidence.namespace}
            pods = sorted(in_namespace)[:_MAX_PODS]
            evidence.objects = pods
            self._run_hpa_query(evidence, labels, pods, pattern)

    def _check_object_metric(self, evidence: HpaEvidence) -> None:
        described = evidence.metric.described_object or {}
        kind, name = described.get("kind"), described.get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            evidence.skipped = "the metric has no describedObject kind and name"
            return
        labels = mapping_for(evidence.rule, canonical_resource(kind))
        evidence.object_label, evidence.namespace_label = (
            labels.object_label,
            labels.namespace_label,
        )
        if labels.object_label is None:
            evidence.skipped = f"the rule maps no label to {canonical_resource(kind)}"
            return
        evidence.namespace = evidence.hpa.namespace or "default"
        evidence.objects = [name]
        self._run_hpa_query(evidence, labels, [name], None)

    def _check_external_metric(self, evidence: HpaEvidence) -> None:
        labels = mapping_for(evidence.rule)
        evidence.namespace_label = labels.namespace_label
        evidence.namespace = evidence.hpa.namespace or "default"
        if labels.namespaced and labels.namespace_label is None:
            # prometheus-adapter: "unable to find label for namespace" on every request.
            evidence.error = (
                "the rule is namespaced but maps no label to namespaces, so the adapter cannot "
                "add the namespace matcher"
            )
            return
        self._run_hpa_query(evidence, labels, [], None)

    def _run_hpa_query(
        self, evidence: HpaEvidence, labels: QueryLabels, objects: list[str], pattern: str | None
    ) -> None:
        selector = evidence.metric.selector
        try:
            evidence.rendered = render_query(
                evidence.rule,
                labels,
                evidence.series_name,
                evidence.namespace,
                objects,
                None if objects else pattern,
                selector,
            )
        except (TemplateError, RenderUnsupported) as error:
            evidence.skipped = f"gpulint cannot render the metricsQuery: {error}"
            return
        try:
            evidence.samples = _samples(self.api.query(evidence.rendered, self.now))
        except QueryRejected as error:
            evidence.error = str(error)
            return
        evidence.usable = [s for s in evidence.samples if _usable(s, labels, objects, pattern)]
        if not evidence.usable:
            return
        external = evidence.metric.type == "External"
        expression = f"sum({evidence.rendered})" if external else f"({evidence.rendered})"
        window = self.options.lookback
        # Enough points for a minimum, a median and a maximum; each step is a full query.
        step = int(max(15, window / 240))
        history: list[float] = []
        try:
            data = self.api.query(f"{expression}[{int(window)}s:{step}s]", self.now)
        except QueryRejected:
            data = {"result": []}
        wanted = {s.label(labels.object_label) for s in evidence.usable if labels.object_label}
        for item in data.get("result", []):
            if not isinstance(item, dict):
                continue
            metric = item.get("metric") or {}
            if (
                labels.object_label
                and not external
                and metric.get(labels.object_label) not in wanted
            ):
                continue
            for point in item.get("values") or []:
                history.append(_number(point))
        current = [s.value for s in evidence.usable]
        if external:
            current = [sum(current)]
        evidence.observed = [v for v in (*history, *current) if math.isfinite(v)]

    # --- KEDA prometheus triggers ------------------------------------------------------------

    def _plan_triggers(self) -> list[PrometheusTrigger]:
        """The triggers KEDA can build a scaler for; a note for each it cannot."""
        planned = []
        for trigger in prometheus_triggers(self.inventory.store.views.values()):
            refused = _refused(trigger)
            if refused:
                self.snapshot.notes.append(
                    f"{trigger.describe()} is not checked live: KEDA refuses it ({refused})"
                )
            else:
                planned.append(trigger)
        return planned

    def _check_triggers(self, triggers: list[PrometheusTrigger]) -> None:
        """Each trigger's query on its own: one that fails, answers slowly or answers
        something unreadable is that trigger's finding, and the others are still checked."""
        outcomes = run_each(
            [self._trigger_task(t) for t in triggers], self.options.concurrency, self.api.deadline
        )
        elsewhere: dict[str, int] = {}
        for trigger, outcome in zip(triggers, outcomes, strict=True):
            error = outcome.error
            if isinstance(error, PrometheusError) and error.reason == UNREACHABLE:
                raise error
            evidence = outcome.value
            if evidence is None:
                evidence = TriggerEvidence(trigger, self.options.url, trigger.timeout)
                if isinstance(error, PrometheusError):
                    evidence.failure, evidence.failure_reason = str(error), error.reason
                elif isinstance(error, _NOT_THE_API):
                    evidence.failure = (
                        f"answered something that is not the Prometheus API ({_shown(error)})"
                    )
                    evidence.failure_reason = BAD_ANSWER
                elif error is not None:
                    raise error
            self.snapshot.triggers[trigger] = evidence
            address = trigger.server_address or ""
            if not same_server(self.options.url, address):
                elsewhere[address] = elsewhere.get(address, 0) + 1
        for address, count in sorted(elsewhere.items()):
            self.snapshot.notes.append(
                f"{count} KEDA trigger{'s name' if count != 1 else ' names'} serverAddress "
                f"{address}: {'their queries were' if count != 1 else 'its query was'} sent "
                f"to {self.options.url} (--prometheus) in its place"
            )

    def _trigger_task(self, trigger: PrometheusTrigger) -> Callable[[], TriggerEvidence]:
        def task() -> TriggerEvidence:
            request = request_for(trigger)
            evidence = TriggerEvidence(trigger, self.options.url, trigger.timeout, request.dropped)
            query = trigger.query or ""
            started = time.monotonic()
            try:
                data = self.api.query(
                    query,
                    self.now,
                    request.params,
                    request.headers,
                    within=trigger.timeout + _TRIGGER_GRACE,
                )
            except QueryRejected as error:
                evidence.elapsed, evidence.error = time.monotonic() - started, str(error)
                return evidence
            except PrometheusError as error:
                if error.reason == UNREACHABLE:
                    raise
                evidence.elapsed = time.monotonic() - started
                evidence.failure, evidence.failure_reason = str(error), error.reason
                return evidence
            evidence.elapsed = time.monotonic() - started
            reading = evidence.reading = read_answer(data)
            try:
                if reading.answer is Answer.VALUE and reading.value is not None:
                    evidence.observed = [*self._trigger_history(query, request), reading.value]
                elif reading.answer in (Answer.EMPTY, Answer.NOT_FINITE):
                    self._explain_no_data(evidence, query)
            except (QueryRejected, PrometheusError, *_NOT_THE_API) as error:
                # What more gpulint asks is its own question: the answer above stands.
                if isinstance(error, PrometheusError) and error.reason == UNREACHABLE:
                    raise
            return evidence

        return task

    def _trigger_history(self, query: str, request: TriggerRequest) -> list[float]:
        """The query's values over the look-back window, as KEDA would have read them."""
        window = self.options.lookback
        step = int(max(15, window / 240))
        # On lines of its own: a query may end in a # comment.
        expression = f"(\n{query}\n)[{int(window)}s:{step}s]"
        data = self.api.query(
            expression, self.now, request.params, request.headers, within=_HISTORY_WITHIN
        )
        values: list[float] = []
        for item in data.get("result", []):
            if isinstance(item, dict):
                values.extend(_number(point) for point in item.get("values") or [])
        return [v for v in values if math.isfinite(v)]

    def _explain_no_data(self, evidence: TriggerEvidence, query: str) -> None:
        """Why a query finds nothing: a name with no series (did you mean, last seen), a
        name that went stale, or else matchers and functions that filter everything out."""
        names = metric_names_in_query(query)
        if not names:
            return
        present = self.present_names()
        known = set(present)
        evidence.absent_names = [n for n in names if n not in known]
        for name in evidence.absent_names:
            found = alternatives_for(name, present)
            if found:
                evidence.alternatives[name] = found
        seen = [n for n in names if n in known]
        current = self.current_names(seen)
        evidence.stale_names = [n for n in seen if n not in current]
        wanted = [*evidence.absent_names, *evidence.stale_names]
        window = max(self.options.lookback, self.options.max_age)
        evidence.last_seen = self.last_seen(wanted, None, window)
        if wanted:
            return
        # Every metric has current series: which label matcher drops them all?
        for selector in selectors_in_query(query, _MAX_SELECTORS):
            by_name, matchers = selector.name_matchers(), selector.label_matchers()
            if not by_name or not matchers:
                continue
            name_only = "{" + ",".join(str(m) for m in by_name) + "}"
            series = self.api.series([name_only], self.start, self.now)
            summary = summarize(series, matchers=matchers)
            if summary.count:
                evidence.filtered.append((selector, summary))


def wants_targets(inventory: Inventory) -> bool:
    """Does the unit deploy or scrape dcgm-exporter, or read its series?"""
    pipeline = inventory.pipeline
    if pipeline.all_monitors() or pipeline.all_exporters():
        return True
    return any(dcgm_series_read(rule) for rule in inventory.adapter_rules() if not rule.generated)


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


def _usable(sample: Sample, labels: QueryLabels, objects: list[str], pattern: str | None) -> bool:
    """Can the adapter hand this sample to one of the objects it was asked about?"""
    if labels.object_label is None:
        return True
    value = sample.label(labels.object_label)
    if objects:
        return value in objects
    return bool(value) and pattern is not None and matches_pattern(pattern, value)


def _number(point: Any) -> float:
    if isinstance(point, list | tuple) and len(point) == 2:
        try:
            return float(point[1])
        except (TypeError, ValueError):
            return math.nan
    return math.nan


def _samples(data: dict[str, Any]) -> list[Sample]:
    """The series of an instant query's answer (vector, scalar or matrix)."""
    result = data.get("result")
    kind = data.get("resultType")
    if kind in ("scalar", "string"):
        return [Sample((), _number(result))] if isinstance(result, list) else []
    found = []
    for item in result if isinstance(result, list) else []:
        if not isinstance(item, dict):
            continue
        metric = item.get("metric")
        labels = tuple(
            sorted(
                (str(k), str(v)) for k, v in (metric.items() if isinstance(metric, dict) else [])
            )
        )
        if "value" in item:
            found.append(Sample(labels, _number(item.get("value"))))
        else:
            for point in item.get("values") or []:
                found.append(Sample(labels, _number(point)))
    return found


def _refused(trigger: PrometheusTrigger) -> str:
    """Why KEDA cannot build a scaler for the trigger ('' when it can)."""
    if trigger.query is None:
        return "no query"
    if trigger.server_address is None:
        return "no serverAddress"
    if trigger.text("threshold") is None:
        return "no threshold"
    if trigger.threshold is None:
        return "threshold is no number"
    if trigger.activation_threshold is None:
        return "activationThreshold is no number"
    if trigger.ignore_null_values is None:
        return "ignoreNullValues is no boolean"
    if not trigger.timeout_readable:
        return "timeout is neither a duration nor milliseconds"
    if trigger.custom_headers is None or trigger.query_parameters is None:
        return "customHeaders or queryParameters is not a list of key=value"
    return ""


def _shown(error: BaseException) -> str:
    shown = repr(error)
    return shown if len(shown) <= 300 else shown[:297] + "..."
