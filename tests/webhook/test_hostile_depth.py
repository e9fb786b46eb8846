"""Objects nested deeper than Python's JSON reader goes (the API server passes on 10,000
levels): a review of one is judged on what gpulint reads and answered by its uid, never a
400 that ``failurePolicy: Ignore`` would turn into a silent allow; a cluster holding one
keeps the cache syncing and every other review judged."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from ..cluster.test_hostile_depth import claim_template, nested
from ..kubefake import FakeCluster, KubeFake
from . import objects
from .harness import Certificates, Webhook, admission_review, serving_cluster
from .test_hostile_webhook import Served

DEPTH = 1_500
DEEP = '{"a":' * DEPTH + "1" + "}" * DEPTH
UNDECODABLE = "gpulint_webhook_undecodable_objects_total"


def deep_review(obj: dict[str, Any], uid: str = "deep") -> bytes:
    """A review of ``obj`` with a field nested ``DEPTH`` levels in its first container."""
    obj = copy.deepcopy(obj)
    obj["spec"]["template"]["spec"]["containers"][0]["x-parameters"] = "\x00DEEP\x00"
    return json.dumps(admission_review(obj, uid=uid)).replace('"\\u0000DEEP\\u0000"', DEEP).encode()


def half_gpu_deployment() -> dict[str, Any]:
    """Refused on its own (GL501: half a GPU)."""
    obj = objects.deployment()
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = (
        "0.5"
    )
    return obj


@pytest.fixture
def served() -> Iterator[Served]:
    server = Served()
    yield server
    server.close()


def _answer(served: Served, body: bytes) -> dict[str, Any]:
    status, text, _ = served.post(body)
    assert status == 200, text
    answer = json.loads(text)
    assert answer["response"]["uid"] == "deep"
    response: dict[str, Any] = answer["response"]
    return response


def test_a_deep_object_that_a_finding_refuses_is_still_refused(served: Served) -> None:
    response = _answer(served, deep_review(half_gpu_deployment()))
    assert response["allowed"] is False
    assert "limits nvidia.com/gpu is not a whole number" in response["status"]["message"]
    assert served.metrics().value(UNDECODABLE, reason="too-deep", verdict="denied") == 1
    (record,) = [json.loads(line) for line in served.log_lines() if "object-too-deep" in line]
    assert record["uid"] == "deep" and record["verdict"] == "denied"


def test_a_deep_object_with_nothing_wrong_is_allowed_with_a_warning(served: Served) -> None:
    response = _answer(served, deep_review(objects.deployment()))
    assert response["allowed"] is True
    assert response["warnings"][0] == (
        "gpulint could not read all of Deployment llm/llm-server: parts of it nest deeper than "
        "100 levels; it was judged on the rest"
    )
    assert served.metrics().value(UNDECODABLE, reason="too-deep", verdict="warned") == 1
    assert any('"event":"object-too-deep"' in line for line in served.log_lines())


def test_deny_undecodable_refuses_a_deep_object() -> None:
    served = Served(deny_undecodable=True)
    try:
        response = _answer(served, deep_review(objects.deployment()))
        assert response["allowed"] is False
        assert response["status"]["message"].endswith(
            "gpulint serve --deny-undecodable refuses such objects"
        )
        assert served.metrics().value(UNDECODABLE, reason="too-deep", verdict="denied") == 1
        # a kind gpulint does not evaluate is never in the way
        other = {
            "apiVersion": "widgets.example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "s", "namespace": "llm"},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
        }
        assert _answer(served, deep_review(other))["allowed"] is True
    finally:
        served.close()


def test_a_shallow_object_is_not_counted(served: Served) -> None:
    status, _, _ = served.post(json.dumps(admission_review(objects.deployment())).encode())
    assert status == 200
    assert served.metrics().value(UNDECODABLE) == 0


# --- the real server, over TLS, on a cluster holding a deep object -----------------------------


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeFake]:
    cluster = FakeCluster()
    cluster.apply(objects.deployment("llm-server", "llm", gpus=2))
    cluster.create(claim_template("deep", nested()))
    with KubeFake(cluster) as server:
        yield server


@pytest.fixture(scope="module")
def webhook(
    kube: KubeFake, module_certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    directory = tmp_path_factory.mktemp("serve-deep")
    with serving_cluster(kube, module_certificates, directory, ready=False) as served:
        yield served


@pytest.mark.slow
def test_the_cache_syncs_and_other_reviews_are_judged(webhook: Webhook) -> None:
    ready = webhook.wait_ready()
    assert ready["ready"] is True
    assert ready["caches"]["resourceclaimtemplates.resource.k8s.io"] == "synced"
    assert webhook.metrics().value("gpulint_webhook_cache_too_deep_objects") == 1
    refused = webhook.review(admission_review(objects.cpu_hpa("llm-server", "llm", "llm-server")))
    assert refused["allowed"] is False
    assert "GL101" in refused["status"]["message"]
    assert "ResourceClaimTemplate ml/deep nests deeper than 100 levels" in webhook.log_text()


@pytest.mark.slow
def test_a_deep_hpa_review_over_tls_is_refused(webhook: Webhook) -> None:
    webhook.wait_ready()
    hpa = objects.cpu_hpa("llm-server", "llm", "llm-server")
    hpa["spec"]["x-parameters"] = "\x00DEEP\x00"
    body = json.dumps(admission_review(hpa, uid="deep-hpa")).replace('"\\u0000DEEP\\u0000"', DEEP)
    status, answer = webhook.post_raw(body.encode())
    assert status == 200, answer
    assert answer["response"]["uid"] == "deep-hpa"
    assert answer["response"]["allowed"] is False
    assert "GL101" in answer["response"]["status"]["message"]
