"""Fetching a replay's history from a server that answers oddly: the range is split into
requests Prometheus accepts, and answers that are not a usable matrix are refused with a
reason, through the live check's hardened client."""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import math
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpulint.core.quantity import INT32_MAX
from gpulint.engine.config import Settings
from gpulint.inventory import Inventory
from gpulint.live.client import (
    MAX_ANSWER_BYTES,
    MAX_RANGE_POINTS,
    Deadline,
    PrometheusAPI,
    PrometheusError,
)
from gpulint.replay.activation import KedaActivation
from gpulint.replay.history import MAX_ANSWER_POINTS, MAX_SERIES, HistoryError, fetch
from gpulint.replay.model import ReplayMetric, ReplaySpec
from gpulint.replay.report import Replayed, replay_one
from tests.live.harness import AppServer
from tests.replay.answers import Answer, RangeServer, matrix, points, steady
from tests.replay.test_rules import SCENARIOS

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
    api = PrometheusAPI(f"{odd.url}/empty", {}, Deadline(30))
    trigger = ReplayMetric("s0-prometheus", "External", "AverageValue", 10.0, "sum(up)")
    keda = dataclasses.replace(SPEC, metrics=(trigger,), keda=KedaActivation())
    assert set(fetch(api, keda, 0.0, 600.0, 15.0).values[0]) == {0.0}
    strict = dataclasses.replace(keda, metrics=(dataclasses.replace(trigger, ignore_null=False),))
    assert set(fetch(api, strict, 0.0, 600.0, 15.0).values[0]) == {None}


# --- what the answers hold -----------------------------------------------------------------

START = 1_768_435_200.0  # on the 15 s grid


@pytest.fixture
def answering() -> Iterator[RangeServer]:
    server = RangeServer(steady("50", "2")).start()
    yield server
    server.stop()


def test_points_out_of_order_repeated_malformed_or_off_the_grid_are_left_out_and_said(
    answering: RangeServer,
) -> None:
    """Each left-out point counts once, by why, in the history's notes; the others are read
    as they are (a point repeated in its series would count as a second pod)."""
    grid = [START + 15 * i for i in range(5)]
    body = (
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":['
        f'[{grid[0]},"40"],[{grid[0]},"99"],[{grid[2]},"44"],[{grid[1]},"99"],'
        f'[{grid[2] + 7},"99"],[{grid[3]},"NaN"],[{grid[3]},"+Inf"],[{grid[3]},5],'
        f'["{grid[3]}","1"],[{grid[3]}],"x",[1{"0" * 400},"1"],[NaN,"1"],'
        f'[{grid[4]},"48"],[{START + 15 * 100},"99"]]}}]}}}}'
    ).encode()
    answering.answer = lambda query, *_: body if "kube_" not in query else matrix()
    history = fetch(PrometheusAPI(answering.url, {}, Deadline(30)), SPEC, grid[0], grid[4], 15.0)
    assert history.values[0] == [40.0, None, 44.0, None, 48.0]
    assert history.pods[0] == [1, None, 1, None, 1]
    metric_notes = [n for n in history.notes if "of the query of gpu_utilization" in n]
    assert metric_notes == [
        "8 points of the query of gpu_utilization left out: not a time and a finite value",
        "2 points of the query of gpu_utilization left out: at a time the request did not ask for",
        "2 points of the query of gpu_utilization left out: out of time order or repeated in "
        "their series",
    ]


def test_observed_replicas_no_int32_holds_are_no_samples(answering: RangeServer) -> None:
    """kube-state-metrics reports status.currentReplicas, an int32: 3e12 is not one, and a
    replay that took it would start from three trillion pods."""
    answering.answer = steady("50", "3e12")
    history = fetch(PrometheusAPI(answering.url, {}, Deadline(30)), SPEC, START, START + 60, 15.0)
    assert history.observed == [None] * 5
    assert any("5 points of max(kube_horizontalpodautoscaler" in n for n in history.notes)
    assert any("not a replica count (outside 0 to 2^31-1)" in n for n in history.notes)
    answering.answer = steady("50", "3e8")
    history = fetch(PrometheusAPI(answering.url, {}, Deadline(30)), SPEC, START, START + 60, 15.0)
    assert history.observed == [300_000_000] * 5


