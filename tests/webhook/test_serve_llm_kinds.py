"""``gpulint serve`` over a cluster judges the LLM serving kinds as they are admitted: the real
process, the fake API server (tests/kubefake.py), real TLS. Each kind is admitted where it
goes wrong and where it does not, and the generated webhook configuration sends it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gpulint.kinds.registry import KINDS

from ..conftest import ROOT
from ..kubefake import FakeCluster, KubeFake
from .harness import Certificates, Webhook, admission_review, serving_cluster

# What the cluster holds before the admissions: a GPU Deployment scaled by an HPA, a KubeAI
# Model that KubeAI autoscales, a VariantAutoscaling, and a ScaledObject on the Deployment a
# VLLMRuntime of that name would make.
CLUSTER = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: deepseek, namespace: llm}
spec:
  selector: {matchLabels: {app: deepseek}}
  template:
    metadata: {labels: {app: deepseek}}
    spec:
      containers:
      - {name: vllm, image: vllm/vllm-openai:v0.11.0, resources: {limits: {nvidia.com/gpu: "1"}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: deepseek, namespace: llm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: deepseek}
  maxReplicas: 4
  behavior:
    scaleUp: {stabilizationWindowSeconds: 0}
    scaleDown: {stabilizationWindowSeconds: 300}
  metrics:
  - type: Pods
    pods:
      metric: {name: vllm_num_requests_waiting}
      target: {type: AverageValue, averageValue: "4"}
---
apiVersion: kubeai.org/v1
kind: Model
metadata: {name: qwen, namespace: kubeai}
spec:
  features: [TextGeneration]
  engine: VLLM
  url: hf://Qwen/Qwen2.5-7B-Instruct
  resourceProfile: nvidia-gpu-l4:1
  minReplicas: 1
  maxReplicas: 4
---
apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata: {name: llama-8b, namespace: llm-d}
spec:
  scaleTargetRef: {kind: Deployment, name: llama-8b}
  modelID: meta/llama-3.1-8b
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: runtime, namespace: serving}
spec:
  scaleTargetRef: {name: runtime}
  maxReplicaCount: 4
  advanced:
    horizontalPodAutoscalerConfig:
      behavior:
        scaleUp: {stabilizationWindowSeconds: 0}
        scaleDown: {stabilizationWindowSeconds: 300}
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus.monitoring:9090
      query: sum(vllm:num_requests_waiting{namespace="serving"})
      threshold: "4"
"""

NIM_ON_CPU = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: llama, namespace: nim}
spec:
  image: {repository: nvcr.io/nim/meta/llama-3.1-8b-instruct, tag: "1.3.3"}
  resources: {limits: {nvidia.com/gpu: 1}}
  scale:
    enabled: true
    hpa:
      maxReplicas: 3
      behavior:
        scaleUp: {stabilizationWindowSeconds: 0}
        scaleDown: {stabilizationWindowSeconds: 300}
      metrics:
      - type: Resource
        resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
"""

LLMISVC = """
apiVersion: serving.kserve.io/v1alpha1
kind: LLMInferenceService
metadata: {name: qwen2, namespace: llm}
spec:
  model: {uri: hf://Qwen/Qwen2.5-7B-Instruct}
  replicas: 2
  template:
    containers:
    - name: main
      resources: {limits: {nvidia.com/gpu: "1"}}
"""

PODAUTOSCALER = """
apiVersion: autoscaling.aibrix.ai/v1alpha1
kind: PodAutoscaler
metadata: {name: deepseek-apa, namespace: llm}
spec:
  scalingStrategy: APA
  minReplicas: 1
  maxReplicas: 4
  metricsSources:
  - {metricSourceType: pod, targetMetric: gpu_cache_usage_perc, targetValue: "0.5"}
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: deepseek}
"""

VLLMRUNTIME = """
apiVersion: production-stack.vllm.ai/v1alpha1
kind: VLLMRuntime
metadata: {name: runtime, namespace: serving}
spec:
  model: {modelURL: meta-llama/Llama-3.1-8B-Instruct}
  deploymentConfig:
    replicas: 1
    resources: {gpu: "1"}
    image: {registry: docker.io, name: "lmcache/vllm-openai:latest"}
"""

WVA_HPA = """
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llama-8b, namespace: llm-d}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llama-8b}
  maxReplicas: 8
  metrics:
  - type: External
    external:
      metric:
        name: wva_desired_replicas
        selector: {matchLabels: {variant_name: llama-8b}}
      target: {type: Value, value: "1"}
