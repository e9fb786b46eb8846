"""``gpulint trace`` through the LLM serving kinds: from the serving metric, through the query
or the adapter rule, to the autoscaler each kind makes and the workload it makes, and to the
objects that say where a series comes from (a VariantAutoscaling, an InferencePool)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpulint.cli import main

ADAPTER = """\
rules:
  default: false
  custom:
  - seriesQuery: 'vllm:num_requests_waiting{namespace!="",pod!=""}'
    resources:
      overrides:
        namespace: {resource: "namespace"}
        pod: {resource: "pod"}
    name: {matches: "^vllm:(.*)$", as: "vllm_${1}"}
    metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
  external:
  - seriesQuery: 'wva_desired_replicas{variant_name!="",exported_namespace!=""}'
    resources:
      overrides:
        exported_namespace: {resource: "namespace"}
        variant_name: {resource: "deployment"}
    metricsQuery: 'wva_desired_replicas{<<.LabelMatchers>>}'
"""

KINDS = """\
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata: {name: granite, namespace: llm}
spec:
  model: {uri: hf://ibm-granite/granite-3.3-8b-instruct}
  scaling:
    maxReplicas: 4
    wva:
      hpa: {}
  template:
    containers:
    - name: main
      resources: {limits: {nvidia.com/gpu: "1"}}
  prefill:
    scaling:
      maxReplicas: 2
      keda:
        triggers:
        - type: prometheus
          metadata:
            serverAddress: http://prometheus-operated.monitoring.svc:9090
            query: max(llm_d_epp_flow_control_pool_saturation{inference_pool="granite-pool"})
            threshold: "0.8"
    template:
      containers:
      - name: main
        resources: {limits: {nvidia.com/gpu: "1"}}
---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: granite-pool, namespace: llm}
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: granite}
  targetPorts: [{number: 8000}]
---
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: llama, namespace: nim}
spec:
  image: {repository: nvcr.io/nim/meta/llama-3.1-8b-instruct, tag: "1.3.3"}
  resources: {limits: {nvidia.com/gpu: 2}}
  scale:
    enabled: true
    hpa:
      maxReplicas: 4
      metrics:
      - type: Pods
        pods:
          metric: {name: vllm_num_requests_waiting}
          target: {type: AverageValue, averageValue: "4"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: deepseek, namespace: default}
spec:
  selector: {matchLabels: {app: deepseek}}
  template:
    metadata: {labels: {app: deepseek}}
    spec:
      containers:
      - {name: vllm, image: vllm/vllm-openai:v0.11.0, resources: {limits: {nvidia.com/gpu: "1"}}}
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
---
apiVersion: production-stack.vllm.ai/v1alpha1
kind: VLLMRuntime
metadata: {name: runtime, namespace: serving}
spec:
  model: {modelURL: meta-llama/Llama-3.1-8B-Instruct}
  deploymentConfig:
    replicas: 1
    resources: {gpu: "2"}
    image: {registry: docker.io, name: "lmcache/vllm-openai:latest"}
  autoscalingConfig:
    enabled: true
    maxReplicas: 4
---
apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata: {name: llama-8b, namespace: llm-inference}
spec:
  scaleTargetRef: {kind: Deployment, name: llama-8b}
  modelID: meta/llama-3.1-8b
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llama-8b, namespace: llm-inference}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llama-8b}
  maxReplicas: 8
  metrics:
  - type: External
    external:
      metric:
        name: wva_desired_replicas
        selector: {matchLabels: {variant_name: llama-8b}}
      target: {type: AverageValue, averageValue: "1"}
---
apiVersion: kubeai.org/v1
kind: Model
metadata: {name: qwen, namespace: kubeai}
spec:
  features: [TextGeneration]
  engine: VLLM
  url: hf://Qwen/Qwen2.5-7B-Instruct
  resourceProfile: nvidia-gpu-l4:1
  autoscalingDisabled: true
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: qwen, namespace: kubeai}
spec:
  scaleTargetRef: {apiVersion: kubeai.org/v1, kind: Model, name: qwen}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: vllm_num_requests_waiting}
      target: {type: AverageValue, averageValue: "4"}
