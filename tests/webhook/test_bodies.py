"""Request bodies and their pool (``webhook.bodies``), in process: room is taken as bytes
arrive, large bodies leave the small-body reserve alone, a waiting body gets room as soon as
it is given back, and a review that finds none in time is a 429 counted as a possible
fail-open. Over TLS in a real process, under attack: test_hostile_connections.py."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from gpulint.webhook.app import WebhookApp
from gpulint.webhook.bodies import BodyPool, small_reserve
from gpulint.webhook.evaluator import StandaloneEvaluator
from gpulint.webhook.logs import JsonLog
from gpulint.webhook.metrics import WebhookMetrics

from gpulint.engine.config import Settings
from gpulint.engine.runner import Selection

from . import objects
from .harness import Metrics, admission_review


def test_the_reserve_is_a_quarter_of_the_pool_as_far_as_the_largest_body_fits_beside_it() -> None:
    assert small_reserve(32 << 20, 6 << 20) == 8 << 20
    assert small_reserve(8 << 20, 6 << 20) == 2 << 20
    assert small_reserve(6 << 20, 6 << 20) == 0


async def _large_bodies_leave_the_reserve_to_small_ones() -> None:
    pool = BodyPool(100, reserve=25)
    end = asyncio.get_running_loop().time() + 0.05
    async with pool.room(small=False) as large, pool.room(small=True) as small:
        assert await large.take(75, end)
        assert not await large.take(1, end)  # the reserve is not for it
        assert await small.take(25, end)  # it is for this one
        assert not await small.take(1, end)  # and the pool is full
        assert (pool.used, pool.large_used) == (100, 75)
    assert (pool.used, pool.large_used) == (0, 0)


async def _a_waiting_body_gets_room_as_soon_as_it_is_given_back() -> None:
    pool = BodyPool(100)
    loop = asyncio.get_running_loop()
    holder = pool.room(small=True)
    held = await holder.__aenter__()
    assert await held.take(100, loop.time() + 1)

    async def waiting() -> float:
        async with pool.room(small=True) as room:
            assert await room.take(10, loop.time() + 5)
            return loop.time()

    waiter = asyncio.create_task(waiting())
    await asyncio.sleep(0.05)
    given_back = loop.time()
    await holder.__aexit__(None, None, None)
    assert await waiter - given_back < 0.05


def _app(metrics: WebhookMetrics, log: io.StringIO) -> WebhookApp:
    return WebhookApp(
        StandaloneEvaluator(Settings(), Selection()),
        deny_on="error",
        deadline=1.0,
        max_body_bytes=4096,
        max_buffered_bytes=4096,
        adapter_configmaps=None,
        log=JsonLog(log),
        metrics=metrics,
    )


async def _a_body_that_finds_no_room_by_its_deadline_is_a_429_and_a_possible_fail_open() -> None:
    metrics, log = WebhookMetrics(), io.StringIO()
    webhook = _app(metrics, log)
    webhook._pool = pool = BodyPool(4096)
    loop = asyncio.get_running_loop()
    async with (
        pool.room(small=True) as held,
        TestClient(TestServer(webhook.application())) as client,
    ):
        assert await held.take(4000, loop.time() + 1)  # another body, all but 96 bytes
        started = loop.time()
        body = json.dumps(admission_review(objects.half_gpu_deployment())).encode()
        answer = await client.post("/validate", data=body)
        assert answer.status == 429
        assert 0.25 < loop.time() - started < 2
        status: dict[str, Any] = await answer.json()
        assert "(--max-buffered-bytes)" in status["message"]
        assert "within 1 s, the time a body has to arrive (--deadline" in status["message"]
    exposed = Metrics(metrics.exposition().decode())
    assert exposed.value("gpulint_webhook_invalid_requests_total", reason="busy") == 1
    assert exposed.value("gpulint_webhook_possible_fail_open_total", reason="busy") == 1
    (record,) = [
        r
        for r in map(json.loads, log.getvalue().splitlines())
        if r["event"] == "possible-fail-open"
    ]
    assert (record["reason"], record["status"]) == ("busy", 429)
    # with the room given back, the same review is judged
    async with TestClient(TestServer(webhook.application())) as client:
        answer = await client.post("/validate", data=body)
        assert answer.status == 200
        assert (await answer.json())["response"]["allowed"] is False


def test_large_bodies_leave_the_reserve_to_small_ones() -> None:
    asyncio.run(_large_bodies_leave_the_reserve_to_small_ones())


def test_a_waiting_body_gets_room_as_soon_as_it_is_given_back() -> None:
    asyncio.run(_a_waiting_body_gets_room_as_soon_as_it_is_given_back())


def test_a_body_that_finds_no_room_by_its_deadline_is_a_429_and_a_possible_fail_open() -> None:
    asyncio.run(_a_body_that_finds_no_room_by_its_deadline_is_a_429_and_a_possible_fail_open())
