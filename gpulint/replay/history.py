"""Fetch what a replay runs on from Prometheus, with range queries, bounded.

* each metric's query over the range on a grid of ``step`` seconds, split into requests of
  at most ``client.MAX_RANGE_POINTS`` points; an answer of more than ``MAX_SERIES`` series, or
  of more than ``MAX_ANSWER_POINTS`` points in all its series, is refused (a Pods metric has
  one series per pod), the second while it streams in, before it is parsed;
* a Pods metric's value at a point is the mean over the pods' series, as the HPA averages
  them, and the number of series is the pods that reported it; an adapter External metric is
  the sum of its series (the HPA sums an External metric's values); a KEDA trigger's answer
  of more than one series fails KEDA's poll (no value), and no series is 0 with
  ``ignoreNullValues`` (gpulint.live.kedaquery);
* the replicas observed, from kube-state-metrics:
  ``kube_horizontalpodautoscaler_status_current_replicas`` of the HPA, else
  ``kube_deployment_status_replicas`` / ``kube_statefulset_status_replicas`` of the target.

What an answer holds is not trusted beyond that: a point that is not ``[<time>, "<value>"]``,
whose value is not a finite number, whose time is not on the grid of the request it answers,
or that does not come after the point before it in its series (Prometheus sends each
series' points once, in time order) is left out, and the history's notes say how many were;
a sum that overflows a float is no sample; an observed replica count outside the int32 range
of ``status.currentReplicas`` is no sample either. Nothing is allocated in proportion to a
number of the answer beyond its points, which the bound above keeps.

Everything goes through gpulint.live.client: its deadline, size limits and same-origin
redirects apply.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from gpulint.core.quantity import INT32_MAX
from gpulint.live.adapterquery import go_quote
from gpulint.live.client import MAX_RANGE_POINTS, AnswerTooLarge, PrometheusAPI, QueryRejected
from gpulint.replay.model import PER_POD, History, ReplayMetric, ReplaySpec

MAX_SERIES = 1000  # series in one answer: more pods than any GPU Deployment has
# Points of all the series of one answer: 170 pods over a day at 15 s, 90 over the 11,000
# points of one request. Parsed, a point costs about 190 bytes, so one answer stays under
# about 200 MB; the history itself keeps two numbers per point of the grid, whatever the
# series.
MAX_ANSWER_POINTS = 1_000_000
_WORKLOAD_REPLICAS = {
    "Deployment": ("kube_deployment_status_replicas", "deployment"),
    "StatefulSet": ("kube_statefulset_status_replicas", "statefulset"),
}


class HistoryError(Exception):
    """A query of the replay could not be answered (the report names the autoscaler)."""


def grid(start: float, end: float, step: float) -> list[float]:
    count = math.floor((end - start) / step + 1e-9) + 1
    return [start + i * step for i in range(count)]


def fetch(api: PrometheusAPI, spec: ReplaySpec, start: float, end: float, step: float) -> History:
    times = grid(start, end, step)
    values: list[list[float | None]] = []
    pods: list[list[int | None]] = []
    notes: list[str] = []
    for metric in spec.metrics:
        left_out = _LeftOut()
        sums, counts = _fetch_metric(api, metric, times, step, spec.keda is not None, left_out)
        if metric.relation == PER_POD:
            pairs = zip(sums, counts, strict=True)
            values.append([_finite(s / c) if c else None for s, c in pairs])
            pods.append([c if c else None for c in counts])
        else:
            values.append([_finite(s) for s in sums])
            pods.append([])
        notes += left_out.notes(f"the query of {metric.name}")
    observed, note = _observed(api, spec, times, step, notes)
    return History(times, values, pods, observed, [*notes, note] if note else notes)


def _finite(value: float | None) -> float | None:
    """A sum past the largest float (values near 1.8e308 added up) is no sample."""
    return value if value is None or math.isfinite(value) else None


class _LeftOut:
    """The points of an answer left out, by why, for the history's notes."""

    def __init__(self) -> None:
        self.malformed = 0  # not [time, "value"] with a finite value
        self.off_grid = 0  # a time that is not one the request asked for
        self.out_of_order = 0  # not after the point before it in its series
        self.out_of_range = 0  # an observed replica count no int32 holds

    def notes(self, what: str) -> list[str]:
        reasons = (
            (self.malformed, "not a time and a finite value"),
            (self.off_grid, "at a time the request did not ask for"),
            (self.out_of_order, "out of time order or repeated in their series"),
            (self.out_of_range, "not a replica count (outside 0 to 2^31-1)"),
        )
        return [
            f"{count:,} point{'s' * (count != 1)} of {what} left out: {reason}"
            for count, reason in reasons
            if count
        ]


