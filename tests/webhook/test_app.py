"""The fail-open contract for an internal error, in process.

A bug in a rule cannot be provoked through a real process without shipping the bug, so this
one case drives the real application with an evaluator that raises the way a broken rule
would (everything else runs for real in test_serve.py and test_serve_cluster.py).
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from gpulint.webhook.app import WebhookApp
from gpulint.webhook.evaluator import StandaloneEvaluator
from gpulint.webhook.logs import JsonLog
from gpulint.webhook.metrics import WebhookMetrics

from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection

from . import objects
from .harness import Metrics, admission_review


class RuleBug(StandaloneEvaluator):
    """The real evaluation, followed by the kind of error a rule with a bug raises."""

    def evaluate(
        self,
        obj: dict[str, Any],
        operation: str,
        old: dict[str, Any] | None,
        deadline: float,
        embedded: Any = None,
    ) -> list[Finding]:
        super().evaluate(obj, operation, old, deadline)
        secret = obj["metadata"]["annotations"]["team.example/token"]
        raise KeyError(f"no field {secret}")


def test_an_internal_error_allows_with_a_warning_counted_and_logged() -> None:
    stream = io.StringIO()
    webhook = WebhookApp(
        RuleBug(Settings(), Selection()),
        deny_on="error",
        deadline=2.0,
        max_body_bytes=1 << 20,
        adapter_configmaps=None,
        log=JsonLog(stream),
        metrics=WebhookMetrics(),
    )
    obj = objects.isvc_with_mode_field()
    obj["metadata"]["annotations"] = {"team.example/token": "s3cr3t"}
    review = admission_review(obj, uid="bug")

    async def ask() -> tuple[dict[str, Any], Metrics]:
        async with TestClient(TestServer(webhook.application())) as client:
            answer = await client.post("/validate", json=review)
            assert answer.status == 200
            body = await answer.json()
            return body, Metrics(await (await client.get("/metrics")).text())

    body, metrics = asyncio.run(ask())
    assert body["response"] == {
        "uid": "bug",
        "allowed": True,
        "warnings": [
            "gpulint could not evaluate InferenceService default/triton-gpu: an internal "
            "error (KeyError); the request was allowed unchecked"
        ],
    }
    assert metrics.value("gpulint_webhook_fail_open_total", reason="error") == 1
    (record,) = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert record["level"] == "error" and record["verdict"] == "fail-open"
    assert record["reason"] == "error" and record["error"] == "KeyError"
    assert "test_app.py:" in record["at"] and record["at"].endswith(" in evaluate")
    assert "s3cr3t" not in stream.getvalue()


def test_a_rule_failing_on_the_object_warns_and_the_other_denials_still_deny(
    monkeypatch: Any,
) -> None:
    """GL799 for the rule that failed, a warning; GL109 still refuses the removed API."""
    from gpulint.engine import registry as engine

    info = next(i for i in engine.rule_index() if i.id == "GL108")
    spec = engine.load_rule(info)

    def broken(item: Any, inventory: Any, ctx: Any) -> Any:
        raise ArithmeticError("a rule that fails on this object")
        yield

    monkeypatch.setitem(engine._loaded, "GL108", spec._replace(check=broken))
    webhook = WebhookApp(
        StandaloneEvaluator(Settings(), Selection()),
        deny_on="error",
        deadline=2.0,
        max_body_bytes=1 << 20,
        adapter_configmaps=None,
        log=JsonLog(io.StringIO()),
        metrics=WebhookMetrics(),
    )
    hpa = {
        "apiVersion": "autoscaling/v2beta2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 3,
        },
    }

    async def ask() -> dict[str, Any]:
        async with TestClient(TestServer(webhook.application())) as client:
            answer = await client.post("/validate", json=admission_review(hpa, uid="r"))
            assert answer.status == 200
            body: dict[str, Any] = await answer.json()
            return body

    response = asyncio.run(ask())["response"]
    assert response["allowed"] is False
    assert "GL109" in response["status"]["message"]
    assert any(w.startswith("GL799") for w in response["warnings"])
