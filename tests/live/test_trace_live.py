"""``gpulint trace --prometheus`` against the real Prometheus servers of the live world: one
that scrapes the exporter and serves the HPAs' values, one whose scrape config leaves the
exporter out, one whose exporter target is down."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpulint.cli import main

from .conftest import LIVE_FIXTURES
from .world import World

pytestmark = [pytest.mark.live, pytest.mark.slow]

CORRECT = LIVE_FIXTURES / "correct" / "stack"
# The stack keeps the chart's selector (release: <release>) and the monitor has no release label.
MONITOR = (LIVE_FIXTURES / "GL806" / "fail_exporter_left_out.yaml").read_text()


def _trace(
    paths: list[str], url: str, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, object]]:
    code = main(["trace", "-f", "json", "--prometheus", url, *args, *paths])
    return code, json.loads(capsys.readouterr().out)


def _links(data: dict[str, object], hpa: str) -> dict[str, dict[str, object]]:
    (traced,) = [t for t in data["traces"] if t["autoscaler"]["name"] == hpa]  # type: ignore[union-attr,index]
    return {link["stage"]: link for link in traced["links"]}


@pytest.fixture
def with_monitor(tmp_path: Path) -> Path:
    unit = tmp_path / "unit"
    shutil.copytree(CORRECT, unit)
    (unit / "monitor.yaml").write_text(MONITOR)
    return unit


def test_a_whole_chain_is_confirmed_live(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = _trace([str(CORRECT)], world.url("stack"), capsys)
    assert code == 0, data
    links = _links(data, "triton")
    assert links["scrape"]["status"] == "ok"
    assert "dcgm-exporter targets up" in str(links["scrape"]["detail"])
    assert links["adapter-rule"]["status"] == "ok"
    assert "series for its seriesQuery" in str(links["adapter-rule"]["detail"])
    assert links["metrics-api"]["status"] == "ok"
    assert "returns 2 values for Deployment ml/triton" in str(links["metrics-api"]["detail"])
    assert "observed" in str(links["autoscaler"]["detail"])


def test_a_prometheus_that_leaves_the_exporter_out(
    world: World, with_monitor: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = _trace([str(with_monitor)], world.url("noexporter"), capsys)
    assert code == 1
    links = _links(data, "triton")
    assert links["scrape"]["status"] == "broken"
    assert links["scrape"]["findings"] == ["GL601", "GL806"]
    assert "0 of 0 dcgm-exporter targets up" in str(links["scrape"]["detail"])
    assert links["adapter-rule"]["status"] == "broken"
    assert "GL801" in links["adapter-rule"]["findings"]  # type: ignore[operator]


def test_a_prometheus_whose_exporter_target_is_down(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = _trace([str(CORRECT)], world.url("exporterdown"), capsys)
    assert code == 1
    links = _links(data, "triton")
    assert links["scrape"]["status"] == "broken"
    assert links["scrape"]["findings"] == ["GL806"]
    assert "0 of 1 dcgm-exporter targets up" in str(links["scrape"]["detail"])
    assert links["metrics-api"]["status"] != "ok"