"""


def _object(text: str) -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load(text)
    return found


@pytest.fixture(scope="module")
def served(
    module_certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    cluster = FakeCluster()
    for document in yaml.safe_load_all(CLUSTER):
        cluster.apply(document)
    with KubeFake(cluster) as kube:
        directory = tmp_path_factory.mktemp("serve-llm-kinds")
        with serving_cluster(kube, module_certificates, directory) as webhook:
            yield webhook


def _refused_by(response: dict[str, Any]) -> list[str]:
    assert response["allowed"] is False, response
    message: str = response["status"]["message"]
    return sorted({line.split()[0] for line in message.splitlines()[1:] if line.startswith("GL")})


def test_a_nimservice_on_cpu_is_refused_and_on_a_gpu_metric_allowed(served: Webhook) -> None:
    nim = _object(NIM_ON_CPU)
    assert _refused_by(served.review(admission_review(nim))) == ["GL101"]
    nim["spec"]["scale"]["hpa"]["metrics"] = [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "vllm_num_requests_waiting"},
                "target": {"type": "AverageValue", "averageValue": "4"},
            },
        }
    ]
    response = served.review(admission_review(nim))
    assert response["allowed"] is True
    assert not response.get("warnings")


def test_a_nimservice_kserve_would_scale_on_cpu_is_refused(served: Webhook) -> None:
    nim = _object(NIM_ON_CPU)
    nim["spec"]["inferencePlatform"] = "kserve"
    nim["spec"]["annotations"] = {"serving.kserve.io/deploymentMode": "Standard"}
    assert _refused_by(served.review(admission_review(nim))) == ["GL133"]


def test_an_llm_inference_service_with_replicas_and_scaling_is_refused(served: Webhook) -> None:
    llmisvc = _object(LLMISVC)
    response = served.review(admission_review(copy.deepcopy(llmisvc)))
    assert response["allowed"] is True  # replicas alone: KServe keeps them
    llmisvc["spec"]["scaling"] = {
        "minReplicas": 1,
        "maxReplicas": 4,
        "wva": {
            "keda": {
                "advanced": {
                    "horizontalPodAutoscalerConfig": {
                        "behavior": {
                            "scaleUp": {"stabilizationWindowSeconds": 0},
                            "scaleDown": {"stabilizationWindowSeconds": 300},
                        }
                    }
                }
            }
        },
    }
    assert _refused_by(served.review(admission_review(llmisvc))) == ["GL130"]


def test_an_aibrix_podautoscaler_beside_the_cluster_hpa_is_refused(served: Webhook) -> None:
    autoscaler = _object(PODAUTOSCALER)
    assert _refused_by(served.review(admission_review(copy.deepcopy(autoscaler)))) == ["GL131"]
    autoscaler["spec"]["scaleTargetRef"]["name"] = "another"
    assert served.review(admission_review(autoscaler))["allowed"] is True


def test_an_hpa_on_a_kubeai_model_is_refused_until_kubeai_stops_scaling_it(
    served: Webhook,
) -> None:
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "qwen", "namespace": "kubeai"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "kubeai.org/v1", "kind": "Model", "name": "qwen"},
            "maxReplicas": 4,
        },
    }
    assert _refused_by(served.review(admission_review(hpa))) == ["GL132"]
    # The Model's update that turns KubeAI's autoscaling off is judged with the HPA it leaves
    # alone: allowed.
    model = _object(CLUSTER.split("---")[2])
    disabled = copy.deepcopy(model)
    disabled["spec"]["autoscalingDisabled"] = True
    response = served.review(admission_review(disabled, "UPDATE", old=model))
    assert response["allowed"] is True


def test_a_vllmruntime_whose_deployment_keda_scales_is_refused(served: Webhook) -> None:
    runtime = _object(VLLMRUNTIME)
    assert _refused_by(served.review(admission_review(copy.deepcopy(runtime)))) == ["GL130"]
    runtime["metadata"]["namespace"] = "elsewhere"
    assert served.review(admission_review(runtime))["allowed"] is True


def test_an_hpa_reading_a_variant_count_on_a_value_target_is_refused(served: Webhook) -> None:
    hpa = _object(WVA_HPA)
    assert _refused_by(served.review(admission_review(copy.deepcopy(hpa)))) == ["GL411"]
    hpa["spec"]["metrics"][0]["external"]["target"] = {"type": "AverageValue", "averageValue": "1"}
    assert served.review(admission_review(hpa))["allowed"] is True


def test_the_webhook_configuration_sends_every_llm_kind() -> None:
    """What the API server sends the webhook is written from the registry (deploy/)."""
    text = (ROOT / "deploy" / "base" / "validatingwebhookconfiguration.yaml").read_text()
    for kind in (
        "LLMInferenceService",
        "NIMService",
        "VLLMRuntime",
        "PodAutoscaler",
        "Model",
        "VariantAutoscaling",
    ):
        specs = [s for s in KINDS if s.kind == kind and s.evaluated and s.group != ""]
        assert specs, kind
        for spec in specs:
            assert f'resources: ["{spec.plural}"]' in text, spec.plural
