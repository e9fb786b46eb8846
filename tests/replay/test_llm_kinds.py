"""``gpulint replay`` of the autoscalers the LLM serving stacks make from their own settings:
an LLMInferenceService's WVA actuator HPA (``wva_desired_replicas`` against a ``Value`` target
of 1, as KServe writes it), beside a plain HPA reading the same count as WVA's sample does
(``AverageValue`` 1), over four hours in which WVA asks for 2 replicas, then 1; and which of
the kinds the plan takes.

The replayed controller is gpulint's model of Kubernetes' (gpulint/replay/replicas.py; its
parity with kubernetes/kubernetes' replica_calculator_test.go is tests/replay/
test_controller_parity.py): what it shows is what GL411 says.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpulint.cli import main
from gpulint.engine.config import Settings
from gpulint.engine.runner import inventory_from_paths
from gpulint.replay.plan import plan
from tests.live.conftest import require_prometheus
from tests.live.harness import PrometheusServer

STEP = 15.0
HOURS = 4
OBSERVED = 2  # replicas kube-state-metrics saw at the start

OBJECTS = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: prometheus-adapter
  namespace: monitoring
  labels: {app.kubernetes.io/name: prometheus-adapter}
data:
  config.yaml: |
    externalRules:
    - seriesQuery: 'wva_desired_replicas{variant_name!="",exported_namespace!=""}'
      resources:
        overrides:
          exported_namespace: {resource: namespace}
          variant_name: {resource: deployment}
      metricsQuery: 'wva_desired_replicas{<<.LabelMatchers>>}'
---
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata: {name: granite, namespace: llm}
spec:
  model: {uri: hf://ibm-granite/granite-3.3-8b-instruct}
  scaling:
    minReplicas: 1
    maxReplicas: 8
    wva:
      hpa:
        behavior:
          scaleUp: {stabilizationWindowSeconds: 0}
          scaleDown: {stabilizationWindowSeconds: 300}
  template:
    containers:
    - name: main
      resources:
        limits: {nvidia.com/gpu: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: plain, namespace: llm}
spec:
  selector: {matchLabels: {app: plain}}
  template:
    metadata: {labels: {app: plain}}
    spec:
      containers:
      - {name: vllm, image: vllm/vllm-openai:v0.11.0, resources: {limits: {nvidia.com/gpu: "1"}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: plain, namespace: llm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: plain}
  minReplicas: 1
  maxReplicas: 8
  behavior:
    scaleUp: {stabilizationWindowSeconds: 0}
    scaleDown: {stabilizationWindowSeconds: 300}
  metrics:
  - type: External
    external:
      metric:
        name: wva_desired_replicas
        selector: {matchLabels: {variant_name: plain-va}}
      target: {type: AverageValue, averageValue: "1"}
"""

KINDS = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: llama, namespace: nim}
spec:
  image: {repository: nvcr.io/nim/meta/llama-3.1-8b-instruct, tag: "1.3.3"}
  resources:
    limits: {nvidia.com/gpu: 1}
  scale:
    enabled: true
    hpa:
      maxReplicas: 4
      metrics:
      - type: Resource
        resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
---
apiVersion: production-stack.vllm.ai/v1alpha1
kind: VLLMRuntime
metadata: {name: runtime, namespace: serving}
spec:
  model: {modelURL: meta-llama/Llama-3.1-8B-Instruct}
  deploymentConfig:
    replicas: 1
    resources: {gpu: "1"}
    image: {registry: docker.io, name: "lmcache/vllm-openai:latest"}
  autoscalingConfig:
    enabled: true
    maxReplicas: 4
    scaleDownPolicy: {stabilizationWindowSeconds: 600}
