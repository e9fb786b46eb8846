"""Where a review is answered: skipped at once, evaluated on the event loop, or in a review
thread; and what happens when the thread is late or gone.

In process, with the real application and the real standalone evaluator (wrapped to record
the thread that evaluated, or to stall the way a rule stuck in C code would, which cannot
be provoked through a real process without shipping the stall). The same paths over TLS in
a real process are test_serve.py's and test_embedded_stall.py's.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from gpulint.webhook.app import (
    INLINE,
    INLINE_BODY_BYTES,
    SKIPPED,
    WORKER,
    WebhookApp,
    review_route,
)
from gpulint.webhook.evaluator import ClusterEvaluator, StandaloneEvaluator
from gpulint.webhook.logs import JsonLog
from gpulint.webhook.metrics import WebhookMetrics
from gpulint.webhook.review import parse_review

from gpulint.cluster.decoding import MAX_OBJECT_DEPTH
from gpulint.cluster.kinds import AdapterConfigMapSelector
from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.runner import Selection

from . import objects
from .harness import Metrics, admission_review

ADAPTER = AdapterConfigMapSelector.parse()


def _adapter_configmap() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "prometheus-adapter",
            "namespace": "monitoring",
            "labels": {"app.kubernetes.io/name": "prometheus-adapter"},
        },
        "data": {"config.yaml": "rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n"},
    }


def _padded(obj: dict[str, Any], size: int) -> dict[str, Any]:
    """``obj`` with an annotation that makes its review's body at least ``size`` bytes."""
    obj["metadata"].setdefault("annotations", {})["team.example/notes"] = "x" * size
    return obj


def _deep(levels: int) -> dict[str, Any]:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"a": value}
    return value  # type: ignore[no-any-return]


def _route(obj: dict[str, Any], operation: str = "CREATE", **kwargs: Any) -> str:
    body = json.dumps(admission_review(obj, operation, **kwargs)).encode()
    return review_route(parse_review(body), len(body), ADAPTER)[0]


def test_small_reviews_of_evaluated_kinds_are_inline() -> None:
    assert _route(objects.deployment()) == INLINE
    assert _route(objects.cpu_hpa()) == INLINE
    assert _route(objects.isvc_with_mode_field()) == INLINE
    assert _route(objects.deployment(), "UPDATE", old=objects.deployment(image="v0")) == INLINE


def test_objects_no_rule_reads_are_skipped() -> None:
    assert _route(objects.deployment(), "DELETE", old=objects.deployment()) == SKIPPED
    assert _route(objects.configmap()) == SKIPPED  # not the adapter's
    assert _route(objects.deployment(), sub_resource="scale") == SKIPPED
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "llm"}}
    assert _route(pod) == SKIPPED


def test_large_deep_and_adapter_reviews_go_to_a_thread() -> None:
    assert _route(_adapter_configmap()) == WORKER
    assert _route(_padded(objects.deployment(), INLINE_BODY_BYTES)) == WORKER
    deep = objects.deployment()
    deep["spec"]["template"]["metadata"]["annotations"] = {"x": _deep(MAX_OBJECT_DEPTH + 5)}
    assert _route(deep) == WORKER
    # Just under the bound stays inline: the bound is the body's size, nothing else.
    assert _route(_padded(objects.deployment(), INLINE_BODY_BYTES - 2000)) == INLINE


class Recording(StandaloneEvaluator):
    """The real evaluation, noting the thread it ran in; stalls in a review thread for
    ``stall`` seconds first (time.sleep stands for a rule stuck in C code)."""

    def __init__(self, stall: float = 0.0, hold: bool = True) -> None:
        super().__init__(Settings(), Selection())
        self.threads: list[str] = []
        self.stall = stall
        self.hold = hold

    def try_hold(self) -> bool:
        return self.hold

    def evaluate(
        self,
        obj: dict[str, Any],
        operation: str,
        old: dict[str, Any] | None,
        deadline: float,
        embedded: Any = None,
    ) -> list[Finding]:
        name = threading.current_thread().name
        self.threads.append(name)
        if self.stall and name != "MainThread":
            time.sleep(self.stall)
        return super().evaluate(obj, operation, old, deadline)


def _app(evaluator: StandaloneEvaluator, deadline: float = 2.0) -> WebhookApp:
    return WebhookApp(
        evaluator,
        deny_on="error",
        deadline=deadline,
        max_body_bytes=3 << 20,
        adapter_configmaps=ADAPTER,
        log=JsonLog(io.StringIO()),
        metrics=WebhookMetrics(),
    )


async def _ask(
    client: TestClient[Any, Any], obj: dict[str, Any], uid: str
) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    answer = await client.post("/validate", json=admission_review(obj, uid=uid))
    assert answer.status == 200
    body: dict[str, Any] = await answer.json()
    assert body["response"]["uid"] == uid
    return body["response"], time.monotonic() - started


async def _metrics(client: TestClient[Any, Any]) -> Metrics:
    return Metrics(await (await client.get("/metrics")).text())