def test_sums_past_the_largest_float_are_no_samples(answering: RangeServer) -> None:
    answering.answer = lambda query, start, end, step: matrix(
        points(start, end, step, "1.7e308"), points(start, end, step, "1.7e308")
    )
    history = fetch(PrometheusAPI(answering.url, {}, Deadline(30)), SPEC, START, START + 60, 15.0)
    assert history.values == [[None] * 5] and history.pods == [[2] * 5]


def _too_many_points(series: int) -> bytes:
    """``series`` series of 11,000 points each: 250 of them fit under 64 MiB."""
    values = b",".join(b'[%d,"50"]' % (START + 15 * i) for i in range(MAX_RANGE_POINTS))
    parts = [b'{"metric":{"pod":"p%d"},"values":[%s]}' % (n, values) for n in range(series)]
    return b'{"status":"success","data":{"resultType":"matrix","result":[%s]}}' % b",".join(parts)


def test_an_answer_of_more_points_than_a_replay_reads_is_refused_as_it_streams_in(
    answering: RangeServer,
) -> None:
    """Under the byte limit, 2,200,000 points would cost 400 MB once parsed: the answer is
    refused once a million of them have streamed in, naming the query and the bound."""
    body = _too_many_points(200)
    assert len(body) < MAX_ANSWER_BYTES
    answering.answer = lambda *_: body
    api = PrometheusAPI(answering.url, {}, Deadline(30))
    began = time.perf_counter()
    with pytest.raises(HistoryError) as refused:
        fetch(api, SPEC, START, START + 15 * (MAX_RANGE_POINTS - 1), 15.0)
    assert time.perf_counter() - began < 10
    message = str(refused.value)
    assert message.startswith("Prometheus's answer to the query of gpu_utilization (up) holds")
    assert f"{MAX_ANSWER_POINTS:,} points in all its series" in message


GPU_APP = """\
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: ml}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - {{name: server, image: triton, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: {name}, namespace: ml}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}
  minReplicas: 1
  maxReplicas: 8
  metrics:
  - type: Pods
    pods:
      metric: {{name: gpu_utilization}}
      target: {{type: AverageValue, averageValue: "60"}}
"""


def _hostile_answers(flood: bytes) -> Answer:
    """``flood``'s metric answered with ``flood`` (too many points), ``crowd``'s
    kube-state-metrics replicas 300,000,000, the rest as a steady load on 2 pods."""

    def answer(query: str, start: float, end: float, step: float) -> bytes:
        if "kube_" in query:
            replicas = "3e8" if '"crowd"' in query else "2"
            return matrix(points(start, end, step, replicas))
        if "flood-" in query:
            return flood
        return matrix(points(start, end, step, "50"), points(start, end, step, "50"))

    return answer


# Runs a command and says, on its last line of stderr, the largest resident size of the
# command's process: a child forked from the test process would count the test's own pages
# (Linux keeps the high-water mark across exec), one forked from this small one does not.
_PEAK = (
    "import resource, subprocess, sys, time\n"
    "began = time.perf_counter()\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(f'\\n{code} {time.perf_counter() - began} {peak}', file=sys.stderr)\n"
)


def _measured(command: list[str], stderr: Path) -> tuple[int, float, int]:
    """``command`` run with its stderr in ``stderr``: its exit code, seconds and peak
    resident size in KiB."""
    with stderr.open("wb") as errors:
        subprocess.run([sys.executable, "-c", _PEAK, *command], stderr=errors, check=False)
    text = stderr.read_text()
    said, _, measured = text.rstrip("\n").rpartition("\n")
    stderr.write_text(said)
    code, seconds, peak = measured.split()
    return int(code), float(seconds), int(peak)


