"""The live check of KEDA prometheus triggers: each query as KEDA's scaler sends it, on its
own and within what KEDA waits for it; its values over the look-back window, or why it finds
nothing (GL810-GL812)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from gpulint.kinds.keda import prometheus_triggers
from gpulint.kinds.triggers import PrometheusTrigger
from gpulint.live.answers import (
    NOT_THE_API,
    history_span,
    point_time,
    point_value,
    shown_error,
)
from gpulint.live.client import PrometheusError, QueryRejected
from gpulint.live.kedaquery import TriggerRequest, read_answer, request_for, same_server
from gpulint.live.lookups import Lookups
from gpulint.live.names import alternatives_for
from gpulint.live.options import history_step
from gpulint.live.series import summarize
from gpulint.live.snapshot import (
    BAD_ANSWER,
    UNREACHABLE,
    Answer,
    TriggerEvidence,
)
from gpulint.live.workers import run_each
from gpulint.metrics.promql import metric_names_in_query, selectors_in_query

# A KEDA trigger's query may take what KEDA waits for it and this much more (the way from
# here to Prometheus may be longer than KEDA's) before gpulint stops waiting for it.
_TRIGGER_GRACE = 2.0

# The look-back values of a trigger's query: one subquery, bounded on its own.
_HISTORY_WITHIN = 10.0

# Selectors of a query that finds nothing, looked at one by one.
_MAX_SELECTORS = 4


class TriggerChecks(Lookups):
    """The checks of the KEDA prometheus triggers (step 5)."""

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
                elif isinstance(error, NOT_THE_API):
                    evidence.failure = (
                        f"answered something that is not the Prometheus API ({shown_error(error)})"
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
                    evidence.observed = [
                        *self._trigger_history(evidence, query, request),
                        reading.value,
                    ]
                elif reading.answer in (Answer.EMPTY, Answer.NOT_FINITE):
                    self._explain_no_data(evidence, query)
            except (QueryRejected, PrometheusError, *NOT_THE_API) as error:
                # What more gpulint asks is its own question: the answer above stands.
                if isinstance(error, PrometheusError) and error.reason == UNREACHABLE:
                    raise
            return evidence

        return task

    def _trigger_history(
        self, evidence: TriggerEvidence, query: str, request: TriggerRequest
    ) -> list[float]:
        """The query's values over the look-back window, as KEDA would have read them; sets
        the span of the window they cover."""
        window = self.options.lookback
        step = history_step(window)
        # On lines of its own: a query may end in a # comment.
        expression = f"(\n{query}\n)[{int(window)}s:{step}s]"
        data = self.api.query(
            expression, self.now, request.params, request.headers, within=_HISTORY_WITHIN
        )
        values: list[float] = []
        first = math.nan
        for item in data.get("result", []):
            if not isinstance(item, dict):
                continue
            for point in item.get("values") or []:
                value = point_value(point)
                if math.isfinite(value):
                    values.append(value)
                    moment = point_time(point)
                    if not moment >= first:  # also true while first is NaN
                        first = moment
        evidence.history_span = history_span(first, self.now, window, step)
        return values

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
