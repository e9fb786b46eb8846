"""Objects the webhook tests admit, modelled on the seeds' recipes (examples/seed-*)."""

from __future__ import annotations

from typing import Any


def deployment(
    name: str = "llm-server", namespace: str = "llm", gpus: int | None = 2, image: str = "v1"
) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": {"cpu": "4", "memory": "32Gi"}}
    if gpus is not None:
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "server",
                            "image": f"vllm/vllm-openai:{image}",
                            "resources": resources,
                        }
                    ]
                },
            },
        },
    }


_BEHAVIOR = {
    "scaleUp": {
        "stabilizationWindowSeconds": 60,
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
    },
    "scaleDown": {
        "stabilizationWindowSeconds": 600,
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}],
    },
}


def cpu_hpa(
    name: str = "llm-server", namespace: str = "llm", target: str = "llm-server"
) -> dict[str, Any]:
    """The pitfall: an HPA on CPU for a Deployment that asks for GPUs."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 70},
                    },
                }
            ],
            "behavior": _BEHAVIOR,
        },
    }


def gpu_hpa(
    name: str = "llm-server-gpu",
    namespace: str = "llm",
    target: str = "llm-server",
    behavior: bool = True,
    metric: str = "gpu_utilization",
) -> dict[str, Any]:
    """An HPA on a GPU metric, as the prometheus-adapter rule of the cluster tests names it."""
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": metric},
                    "target": {"type": "AverageValue", "averageValue": "60"},
                },
            }
        ],
    }
    if behavior:
        spec["behavior"] = _BEHAVIOR
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def isvc_with_mode_field(name: str = "triton-gpu", namespace: str = "default") -> dict[str, Any]:
    """The pitfall: KServe's deploymentMode written as a spec field (seed-ja)."""
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "predictor": {
                "deploymentMode": "RawDeployment",
                "minReplicas": 1,
                "maxReplicas": 5,
                "triton": {
                    "storageUri": "gs://models/triton",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                },
            }
        },
    }


def isvc_standard(name: str = "triton-gpu", namespace: str = "default") -> dict[str, Any]:
    """The same InferenceService, corrected: the mode as an annotation."""
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {
                "serving.kserve.io/deploymentMode": "Standard",
                "serving.kserve.io/autoscalerClass": "external",
            },
        },
        "spec": {
            "predictor": {
                "minReplicas": 1,
                "maxReplicas": 5,
                "triton": {
                    "storageUri": "gs://models/triton",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                },
            }
        },
    }


def configmap(name: str = "settings", namespace: str = "llm") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"key": "value"},
    }


def isvc_knative(name: str = "llm", namespace: str = "default") -> dict[str, Any]:
    """A GPU InferenceService left in KServe's Knative mode: a warning (GL306), no error."""
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "predictor": {
                "model": {
                    "modelFormat": {"name": "huggingface"},
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            }
        },
    }


def half_gpu_deployment(name: str = "half-gpu", namespace: str = "llm") -> dict[str, Any]:
    """A Deployment that asks for half a GPU: GL501 refuses it on its own."""
    obj = deployment(name, namespace)
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = (
        "0.5"
    )
    return obj


def slow_adapter_configmap() -> dict[str, Any]:
    """A prometheus-adapter ConfigMap whose embedded YAML takes seconds to parse: about 0.9 MB
    with a quarter of a million scalars, far more than the worker's limit (half the
    --deadline) allows, so its review is answered only at its deadline."""
    lines = "".join(f"k{i}: [{', '.join(str(j) for j in range(20))}]\n" for i in range(12000))
    config = "rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n  metricsQuery: x\n" + lines
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "prometheus-adapter",
            "namespace": "monitoring",
            "labels": {"app.kubernetes.io/name": "prometheus-adapter"},
        },
        "data": {"config.yaml": config},
    }
