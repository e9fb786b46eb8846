"""``gpulint serve`` over a cluster judges VerticalPodAutoscalers and KEDA ScaledJobs as they
are admitted: the real process, the fake API server (tests/kubefake.py), real TLS."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..conftest import lint_paths
from ..kubefake import FakeCluster, KubeFake
from . import objects
from .harness import Certificates, Webhook, admission_review, serving_cluster


def _gpu_deployment() -> dict[str, Any]:
    deployment = objects.deployment("llm-server", "llm", gpus=1)
    deployment["spec"]["replicas"] = 3
    return deployment


def _vpa(name: str, update_mode: str, controlled: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm-server"},
        "updatePolicy": {"updateMode": update_mode},
    }
    if controlled is not None:
        spec["resourcePolicy"] = {
            "containerPolicies": [{"containerName": "*", "controlledResources": controlled}]
        }
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": "llm"},
        "spec": spec,
    }


def _scaled_job(trigger: dict[str, Any], max_jobs: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "jobTargetRef": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "render",
                            "image": "render:1",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                }
            }
        },
        "triggers": [trigger],
    }
    if max_jobs is not None:
        spec["maxReplicaCount"] = max_jobs
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledJob",
        "metadata": {"name": "render", "namespace": "batch"},
        "spec": spec,
    }


QUEUE_TRIGGER = {
    "type": "rabbitmq",
    "metadata": {"queueName": "render", "mode": "QueueLength", "value": "1"},
}


@pytest.fixture(scope="module")
def served(
    module_certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    cluster = FakeCluster()
    cluster.apply(_gpu_deployment())
    with KubeFake(cluster) as kube:
        directory = tmp_path_factory.mktemp("serve-newkinds")
        with serving_cluster(kube, module_certificates, directory) as webhook:
            yield webhook


def test_a_vpa_that_may_evict_gpu_pods_is_allowed_with_a_warning(served: Webhook) -> None:
    response = served.review(admission_review(_vpa("llm-server", "Recreate")))
    assert response["allowed"] is True
    assert [w.split(":")[0] for w in response["warnings"]] == ["GL112"]
    assert "may evict GPU pods" in response["warnings"][0]


def test_a_vpa_naming_gpus_in_controlled_resources_is_refused(served: Webhook) -> None:
    vpa = _vpa("llm-server", "Initial", ["cpu", "nvidia.com/gpu"])
    response = served.review(admission_review(vpa))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert message.startswith("gpulint refused VerticalPodAutoscaler llm/llm-server (1 error)")
    assert "GL113 vpa-extended-resource: " in message


def test_a_gpu_scaledjob_on_cpu_is_refused_and_one_on_a_queue_warned(served: Webhook) -> None:
    cpu = {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}
    response = served.review(admission_review(_scaled_job(cpu, 4)))
    assert response["allowed"] is False
    assert "GL114 scaledjob-resource-trigger: " in response["status"]["message"]
    response = served.review(admission_review(_scaled_job(copy.deepcopy(QUEUE_TRIGGER), None)))
    assert response["allowed"] is True
    assert [w.split(":")[0] for w in response["warnings"]] == ["GL115"]
    response = served.review(admission_review(_scaled_job(copy.deepcopy(QUEUE_TRIGGER), 4)))
    assert response["allowed"] is True
    assert not response.get("warnings")


def test_the_served_answer_matches_the_cli(served: Webhook, tmp_path: Path) -> None:
    """The warning the webhook gives is the finding `gpulint lint` gives for the same files."""
    vpa = _vpa("llm-server", "Auto")
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all([_gpu_deployment(), vpa], sort_keys=False))
    (cli,) = [f for f in lint_paths(path) if f.rule == "GL112"]
    response = served.review(admission_review(vpa))
    assert response["warnings"] == [
        f"GL112: {cli.headline} (gpulint explain GL112; docs/rules.md#gl112)"
    ]