def test_inline_reviews_are_evaluated_on_the_loop_and_large_ones_in_a_thread() -> None:
    evaluator = Recording()
    webhook = _app(evaluator)

    async def ask() -> tuple[dict[str, Any], dict[str, Any], Metrics]:
        async with TestClient(TestServer(webhook.application())) as client:
            small, _ = await _ask(client, objects.isvc_with_mode_field(), "small")
            large_object = _padded(objects.isvc_with_mode_field(), INLINE_BODY_BYTES)
            large, _ = await _ask(client, large_object, "large")
            await _ask(client, objects.configmap(), "skipped")
            return small, large, await _metrics(client)

    small, large, metrics = asyncio.run(ask())
    webhook.close()
    assert evaluator.threads[0] == "MainThread"
    assert evaluator.threads[1].startswith("gpulint-review")
    assert len(evaluator.threads) == 2  # the ConfigMap that is not the adapter's: no engine
    # Both paths judge the same way: the padding moved the review, it did not let it through.
    for response in (small, large):
        assert response["allowed"] is False
        assert "GL301" in response["status"]["message"]
    assert metrics.value("gpulint_webhook_review_routes_total", route="inline") == 1
    assert metrics.value("gpulint_webhook_review_routes_total", route="worker") == 1
    assert metrics.value("gpulint_webhook_review_routes_total", route="skipped") == 1


def test_a_busy_cache_sends_the_review_to_a_thread_and_it_is_still_judged() -> None:
    evaluator = Recording(hold=False)
    webhook = _app(evaluator)

    async def ask() -> dict[str, Any]:
        async with TestClient(TestServer(webhook.application())) as client:
            response, _ = await _ask(client, objects.isvc_with_mode_field(), "busy")
            return response

    response = asyncio.run(ask())
    webhook.close()
    assert evaluator.threads and evaluator.threads[0].startswith("gpulint-review")
    assert response["allowed"] is False


def test_the_cluster_evaluator_does_not_wait_for_a_lock_another_thread_holds() -> None:
    class Cache:
        lock = threading.RLock()

    evaluator = ClusterEvaluator(Cache(), Selection())  # type: ignore[arg-type]
    assert evaluator.try_hold()  # free: taken
    evaluator.release()
    taken, release = threading.Event(), threading.Event()

    def holder() -> None:
        with Cache.lock:
            taken.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    taken.wait(10)
    started = time.monotonic()
    assert not evaluator.try_hold()
    assert time.monotonic() - started < 0.1
    release.set()
    thread.join(10)
    assert evaluator.try_hold()
    evaluator.release()


def test_a_thread_past_the_deadline_fails_open_and_the_loop_keeps_answering() -> None:
    evaluator = Recording(stall=1.5)
    webhook = _app(evaluator, deadline=0.3)

    async def ask() -> tuple[dict[str, Any], float, dict[str, Any], list[float], Metrics]:
        async with TestClient(TestServer(webhook.application())) as client:
            large_object = _padded(objects.isvc_with_mode_field(), INLINE_BODY_BYTES)
            stuck = asyncio.create_task(_ask(client, large_object, "stuck"))
            await asyncio.sleep(0.05)
            health = []
            for _ in range(3):
                started = time.monotonic()
                assert (await client.get("/healthz")).status == 200
                health.append(time.monotonic() - started)
            small, _ = await _ask(client, objects.isvc_with_mode_field(), "small")
            response, seconds = await stuck
            return response, seconds, small, health, await _metrics(client)

    response, seconds, small, health, metrics = asyncio.run(ask())
    webhook.close()
    assert response["allowed"] is True
    assert response["warnings"] == [
        "gpulint could not evaluate InferenceService default/triton-gpu: its deadline of "
        "0.3 s passed; the request was allowed unchecked"
    ]
    assert seconds < 1.0  # the deadline and its grace, not the 1.5 s stall
    assert max(health) < 0.25
    assert small["allowed"] is False  # inline, while the thread is stuck
    assert metrics.value("gpulint_webhook_fail_open_total", reason="deadline") == 1


def test_without_review_threads_large_reviews_fail_open_and_small_ones_are_judged() -> None:
    evaluator = Recording()
    webhook = _app(evaluator)
    webhook.close()  # the pool takes no more work, as after a shutdown

    async def ask() -> tuple[dict[str, Any], dict[str, Any], Metrics]:
        async with TestClient(TestServer(webhook.application())) as client:
            large_object = _padded(objects.isvc_with_mode_field(), INLINE_BODY_BYTES)
            large, _ = await _ask(client, large_object, "large")
            small, _ = await _ask(client, objects.isvc_with_mode_field(), "small")
            return large, small, await _metrics(client)

    large, small, metrics = asyncio.run(ask())
    assert large["allowed"] is True
    assert large["warnings"] == [
        "gpulint could not evaluate InferenceService default/triton-gpu: an internal error "
        "(RuntimeError); the request was allowed unchecked"
    ]
    assert small["allowed"] is False
    assert metrics.value("gpulint_webhook_fail_open_total", reason="error") == 1


def test_a_failing_hold_fails_open_with_the_reason() -> None:
    class Broken(Recording):
        def try_hold(self) -> bool:
            raise OSError("the lock is gone")

    webhook = _app(Broken())

    async def ask() -> dict[str, Any]:
        async with TestClient(TestServer(webhook.application())) as client:
            response, _ = await _ask(client, objects.cpu_hpa(), "r")
            return response

    response = asyncio.run(ask())
    webhook.close()
    assert response["allowed"] is True
    assert "an internal error (OSError)" in response["warnings"][0]
