"""A deterministic synthetic manifest repository for benchmarks.

``python bench/generate.py N OUT`` writes N apps, laid out as a GitOps repository with one
directory per cluster of up to 1,000 apps (OUT/clusters/cNN/apps/<app>/): each app a GPU
workload and its autoscaler, with Knative Services, KServe InferenceServices and KEDA
ScaledObjects mixed in; each cluster has its prometheus-adapter values and a dcgm-exporter
ServiceMonitor. The same N always produces the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: team-{team}
  labels:
    app.kubernetes.io/name: {name}
    app.kubernetes.io/part-of: inference
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {name}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {name}
    spec:
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-L40S
      containers:
        - name: server
          image: nvcr.io/nvidia/tritonserver:24.01-py3
          args: ["--model-repository=/models", "--strict-readiness=true"]
          ports:
            - containerPort: 8000
              name: http
          readinessProbe:
            httpGet: {{path: /v2/health/ready, port: http}}
            periodSeconds: 5
          resources:
            requests:
              cpu: "4"
              memory: 24Gi
            limits:
              memory: 24Gi
              nvidia.com/gpu: {gpus}
"""

HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
  namespace: team-{team}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {name}
  minReplicas: 1
  maxReplicas: 8
  metrics:
    - type: Pods
      pods:
        metric:
          name: gpu_utilization
        target:
          type: AverageValue
          averageValue: "70"
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 60
      policies:
        - {{type: Pods, value: 1, periodSeconds: 120}}
    scaleDown:
      stabilizationWindowSeconds: 600
"""

SCALED_OBJECT = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
  namespace: team-{team}
spec:
  scaleTargetRef:
    name: {name}
  minReplicaCount: 1
  maxReplicaCount: 8
  triggers:
    - type: prometheus
      metadata:
        serverAddress: http://prometheus.monitoring:9090
        query: >-
          avg(DCGM_FI_DEV_GPU_UTIL{{exported_namespace="team-{team}",exported_pod=~"{name}-.*"}})
        threshold: "70"
"""

KNATIVE = """\
apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: {name}
  namespace: team-{team}
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
        autoscaling.knative.dev/metric: gpu_utilization
        autoscaling.knative.dev/target: "70"
    spec:
      containers:
        - image: ghcr.io/example/{name}:1.0
          resources:
            limits:
              nvidia.com/gpu: 1
"""

ISVC = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: {name}
  namespace: team-{team}
  annotations:
    serving.kserve.io/deploymentMode: Standard
    serving.kserve.io/autoscalerClass: external
spec:
  predictor:
    minReplicas: 1
    maxReplicas: 8
    model:
      modelFormat: {{name: triton}}
      storageUri: gs://models/{name}
      resources:
        limits:
          nvidia.com/gpu: "1"
"""

ISVC_HPA = HPA.replace(
    "    name: {name}\n  minReplicas", "    name: {name}-predictor\n  minReplicas"
)

ADAPTER_VALUES = """\
prometheus:
  url: http://prometheus.monitoring.svc
  port: 9090
rules:
  default: false
  custom:
    - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{{exported_namespace!="",exported_pod!=""}}'
      resources:
        overrides:
          exported_namespace: {{resource: namespace}}
          exported_pod: {{resource: pod}}
      name:
        matches: "^DCGM_FI_DEV_GPU_UTIL$"
        as: "gpu_utilization"
      metricsQuery: avg(<<.Series>>{{<<.LabelMatchers>>}}) by (<<.GroupBy>>)
"""

SERVICE_MONITOR = """\
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: dcgm-exporter-{index}
  namespace: monitoring
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: dcgm-exporter
  endpoints:
    - port: metrics
      interval: 15s
"""


def generate(apps: int, out: Path) -> int:
    """Write the repository; return the number of files."""
    files = 0
    for index in range(apps):
        name = f"model-{index:05d}"
        team = index % 40
        cluster = out / "clusters" / f"c{index // 1000:02d}"
        directory = cluster / "apps" / name
        directory.mkdir(parents=True, exist_ok=True)
        if index % 1000 == 0:
            values = {"index": index}
            (cluster / "prometheus-adapter-values.yaml").write_text(ADAPTER_VALUES.format(**values))
            (cluster / "servicemonitor-dcgm.yaml").write_text(SERVICE_MONITOR.format(**values))
            files += 2
        values = {"name": name, "team": team, "gpus": 1 + index % 2, "index": index}
        if index % 10 == 3:
            (directory / "service.yaml").write_text(KNATIVE.format(**values))
            files += 1
            continue
        if index % 7 == 5:
            (directory / "inferenceservice.yaml").write_text(ISVC.format(**values))
            (directory / "hpa.yaml").write_text(ISVC_HPA.format(**values))
            files += 2
            continue
        (directory / "deployment.yaml").write_text(DEPLOYMENT.format(**values))
        autoscaler = SCALED_OBJECT if index % 5 == 1 else HPA
        (directory / "autoscaler.yaml").write_text(autoscaler.format(**values))
        files += 2
    return files


if __name__ == "__main__":
    count = generate(int(sys.argv[1]), Path(sys.argv[2]))
    print(f"{count} files")
