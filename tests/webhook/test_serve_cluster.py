"""``gpulint serve`` over a cluster: the real process reads the fake API server
(tests/kubefake.py) through a kubeconfig with the real ``kubernetes`` client, and answers
AdmissionReviews about objects that meet what the cluster already holds."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..conftest import lint_paths
from ..kubefake import FakeCluster, KubeFake
from . import objects
from .harness import Certificates, Webhook, admission_review, serving_cluster

ADAPTER_CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "prometheus-adapter",
        "namespace": "monitoring",
        "labels": {"app.kubernetes.io/name": "prometheus-adapter"},
    },
    "data": {
        "config.yaml": yaml.safe_dump(
            {
                "rules": [
                    {
                        "seriesQuery": 'DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}',
                        "resources": {
                            "overrides": {
                                "namespace": {"resource": "namespace"},
                                "pod": {"resource": "pod"},
                            }
                        },
                        "name": {"matches": "^DCGM_FI_DEV_GPU_UTIL$", "as": "gpu_utilization"},
                        "metricsQuery": "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
                    }
                ]
            },
            sort_keys=False,
        )
    },
}


def world() -> list[dict[str, Any]]:
    """What the cluster holds before the tests admit anything."""
    gpu_hpa = objects.gpu_hpa("triton-gpu-hpa", "default", "triton-gpu-predictor")
    return [
        objects.deployment("llm-server", "llm", gpus=2),
        objects.deployment("embedder", "llm", gpus=None),
        objects.cpu_hpa("embedder", "llm", "embedder"),
        objects.deployment("triton-gpu-predictor", "default", gpus=1),
        gpu_hpa,
        ADAPTER_CONFIGMAP,
    ]


def cli_messages(tmp_path: Path, documents: list[dict[str, Any]]) -> dict[str, str]:
    """rule -> message that `gpulint lint` gives for the same objects as files."""
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return {f.rule: f.message for f in lint_paths(path)}


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeFake]:
    cluster = FakeCluster()
    for obj in world():
        cluster.apply(copy.deepcopy(obj))
    with KubeFake(cluster) as server:
        yield server


@pytest.fixture(scope="module")
def served(
    kube: KubeFake, module_certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    directory = tmp_path_factory.mktemp("serve-cluster")
    with serving_cluster(kube, module_certificates, directory) as webhook:
        yield webhook


# --- the seeds' pitfalls ---------------------------------------------------------------------


@pytest.mark.slow
def test_refuses_a_cpu_hpa_on_a_gpu_deployment_in_the_cluster(
    served: Webhook, tmp_path: Path
) -> None:
    hpa = objects.cpu_hpa("llm-server", "llm", "llm-server")
    response = served.review(admission_review(hpa))
    assert response["allowed"] is False
    message = response["status"]["message"]
    cli = cli_messages(tmp_path, [objects.deployment("llm-server", "llm", gpus=2), hpa])
    assert f"\nGL101 hpa-cpu-on-gpu-workload: {cli['GL101']}\n" in message
    assert message.startswith("gpulint refused HorizontalPodAutoscaler llm/llm-server (1 error)")


@pytest.mark.slow
def test_the_same_hpa_alone_cannot_know_and_is_allowed(alone: Webhook) -> None:
    """Without the cluster (--no-cluster) the Deployment is unknown: no cross-object finding."""
    hpa = objects.cpu_hpa("llm-server", "llm", "llm-server")
    assert alone.review(admission_review(hpa))["allowed"] is True


@pytest.mark.slow
def test_refuses_a_second_hpa_on_one_target(served: Webhook, tmp_path: Path) -> None:
    second = objects.gpu_hpa("triton-gpu-hpa-ext", "default", "triton-gpu-predictor")
    response = served.review(admission_review(second))
    assert response["allowed"] is False
    message = response["status"]["message"]
    first = objects.gpu_hpa("triton-gpu-hpa", "default", "triton-gpu-predictor")
    target = objects.deployment("triton-gpu-predictor", "default", gpus=1)
    cli = cli_messages(tmp_path, [target, first, second])
    assert "GL103 duplicate-autoscalers: " in message
    assert cli["GL103"].split(":")[0] in message
    assert "HorizontalPodAutoscaler triton-gpu-hpa" in message


def test_a_deployment_update_adding_gpus_under_a_cpu_hpa_is_caught_from_its_side(
    served: Webhook,
) -> None:
    before = objects.deployment("embedder", "llm", gpus=None)
    after = objects.deployment("embedder", "llm", gpus=1)
    response = served.review(admission_review(after, "UPDATE", old=before))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "\nGL101 hpa-cpu-on-gpu-workload: HPA embedder scales only on cpu" in message
    # An image bump that leaves the GPUs alone is not held up.
    bumped = objects.deployment("embedder", "llm", gpus=None, image="v2")
    assert served.review(admission_review(bumped, "UPDATE", old=before))["allowed"] is True


def test_refuses_kserve_deploymentmode_as_a_field(served: Webhook) -> None:
    response = served.review(admission_review(objects.isvc_with_mode_field()))
    assert response["allowed"] is False
    assert "\nGL301 kserve-deploymentmode-field: " in response["status"]["message"]


def test_warns_about_an_hpa_without_behavior_on_a_gpu_deployment(served: Webhook) -> None:
    hpa = objects.gpu_hpa("llm-server-gpu", "llm", "llm-server", behavior=False)
    response = served.review(admission_review(hpa))
    assert response["allowed"] is True
    assert [w.split(":")[0] for w in response["warnings"]] == ["GL102"]


def test_the_adapter_configmap_is_evaluated_and_others_are_not(served: Webhook) -> None:
    broken = copy.deepcopy(ADAPTER_CONFIGMAP)
    config = yaml.safe_load(broken["data"]["config.yaml"])
    config["rules"][0]["metricsQuery"] = "sum(<<.Series>>{<<.LabelMatchers>>})"
    broken["data"]["config.yaml"] = yaml.safe_dump(config, sort_keys=False)
    review = admission_review(broken, "UPDATE", old=ADAPTER_CONFIGMAP)
    response = served.review(review)
    assert response["allowed"] is False
    assert "\nGL404 adapter-query-template: " in response["status"]["message"]
    other = copy.deepcopy(broken)
    other["metadata"] = {"name": "dashboards", "namespace": "monitoring"}
    response = served.review(admission_review(other))
    assert response == {"uid": response["uid"], "allowed": True}


def test_metrics_show_the_cache_state(served: Webhook) -> None:
    metrics = served.metrics()
    assert metrics.value("gpulint_webhook_cache_synced") == 1
    assert (
        metrics.value(
            "gpulint_webhook_cache_sync_state",
            kind="horizontalpodautoscalers.autoscaling",
            state="synced",
        )
        == 1
    )
    status, ready = served.get("/readyz")
    assert status == 200 and ready["ready"] is True
    assert ready["caches"]["deployments.apps"] == "synced"


# --- the API server going away, not there yet, partly forbidden, without CRDs -----------------


@pytest.mark.slow
def test_the_api_server_going_away_mid_watch(certificates: Certificates, tmp_path: Path) -> None:
    cluster = FakeCluster()
    for obj in world():
        cluster.apply(copy.deepcopy(obj))
    kube = KubeFake(cluster).start()
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
    hook = Webhook(certificates, tmp_path / "serve.log", [f"--kubeconfig={kubeconfig}"])
    try:
        hook.wait_ready()
        kube.stop()  # open watches break mid-stream
        time.sleep(0.5)
        # Answers still come from memory, with the cluster's objects.
        hpa = objects.cpu_hpa("llm-server", "llm", "llm-server")
        response = hook.review(admission_review(hpa))
        assert response["allowed"] is False and "GL101" in response["status"]["message"]
        assert hook.get("/readyz")[0] == 200
        # It comes back with a new GPU Deployment; the watch resumes and sees it.
        kube.restart()
        cluster.apply(objects.deployment("reranker", "llm", gpus=1))
        reranker_hpa = objects.cpu_hpa("reranker", "llm", "reranker")
        deadline = time.monotonic() + 60
        while True:
            response = hook.review(admission_review(reranker_hpa))
            if response["allowed"] is False or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        assert response["allowed"] is False, hook.log_text()[-2000:]
        assert "GL101" in response["status"]["message"]
        metrics = hook.metrics()
        for reason in ("not-synced", "deadline", "error"):
            assert metrics.value("gpulint_webhook_fail_open_total", reason=reason) == 0
    finally:
        hook.stop()
        kube.stop()


@pytest.mark.slow
def test_before_the_caches_sync_requests_fail_open_and_readyz_fails(
    certificates: Certificates, tmp_path: Path
) -> None:
    cluster = FakeCluster()
    for obj in world():
        cluster.apply(copy.deepcopy(obj))
    kube = KubeFake(cluster).start()
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
    kube.stop()  # the API server is not answering yet
    hook = Webhook(certificates, tmp_path / "serve.log", [f"--kubeconfig={kubeconfig}"])
    try:
        status, body = hook.get("/readyz")
        assert status == 503
        assert body["ready"] is False and body["reason"] == "caches not synced"
        assert set(body["caches"].values()) <= {"syncing", "error"}
        hpa = objects.cpu_hpa("llm-server", "llm", "llm-server")
        response = hook.review(admission_review(hpa))
        assert response["allowed"] is True
        assert response["warnings"] == [
            "gpulint could not evaluate HorizontalPodAutoscaler llm/llm-server: its cluster "
            "caches have not synced yet; the request was allowed unchecked"
        ]
        metrics = hook.metrics()
        assert metrics.value("gpulint_webhook_fail_open_total", reason="not-synced") == 1
        assert metrics.value("gpulint_webhook_cache_synced") == 0
        kube.restart()
        hook.wait_ready(60)
        response = hook.review(admission_review(hpa))
        assert response["allowed"] is False and "GL101" in response["status"]["message"]
        assert hook.metrics().value("gpulint_webhook_fail_open_total", reason="not-synced") == 1
    finally:
        hook.stop()
        kube.stop()


@pytest.mark.slow
def test_forbidden_and_absent_kinds_do_not_hold_readiness_back(
    certificates: Certificates, tmp_path: Path
) -> None:
    cluster = FakeCluster(crds=("keda",))  # no KServe, no Knative
    cluster.forbidden.add("scaledobjects.keda.sh")
    for obj in world():
        cluster.apply(copy.deepcopy(obj))
    kube = KubeFake(cluster).start()
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
    hook = Webhook(certificates, tmp_path / "serve.log", [f"--kubeconfig={kubeconfig}"])
    try:
        ready = hook.wait_ready()
        caches = ready["caches"]
        assert caches["scaledobjects.keda.sh"] == "forbidden"
        assert caches["inferenceservices.serving.kserve.io"] == "absent"
        assert caches["services.serving.knative.dev"] == "absent"
        assert caches["deployments.apps"] == "synced"
        metrics = hook.metrics()
        assert (
            metrics.value(
                "gpulint_webhook_cache_sync_state", kind="scaledobjects.keda.sh", state="forbidden"
            )
            == 1
        )
        # An InferenceService is still evaluated on what it says itself.
        response = hook.review(admission_review(objects.isvc_with_mode_field()))
        assert response["allowed"] is False
        assert "GL301" in response["status"]["message"]
        assert not [r for r in hook.log_records() if r.get("level") == "error"]
    finally:
        hook.stop()
        kube.stop()


@pytest.mark.slow
def test_a_resourceclaimtemplate_that_gives_gpus_to_a_cpu_scaled_deployment_is_refused(
    certificates: Certificates, tmp_path: Path
) -> None:
    """The Deployment names a template that is not there yet; the template that comes makes
    it a GPU workload under a CPU HPA. ResourceClaims are not evaluated."""
    deployment = objects.deployment("dra-server", "llm", gpus=None)
    pod = deployment["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
    pod["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    cluster = FakeCluster()
    for obj in (deployment, objects.cpu_hpa("dra-server", "llm", "dra-server")):
        cluster.apply(copy.deepcopy(obj))
    kube = KubeFake(cluster).start()
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
    hook = Webhook(certificates, tmp_path / "serve.log", [f"--kubeconfig={kubeconfig}"])
    template: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-gpus", "namespace": "llm"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2},
                        }
                    ]
                }
            }
        },
    }
    try:
        caches = hook.wait_ready()["caches"]
        assert caches["resourceclaimtemplates.resource.k8s.io"] == "synced"
        response = hook.review(admission_review(template))
        assert response["allowed"] is False
        message = response["status"]["message"]
        assert "\nGL101 hpa-cpu-on-gpu-workload: HPA dra-server scales only on cpu" in message
        assert (
            "asks for DRA device class gpu.nvidia.com of ResourceClaimTemplate two-gpus" in message
        )
        nic = copy.deepcopy(template)
        requests = nic["spec"]["spec"]["devices"]["requests"]
        requests[0]["exactly"]["deviceClassName"] = "sriov.example.com"
        assert hook.review(admission_review(nic))["allowed"] is True
        claim = {**template, "kind": "ResourceClaim", "spec": template["spec"]["spec"]}
        review = admission_review(claim)
        assert hook.review(review) == {"uid": review["request"]["uid"], "allowed": True}
        (decision,) = [
            r
            for r in hook.log_records()
            if r.get("event") == "decision" and r.get("uid") == review["request"]["uid"]
        ]
        assert (decision["verdict"], decision["reason"]) == ("skipped", "kind")
    finally:
        hook.stop()
        kube.stop()


def test_decisions_are_logged_once_each(served: Webhook) -> None:
    review = admission_review(objects.cpu_hpa("llm-server", "llm", "llm-server"), uid="one")
    served.review(review)
    lines = [r for r in served.log_records() if r.get("uid") == "one"]
    assert len(lines) == 1 and lines[0]["verdict"] == "denied"
    assert json.dumps(lines[0]).count("llm-server") == 1  # the name, and no object contents
