"""YAML from an admitted object, parsed in a child process that a limit can stop."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from gpulint.admission.embedded import EmbeddedWorker, ParseLimit
from gpulint.input.yamlparse import YamlError

CONFIG = "rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n  metricsQuery: avg(<<.Series>>)\n"


@pytest.fixture
def worker() -> Iterator[EmbeddedWorker]:
    worker = EmbeddedWorker(max_bytes=1 << 20, timeout=5.0)
    worker.start()
    yield worker
    worker.stop()


def test_parses_with_positions_like_the_parser_itself(worker: EmbeddedWorker) -> None:
    (document,) = worker.parse(CONFIG, 10, 4)
    assert document.value["rules"][0]["seriesQuery"] == "DCGM_FI_DEV_GPU_UTIL"
    assert document.value.key_position("rules") == (11, 5)
    assert document.value["rules"].item_position(0) == (12, 7)


def test_text_that_is_not_yaml_is_a_yaml_error(worker: EmbeddedWorker) -> None:
    with pytest.raises(YamlError) as raised:
        worker.parse("rules: [\n", 0, 0)
    assert raised.value.line >= 1


def test_too_large_is_refused_before_it_is_sent(worker: EmbeddedWorker) -> None:
    small = EmbeddedWorker(max_bytes=100)
    with pytest.raises(ParseLimit, match="over the limit of 100"):
        small.parse("x: " + "y" * 200)


def test_a_parse_over_its_time_is_killed_and_the_worker_recovers(worker: EmbeddedWorker) -> None:
    big = "".join(f"k{i}: [{', '.join(str(j) for j in range(20))}]\n" for i in range(12000))
    started = time.monotonic()
    with pytest.raises(ParseLimit, match="not parsed within"):
        worker.parse(big, timeout=0.05)
    assert time.monotonic() - started < 1.0
    assert worker.killed == 1
    (document,) = worker.parse(CONFIG)  # a new child answers the next one
    assert "rules" in document.value


def test_the_parser_reads_a_stopped_text_as_empty_and_says_why(worker: EmbeddedWorker) -> None:
    big = "".join(f"k{i}: [{', '.join(str(j) for j in range(20))}]\n" for i in range(12000))
    skipped: list[str] = []
    parse = worker.parser(time.monotonic() + 0.05, skipped)
    assert parse(big, 0, 0) == []
    assert len(skipped) == 1 and "not parsed within" in skipped[0]
    time.sleep(0.06)
    assert parse(CONFIG, 0, 0) == []  # past the deadline, nothing more is parsed
    assert len(skipped) == 2
