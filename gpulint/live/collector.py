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

The checks are one class each: ``rulechecks`` (steps 1-3), ``hpachecks`` (4) and
``triggerchecks`` (5), over the state and lookups they share in ``lookups``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gpulint.chain.adapter import AdapterRule
from gpulint.chain.scrape import dcgm_series_read
from gpulint.inventory import Inventory
from gpulint.live.answers import NOT_THE_API, shown_error
from gpulint.live.client import Deadline, PrometheusAPI, PrometheusError, QueryRejected
from gpulint.live.hpachecks import HpaChecks
from gpulint.live.options import LiveOptions
from gpulint.live.progress import Waiting
from gpulint.live.rulechecks import RuleChecks
from gpulint.live.snapshot import (
    BAD_ANSWER,
    HTTP_ERROR,
    MAX_TARGETS,
    LiveSnapshot,
    RuleEvidence,
    ScrapeTarget,
    hpa_key,
    rule_key,
)
from gpulint.live.triggerchecks import TriggerChecks
from gpulint.live.workers import run_all


def collect(
    inventory: Inventory, options: LiveOptions, waiting: Waiting | None = None
) -> LiveSnapshot:
    """Run the live check; the snapshot's ``error`` says why it could not. ``waiting`` is told
    of each request (``--progress``)."""
    started = time.monotonic()
    snapshot = LiveSnapshot(
        options.url,
        options.required,
        options.lookback,
        options.max_age,
        time.time(),
        min_history=options.min_history,
        lookback_text=options.lookback_text,
    )
    deadline = Deadline(options.timeout)
    api = PrometheusAPI(options.url, options.headers, deadline, waiting)
    try:
        _Collector(inventory, options, api, snapshot).run()
    except PrometheusError as error:
        _fail(snapshot, str(error), error.reason)
    except NOT_THE_API as error:
        _fail(
            snapshot,
            f"answered something that is not the Prometheus API ({shown_error(error)})",
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


class _Collector(RuleChecks, HpaChecks, TriggerChecks):
    """Every live check of a unit, planned and run on one API and one deadline."""

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
            return
        if rules:
            self._check_adapter(rules)
        else:
            # A Prometheus that does not answer at all is GL809, not a finding per trigger.
            self._probe()
        if triggers:
            self._check_triggers(triggers)
        # What was checked, said once for the run (gpulint.live.words.checked_note).
        checked = self.snapshot.checked
        checked.rules.update(rule_key(rule) for rule in rules)
        checked.hpa_metrics.update(
            (hpa_key(evidence.hpa), evidence.metric.index) for evidence in self.snapshot.hpas
        )
        checked.triggers.update(
            (t.manifest.file, t.manifest.index, tuple(t.path)) for t in triggers
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


def wants_targets(inventory: Inventory) -> bool:
    """Does the unit deploy or scrape dcgm-exporter, or read its series?"""
    pipeline = inventory.pipeline
    if pipeline.all_monitors() or pipeline.all_exporters():
        return True
    return any(dcgm_series_read(rule) for rule in inventory.adapter_rules() if not rule.generated)
