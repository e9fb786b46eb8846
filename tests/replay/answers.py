"""A server that answers the replay's range queries as a test says, for answers no Prometheus
gives (hostile, malformed, huge): ``/api/v1/query_range`` answered by a function of the query
and the grid it asks for. The replay's ordinary answers come from a real Prometheus
(tests/replay/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.live.harness import AppServer

# (query, start, end, step) -> the body of the answer
Answer = Callable[[str, float, float, float], bytes]


def envelope(data: Any) -> bytes:
    """A successful API answer around ``data``; NaN and infinities as Python's json writes
    them (``NaN``, ``Infinity``), which no JSON parser must choke on."""
    return json.dumps({"status": "success", "data": data}).encode()


def matrix(*series: list[Any], labels: str = "pod") -> bytes:
    """A matrix of ``series`` (each its ``values``), labelled ``{labels: "p<n>"}``."""
    return envelope(
        {
            "resultType": "matrix",
            "result": [{"metric": {labels: f"p{n}"}, "values": v} for n, v in enumerate(series)],
        }
    )


def points(start: float, end: float, step: float, value: str) -> list[list[Any]]:
    """``value`` at every time of the grid a request asks for."""
    count = int((end - start) / step + 1e-9) + 1
    return [[start + i * step, value] for i in range(count)]


def steady(metric: str, replicas: str) -> Answer:
    """Every metric query answered with one series at ``metric``, kube-state-metrics' with
    ``replicas``."""

    def answer(query: str, start: float, end: float, step: float) -> bytes:
        value = replicas if "kube_" in query else metric
        return matrix(points(start, end, step, value))

    return answer


class RangeServer(AppServer):
    """``/api/v1/query_range`` answered by ``answer`` (which a test may change between
    requests); the queries asked are kept in ``asked``."""

    def __init__(self, answer: Answer) -> None:
        super().__init__()
        self.answer = answer
        self.asked: list[str] = []

    def application(self) -> web.Application:
        app = web.Application(client_max_size=1 << 20)
        app.router.add_route("*", "/api/v1/query_range", self._answer)
        return app

    async def _answer(self, request: web.Request) -> web.Response:
        form = request.query if request.method == "GET" else await request.post()
        query = str(form["query"])
        start, end, step = (float(str(form[key])) for key in ("start", "end", "step"))
        self.asked.append(query)
        body = self.answer(query, start, end, step)
        return web.Response(body=body, content_type="application/json")
