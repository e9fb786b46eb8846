"""DRA in a cluster: ResourceClaimTemplates and ResourceClaims are watched, the claims the
control plane makes for each pod are not kept, and an admitted template is judged by what
it changes for the Deployments whose pods name it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from gpulint.admission.focus import related_items
from gpulint.cluster.cache import ClusterCache
from gpulint.cluster.mode import connect
from gpulint.kinds.workload import ClaimedGpu, pod_templates

from ..kubefake import KubeFake
from .conftest import cached_names, wait_for

CLUSTER = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: ml}
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      resourceClaims:
      - {name: gpus, resourceClaimTemplateName: tp2}
      containers:
      - {name: vllm, image: vllm, resources: {claims: [{name: gpus}]}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: vllm, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  minReplicas: 1
  maxReplicas: 4
  behavior:
    scaleUp: {stabilizationWindowSeconds: 0}
    scaleDown: {stabilizationWindowSeconds: 600}
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: vllm-6f7d9-gpus-k2x8q
  namespace: ml
  annotations: {resource.kubernetes.io/pod-claim-name: gpus}
spec:
  devices:
    requests: [{name: gpus, exactly: {deviceClassName: gpu.nvidia.com, count: 2}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-nic, namespace: ml}
spec:
  devices:
    requests: [{name: vf, exactly: {deviceClassName: sriov.example.com}}]
"""


def _template(device_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "tp2", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpus", "exactly": {"deviceClassName": device_class, "count": 2}}
                    ]
                }
            }
        },
    }


def _vllm_gpus(cache: ClusterCache) -> list[Any]:
    with cache.lock:
        (deployment,) = [m for m in cache.inventory.workloads if m.name == "vllm"]
        (template,) = pod_templates(deployment)
        return template.gpu_requests(cache.inventory.gpu_names)


def test_templates_and_shared_claims_are_watched_and_claims_made_for_pods_are_not(
    fake: KubeFake, kubeconfig: Path, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(CLUSTER)
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    state = cache.sync_state()
    assert state["resourceclaimtemplates.resource.k8s.io"] == "synced"
    assert state["resourceclaims.resource.k8s.io"] == "synced"
    assert cached_names(cache, "ResourceClaim") == {"shared-nic"}
    (untold,) = _vllm_gpus(cache)
    assert isinstance(untold, ClaimedGpu) and untold.untold

    api = client.CustomObjectsApi(connect(str(kubeconfig))[0])
    group = ("resource.k8s.io", "v1", "ml", "resourceclaimtemplates")
    api.create_namespaced_custom_object(*group, _template("gpu.nvidia.com"))
    wait_for(lambda: cached_names(cache, "ResourceClaimTemplate") == {"tp2"}, what="ADDED")
    (gpus,) = _vllm_gpus(cache)
    assert isinstance(gpus, ClaimedGpu) and not gpus.untold and gpus.count == 2
    assert gpus.source is not None and gpus.source.file == "cluster://ml/ResourceClaimTemplate/tp2"
    api.delete_namespaced_custom_object(*group, "tp2")
    wait_for(lambda: not cached_names(cache, "ResourceClaimTemplate"), what="DELETED")
    assert [g.untold for g in _vllm_gpus(cache)] == [True]


def test_a_template_is_judged_by_the_cpu_hpas_on_the_pods_that_name_it(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(CLUSTER)
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    findings = cache.evaluate(_template("gpu.nvidia.com"), "CREATE")
    assert [(f.rule, f.location.file) for f in findings] == [
        ("GL101", "cluster://ml/HorizontalPodAutoscaler/vllm")
    ]
    (gl101,) = findings
    assert "asks for DRA device class gpu.nvidia.com of ResourceClaimTemplate tp2)" in (
        gl101.message
    )
    assert [(r.ref.kind, r.ref.name) for r in gl101.related] == [
        ("Deployment", "vllm"),
        ("ResourceClaimTemplate", "tp2"),
    ]
    # A template for a NIC: the Deployment is no GPU workload, and nothing is said.
    assert cache.evaluate(_template("sriov.example.com"), "CREATE") == []
    # Without the template the claim's class cannot be told: said about the HPA, not the
    # template, so another template of the same namespace is not blamed for it.
    other = _template("gpu.nvidia.com")
    other["metadata"]["name"] = "unused"
    assert cache.evaluate(other, "CREATE") == []
    with cache.lock:
        assert cached_names(cache, "ResourceClaimTemplate") == set()  # the overlay is undone


def test_the_focus_of_a_template_is_what_the_pods_naming_it_relate_to(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    world = list(yaml.safe_load_all(CLUSTER))
    for namespace in range(30):  # unrelated Deployments and HPAs elsewhere
        for obj in world[:3]:
            copied = copy.deepcopy(obj)
            copied["metadata"]["namespace"] = f"team-{namespace}"
            fake.cluster.create(copied)
    for obj in world:
        fake.cluster.create(obj)
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    from gpulint.cluster.reading import cluster_file
    from gpulint.input.document import Manifest

    template = _template("gpu.nvidia.com")
    manifest = Manifest(template, cluster_file(template))
    with cache.lock:
        cache.inventory.add_manifest(manifest)
        try:
            focus = related_items(cache.inventory, manifest)
        finally:
            cache.inventory.remove_manifest(manifest)
    assert [(h.namespace, h.name) for h in focus("hpa")] == [("ml", "vllm")]
    assert [o.manifest.name for o in focus("pod-owner")] == ["vllm"]
    assert [g.target for g in focus("target-group")] == [("Deployment", "ml", "vllm")]
