"""The webhook's log lines about requests anyone can send: one per kind of trouble and
interval, with the count since, however many arrive."""

from __future__ import annotations

import io
import json
import time

from gpulint.webhook.logs import JsonLog, Throttled


def _records(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_flood_of_one_trouble_is_one_line_then_one_per_interval_with_its_count() -> None:
    stream = io.StringIO()
    warn = Throttled(JsonLog(stream), "bad-request", interval=0.2)
    for _ in range(1000):
        warn("bad-json", reason="bad-json", message="the body is not JSON")
    warn("bad-kind", reason="bad-kind", message="request.kind")
    first = _records(stream)
    assert [(r["event"], r["reason"], r["times"]) for r in first] == [
        ("bad-request", "bad-json", 1),
        ("bad-request", "bad-kind", 1),
    ]
    time.sleep(0.25)
    warn("bad-json", reason="bad-json", message="the body is not JSON")
    later = _records(stream)[2:]
    # the 999 held back, and this one
    assert [(r["reason"], r["times"]) for r in later] == [("bad-json", 1000)]
