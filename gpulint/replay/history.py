"""Fetch what a replay runs on from Prometheus, with range queries, bounded.

* each metric's query over the range on a grid of ``step`` seconds, split into requests of
  at most ``client.MAX_RANGE_POINTS`` points; an answer of more than ``MAX_SERIES`` series is
  refused (a Pods metric has one series per pod);
* a Pods metric's value at a point is the mean over the pods' series, as the HPA averages
  them, and the number of series is the pods that reported it; an adapter External metric is
  the sum of its series (the HPA sums an External metric's values); a KEDA trigger's answer
  of more than one series fails KEDA's poll (no value), and no series is 0 with
  ``ignoreNullValues`` (gpulint.live.kedaquery);
* the replicas observed, from kube-state-metrics:
  ``kube_horizontalpodautoscaler_status_current_replicas`` of the HPA, else
  ``kube_deployment_status_replicas`` / ``kube_statefulset_status_replicas`` of the target.

Everything goes through gpulint.live.client: its deadline, size limits and same-origin
redirects apply.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from gpulint.live.adapterquery import go_quote
from gpulint.live.client import MAX_RANGE_POINTS, PrometheusAPI, QueryRejected
from gpulint.replay.model import PER_POD, History, ReplayMetric, ReplaySpec

MAX_SERIES = 1000  # series in one answer: more pods than any GPU Deployment has
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
    for metric in spec.metrics:
        sums, counts = _fetch_metric(api, metric, times, step, spec.keda is not None)
        if metric.relation == PER_POD:
            values.append([s / c if c else None for s, c in zip(sums, counts, strict=True)])
            pods.append([c if c else None for c in counts])
        else:
            values.append(sums)
            pods.append([])
    observed, note = _observed(api, spec, times, step)
    return History(times, values, pods, observed, [note] if note else [])


def _fetch_metric(
    api: PrometheusAPI, metric: ReplayMetric, times: list[float], step: float, keda: bool
) -> tuple[list[Any], list[int]]:
    """Per grid point: (the sum of the series' values, or KEDA's reading; the series count)."""
    index = {round(t, 3): i for i, t in enumerate(times)}
    sums: list[float | None] = [None] * len(times)
    counts = [0] * len(times)
    for first, last in _chunks(times, step):
        series = _range(api, metric.query, first, last, step, metric)
        for item in series:
            for at, value in _points(item.get("values")):
                i = index.get(round(at, 3))
                if i is None:
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
            query, first, last, step, list(metric.params), dict(metric.headers)
        )
    except QueryRejected as error:
        raise HistoryError(f"Prometheus rejects the query of {metric.name}: {error}") from None
    if len(series) > MAX_SERIES:
        raise HistoryError(
            f"the query of {metric.name} answers {len(series)} series, more than {MAX_SERIES}"
        )
    return series


def _chunks(times: list[float], step: float) -> Iterator[tuple[float, float]]:
    for offset in range(0, len(times), MAX_RANGE_POINTS):
        part = times[offset : offset + MAX_RANGE_POINTS]
        yield part[0], part[-1]


def _points(values: Any) -> Iterator[tuple[float, float]]:
    """The finite ``[time, "value"]`` points of a series; anything else is skipped."""
    if not isinstance(values, list):
        return
    isfinite = math.isfinite
    for point in values:
        if type(point) is not list or len(point) != 2:
            continue
        at, text = point
        if type(text) is not str or len(text) > 64 or type(at) not in (int, float):
            continue
        try:
            value = float(text)
        except ValueError:
            continue
        if isfinite(value):
            yield float(at), value


def _observed(
    api: PrometheusAPI, spec: ReplaySpec, times: list[float], step: float
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
        for first, last in _chunks(times, step):
            try:
                answer = api.query_range(query, first, last, step)
            except QueryRejected:
                answer = []
            for item in answer[:1]:
                for at, value in _points(item.get("values")):
                    i = index.get(round(at, 3))
                    if i is not None:
                        observed[i] = round(value)
                        found = True
        if found:
            return observed, ""
    return [None] * len(times), (
        "no kube-state-metrics replicas for it: the observed load is spread over the pods "
        "that reported the metric"
    )
