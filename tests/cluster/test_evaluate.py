"""Admission evaluation over the cached cluster: CREATE, UPDATE, DELETE, deadlines, focus."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from gpulint.cluster.cache import ClusterCache, evaluate_alone
from gpulint.core.deadline import DeadlineExceeded
from gpulint.engine import registry as engine
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection

from ..kubefake import KubeFake
from .conftest import wait_for

CLUSTER = """
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
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: triton, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: triton}
  minReplicas: 1
  maxReplicas: 4
  behavior:
    scaleDown: {stabilizationWindowSeconds: 600}
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}
      target: {type: AverageValue, averageValue: "60"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend, namespace: web}
spec:
  selector: {matchLabels: {app: frontend}}
  template:
    metadata: {labels: {app: frontend}}
    spec:
      containers:
      - {name: web, image: nginx, resources: {requests: {cpu: 100m}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: frontend, namespace: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: frontend}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
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
apiVersion: v1
kind: ConfigMap
metadata: {name: inferenceservice-config, namespace: kserve}
data:
  deploy: '{"defaultDeploymentMode": "Standard"}'
---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llm
  namespace: ml
  annotations: {serving.kserve.io/autoscalerClass: external}
spec:
  predictor:
    minReplicas: 1
    maxReplicas: 2
    model:
      modelFormat: {name: huggingface}
      resources: {limits: {nvidia.com/gpu: 1}}
"""

SCALED_OBJECT = {
    "apiVersion": "keda.sh/v1alpha1",
    "kind": "ScaledObject",
    "metadata": {"name": "triton-queue", "namespace": "ml"},
    "spec": {
        "scaleTargetRef": {"name": "triton"},
        "minReplicaCount": 1,  # at zero, Triton's own series could not wake it (GL117)
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {
                    "scaleUp": {"stabilizationWindowSeconds": 0},
                    "scaleDown": {"stabilizationWindowSeconds": 600},
                }
            }
        },
        "triggers": [
            {
                "type": "prometheus",
                "metadata": {
                    "serverAddress": "http://prometheus.monitoring:9090",
                    "query": 'sum(nv_inference_queue_duration_us{namespace="ml"})',
                    "threshold": "100",
                },
            }
        ],
    },
}


@pytest.fixture
def cache(fake: KubeFake, new_cache: Callable[..., ClusterCache]) -> ClusterCache:
    fake.cluster.load(CLUSTER)
    made = new_cache()
    wait_for(made.synced, what="sync")
    return made


def _stored(fake: KubeFake, plural: str, namespace: str, name: str) -> dict[str, Any]:
    with fake.cluster.lock:
        obj = fake.cluster.objects[plural][(namespace, name)]
        resource = next(r for r in fake.cluster.resources.values() if r.key == plural)
        return copy.deepcopy(fake.cluster.encode(resource, obj, in_list=False))


def _snapshot(cache: ClusterCache) -> tuple[Any, ...]:
    with cache.lock:
        inventory = cache.inventory
        return (
            sorted(id(m) for m in inventory.manifests),
            sorted(
                (key, [id(a.manifest) for a in group.autoscalers])
                for key, group in inventory.target_groups().items()
            ),
            len(inventory.hpas),
            len(inventory.adapter_configs),
            inventory.kserve_default_mode,
        )


def test_a_scaledobject_created_while_an_hpa_scales_the_deployment(cache: ClusterCache) -> None:
    before = _snapshot(cache)
    findings = cache.evaluate(copy.deepcopy(SCALED_OBJECT), "CREATE")
    assert [(f.rule, f.location.file) for f in findings] == [
        ("GL103", "cluster://ml/ScaledObject/triton-queue")
    ]
    assert "HorizontalPodAutoscaler triton" in findings[0].message
    assert _snapshot(cache) == before  # the overlay is undone


def test_a_deployment_update_that_adds_gpus_under_a_cpu_hpa(
    fake: KubeFake, cache: ClusterCache
) -> None:
    deployment = _stored(fake, "deployments.apps", "web", "frontend")
    assert cache.evaluate(copy.deepcopy(deployment), "UPDATE", old=deployment) == []
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    findings = cache.evaluate(
        deployment, "UPDATE", old=_stored(fake, "deployments.apps", "web", "frontend")
    )
    assert {f.rule for f in findings} >= {"GL101"}
    (gl101,) = [f for f in findings if f.rule == "GL101"]
    assert gl101.location.file == "cluster://web/HorizontalPodAutoscaler/frontend"
    assert "HPA frontend scales only on cpu" in gl101.message
    assert [r.ref.name for r in gl101.related] == ["frontend"]
    # The cached Deployment is the API server's again.
    with cache.lock:
        (cached,) = [m for m in cache.inventory.workloads if m.name == "frontend"]
        assert cached.get(("spec", "template", "spec", "containers", 0, "resources")) == {
            "requests": {"cpu": "100m"}
        }


def test_an_update_without_a_namespace_replaces_the_cached_object(
    fake: KubeFake, cache: ClusterCache
) -> None:
    old = _stored(fake, "horizontalpodautoscalers.autoscaling", "ml", "triton")
    new = copy.deepcopy(old)
    del new["metadata"]["namespace"]
    new["spec"]["maxReplicas"] = 1
    findings = cache.evaluate(new, "UPDATE", old=old)
    # One HPA, not two (no GL103); what is reported is about the admitted object: now GL110
    # (a fixed size), and no longer GL102, since an HPA that cannot scale needs no behavior.
    assert [f.rule for f in findings] == ["GL110"]
    assert {f.location.file for f in findings} == {"cluster://ml/HorizontalPodAutoscaler/triton"}
    assert [f.rule for f in cache.evaluate(copy.deepcopy(old), "UPDATE", old=old)] == ["GL102"]


def test_an_adapter_configmap_update_that_renames_a_metric(
    fake: KubeFake, cache: ClusterCache
) -> None:
    configmap = _stored(fake, "configmaps", "monitoring", "adapter")
    changed = copy.deepcopy(configmap)
    changed["data"]["config.yaml"] = changed["data"]["config.yaml"].replace(
        "as: gpu_utilization", "as: gpu_utilisation"
    )
    findings = cache.evaluate(changed, "UPDATE", old=configmap)
    (gl401,) = [f for f in findings if f.rule == "GL401"]
    assert gl401.location.file == "cluster://ml/HorizontalPodAutoscaler/triton"
    assert "Did you mean gpu_utilisation" in gl401.message
    assert cache.evaluate(copy.deepcopy(configmap), "UPDATE", old=configmap) == []


def test_an_isvc_created_with_kserves_own_hpa_while_a_user_hpa_exists(cache: ClusterCache) -> None:
    user_hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "chat-gpu", "namespace": "ml"},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "chat-predictor",
            },
            "maxReplicas": 3,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "gpu_utilization"},
                        "target": {"type": "AverageValue", "averageValue": "60"},
                    },
                }
            ],
        },
    }
    assert [f.rule for f in cache.evaluate(user_hpa, "CREATE")] == []
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "ml"},
        "spec": {
            "predictor": {
                "maxReplicas": 2,
                "model": {
                    "modelFormat": {"name": "vllm"},
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                },
            }
        },
    }
    with cache.lock:
        cache.inventory.add_manifest(_manifest(user_hpa))
    try:
        findings = cache.evaluate(isvc, "CREATE")
    finally:
        with cache.lock:
            (added,) = [h for h in cache.inventory.hpas if h.name == "chat-gpu"]
            cache.inventory.remove_manifest(added.manifest)
    gl103 = [f for f in findings if f.rule == "GL103"]
    assert [f.location.file for f in gl103] == ["cluster://ml/HorizontalPodAutoscaler/chat-gpu"]
    assert "InferenceService chat" in gl103[0].message


def _manifest(obj: dict[str, Any]) -> Any:
    from gpulint.cluster.reading import cluster_file
    from gpulint.input.document import Manifest

    return Manifest(copy.deepcopy(obj), cluster_file(obj))


def test_deleting_the_kserve_configmap_reports_what_it_breaks(
    fake: KubeFake, cache: ClusterCache
) -> None:
    configmap = _stored(fake, "configmaps", "kserve", "inferenceservice-config")
    before = _snapshot(cache)
    findings = cache.evaluate(configmap, "DELETE", old=configmap)
    assert before == _snapshot(cache)
    # Without the ConfigMap the default mode is Knative: the GPU InferenceService falls back.
    assert {f.rule for f in findings} >= {"GL306"}
    assert all(f.location.file == "cluster://ml/InferenceService/llm" for f in findings)
    hpa = _stored(fake, "horizontalpodautoscalers.autoscaling", "web", "frontend")
    assert cache.evaluate(hpa, "DELETE", old=hpa) == []


def test_unrelated_problems_are_not_reported(fake: KubeFake, cache: ClusterCache) -> None:
    fake.cluster.create(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "broken", "namespace": "ml"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"},
                "minReplicas": 3,
                "maxReplicas": 3,
            },
        }
    )
    wait_for(lambda: len(cache) == 8, what="the new HPA")
    ok = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "batch", "namespace": "jobs"},
        "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b"}]}}},
    }
    assert cache.evaluate(ok, "CREATE") == []


def test_a_passed_deadline_raises_and_leaves_the_cache_as_it_was(
    cache: ClusterCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(DeadlineExceeded):
        cache.evaluate(copy.deepcopy(SCALED_OBJECT), "CREATE", deadline=time.monotonic() - 1)
    engine.all_rules()
    spec = engine.rule_by_id("GL102")
    assert spec is not None

    def slow(*args: Any) -> Any:
        time.sleep(0.2)
        return iter(())

    monkeypatch.setitem(engine._loaded, "GL102", spec._replace(check=slow))
    before = _snapshot(cache)
    with pytest.raises(DeadlineExceeded):
        cache.evaluate(copy.deepcopy(SCALED_OBJECT), "CREATE", deadline=time.monotonic() + 0.1)
    assert _snapshot(cache) == before


def test_selection_and_bad_input(cache: ClusterCache) -> None:
    only = Selection(["GL1"], ["GL103"])
    assert cache.evaluate(copy.deepcopy(SCALED_OBJECT), "CREATE", selection=only) == []
    assert cache.evaluate({"kind": "ScaledObject"}, "CREATE") == []
    assert cache.evaluate({"apiVersion": "v1", "kind": "Pod", "metadata": {}}, "CREATE") == []
    with pytest.raises(ValueError):
        cache.evaluate(copy.deepcopy(SCALED_OBJECT), "PATCH")


def test_evaluate_alone_sees_only_the_object() -> None:
    documents = list(yaml.safe_load_all(CLUSTER))
    hpa = documents[1]
    broken = copy.deepcopy(hpa)
    broken["spec"]["maxReplicas"] = 0
    assert {f.rule for f in evaluate_alone(broken, "CREATE", Settings())} == {"GL108"}
    # Alone, the HPA's target and the adapter are unknown: nothing cross-object fires.
    assert evaluate_alone(copy.deepcopy(hpa), "CREATE", Settings()) == []
    assert evaluate_alone(broken, "DELETE", Settings()) == []
    assert evaluate_alone({"apiVersion": 1}, "CREATE", Settings()) == []
    with pytest.raises(DeadlineExceeded):
        evaluate_alone(broken, "CREATE", Settings(), deadline=time.monotonic() - 1)
