"""A cluster of any size, with every kind the caches read, for scale tests and measurements."""

from __future__ import annotations

from typing import Any

GPU = {"limits": {"nvidia.com/gpu": 1}}


def _deployment(namespace: str, name: str, gpu: bool, claim: str | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = GPU if gpu and claim is None else {"requests": {"cpu": "250m"}}
    pod: dict[str, Any] = {"containers": [{"name": "app", "image": name, "resources": resources}]}
    if claim is not None:  # the GPU through DRA
        pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim}]
        resources["claims"] = [{"name": "gpu"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
        },
    }


def _claim_template(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            }
        },
    }


def _hpa(namespace: str, name: str, target: str, gpu_metric: bool) -> dict[str, Any]:
    metric: dict[str, Any]
    if gpu_metric:
        metric = {
            "type": "Pods",
            "pods": {
                "metric": {"name": "gpu_utilization"},
                "target": {"type": "AverageValue", "averageValue": "60"},
            },
        }
    else:
        metric = {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 70},
            },
        }
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 1,
            "maxReplicas": 8,
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 60},
                "scaleDown": {"stabilizationWindowSeconds": 600},
            },
            "metrics": [metric],
        },
    }


def big_world(objects: int) -> list[dict[str, Any]]:
    """About ``objects`` objects in namespaces of 50: Deployments with their HPAs (GPU and
    CPU; some GPUs claimed through a ResourceClaimTemplate), ScaledObjects, StatefulSets,
    InferenceServices, Knative Services, and one adapter ConfigMap. Clean: gpulint finds
    nothing to report in it."""
    found: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "adapter",
                "namespace": "monitoring",
                "labels": {"app.kubernetes.io/name": "prometheus-adapter"},
            },
            "data": {
                "config.yaml": (
                    "rules:\n"
                    '- seriesQuery: \'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",'
                    'exported_pod!=""}\'\n'
                    "  resources:\n"
                    "    overrides:\n"
                    "      exported_namespace: {resource: namespace}\n"
                    "      exported_pod: {resource: pod}\n"
                    "  name: {matches: ^DCGM_FI_DEV_GPU_UTIL$, as: gpu_utilization}\n"
                    "  metricsQuery: avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)\n"
                )
            },
        }
    ]
    index = 0
    while len(found) < objects:
        namespace = f"team-{index // 10:03d}"
        name = f"app-{index:05d}"
        shape = index % 10
        if shape < 6:  # a GPU or CPU Deployment with its HPA
            gpu = shape < 3
            claim = f"{name}-gpu" if shape == 2 else None
            if claim is not None:
                found.append(_claim_template(namespace, claim))
            found.append(_deployment(namespace, name, gpu, claim))
            found.append(_hpa(namespace, name, name, gpu))
        elif shape == 6:  # a Deployment scaled by KEDA
            found.append(_deployment(namespace, name, False))
            found.append(
                {
                    "apiVersion": "keda.sh/v1alpha1",
                    "kind": "ScaledObject",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {
                        "scaleTargetRef": {"name": name},
                        "minReplicaCount": 1,
                        "triggers": [
                            {
                                "type": "cpu",
                                "metricType": "Utilization",
                                "metadata": {"value": "70"},
                            }
                        ],
                    },
                }
            )
        elif shape == 7:
            statefulset = _deployment(namespace, name, False)
            statefulset["kind"] = "StatefulSet"
            found.append(statefulset)
        elif shape == 8:
            found.append(
                {
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
                            "maxReplicas": 3,
                            "model": {"modelFormat": {"name": "sklearn"}, "storageUri": "s3://m"},
                        }
                    },
                }
            )
        else:
            found.append(
                {
                    "apiVersion": "serving.knative.dev/v1",
                    "kind": "Service",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {
                        "template": {"spec": {"containers": [{"image": name, "name": "app"}]}}
                    },
                }
            )
        index += 1
    return found[:objects]