def _fetch_metric(
    api: PrometheusAPI,
    metric: ReplayMetric,
    times: list[float],
    step: float,
    keda: bool,
    left_out: _LeftOut,
) -> tuple[list[Any], list[int]]:
    """Per grid point: (the sum of the series' values, or KEDA's reading; the series count)."""
    index = {round(t, 3): i for i, t in enumerate(times)}
    sums: list[float | None] = [None] * len(times)
    counts = [0] * len(times)
    for low, high, first, last in _chunks(times):
        series = _range(api, metric.query, first, last, step, metric)
        for item in series:
            for at, value in _points(item.get("values"), left_out):
                i = index.get(round(at, 3))
                # Only the times this request asked for: an answer that strays into another
                # request's part of the grid would count its points twice.
                if i is None or not low <= i < high:
                    left_out.off_grid += 1
                    continue
                counts[i] += 1
                total = sums[i]
                sums[i] = value if total is None else total + value
    if keda:
        # KEDA's poll: one element gives its value, none (or NaN) gives 0 with
        # ignoreNullValues (the default) and fails the poll without, several fail it.
        empty = 0.0 if metric.ignore_null else None
        readings: list[float | None] = []
        for total, count in zip(sums, counts, strict=True):
            readings.append(empty if count == 0 else total if count == 1 else None)
        return readings, counts
    return sums, counts


def _range(
    api: PrometheusAPI, query: str, first: float, last: float, step: float, metric: ReplayMetric
) -> list[dict[str, Any]]:
    try:
        series = api.query_range(
            query,
            first,
            last,
            step,
            list(metric.params),
            dict(metric.headers),
            max_points=MAX_ANSWER_POINTS,
        )
    except QueryRejected as error:
        raise HistoryError(f"Prometheus rejects the query of {metric.name}: {error}") from None
    except AnswerTooLarge as error:
        raise _too_large(f"the query of {metric.name}", query, error) from None
    if len(series) > MAX_SERIES:
        raise HistoryError(
            f"the query of {metric.name} answers {len(series)} series, more than {MAX_SERIES}"
        )
    return series


def _too_large(what: str, query: str, error: AnswerTooLarge) -> HistoryError:
    return HistoryError(
        f"Prometheus's answer to {what} ({_shown(query)}) holds more than a replay reads, "
        f"{error.bound}: a longer --step asks for fewer points"
    )


def _shown(query: str) -> str:
    """A query on one line, cut to a length a message can hold."""
    text = " ".join(query.split())
    return text if len(text) <= 300 else text[:297] + "..."


def _chunks(times: list[float]) -> Iterator[tuple[int, int, float, float]]:
    """The requests a range is split into: the grid indexes each covers (``low`` up to
    ``high``, excluded) and its first and last time."""
    for low in range(0, len(times), MAX_RANGE_POINTS):
        high = min(low + MAX_RANGE_POINTS, len(times))
        yield low, high, times[low], times[high - 1]


def _points(values: Any, left_out: _LeftOut) -> Iterator[tuple[float, float]]:
    """The ``[time, "value"]`` points of a series with a finite value, each after the one
    before it; the others are counted in ``left_out``."""
    if not isinstance(values, list):
        return
    isfinite = math.isfinite
    previous = -math.inf
    for point in values:
        if type(point) is not list or len(point) != 2:
            left_out.malformed += 1
            continue
        at, text = point
        if type(text) is not str or len(text) > 64 or type(at) not in (int, float):
            left_out.malformed += 1
            continue
        try:
            value = float(text)
            at = float(at)  # an integer of 400 digits is JSON, and no float
        except (ValueError, OverflowError):
            left_out.malformed += 1
            continue
        if not (isfinite(value) and isfinite(at)):
            left_out.malformed += 1
            continue
        if not at > previous:  # a time repeated, or earlier
            left_out.out_of_order += 1
            continue
        previous = at
        yield at, value


def _observed(
    api: PrometheusAPI, spec: ReplaySpec, times: list[float], step: float, notes: list[str]
) -> tuple[list[int | None], str]:
    hpa_name = spec.name if spec.kind == "HorizontalPodAutoscaler" else f"keda-hpa-{spec.name}"
    namespace = go_quote(spec.namespace)
    queries = [
        "max(kube_horizontalpodautoscaler_status_current_replicas{"
        f"namespace={namespace},horizontalpodautoscaler={go_quote(hpa_name)}}})"
    ]
    workload = _WORKLOAD_REPLICAS.get(spec.target_kind)
    if workload is not None:
        series, label = workload
        queries.append(
            f"max({series}{{namespace={namespace},{label}={go_quote(spec.target_name)}}})"
        )
    index = {round(t, 3): i for i, t in enumerate(times)}
    for query in queries:
        observed: list[int | None] = [None] * len(times)
        found = False
        left_out = _LeftOut()
        for low, high, first, last in _chunks(times):
            try:
                answer = api.query_range(query, first, last, step, max_points=MAX_ANSWER_POINTS)
            except QueryRejected:
                answer = []
            except AnswerTooLarge as error:
                raise _too_large("kube-state-metrics' replicas", query, error) from None
            for item in answer[:1]:
                for at, value in _points(item.get("values"), left_out):
                    i = index.get(round(at, 3))
                    if i is None or not low <= i < high:
                        left_out.off_grid += 1
                    elif not 0 <= value <= INT32_MAX:
                        # status.currentReplicas is an int32: anything else is not one, and
                        # would cost the replay its size if taken for replicas
                        left_out.out_of_range += 1
                    else:
                        observed[i] = round(value)
                        found = True
        notes += left_out.notes(_shown(query))
        if found:
            return observed, ""
    return [None] * len(times), (
        "no kube-state-metrics replicas for it: the observed load is spread over the pods "
        "that reported the metric"
    )
