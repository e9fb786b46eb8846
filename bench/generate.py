"""Deterministic synthetic manifest repositories for benchmarks, in every shape input grows in.

``python bench/generate.py OUT --apps N [options]`` writes a GitOps repository of N apps, each
a GPU workload and its autoscaler. The same options always produce the same bytes. One
option at a time changes one dimension of the input:

* ``--apps N``: apps, 1,000 per cluster directory (OUT/clusters/cNN/apps/<app>/), unique
  names, with a mix of Deployments with HPAs, KEDA ScaledObjects, Knative Services and KServe
  InferenceServices; each cluster has its prometheus-adapter values and a dcgm-exporter
  ServiceMonitor (one lint unit: no object is written twice);
* ``--adapter-every K``: besides the cluster's, one app in K carries its own adapter values
  file in its directory (K=10: a thousand adapter configs at 10,000 apps);
* ``--units U``: the apps spread over U cluster directories that each hold their own copy of
  the same app names (U lint units of N/U apps);
* ``--overlays O``: the apps as a kustomize base, built by O overlays (namespace, namePrefix,
  a GPU patch): O kustomize units rendering N objects each;
* ``--kind hpa|scaledobject|knative|kserve``: every app of one kind instead of the mix;
* ``--doc-scale S``: S containers (and S times the env) per pod: documents S times bigger;
* ``--autoscalers-per-target A``: A HPAs on each Deployment (duplicate-autoscaler groups);
* ``--per-app``: the layout of a repository with one directory per application
  (OUT/teams/team-NN/svc-NNNNN/, 1-4 files each, nothing shared above them): a GPU
  Deployment and its HPA in two files, a KServe InferenceService beside them in one
  application of seven, a Knative Service alone in one of ten, and the prometheus-adapter
  values in one application's directory of every ten: a lint unit per application, all one
  cluster;
* ``--charts``: with ``--per-app``, each application directory a Helm chart (Chart.yaml,
  values.yaml, its GPU Deployment and HPA templates): a chart unit per application, rendered
  by helm.
"""

from __future__ import annotations

import argparse
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
{containers}"""

CONTAINER = """\
        - name: server{suffix}
          image: nvcr.io/nvidia/tritonserver:24.01-py3
          args: ["--model-repository=/models", "--strict-readiness=true"]
          env:
{env}          ports:
            - containerPort: {port}
              name: http{suffix}
          readinessProbe:
            httpGet: {{path: /v2/health/ready, port: http{suffix}}}
            periodSeconds: 5
          resources:
            requests:
              cpu: "4"
              memory: 24Gi
            limits:
              memory: 24Gi
              nvidia.com/gpu: {gpus}
"""

ENV = """\
            - name: MODEL_SETTING_{index}
              value: "{value}"
"""

HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {hpa}
  namespace: team-{team}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {target}
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

OVERLAY = """\
resources:
  - ../../base
