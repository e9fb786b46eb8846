"""``gpulint lint --cluster`` end to end: the real CLI, the real client, the fake API server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpulint.cli import main

from ..kubefake import CUSTOM_METRICS, FakeCluster, KubeFake, load_world
from .conftest import knative_config_by_name

WORLD = """
kubefake:
  custom:
  - {metric: gpu_utilization, namespace: ml, name: triton-6d5f7-abcde, value: "55"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: adapter
  namespace: monitoring
  labels: {app.kubernetes.io/name: prometheus-adapter}
data:
  config.yaml: |
    rules:
    - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
      resources:
        overrides:
          exported_namespace: {resource: namespace}
          exported_pod: {resource: pod}
      name: {matches: ^DCGM_FI_DEV_GPU_UTIL$, as: gpu_utilization}
      metricsQuery: avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: triton, namespace: ml}
spec:
  selector: {matchLabels: {app: triton}}
  template:
    metadata: {labels: {app: triton}}
    spec:
      containers:
      - {name: server, image: triton, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: v1
kind: Pod
metadata: {name: triton-6d5f7-abcde, namespace: ml, labels: {app: triton}}
spec:
  containers:
  - {name: server, image: triton}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: triton, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: triton}
  minReplicas: 1
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
apiVersion: apps/v1
kind: Deployment
metadata: {name: embedder, namespace: web}
spec:
  selector: {matchLabels: {app: embedder}}
  template:
    metadata: {labels: {app: embedder}}
    spec:
      containers:
      - name: server
        image: embedder
        resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: 1}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: embedder, namespace: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: embedder}
  minReplicas: 1
  maxReplicas: 4
  behavior:
    scaleUp: {stabilizationWindowSeconds: 60}
    scaleDown: {stabilizationWindowSeconds: 600}
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
"""


@pytest.fixture
def world(fake: KubeFake) -> KubeFake:
    load_world(fake.cluster, WORLD)
    return fake


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["lint", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _json(out: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(out)
    return report


def test_findings_on_a_cluster_with_cluster_locations(
    world: KubeFake, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "--cluster", "--kubeconfig", str(kubeconfig), "-f", "json")
    assert code == 1, err
    report = _json(out)
    assert [(f["rule"], f["file"], f["line"], f["column"]) for f in report["findings"]] == [
        ("GL101", "cluster://web/HorizontalPodAutoscaler/embedder", 1, 1)
    ]
    assert report["findings"][0]["related"][0]["file"] == "cluster://web/Deployment/embedder"
    assert report["summary"]["objects"] == 5
    code, out, err = _run(capsys, "--cluster", "--kubeconfig", str(kubeconfig))
    assert code == 1
    assert out.startswith("cluster://web/HorizontalPodAutoscaler/embedder:1:1: GL101 [error]")
    assert (
        f"note: read 5 objects from {world.url} "
        "(context fake, all namespaces; ConfigMaps in monitoring, kserve; "
        "ConfigMap knative-serving/config-autoscaler)"
    ) in " ".join(out.split())  # wrapped at 80 columns (tests/conftest.py)
    assert out.rstrip().endswith("gpulint: 1 error, 0 warnings, 0 info (5 objects)")


def test_namespace_context_fail_on_and_a_clean_namespace(
    world: KubeFake, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--cluster", "--kubeconfig", str(kubeconfig)]
    code, out, _ = _run(capsys, *base, "--namespace", "ml", "--context", "other")
    assert code == 0
    # The namespace's objects and the adapter ConfigMap, read in its own namespace.
    assert "read 3 objects" in out
    assert (
        "(context other, namespace ml; ConfigMaps in monitoring, kserve; "
        "ConfigMap knative-serving/config-autoscaler)"
    ) in " ".join(out.split())
    lists = {path for method, path, q in world.cluster.requests if "watch" not in q}
    assert "/apis/apps/v1/namespaces/ml/deployments" in lists
    assert "/api/v1/namespaces/monitoring/configmaps" in lists
    assert "/api/v1/configmaps" not in lists
    code, _, _ = _run(capsys, *base, "--fail-on", "never")
    assert code == 0
    code, out, _ = _run(capsys, *base, "--select", "GL9")
    assert code == 0
    asked = [p for _, p, _ in world.cluster.requests if CUSTOM_METRICS in p]
    assert "/apis/custom.metrics.k8s.io/v1beta1/namespaces/ml/pods/*/gpu_utilization" in asked


def test_the_metrics_apis_are_asked_only_when_gl901_runs(
    world: KubeFake, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = _run(capsys, "--cluster", "--kubeconfig", str(kubeconfig), "--ignore", "GL901")
    assert code == 1
    assert not [p for _, p, _ in world.cluster.requests if CUSTOM_METRICS in p]


def test_kinds_the_cluster_does_not_serve_and_kinds_it_forbids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = KubeFake(FakeCluster(crds=())).start()
    try:
        load_world(fake.cluster, WORLD)
        fake.cluster.forbidden = {"statefulsets.apps"}
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = _run(capsys, "--cluster", "--kubeconfig", str(kubeconfig))
    finally:
        fake.stop()
    assert code == 1, err
    absent = (
        "clusterpolicies.nvidia.com, configurations.serving.knative.dev, "
        "inferencepools.inference.networking.k8s.io, "
        "inferenceservices.serving.kserve.io, llminferenceservices.serving.kserve.io, "
        "models.kubeai.org, nimservices.apps.nvidia.com, podautoscalers.autoscaling.aibrix.ai, "
        "podmonitors.monitoring.coreos.com, "
        "prometheuses.monitoring.coreos.com, scaledjobs.keda.sh, scaledobjects.keda.sh, "
        "servicemonitors.monitoring.coreos.com, services.serving.knative.dev, "
        "variantautoscalings.llmd.ai, verticalpodautoscalers.autoscaling.k8s.io, "
        "vllmruntimes.production-stack.vllm.ai"
    )
    words = " ".join(out.split())  # wrapped at 80 columns (tests/conftest.py)
    assert f"not served there: {absent}" in words
    assert "note: statefulsets.apps not read: statefulsets.apps is forbidden: User" in words


@pytest.mark.parametrize(
    ("problem", "message"),
    [
        ("token", "refused the credentials (401)"),
        ("down", "cannot reach the Kubernetes API server at https://127.0.0.1:"),
        ("context", "cannot load cluster credentials"),
        ("paths", "--cluster reads the cluster: give no PATH with it"),
        ("adapter", "is not a ConfigMap as NAMESPACE/NAME or NAME"),
        ("selector", "is not a label selector"),
        ("namespaces", "--configmap-namespaces: 'Monitoring' is not a namespace name"),
    ],
)
def test_a_cluster_that_cannot_be_read_is_a_usage_error(
    fake: KubeFake,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    problem: str,
    message: str,
) -> None:
    kubeconfig = fake.write_kubeconfig(
        tmp_path / "kubeconfig", token="wrong" if problem == "token" else None
    )
    args = ["--cluster", "--kubeconfig", str(kubeconfig)]
    if problem == "down":
        fake.stop()
    if problem == "context":
        args += ["--context", "nowhere"]
    if problem == "paths":
        args.append(str(tmp_path))
    if problem == "adapter":
        args += ["--adapter-configmap", "a/b/c"]
    if problem == "selector":
        args += ["--adapter-configmap-selector", "app in (x"]
    if problem == "namespaces":
        args += ["--configmap-namespaces", "Monitoring"]
    code, out, err = _run(capsys, *args)
    assert code == 2
    assert out == ""
    assert err.startswith("gpulint: error: ") and message in err, err
    assert "Traceback" not in err


def test_without_a_kubeconfig_or_a_service_account(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    code, _, err = _run(capsys, "--cluster")
    assert code == 2
    # The two places credentials come from, each with why it gave none.
    assert err == (
        "gpulint: error: no cluster credentials:\n"
        f"  no kubeconfig: $KUBECONFIG is not set and {tmp_path}/.kube/config does not exist "
        "(name one with --kubeconfig);\n"
        "  no in-cluster service account: gpulint is not running in a pod "
        "(KUBERNETES_SERVICE_HOST is not set).\n"
    )
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    code, _, err = _run(capsys, "--cluster")
    assert code == 2
    assert "  no in-cluster service account: the pod's service account gave none (" in err


def test_a_named_adapter_configmap(
    fake: KubeFake, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_world(fake.cluster, WORLD.replace("app.kubernetes.io/name: prometheus-adapter", "x: y"))
    base = ["--cluster", "--kubeconfig", str(kubeconfig), "-f", "json", "--select", "GL401"]
    # Not found by the default selectors: GL401 has no config to judge against.
    code, out, _ = _run(capsys, *base)
    assert _json(out)["findings"] == []
    # Named: found, and the HPA's metric is exposed by it (no finding either), while a
    # renamed metric would be reported.
    code, out, _ = _run(capsys, *base, "--adapter-configmap", "monitoring/adapter")
    assert _json(out)["summary"]["objects"] == 5
    fake.cluster.apply(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "triton", "namespace": "ml"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"},
                "maxReplicas": 4,
                "metrics": [
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": "gpu_utilisation"},
                            "target": {"type": "AverageValue", "averageValue": "60"},
                        },
                    }
                ],
            },
        }
    )
    code, out, _ = _run(capsys, *base, "--adapter-configmap", "monitoring/adapter")
    assert code == 1
    assert [f["rule"] for f in _json(out)["findings"]] == ["GL401"]
    _, out, _ = _run(capsys, *base, "--adapter-configmap-selector", "x=y")
    assert [f["rule"] for f in _json(out)["findings"]] == ["GL401"]


ANOTHER_ADAPTER = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: adapter
  namespace: team-metrics
  labels: {app.kubernetes.io/name: prometheus-adapter}
data:
  config.yaml: |
    rules: []
"""