"""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], Any]:
    root = tmp_path_factory.mktemp("trace")
    (root / "adapter-values.yaml").write_text(ADAPTER)
    (root / "kinds.yaml").write_text(KINDS)
    out = root / "trace.json"
    main(["trace", str(root), "-f", "json", "-o", str(out), "--no-config"])
    found = json.loads(out.read_text())["traces"]
    return {(t["autoscaler"]["kind"], t["autoscaler"]["name"], t["metric"]): t for t in found}


def links(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {link["stage"]: link for link in trace["links"]}


def test_llm_inference_service_wva_hpa_through_the_adapter(
    traces: dict[tuple[str, str, str], Any],
) -> None:
    trace = traces[("LLMInferenceService", "granite", "wva_desired_replicas")]
    stages = links(trace)
    assert stages["workload"]["status"] == "ok"
    assert stages["workload"]["detail"] == (
        "Deployment llm/granite-kserve: 1 nvidia.com/gpu per pod "
        "(made by LLMInferenceService llm/granite)"
    )
    assert stages["adapter-rule"]["status"] == "ok"
    assert stages["autoscaler"]["status"] == "broken"  # GL411: KServe's Value target
    assert "GL411" in stages["autoscaler"]["findings"]


def test_llm_inference_service_keda_query_names_its_inference_pool(
    traces: dict[tuple[str, str, str], Any],
) -> None:
    trace = traces[("LLMInferenceService", "granite", "s0-prometheus")]
    stages = links(trace)
    assert stages["workload"]["detail"].startswith("Deployment llm/granite-kserve-prefill: 1 ")
    assert stages["exporter"]["status"] == "ok"
    assert stages["exporter"]["object"]["kind"] == "InferencePool"
    assert stages["exporter"]["detail"] == (
        "llm_d_epp_flow_control_pool_saturation is the endpoint picker's, for InferencePool "
        "llm/granite-pool (the model server pods with app.kubernetes.io/name=granite)"
    )
    assert stages["autoscaler"]["detail"].startswith("KEDA prometheus trigger: max(llm_d_epp")
    # GL411 on the decode workload's HPA (spec.scaling) is not the prefill ScaledObject's.
    assert stages["autoscaler"]["status"] == "ok"
    assert stages["autoscaler"]["findings"] == []


def test_nimservice_aibrix_and_vllmruntime_autoscalers(
    traces: dict[tuple[str, str, str], Any],
) -> None:
    nim = links(traces[("NIMService", "llama", "vllm_num_requests_waiting")])
    assert nim["workload"]["detail"] == (
        "Deployment nim/llama: 2 nvidia.com/gpu per pod (made by NIMService nim/llama)"
    )
    assert nim["adapter-rule"]["status"] == "ok"
    assert nim["autoscaler"]["detail"] == "Pods metric vllm_num_requests_waiting, target 4"
    aibrix = links(traces[("PodAutoscaler", "deepseek", "vllm_num_requests_waiting")])
    assert aibrix["workload"]["detail"] == "Deployment default/deepseek: 1 nvidia.com/gpu per pod"
    assert aibrix["adapter-rule"]["status"] == "ok"
    runtime = [t for key, t in traces.items() if key[:2] == ("VLLMRuntime", "runtime")]
    assert sorted(t["metric"] for t in runtime) == [f"s{i}-prometheus" for i in range(4)]
    first = links(runtime[0])
    assert first["workload"]["detail"] == "VLLMRuntime serving/runtime: 2 nvidia.com/gpu per pod"
    assert first["prometheus"]["detail"].startswith(
        "ScaledObject runtime-scaledobject trigger 0 queries "
        "http://kube-prom-stack-kube-prome-prometheus.monitoring.svc:9090"
    )


def test_variant_autoscaling_and_kubeai_model_in_the_traces_of_their_hpas(
    traces: dict[tuple[str, str, str], Any],
) -> None:
    wva = links(traces[("HorizontalPodAutoscaler", "llama-8b", "wva_desired_replicas")])
    assert wva["exporter"]["object"]["kind"] == "VariantAutoscaling"
    assert "published by llm-d's Workload Variant Autoscaler" in wva["exporter"]["detail"]
    assert wva["autoscaler"]["status"] == "ok"  # AverageValue: no GL411
    model = links(traces[("HorizontalPodAutoscaler", "qwen", "vllm_num_requests_waiting")])
    assert model["workload"]["status"] == "ok"
    assert model["workload"]["object"]["kind"] == "Model"


def test_a_variant_of_another_namespace_is_not_its_source(tmp_path: Path) -> None:
    """variant_name and exported_namespace both select the VariantAutoscaling."""
    other = KINDS.replace(
        "metadata: {name: llama-8b, namespace: llm-inference}\nspec:\n  scaleTargetRef",
        "metadata: {name: llama-8b, namespace: staging}\nspec:\n  scaleTargetRef",
    )
    other = other.replace(
        "selector: {matchLabels: {variant_name: llama-8b}}",
        "selector: {matchLabels: {variant_name: llama-8b, exported_namespace: llm-inference}}",
    )
    (tmp_path / "kinds.yaml").write_text(other)
    out = tmp_path / "trace.json"
    main(["trace", str(tmp_path), "-f", "json", "-o", str(out), "--no-config"])
    found = json.loads(out.read_text())["traces"]
    (hpa,) = [t for t in found if t["autoscaler"]["name"] == "llama-8b"]
    assert links(hpa)["exporter"]["status"] == "unknown"
