"""``gpulint trace --cluster`` against the fake API server: the scrape chain as the cluster
holds it (DaemonSet, Service and EndpointSlices, ServiceMonitor, Prometheus object, the
adapter's Deployment and its Prometheus Service), the metrics API's answer (the seeds'
``kubectl get --raw`` step) and the HPA's conditions."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from gpulint.cli import main

from ..kubefake import FakeCluster, KubeFake, load_world

WORLD = """\
kubefake:
  custom:
  - {metric: gpu_utilization, namespace: llm, name: llm-7d9f8-x2k4q, value: "72"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: llm}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      containers:
      - {name: server, image: vllm, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: v1
kind: Pod
metadata: {name: llm-7d9f8-x2k4q, namespace: llm, labels: {app: llm}}
spec:
  containers: [{name: server, image: vllm}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm, namespace: llm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}
      target: {type: AverageValue, averageValue: "60"}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-dcgm-exporter, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: nvidia-dcgm-exporter}}
  template:
    metadata: {labels: {app: nvidia-dcgm-exporter}}
    spec:
      nodeSelector: {nvidia.com/gpu.deploy.dcgm-exporter: "true"}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: nvidia-dcgm-exporter
        image: nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04
        ports: [{name: metrics, containerPort: 9400}]
---
apiVersion: v1
kind: Service
metadata: {name: nvidia-dcgm-exporter, namespace: gpu-operator, labels: {app: nvidia-dcgm-exporter}}
spec:
  selector: {app: nvidia-dcgm-exporter}
  ports: [{name: gpu-metrics, port: 9400, targetPort: 9400}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: nvidia-dcgm-exporter-abcde
  namespace: gpu-operator
  labels: {kubernetes.io/service-name: nvidia-dcgm-exporter}
addressType: IPv4
ports: [{name: gpu-metrics, port: 9400}]
endpoints:
- addresses: [10.0.1.11]
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: nvidia-dcgm-exporter, namespace: gpu-operator, labels: {app: nvidia-dcgm-exporter}}
spec:
  selector: {matchLabels: {app: nvidia-dcgm-exporter}}
  endpoints: [{port: gpu-metrics}]
---
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata: {name: k8s, namespace: monitoring}
spec:
  serviceMonitorSelector: {}
  serviceMonitorNamespaceSelector: {}
---
apiVersion: v1
kind: Service
metadata: {name: prometheus-operated, namespace: monitoring, labels: {operated-prometheus: "true"}}
spec:
  clusterIP: None
  selector: {app.kubernetes.io/name: prometheus}
  ports: [{name: web, port: 9090, targetPort: web}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: prometheus-operated-m2x8q
  namespace: monitoring
  labels: {kubernetes.io/service-name: prometheus-operated}
addressType: IPv4
ports: [{name: web, port: 9090}]
endpoints:
- addresses: [10.0.3.14]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: prometheus-adapter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: prometheus-adapter}}
  template:
    metadata: {labels: {app: prometheus-adapter}}
    spec:
      containers:
      - name: adapter
        image: registry.k8s.io/prometheus-adapter/prometheus-adapter:v0.12.0
        args: [--prometheus-url=http://prometheus-operated.monitoring.svc:9090/]
"""


def trace_cluster(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, dict[str, object], KubeFake]:
    fake = KubeFake(FakeCluster()).start()
    try:
        load_world(fake.cluster, text)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        out = io.StringIO()
        monkeypatch.setattr("sys.stdout", out)
        code = main(["trace", "--cluster", "--kubeconfig", str(kubeconfig), "-f", "json", *args])
    finally:
        fake.stop()
    return code, json.loads(out.getvalue()), fake


def links_of(data: dict[str, object]) -> dict[str, dict[str, object]]:
    (traced,) = data["traces"]  # type: ignore[misc]
    return {link["stage"]: link for link in traced["links"]}


def test_the_cluster_confirms_every_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, data, fake = trace_cluster(WORLD, tmp_path, monkeypatch)
    assert code == 0, data
    links = links_of(data)
    assert {stage: link["status"] for stage, link in links.items()} == {
        "workload": "ok",
        "exporter": "ok",
        "service": "ok",
        "scrape": "ok",
        "prometheus": "ok",
        "adapter-rule": "unknown",  # the adapter's ConfigMap is not in this cluster
        "metrics-api": "ok",
        "autoscaler": "ok",
    }
    assert "1 ready endpoint in the cluster" in str(links["service"]["detail"])
    assert links["service"]["file"] == "cluster://gpu-operator/Service/nvidia-dcgm-exporter"
    assert "/apis/custom.metrics.k8s.io/v1beta1/namespaces/llm/pods/*/gpu_utilization" in str(
        links["metrics-api"]["detail"]
    )
    assert "1 value" in str(links["metrics-api"]["detail"])
    # The endpoints of the chain's Services were asked for by label, not listed whole.
    slices = [q for _, p, q in fake.cluster.requests if p.endswith("/endpointslices")]
    assert {q.get("labelSelector") for q in slices} == {
        "kubernetes.io/service-name=nvidia-dcgm-exporter",
        "kubernetes.io/service-name=prometheus-operated",
    }


def test_a_prometheus_without_ready_endpoints_and_no_values_break_the_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = WORLD.replace(
        "- addresses: [10.0.3.14]", "- addresses: [10.0.3.14]\n  conditions: {ready: false}"
    ).replace('name: llm-7d9f8-x2k4q, value: "72"', 'name: other-pod, value: "72"')
    code, data, _ = trace_cluster(broken, tmp_path, monkeypatch)
    assert code == 1
    links = links_of(data)
    assert links["prometheus"]["status"] == "broken"
    assert links["prometheus"]["findings"] == ["GL904"]
    assert links["metrics-api"]["status"] == "broken"
    assert links["metrics-api"]["findings"] == ["GL901"]


def test_the_hpa_conditions_are_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_status = WORLD.replace(
        '      target: {type: AverageValue, averageValue: "60"}\n'
        "---\napiVersion: apps/v1\nkind: DaemonSet",
        '      target: {type: AverageValue, averageValue: "60"}\n'
        "status:\n"
        "  conditions:\n"
        '  - {type: ScalingActive, status: "False", reason: FailedGetPodsMetric,'
        " message: unable to get metric gpu_utilization}\n"
        "---\napiVersion: apps/v1\nkind: DaemonSet",
    )
    assert with_status != WORLD
    code, data, _ = trace_cluster(with_status, tmp_path, monkeypatch)
    links = links_of(data)
    assert "ScalingActive=False (FailedGetPodsMetric)" in str(links["autoscaler"]["detail"])
    assert links["autoscaler"]["findings"] == ["GL902"]
    assert code == 1
