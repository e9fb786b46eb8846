"""Adapter queries written to stall gpulint: ``sum(a)+sum(a)+...`` over 84 KB in a ConfigMap
anyone may label as a prometheus-adapter config. The analysis is linear and bounded
(``gpulint.metrics.promql``, ``adapter.MAX_QUERY_CHARS``); reviews that meet such a ConfigMap in the
cache are still judged within their deadline, over the real TLS server and the fake API
server."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulint.chain.adapter import MAX_QUERY_CHARS
from gpulint.core.deadline import DeadlineExceeded
from gpulint.metrics.promql import (
    _placed_aggregations,
    analysis_deadline,
    metric_names_in_query,
    outermost_aggregations,
)

from ..conftest import lint_paths
from ..kubefake import FakeCluster, KubeFake
from . import objects
from .harness import Certificates, Webhook, admission_review, serving_cluster
from .test_serve_cluster import ADAPTER_CONFIGMAP

HOSTILE = "+".join(["sum(a)"] * 12_000)  # 84 KB
NEAR_LIMIT = "+".join(["sum(a)"] * ((MAX_QUERY_CHARS - 6) // 7))  # just under the bound
# The limit of the deployment (deploy/base/deployment.yaml).
MEMORY_LIMIT = 512 * 1024 * 1024


def adapter_configmap(name: str, query: str) -> dict[str, Any]:
    config = yaml.safe_load(ADAPTER_CONFIGMAP["data"]["config.yaml"])
    config["rules"][0]["metricsQuery"] = query
    cm = copy.deepcopy(ADAPTER_CONFIGMAP)
    cm["metadata"]["name"] = name
    cm["data"] = {"config.yaml": yaml.safe_dump(config, width=1 << 30)}
    return cm


# --- the analysis -----------------------------------------------------------------------------


def _outermost_by_definition(query: str) -> list[Any]:
    """Aggregations not inside another, by the definition: every pair compared."""
    placed = _placed_aggregations(query)
    return [p for p in placed if not any(o is not p and o.start < p.start < o.end for o in placed)]


_PIECES = st.sampled_from(
    ["sum(", "avg(", "max by (pod)(", "count(", ")", ")", " by (pod)", " without (gpu)", "x",
     '{a="(("}', "rate(", "[5m]", "+", "/", " ", "<<.Series>>", "topk(3,"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_outermost_aggregations_match_their_definition(query: str) -> None:
    assert outermost_aggregations(query) == _outermost_by_definition(query)


def test_an_analysis_past_its_deadline_stops() -> None:
    query = "+".join(f"sum(n{i})" for i in range(5_000)) + " "  # not analysed before
    with analysis_deadline(time.monotonic() - 1), pytest.raises(DeadlineExceeded):
        metric_names_in_query(query)
    assert len(metric_names_in_query(query)) == 5_000  # no deadline: the whole answer


def test_a_query_over_the_bound_is_a_warning_not_an_analysis(tmp_path: Path) -> None:
    path = tmp_path / "adapter.yaml"
    path.write_text(yaml.safe_dump(adapter_configmap("hostile", HOSTILE)))
    (finding,) = [f for f in lint_paths(path) if f.rule == "GL404"]
    assert str(finding.severity) == "warning"
    assert finding.message == (
        "Rule rules[0] in ConfigMap hostile: has a metricsQuery of 83,999 characters, over the "
        "16,384 gpulint analyses: it was not checked, and no rule reads it."
    )
    near = tmp_path / "near.yaml"
    near.write_text(yaml.safe_dump(adapter_configmap("near", NEAR_LIMIT)))
    messages = [f.message for f in lint_paths(near) if f.rule == "GL404"]
    assert messages and not any("not checked" in m for m in messages)


# --- the webhook with hostile ConfigMaps in its cache -------------------------------------------


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeFake]:
    cluster = FakeCluster()
    world = [
        objects.deployment("llm-server", "llm", gpus=2),
        objects.gpu_hpa("llm-server-gpu", "llm", "llm-server"),
        ADAPTER_CONFIGMAP,
        adapter_configmap("hostile-1", HOSTILE),
        adapter_configmap("hostile-2", HOSTILE),
        adapter_configmap("near-1", NEAR_LIMIT),
        adapter_configmap("near-2", NEAR_LIMIT),
    ]
    for obj in world:
        cluster.apply(copy.deepcopy(obj))
    with KubeFake(cluster) as server:
        yield server


@pytest.fixture(scope="module")
def webhook(
    kube: KubeFake, module_certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    directory = tmp_path_factory.mktemp("serve-promql")
    with serving_cluster(kube, module_certificates, directory) as served:
        yield served


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.slow
def test_denials_stand_while_hostile_adapter_queries_are_cached(webhook: Webhook) -> None:
    for index in range(6):
        deployment = objects.deployment("llm-server", "llm", gpus=2, image=f"v{index}")
        limits = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        limits["nvidia.com/gpu"] = "0.5"
        response = webhook.review(
            admission_review(deployment, "UPDATE", old=objects.deployment("llm-server", "llm"))
        )
        assert response["allowed"] is False, response
        hpa = objects.cpu_hpa("llm-server", "llm", "llm-server")
        assert webhook.review(admission_review(hpa))["allowed"] is False
        # a review that reads the hostile rules themselves (the HPA's metric is theirs)
        gpu = webhook.review(admission_review(objects.gpu_hpa("llm-server-gpu", "llm")))
        assert gpu["allowed"] is True
    metrics = webhook.metrics()
    assert metrics.value("gpulint_webhook_fail_open_total") == 0
    assert metrics.value("gpulint_webhook_requests_total", verdict="denied") == 12
    assert _rss(webhook.process.pid) < MEMORY_LIMIT // 2
