"""VerticalPodAutoscalers and KEDA ScaledJobs read from a cluster (``gpulint lint --cluster``)
and judged at admission over the cached cluster, against the fake API server."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpulint.cli import main
from gpulint.cluster.cache import ClusterCache

from ..kubefake import KubeFake, load_world
from .conftest import wait_for

WORLD = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: ml}
spec:
  replicas: 2
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      containers:
      - {name: server, image: vllm, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  minReplicas: 2
  maxReplicas: 4
  behavior:
    scaleUp: {stabilizationWindowSeconds: 60}
    scaleDown: {stabilizationWindowSeconds: 600}
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}
      target: {type: AverageValue, averageValue: "60"}
---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {name: llm, namespace: ml}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  updatePolicy: {updateMode: Recreate}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata: {name: render, namespace: batch}
spec:
  jobTargetRef:
    template:
      spec:
        restartPolicy: Never
        containers:
        - {name: render, image: render, resources: {limits: {nvidia.com/gpu: 1}}}
  triggers:
  - type: cpu
    metricType: Utilization
    metadata: {value: "60"}
"""

BUDGET = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "llm", "namespace": "ml"},
    "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "llm"}}},
}

VPA_ON_CPU = {
    "apiVersion": "autoscaling.k8s.io/v1",
    "kind": "VerticalPodAutoscaler",
    "metadata": {"name": "llm-cpu", "namespace": "ml"},
    "spec": {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"},
        "updatePolicy": {"updateMode": "Initial"},
        "resourcePolicy": {
            "containerPolicies": [
                {"containerName": "server", "controlledResources": ["cpu", "nvidia.com/gpu"]}
            ]
        },
    },
}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["lint", *args, "-f", "json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, report


def test_cluster_mode_judges_vpas_and_scaledjobs(
    fake: KubeFake, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_world(fake.cluster, WORLD)
    code, report = _run(capsys, "--cluster", "--kubeconfig", str(kubeconfig), "--ignore", "GL901")
    assert code == 1
    found = {(f["rule"], f["file"]) for f in report["findings"]}
    assert found == {
        ("GL112", "cluster://ml/VerticalPodAutoscaler/llm"),
        ("GL114", "cluster://batch/ScaledJob/render"),
        ("GL115", "cluster://batch/ScaledJob/render"),
    }
    lists = {path for _, path, query in fake.cluster.requests if "watch" not in query}
    assert "/apis/autoscaling.k8s.io/v1/verticalpodautoscalers" in lists
    assert "/apis/keda.sh/v1alpha1/scaledjobs" in lists
    assert "/apis/policy/v1/poddisruptionbudgets" in lists
    # A PodDisruptionBudget in the cluster bounds the evictions: GL112 goes.
    fake.cluster.apply(copy.deepcopy(BUDGET))
    _, report = _run(capsys, "--cluster", "--kubeconfig", str(kubeconfig), "--ignore", "GL901")
    assert "GL112" not in {f["rule"] for f in report["findings"]}


def test_admission_of_a_vpa_and_a_scaledjob(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    load_world(fake.cluster, WORLD)
    fake.cluster.apply(copy.deepcopy(BUDGET))
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    # A second VPA on the same GPU Deployment: Initial evicts nothing, but GPUs cannot be
    # resized; the budget in the cluster keeps the first VPA's GL112 away too.
    findings = cache.evaluate(copy.deepcopy(VPA_ON_CPU), "CREATE")
    assert [(f.rule, f.location.file) for f in findings] == [
        ("GL113", "cluster://ml/VerticalPodAutoscaler/llm-cpu")
    ]
    # The same VPA in Recreate mode on the CPU the HPA does not read: only the eviction
    # question, which the cluster's budget answers.
    recreate = copy.deepcopy(VPA_ON_CPU)
    recreate["spec"]["updatePolicy"]["updateMode"] = "Recreate"
    recreate["spec"]["resourcePolicy"]["containerPolicies"][0]["controlledResources"] = ["cpu"]
    assert cache.evaluate(recreate, "CREATE") == []
    # A ScaledJob: its own findings, located at it.
    job = yaml.safe_load(WORLD.split("---")[-1])
    job["metadata"]["name"] = "render-2"
    findings = cache.evaluate(job, "CREATE")
    assert [(f.rule, f.location.file) for f in findings] == [
        ("GL114", "cluster://batch/ScaledJob/render-2"),
        ("GL115", "cluster://batch/ScaledJob/render-2"),
    ]
    assert "KEDA never reads for jobs" in findings[0].message


def test_admission_of_a_vpa_sees_the_hpa_of_the_cluster(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    """The VPA admitted in Recreate mode on a workload a cluster HPA scales on CPU."""
    load_world(fake.cluster, WORLD)
    hpa = yaml.safe_load(WORLD.split("---")[1])
    hpa["spec"]["metrics"] = [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 70},
            },
        }
    ]
    fake.cluster.apply(hpa)
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    vpa = yaml.safe_load(WORLD.split("---")[2])
    vpa["metadata"]["name"] = "llm-new"
    findings = cache.evaluate(vpa, "CREATE")
    assert {f.rule for f in findings} == {"GL111", "GL112"}
    (gl111,) = [f for f in findings if f.rule == "GL111"]
    assert gl111.location.file == "cluster://ml/VerticalPodAutoscaler/llm-new"
    assert [r.ref.name for r in gl111.related if r.ref is not None] == ["llm"]


def test_admission_of_an_hpa_or_a_deployment_rejudges_the_vpa_on_it(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    """A VPA acts on a workload without claiming its replicas: what changes the workload or its
    autoscalers is judged with the VPA, and the VPA's finding names what was admitted."""
    load_world(fake.cluster, WORLD)
    fake.cluster.apply(copy.deepcopy(BUDGET))
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    hpa = yaml.safe_load(WORLD.split("---")[1])
    hpa["spec"]["metrics"] = [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 70},
            },
        }
    ]
    findings = cache.evaluate(hpa, "UPDATE", old=yaml.safe_load(WORLD.split("---")[1]))
    assert "GL111" in {f.rule for f in findings}
    (gl111,) = [f for f in findings if f.rule == "GL111"]
    assert gl111.location.file == "cluster://ml/VerticalPodAutoscaler/llm"
    assert "resizes the CPU that HorizontalPodAutoscaler llm scales on" in gl111.message
    # The budget's selector no longer matching (new pod labels) makes the VPA's evictions
    # unbounded: the Deployment's update brings GL112.
    deployment = yaml.safe_load(WORLD.split("---")[0])
    relabelled = copy.deepcopy(deployment)
    relabelled["spec"]["template"]["metadata"]["labels"] = {"app": "llm-v2"}
    relabelled["spec"]["selector"] = {"matchLabels": {"app": "llm-v2"}}
    findings = cache.evaluate(relabelled, "UPDATE", old=deployment)
    assert [(f.rule, f.location.file) for f in findings if f.rule.startswith("GL11")] == [
        ("GL112", "cluster://ml/VerticalPodAutoscaler/llm")
    ]


def test_admission_of_a_scaledjob_checks_its_prometheus_triggers(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    job = yaml.safe_load(WORLD.split("---")[-1])
    job["spec"]["maxReplicaCount"] = 4
    job["spec"]["triggers"] = [
        {
            "type": "prometheus",
            "metadata": {
                "serverAddress": "http://prometheus.monitoring:9090",
                "query": "avg(DCGM_FI_DEV_GPU_UTILIZATION)",
                "threshold": "50",
            },
        }
    ]
    findings = cache.evaluate(job, "CREATE")
    assert [(f.rule, f.location.file) for f in findings] == [
        ("GL402", "cluster://batch/ScaledJob/render")
    ]
    assert "prometheus trigger 0 of ScaledJob batch/render" in findings[0].message