@pytest.mark.slow
def test_replay_of_hostile_answers_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """`gpulint replay` against answers over every bound: 300,000,000 observed replicas and an
    answer of 2,200,000 points under the byte limit. The autoscaler with the large answer is
    not replayed, said on one line naming the query and the bound; the others are; in under
    10 s and 120 MiB (before, 2.4 GB and a MemoryError, then 1.2 GB and 52 s)."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "adapter.yaml").write_text((SCENARIOS / "prometheus-adapter.yaml").read_text())
    (manifests / "apps.yaml").write_text(
        "".join(GPU_APP.format(name=name) for name in ("fine", "flood", "crowd"))
    )
    server = RangeServer(_hostile_answers(_too_many_points(200))).start()
    out, err = tmp_path / "replay.json", tmp_path / "stderr"
    command = [sys.executable, "-m", "gpulint", "replay", str(manifests), "--no-config"]
    command += ["--prometheus", server.url, "--end", str(START + 7200), "--range", "2h"]
    command += ["--format", "json", "-o", str(out), "--fail-on", "never"]
    try:
        code, seconds, peak = _measured(command, err)
    finally:
        server.stop()
    errors = err.read_text()
    assert code == 0, errors
    assert seconds < 10
    assert peak < 120 * 1024, peak  # KiB: about 55 MiB, most of it the interpreter and imports
    lines = errors.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "gpulint: HorizontalPodAutoscaler ml/flood not replayed: Prometheus's answer to the "
        'query of gpu_utilization (avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",'
        'exported_pod=~"flood-'
    )
    assert lines[0].endswith(
        "holds more than a replay reads, 1,000,000 points in all its series: a longer --step "
        "asks for fewer points"
    )
    replays = {r["autoscaler"]["name"]: r for r in json.loads(out.read_text())["replays"]}
    assert set(replays) == {"fine", "crowd"}
    first = replays["crowd"]["events"][0]
    assert (first["from"], first["to"], first["reason"]) == (300_000_000, 8, "above maxReplicas")


# --- any answer: replayed, or why not ----------------------------------------------------------

WINDOW = [START + 15 * i for i in range(41)]  # ten minutes at 15 s
_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6))
_times = st.one_of(
    st.sampled_from(WINDOW),
    st.sampled_from(WINDOW).map(lambda t: t + 0.5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**80), 2**80),
    _scalars,
)
_values = st.one_of(
    st.sampled_from(
        [
            "0",
            "50",
            "100",
            "1e308",
            "-1e308",
            "1.7976931348623157e308",
            "5e-324",
            "NaN",
            "+Inf",
            "-Inf",
            "3e8",
            "2147483648",
            "-1",
            "0x10",
            "",
            " 5",
            "1_0",
            "9" * 70,
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers().map(str),
    _scalars,
)
_points = st.one_of(
    st.tuples(_times, _values).map(list),
    st.lists(st.one_of(_times, _values), max_size=3),
    _scalars,
)
# In order, shuffled, or with points repeated: the same grid, as Prometheus would not send it.
_ordered = st.lists(st.tuples(st.sampled_from(WINDOW), _values), max_size=45).map(
    lambda pairs: [[t, v] for t, v in sorted(pairs, key=lambda p: p[0])]
)
_series_values = st.one_of(
    _ordered,
    st.lists(_points, max_size=45),
    st.lists(st.tuples(st.sampled_from(WINDOW), _values).map(list), max_size=45),
    _scalars,
)
_labels = st.dictionaries(st.text(max_size=4), st.one_of(st.text(max_size=4), _scalars), max_size=2)
_series = st.one_of(
    st.fixed_dictionaries({"metric": _labels, "values": _series_values}),
    st.fixed_dictionaries({"metric": _labels, "value": _points}),  # a vector's
    st.dictionaries(st.sampled_from(["metric", "values", "value"]), _scalars, max_size=3),
    _scalars,
)
_data = st.one_of(
    st.fixed_dictionaries(
        {
            "resultType": st.sampled_from(["matrix", "matrix", "vector", "scalar", "string", 1]),
            "result": st.one_of(st.lists(_series, max_size=4), _scalars),
        }
    ),
    _scalars,
)
_envelopes = st.one_of(
    st.fixed_dictionaries(
        {"status": st.sampled_from(["success", "success", "error"]), "data": _data}
    ),
    st.fixed_dictionaries({"status": st.just("error"), "errorType": _scalars, "error": _scalars}),
    _scalars,
)
# Most answers a matrix of series whose points are hostile, the rest anything at all.
_matrices = st.fixed_dictionaries(
    {
        "status": st.just("success"),
        "data": st.fixed_dictionaries(
            {
                "resultType": st.just("matrix"),
                "result": st.lists(
                    st.fixed_dictionaries({"metric": _labels, "values": _series_values}),
                    max_size=4,
                ),
            }
        ),
    }
)


@st.composite
def _bodies(draw: st.DrawFn) -> bytes:
    envelope = draw(_matrices if draw(st.integers(0, 3)) else _envelopes)
    body = json.dumps(envelope).encode()  # NaN and Infinity as JSON's literals
    if draw(st.integers(0, 9)) == 0:
        return body[: draw(st.integers(0, max(len(body) - 1, 0)))]  # a body that ends early
    return body


KEDA_SPEC = dataclasses.replace(
    SPEC,
    kind="ScaledObject",
    metrics=(ReplayMetric("s0-prometheus", "External", "AverageValue", 10.0, "sum(up)"),),
    keda=KedaActivation(),
)


@pytest.fixture(scope="module")
def any_answer() -> Iterator[RangeServer]:
    server = RangeServer(steady("50", "2")).start()
    yield server
    server.stop()


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(_bodies(), _bodies(), st.sampled_from([SPEC, KEDA_SPEC]), st.booleans())
def test_any_answer_is_replayed_or_refused_with_a_reason(
    any_answer: RangeServer, metric: bytes, replicas: bytes, spec: ReplaySpec, compare: bool
) -> None:
    """Whatever Prometheus answers (well-formed or not, numbers at the ends of a float, NaN
    and infinities, points repeated, out of order or off the grid), the replay either runs
    and every writer writes it, or says why not: never a traceback."""
    any_answer.answer = lambda query, *_: replicas if "kube_" in query else metric
    api = PrometheusAPI(any_answer.url, {}, Deadline(30))
    try:
        history = fetch(api, spec, WINDOW[0], WINDOW[-1], 15.0)
    except (HistoryError, PrometheusError) as refused:
        event(f"refused: {type(refused).__name__}")
        assert str(refused)
        return
    finally:
        api.close()
    assert len(history.times) == len(WINDOW)
    for series in (*history.values, history.observed):
        assert all(v is None or math.isfinite(v) for v in series)
    assert all(o is None or 0 <= o <= INT32_MAX for o in history.observed)
    event("replayed" if any(v is not None for v in history.values[0]) else "replayed no value")
    replayed = replay_one(spec, history, _inventory(), compare_fix=compare)
    _write_every_format(replayed)


@functools.cache
def _inventory() -> Inventory:
    return Inventory(Settings())


def _write_every_format(replayed: Replayed) -> None:
    from gpulint.replay import render

    window = (WINDOW[0], WINDOW[-1], 15.0)
    for writer in (render.render_text, render.render_json, render.render_html):
        out = io.StringIO()
        writer([replayed], *window, out)
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", out.getvalue())
        if writer is render.render_json:
            json.loads(out.getvalue(), parse_constant=_no_constant)
    out = io.StringIO()
    render.render_markdown([replayed], *window, out)
    ET.fromstring(render.render_svg(replayed))


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} in the JSON report")