namespace: env-{index}
namePrefix: e{index}-
patches:
  - target: {{kind: Deployment}}
    patch: |-
      - op: replace
        path: /spec/template/spec/nodeSelector
        value: {{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
"""

KINDS = ("mixed", "hpa", "scaledobject", "knative", "kserve")


class Shape:
    """One point of the input's dimensions (see the module docstring)."""

    def __init__(
        self,
        apps: int,
        adapter_every: int = 0,
        units: int = 1,
        overlays: int = 0,
        kind: str = "mixed",
        doc_scale: int = 1,
        autoscalers_per_target: int = 1,
        per_app: bool = False,
        charts: bool = False,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")
        self.apps = apps
        self.adapter_every = adapter_every
        self.units = max(1, units)
        self.overlays = overlays
        self.kind = kind
        self.doc_scale = max(1, doc_scale)
        self.autoscalers_per_target = max(1, autoscalers_per_target)
        self.per_app = per_app or charts
        self.charts = charts

    def describe(self) -> str:
        parts = [f"{self.apps:,} apps"]
        if self.charts:
            parts.append("a Helm chart (a unit) per app, adapter values per team")
        elif self.per_app:
            parts.append("a directory (a unit) per app, adapter values in 1 app of 10")
        if self.adapter_every:
            parts.append(f"adapter values in 1 app of {self.adapter_every}")
        if self.units > 1:
            parts.append(f"{self.units:,} units")
        if self.overlays:
            parts.append(f"{self.overlays:,} kustomize overlays")
        if self.kind != "mixed":
            parts.append(f"all {self.kind}")
        if self.doc_scale > 1:
            parts.append(f"documents x{self.doc_scale}")
        if self.autoscalers_per_target > 1:
            parts.append(f"{self.autoscalers_per_target} autoscalers per target")
        return ", ".join(parts)


def _deployment(values: dict[str, object], scale: int) -> str:
    containers = []
    for c in range(scale):
        env = "".join(
            ENV.format(index=i, value=f"{values['name']}-{c}-{i}") for i in range(4 * scale)
        )
        containers.append(
            CONTAINER.format(
                suffix="" if c == 0 else f"-{c}", env=env, port=8000 + c, gpus=values["gpus"]
            )
        )
    return DEPLOYMENT.format(containers="".join(containers), **values)


def _app(directory: Path, index: int, shape: Shape, name: str, team: int) -> int:
    """One app's files; returns how many."""
    values: dict[str, object] = {"name": name, "team": team, "gpus": 1 + index % 2}
    kind = shape.kind
    if kind == "mixed":
        kind = (
            "knative"
            if index % 10 == 3
            else "kserve"
            if index % 7 == 5
            else "scaledobject"
            if index % 5 == 1
            else "hpa"
        )
    written = 0
    if kind == "knative":
        (directory / "service.yaml").write_text(KNATIVE.format(**values))
        return 1
    if kind == "kserve":
        (directory / "inferenceservice.yaml").write_text(ISVC.format(**values))
        (directory / "hpa.yaml").write_text(
            HPA.format(hpa=name, target=f"{name}-predictor", **values)
        )
        return 2
    (directory / "deployment.yaml").write_text(_deployment(values, shape.doc_scale))
    written += 1
    if kind == "scaledobject":
        (directory / "autoscaler.yaml").write_text(SCALED_OBJECT.format(**values))
        return written + 1
    hpas = [
        HPA.format(hpa=name if a == 0 else f"{name}-{a}", target=name, **values)
        for a in range(shape.autoscalers_per_target)
    ]
    (directory / "autoscaler.yaml").write_text("---\n".join(hpas))
    return written + 1


def _application(directory: Path, index: int, shape: Shape, name: str, team: int) -> int:
    """One application's directory of the per-application layout; returns how many files."""
    values: dict[str, object] = {"name": name, "team": team, "gpus": 1 + index % 2}
    if index % 10 == 3:
        (directory / "service.yaml").write_text(KNATIVE.format(**values))
        return 1
    (directory / "deployment.yaml").write_text(_deployment(values, shape.doc_scale))
    (directory / "hpa.yaml").write_text(HPA.format(hpa=name, target=name, **values))
    if index % 7 == 5:
        (directory / "inferenceservice.yaml").write_text(ISVC.format(**values))
        return 3
    return 2


def _chart(directory: Path, index: int, shape: Shape, name: str, team: int) -> int:
    """One application as a Helm chart; returns how many files."""
    values: dict[str, object] = {"name": name, "team": team, "gpus": "{{ .Values.gpus }}"}
    templates = directory / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    (directory / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n")
    (directory / "values.yaml").write_text(f"gpus: {1 + index % 2}\n")
    (templates / "deployment.yaml").write_text(_deployment(values, shape.doc_scale))
    (templates / "hpa.yaml").write_text(HPA.format(hpa=name, target=name, **values))
    return 4


def app_documents(index: int, name: str, team: int) -> list[str]:
    """The YAML documents of app ``index`` in the mixed shape (for bench/webhook_load.py):
    a tenth Knative Services, KServe InferenceServices with an HPA, Deployments with a KEDA
    ScaledObject, Deployments nothing scales yet, the rest Deployments with an HPA."""
    values: dict[str, object] = {"name": name, "team": team, "gpus": 1 + index % 2}
    if index % 10 == 3:
        return [KNATIVE.format(**values)]
    if index % 7 == 5:
        return [ISVC.format(**values), HPA.format(hpa=name, target=f"{name}-predictor", **values)]
    deployment = _deployment(values, 1)
    if index % 10 == 7:
        return [deployment, SCALED_OBJECT.format(**values)]
    if index % 10 == 9:
        return [deployment]
    return [deployment, HPA.format(hpa=name, target=name, **values)]


def generate(out: Path, shape: Shape) -> int:
    """Write the repository; return the number of files."""
    files = 0
    if shape.per_app:
        for index in range(shape.apps):
            team = index % 40
            name = f"svc-{index:05d}"
            directory = out / "teams" / f"team-{team:02d}" / name
            directory.mkdir(parents=True, exist_ok=True)
            if shape.charts:
                files += _chart(directory, index, shape, name, team)
                continue
            if index % 10 == 9:
                (directory / "prometheus-adapter-values.yaml").write_text(ADAPTER_VALUES.format())
                files += 1
            files += _application(directory, index, shape, name, team)
        if shape.charts:
            # a chart's directory holds the chart alone: the adapter values sit beside the
            # teams' applications, one file per team
            for team in range(min(40, shape.apps)):
                platform = out / "teams" / f"team-{team:02d}" / "platform"
                platform.mkdir(parents=True, exist_ok=True)
                (platform / "prometheus-adapter-values.yaml").write_text(ADAPTER_VALUES.format())
                files += 1
        return files
    if shape.overlays:
        base = out / "base"
        resources = []
        for index in range(shape.apps):
            name = f"model-{index:05d}"
            directory = base / "apps" / name
            directory.mkdir(parents=True, exist_ok=True)
            files += _app(directory, index, shape, name, index % 40)
            resources.extend(f"  - apps/{name}/{p.name}\n" for p in sorted(directory.iterdir()))
        (base / "kustomization.yaml").write_text("resources:\n" + "".join(resources))
        files += 1
        for overlay in range(shape.overlays):
            directory = out / "overlays" / f"o{overlay:04d}"
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "kustomization.yaml").write_text(OVERLAY.format(index=overlay))
            files += 1
        (out / "prometheus-adapter-values.yaml").write_text(ADAPTER_VALUES.format())
        return files + 1
    per_unit = max(1, shape.apps // shape.units)
    for index in range(shape.apps):
        unit, local = divmod(index, per_unit) if shape.units > 1 else (index // 1000, index)
        # With several units, each cluster holds its own copy of the same app names.
        name = f"model-{local:05d}"
        team = local % 40
        cluster = out / "clusters" / f"c{unit:04d}"
        directory = cluster / "apps" / name
        directory.mkdir(parents=True, exist_ok=True)
        first_of_cluster = local == 0 if shape.units > 1 else index % 1000 == 0
        if first_of_cluster:
            (cluster / "prometheus-adapter-values.yaml").write_text(ADAPTER_VALUES.format())
            (cluster / "servicemonitor-dcgm.yaml").write_text(SERVICE_MONITOR.format(index=unit))
            files += 2
        if shape.adapter_every and local % shape.adapter_every == shape.adapter_every - 1:
            (directory / "prometheus-adapter-values.yaml").write_text(ADAPTER_VALUES.format())
            files += 1
        files += _app(directory, index, shape, name, team)
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--adapter-every", type=int, default=0)
    parser.add_argument("--units", type=int, default=1)
    parser.add_argument("--overlays", type=int, default=0)
    parser.add_argument("--kind", choices=KINDS, default="mixed")
    parser.add_argument("--doc-scale", type=int, default=1)
    parser.add_argument("--autoscalers-per-target", type=int, default=1)
    parser.add_argument("--per-app", action="store_true")
    parser.add_argument("--charts", action="store_true")
    args = parser.parse_args()
    shape = Shape(
        args.apps,
        args.adapter_every,
        args.units,
        args.overlays,
        args.kind,
        args.doc_scale,
        args.autoscalers_per_target,
        args.per_app,
        args.charts,
    )
    print(f"{generate(args.out, shape)} files: {shape.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