---
apiVersion: autoscaling.aibrix.ai/v1alpha1
kind: PodAutoscaler
metadata: {name: deepseek, namespace: default}
spec:
  scalingStrategy: HPA
  maxReplicas: 8
  metricsSources:
  - {metricSourceType: pod, targetMetric: vllm_num_requests_waiting, targetValue: "4"}
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: deepseek}
"""


def _history(start: float) -> str:
    """WVA asks for 2 replicas for two hours, then for 1; 2 replicas were observed."""
    points = int(HOURS * 3600 / STEP) + 1
    lines = [
        "# HELP wva_desired_replicas The desired number of replicas.",
        "# TYPE wva_desired_replicas gauge",
    ]
    for variant in ("granite-kserve-hpa", "plain-va"):
        labels = f'{{exported_namespace="llm",namespace="wva",variant_name="{variant}"}}'
        for i in range(points):
            wanted = 2 if i * STEP < 2 * 3600 else 1
            lines.append(f"wva_desired_replicas{labels} {wanted} {start + i * STEP:.0f}")
    lines += [
        "# HELP kube_deployment_status_replicas The number of replicas per deployment.",
        "# TYPE kube_deployment_status_replicas gauge",
    ]
    for deployment in ("granite-kserve", "plain"):
        labels = f'{{deployment="{deployment}",namespace="llm"}}'
        for i in range(points):
            lines.append(
                f"kube_deployment_status_replicas{labels} {OBSERVED} {start + i * STEP:.0f}"
            )
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_prometheus()
    workdir = tmp_path_factory.mktemp("wva")
    inputs = workdir / "input"
    inputs.mkdir()
    (inputs / "objects.yaml").write_text(OBJECTS)
    start = math.floor(time.time() / 86400) * 86400 - 2 * 86400
    server = PrometheusServer(
        workdir / "prometheus",
        '{"global": {"scrape_interval": "15s"}, "scrape_configs": []}',
        backfill=_history(start),
    )
    server.start()
    out = workdir / "replay.json"
    try:
        main(
            [
                "replay",
                str(inputs),
                "--no-config",
                "--prometheus",
                server.url,
                "--end",
                str(start + HOURS * 3600),
                "--range",
                f"{HOURS}h",
                "--format",
                "json",
                "-o",
                str(out),
            ]
        )
    finally:
        server.stop()
    report = json.loads(out.read_text())
    yield {r["autoscaler"]["name"]: r for r in report["replays"]}


@pytest.mark.slow
def test_kserve_wva_hpa_climbs_to_its_maximum_where_average_value_follows_wva(
    replayed: dict[str, Any],
) -> None:
    kserve, plain = replayed["granite-kserve-hpa"], replayed["plain"]
    assert kserve["autoscaler"]["kind"] == "HorizontalPodAutoscaler"
    assert kserve["target"] == {"kind": "Deployment", "name": "granite-kserve"}
    # ceil(2 / 1 x 2 ready) = 4, then ceil(2 x 4) capped at 8; a count of 1 is a ratio of 1,
    # within the tolerance: it stays at 8 for the two hours WVA asks for one replica.
    assert [(e["from"], e["to"]) for e in kserve["events"]] == [(2, 4), (4, 8)]
    assert kserve["figures"]["time_at_max_s"] > 3 * 3600
    # The same count read as WVA's sample reads it: 2, then 1 once the 300 s window passes.
    assert [(e["from"], e["to"]) for e in plain["events"]] == [(2, 1)]
    assert plain["figures"]["time_at_max_s"] == 0
    assert kserve["figures"]["gpu_hours_used"] > 4 * plain["figures"]["gpu_hours_used"]
    # Saturated at the maximum, said where it is written: spec.scaling.maxReplicas.
    (saturated,) = [f for f in kserve["findings"] if f["rule"] == "GL952"]
    assert saturated["location"]["line"] == OBJECTS.splitlines().index("    maxReplicas: 8") + 1
    assert saturated["fix"].startswith("spec:\n  scaling:\n    maxReplicas: 16")


def test_the_plan_takes_what_the_kinds_make(tmp_path: Path) -> None:
    """NIMService's HPA (a CPU metric: not replayable, said why), VLLMRuntime's ScaledObject
    (four prometheus triggers on the VLLMRuntime's /scale) and AIBrix's HPA (a Pods metric
    no adapter of the input serves, said why)."""
    (tmp_path / "kinds.yaml").write_text(KINDS)
    found = plan(inventory_from_paths([str(tmp_path)], Settings()))
    specs = {(s.kind, s.name): s for s in found.specs}
    runtime = specs[("ScaledObject", "runtime-scaledobject")]
    assert runtime.target_kind == "VLLMRuntime" and runtime.max_replicas == 4
    assert len(runtime.metrics) == 4
    assert runtime.metrics[0].target_type == "Value"
    assert runtime.behavior_path == ("spec", "autoscalingConfig")
    reasons = {(s.kind, s.name): s.reason for s in found.skipped}
    assert reasons[("HorizontalPodAutoscaler", "llama")] == (
        "metric 1 is a Resource metric, which comes from metrics-server, not Prometheus"
    )
    assert "vllm_num_requests_waiting" in reasons[("HorizontalPodAutoscaler", "deepseek-hpa")]
    # Nothing is reported as generated and missing from the input: the input says it.
    assert not [s for s in found.skipped if "is not in the input" in s.reason]


def test_a_patch_for_a_made_autoscaler_says_where_its_settings_are_written(
    tmp_path: Path,
) -> None:
    """The HPA a controller makes from a VLLMRuntime's or NIMService's settings: a
    recommendation's paths are the made autoscaler's, so the patch names the settings they
    are written in, not a line of the owner that holds no such field."""
    from gpulint.replay.search import _Change, _patch

    (tmp_path / "objects.yaml").write_text(OBJECTS)
    inventory = inventory_from_paths([str(tmp_path)], Settings())
    made = [spec for spec in plan(inventory, None).specs if spec.max_path is not None]
    assert made
    for spec in made:
        behavior = {"scaleDown": {"stabilizationWindowSeconds": 600}}
        patch = _patch(spec, [_Change(("spec", "behavior"), "behavior", behavior, False)])
        settings = ".".join(str(step) for step in spec.max_path[:-1])
        where = spec.document.location(spec.max_path[:-1])
        first, *rest = patch.splitlines()
        assert first == (
            f"# {spec.kind} {spec.key} is made from {where.file}:{where.line} ({settings}): "
            "set the fields below there, as it names them"
        )
        assert not any(line.startswith("# ") and ".yaml:" in line for line in rest)
        assert "stabilizationWindowSeconds: 600" in patch
