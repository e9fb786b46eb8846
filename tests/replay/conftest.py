"""A real Prometheus holding a recorded day of the scenarios' load (tests/replay/loads.py),
backfilled with ``promtool tsdb create-blocks-from openmetrics``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.live.conftest import require_prometheus
from tests.live.harness import PrometheusServer
from tests.replay import loads


@dataclass
class Recorded:
    url: str
    start: float  # the first sample; the last is a day later

    @property
    def end(self) -> float:
        return self.start + loads.DAY


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    require_prometheus()
    workdir = tmp_path_factory.mktemp("replay-prometheus")
    start = loads.history_start(time.time())
    server = PrometheusServer(
        workdir,
        loads.prometheus_config(),
        backfill=loads.openmetrics(
            start, {**loads.SCENARIOS, **loads.RECOMMEND_SCENARIOS}, loads.PER_POD
        ),
    )
    server.start()
    try:
        yield Recorded(server.url, start)
    finally:
        server.stop()