def _configmap_lists(fake: KubeFake) -> set[str]:
    return {p for _, p, _ in fake.cluster.requests if p.endswith("/configmaps")}


def test_configmaps_are_listed_only_where_rbac_grants_them(
    world: KubeFake, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """deploy/'s RBAC: ConfigMaps granted by Roles in monitoring and kserve only."""
    load_world(world.cluster, ANOTHER_ADAPTER)
    world.cluster.granted_in = {"configmaps": {"monitoring", "kserve"}}
    world.cluster.granted_names = knative_config_by_name()
    code, out, err = _run(capsys, "--cluster", "--kubeconfig", str(kubeconfig), "-f", "json")
    assert code == 1, err
    report = _json(out)
    # The world's four objects and the adapter in monitoring; nothing from team-metrics.
    assert report["summary"]["objects"] == 5
    assert not [n for n in report["summary"]["notes"] if "not read" in n]
    assert _configmap_lists(world) == {
        "/api/v1/namespaces/monitoring/configmaps",
        "/api/v1/namespaces/kserve/configmaps",
        "/api/v1/namespaces/knative-serving/configmaps",
    }


def test_configmap_namespaces_rbac_does_not_grant_are_noted(
    world: KubeFake, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_world(world.cluster, ANOTHER_ADAPTER)
    world.cluster.granted_in = {"configmaps": {"monitoring"}}
    world.cluster.granted_names = knative_config_by_name()
    base = ["--cluster", "--kubeconfig", str(kubeconfig), "-f", "json"]
    _, out, _ = _run(capsys, *base, "--configmap-namespaces", "monitoring,team-metrics")
    report = _json(out)
    assert report["summary"]["objects"] == 5
    not_read = [n for n in report["summary"]["notes"] if "not read" in n]
    assert len(not_read) == 4
    assert all(n.startswith("configmaps[team-metrics: ") for n in not_read)
    assert all('in the namespace "team-metrics"' in n for n in not_read)
    assert (
        "ConfigMaps in monitoring, team-metrics; ConfigMap knative-serving/config-autoscaler)"
    ) in report["summary"]["notes"][0]
    # Every namespace: one cluster-wide list per selector, which RBAC refuses here.
    _, out, _ = _run(capsys, *base, "--configmap-namespaces", "*")
    report = _json(out)
    assert report["summary"]["objects"] == 4
    not_read = [n for n in report["summary"]["notes"] if "not read" in n]
    assert len(not_read) == 4 and all("at the cluster scope" in n for n in not_read)
    assert (
        "(context fake, all namespaces; ConfigMap knative-serving/config-autoscaler)"
    ) in report["summary"]["notes"][0]
    # With the RBAC for it, everywhere finds both adapter ConfigMaps.
    world.cluster.granted_in = {}
    _, out, _ = _run(capsys, *base, "--configmap-namespaces", "*")
    assert _json(out)["summary"]["objects"] == 6
    assert "/api/v1/configmaps" in _configmap_lists(world)
