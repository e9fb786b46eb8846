"""Fetching a replay's history from a server that answers oddly: the range is split into
requests Prometheus accepts, and answers that are not a usable matrix are refused with a
reason, through the live check's hardened client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from aiohttp import web

from gpulint.live.client import MAX_RANGE_POINTS, Deadline, PrometheusAPI, PrometheusError
from gpulint.replay.history import MAX_SERIES, HistoryError, fetch
from gpulint.replay.model import ReplayMetric, ReplaySpec
from tests.live.harness import AppServer

METRIC = ReplayMetric("gpu_utilization", "Pods", "AverageValue", 60.0, "up", cap=100.0)
SPEC = ReplaySpec(
    "HorizontalPodAutoscaler",
    "ml",
    "web",
    "Deployment",
    "web",
    1,
    4,
    None,
    (METRIC,),
    120.0,
    "test",
    1,
)


class Odd(AppServer):
    """``/<behaviour>/api/v1/query_range``: a matrix of one series at every asked point
    (``ok``), a vector (``vector``), or more series than a replay takes (``many``)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[float, float, float]] = []

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{behaviour}/api/v1/query_range", self._answer)
        return app

    async def _answer(self, request: web.Request) -> web.Response:
        behaviour = request.match_info["behaviour"]
        query = request.query
        start, end, step = float(query["start"]), float(query["end"]), float(query["step"])
        self.asked.append((start, end, step))
        if behaviour == "vector":
            data = {"resultType": "vector", "result": []}
        elif behaviour == "empty":
            data = {"resultType": "matrix", "result": []}
        else:
            count = MAX_SERIES + 1 if behaviour == "many" else 1
            points = int((end - start) / step) + 1
            values = [[start + i * step, "50"] for i in range(points)]
            data = {
                "resultType": "matrix",
                "result": [{"metric": {"pod": f"p{n}"}, "values": values} for n in range(count)],
            }
        body = json.dumps({"status": "success", "data": data})
        return web.Response(text=body, content_type="application/json")


@pytest.fixture
def odd() -> Iterator[Odd]:
    server = Odd().start()
    yield server
    server.stop()


def test_a_long_range_is_split_into_requests_prometheus_accepts(odd: Odd) -> None:
    api = PrometheusAPI(f"{odd.url}/ok", {}, Deadline(30))
    start = 1_768_435_200.0
    history = fetch(api, SPEC, start, start + 3 * 86400, 15.0)  # 17,281 points
    assert len(history.times) == 17281
    assert all(v == 50.0 for v in history.values[0])
    ranges = [a for a in odd.asked if a[2] == 15.0]
    assert all((end - begin) / step + 1 <= MAX_RANGE_POINTS for begin, end, step in ranges)
    # the metric's query in two requests, then kube-state-metrics' replicas the same way
    assert ranges[0][0] == start and ranges[1][1] == start + 3 * 86400


def test_a_vector_answer_is_refused(odd: Odd) -> None:
    api = PrometheusAPI(f"{odd.url}/vector", {}, Deadline(30))
    with pytest.raises(PrometheusError, match="not a matrix"):
        fetch(api, SPEC, 0.0, 3600.0, 15.0)


def test_too_many_series_are_refused(odd: Odd) -> None:
    api = PrometheusAPI(f"{odd.url}/many", {}, Deadline(30))
    with pytest.raises(HistoryError, match=f"more than {MAX_SERIES}"):
        fetch(api, SPEC, 0.0, 600.0, 15.0)


def test_a_range_of_too_many_points_is_not_sent(odd: Odd) -> None:
    api = PrometheusAPI(f"{odd.url}/ok", {}, Deadline(30))
    with pytest.raises(ValueError, match="more than 11000 points"):
        api.query_range("up", 0.0, 15.0 * MAX_RANGE_POINTS, 15.0)
    assert odd.asked == []


def test_a_keda_trigger_with_no_series_reads_as_keda_reads_it(odd: Odd) -> None:
    """No series: 0 with ignoreNullValues (the default), a failed poll (no value) without."""
    import dataclasses

    from gpulint.replay.activation import KedaActivation

    api = PrometheusAPI(f"{odd.url}/empty", {}, Deadline(30))
    trigger = ReplayMetric("s0-prometheus", "External", "AverageValue", 10.0, "sum(up)")
    keda = dataclasses.replace(SPEC, metrics=(trigger,), keda=KedaActivation())
    assert set(fetch(api, keda, 0.0, 600.0, 15.0).values[0]) == {0.0}
    strict = dataclasses.replace(keda, metrics=(dataclasses.replace(trigger, ignore_null=False),))
    assert set(fetch(api, strict, 0.0, 600.0, 15.0).values[0]) == {None}
