"""GPUs through DRA: ResourceClaims and ResourceClaimTemplates in each API version, the
claims pods name, and how they count as GPUs (gpulint.kinds.dra, gpulint.kinds.workload)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpulint.cluster.kinds import RESOURCES
from gpulint.cluster.reading import cluster_file, cluster_manifest
from gpulint.engine.config import ConfigError, Settings, settings_from_data
from gpulint.input.document import Manifest
from gpulint.inventory import Inventory
from gpulint.kinds.dra import Alternative, DeviceRequest, PodClaim, device_requests, pod_claims
from gpulint.kinds.workload import ClaimedGpu, containers_of, pod_templates

from .conftest import lint_text


def _object(kind: str, version: str, requests: Any, namespace: str = "ml") -> Manifest:
    devices = {"devices": {"requests": requests}}
    spec = {"spec": devices} if kind == "ResourceClaimTemplate" else devices
    data = {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": kind,
        "metadata": {"name": "gpus", "namespace": namespace},
        "spec": spec,
    }
    return Manifest(data, "claims.yaml")


def _deployment(
    claims: list[dict[str, Any]], used: list[str], namespace: str | None = "ml"
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "llm"}
    if namespace:
        metadata["namespace"] = namespace
    container = {
        "name": "server",
        "image": "vllm",
        "resources": {"claims": [{"name": n} for n in used]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {
                "metadata": {"labels": {"app": "llm"}},
                "spec": {"resourceClaims": claims, "containers": [container]},
            },
        },
    }


TEMPLATE_CLAIM = {"name": "gpus", "resourceClaimTemplateName": "gpus"}

# --- the claim side, per API version --------------------------------------------------------


@pytest.mark.parametrize("version", ["v1", "v1beta2"])
def test_v1_and_v1beta2_read_exactly_and_first_available(version: str) -> None:
    manifest = _object(
        "ResourceClaimTemplate",
        version,
        [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
            {
                "name": "any",
                "firstAvailable": [
                    {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 4},
                    {"name": "slice", "deviceClassName": "mig.nvidia.com"},
                ],
            },
            # the v1beta1 shape is not a v1 request: the API server asks for exactly
            {"name": "flat", "deviceClassName": "gpu.nvidia.com"},
        ],
    )
    base = ("spec", "spec", "devices", "requests")
    assert device_requests(manifest) == [
        DeviceRequest("gpu", (Alternative("gpu.nvidia.com", 2),), (*base, 0, "exactly")),
        DeviceRequest(
            "any",
            (Alternative("gpu.nvidia.com", 4), Alternative("mig.nvidia.com", 1)),
            (*base, 1, "firstAvailable"),
        ),
    ]


def test_v1beta1_reads_the_request_itself() -> None:
    manifest = _object(
        "ResourceClaim",
        "v1beta1",
        [
            {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount"},
            {"name": "all", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"},
            {"name": "v1-shape", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
            {"name": "alt", "firstAvailable": [{"name": "a", "deviceClassName": "x.example"}]},
        ],
    )
    base = ("spec", "devices", "requests")  # a claim, not a template: no spec.spec
    assert device_requests(manifest) == [
        DeviceRequest("gpu", (Alternative("gpu.nvidia.com", 1),), (*base, 0)),
        DeviceRequest("all", (Alternative("gpu.nvidia.com", None),), (*base, 1)),
        DeviceRequest("v1-shape", (Alternative(None, 1),), (*base, 2)),
        DeviceRequest("alt", (Alternative("x.example", 1),), (*base, 3, "firstAvailable")),
    ]


@pytest.mark.parametrize(
    ("request_fields", "expected"),
    [
        ({}, Alternative("gpu.nvidia.com", 1)),
        ({"count": 32}, Alternative("gpu.nvidia.com", 32)),
        ({"count": 33}, Alternative("gpu.nvidia.com", None)),  # more than a claim is allocated
        ({"count": 0}, Alternative("gpu.nvidia.com", None)),
        ({"count": -1}, Alternative("gpu.nvidia.com", None)),
        ({"count": 10**400}, Alternative("gpu.nvidia.com", None)),
        ({"count": True}, Alternative("gpu.nvidia.com", None)),
        ({"count": "2"}, Alternative("gpu.nvidia.com", None)),
        ({"count": 2.0}, Alternative("gpu.nvidia.com", None)),
        ({"count": "{{ .Values.gpus }}"}, Alternative("gpu.nvidia.com", None)),
        ({"allocationMode": "All", "count": 2}, Alternative("gpu.nvidia.com", None)),
        ({"allocationMode": "Some"}, Alternative("gpu.nvidia.com", None)),
        ({"deviceClassName": "{{ .Values.class }}"}, Alternative(None, 1)),
        ({"deviceClassName": {"{ .Values.class }": None}}, Alternative(None, 1)),
        ({"deviceClassName": ""}, Alternative(None, 1)),
        ({"deviceClassName": 7}, Alternative(None, 1)),
    ],
)
def test_counts_and_classes_that_cannot_be_told_are_unknown(
    request_fields: dict[str, Any], expected: Alternative
) -> None:
    exactly = {"deviceClassName": "gpu.nvidia.com", **request_fields}
    (found,) = device_requests(_object("ResourceClaim", "v1", [{"name": "r", "exactly": exactly}]))
    assert found.alternatives == (expected,)


def test_hostile_claims_are_read_within_the_api_servers_limits() -> None:
    many = [{"name": f"r{i}", "deviceClassName": "gpu.nvidia.com"} for i in range(10_000)]
    alternatives = [{"name": f"s{i}", "deviceClassName": "gpu.nvidia.com"} for i in range(1000)]
    manifest = _object(
        "ResourceClaimTemplate", "v1beta1", [{"name": "a", "firstAvailable": alternatives}, *many]
    )
    found = device_requests(manifest)
    assert len(found) == 32  # DeviceRequestsMaxSize
    assert len(found[0].alternatives) == 8  # FirstAvailableDeviceRequestMaxSize
    for broken in (None, "x", [1, "two", None], {"requests": 1}):
        data = copy.deepcopy(manifest.data)
        data["spec"]["spec"]["devices"]["requests"] = broken
        assert device_requests(Manifest(data, "x.yaml")) == []
    data["spec"] = "not a spec"
    assert device_requests(Manifest(data, "x.yaml")) == []


# --- the pod side -----------------------------------------------------------------------------


def test_pod_claims_in_the_current_and_the_pre_1_31_shape() -> None:
    spec = {
        "resourceClaims": [
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
            {"name": "shared", "resourceClaimName": "shared-gpu"},
            {"name": "old", "source": {"resourceClaimTemplateName": "legacy"}},
            {"name": "placeholder", "resourceClaimName": "{{ .Values.claim }}"},
            {"name": "nothing"},
            "not an entry",
        ],
        "containers": [
            {"name": "a", "resources": {"claims": [{"name": "gpu"}, {"name": "old"}]}},
            {"name": "b", "resources": {"claims": [{"name": "gpu", "request": "gpu"}, "x"]}},
        ],
        "initContainers": [{"name": "warm", "resources": {"claims": [{"name": "shared"}]}}],
    }
    path = ("spec", "template", "spec")
    found = pod_claims(spec, path, containers_of(spec, path))
    claims = (*path, "resourceClaims")
    assert found == [
        PodClaim("gpu", "ResourceClaimTemplate", "one-gpu", (*claims, 0), ("a", "b")),
        PodClaim("shared", "ResourceClaim", "shared-gpu", (*claims, 1), ("warm",)),
        PodClaim("old", "ResourceClaimTemplate", "legacy", (*claims, 2), ("a",)),
        PodClaim("placeholder", "ResourceClaim", "", (*claims, 3), ()),
        PodClaim("nothing", "", "", (*claims, 4), ()),
    ]
    hostile = {"resourceClaims": [{"name": f"c{i}"} for i in range(100_000)], "containers": []}
    assert len(pod_claims(hostile, (), [])) == 64


# --- which claims are GPUs, and how many -------------------------------------------------------


def _inventory(*objects: dict[str, Any] | Manifest, settings: Settings | None = None) -> Inventory:
    inventory = Inventory(settings or Settings())
    for obj in objects:
        manifest = obj if isinstance(obj, Manifest) else Manifest(obj, "workload.yaml")
        inventory.add_manifest(manifest)
    return inventory


def _gpus(inventory: Inventory) -> list[ClaimedGpu]:
    (deployment,) = inventory.workloads
    (template,) = pod_templates(deployment)
    found = template.gpu_requests(inventory.gpu_names)
    assert all(isinstance(g, ClaimedGpu) for g in found)
    return found  # type: ignore[return-value]


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_a_template_for_a_gpu_class_makes_the_pod_a_gpu_workload(version: str) -> None:
    request: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "count": 2}
    if version != "v1beta1":
        request = {"exactly": request}
    template = _object("ResourceClaimTemplate", version, [{"name": "r", **request}])
    inventory = _inventory(template, _deployment([TEMPLATE_CLAIM], []))
    (gpu,) = _gpus(inventory)
    assert (gpu.count, gpu.is_mig, gpu.untold) == (2, False, False)
    assert gpu.resource == "DRA device class gpu.nvidia.com of ResourceClaimTemplate gpus"
    assert gpu.source is template
    assert gpu.container_path == ("spec", "template", "spec", "resourceClaims", 0)
    (deployment,) = inventory.workloads
    assert pod_templates(deployment)[0].gpus_per_pod(inventory.gpu_names) == 2


def test_gpus_per_pod_adds_claimed_and_requested_gpus_and_mig_is_flagged() -> None:
    template = _object(
        "ResourceClaimTemplate",
        "v1",
        [
            {"name": "whole", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
            {"name": "slice", "exactly": {"deviceClassName": "mig.nvidia.com"}},
            {"name": "nic", "exactly": {"deviceClassName": "sriov.example.com", "count": 4}},
        ],
    )
    deployment = _deployment([TEMPLATE_CLAIM], ["gpus"])
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"] = {"nvidia.com/gpu": 1}
    inventory = _inventory(template, deployment)
    (template_of_pod,) = pod_templates(inventory.workloads[0])
    found = template_of_pod.gpu_requests(inventory.gpu_names)
    assert [(g.resource, g.count, g.is_mig) for g in found] == [
        ("nvidia.com/gpu", 1, False),
        ("DRA device class gpu.nvidia.com of ResourceClaimTemplate gpus", 2, False),
        ("DRA device class mig.nvidia.com of ResourceClaimTemplate gpus", 1, True),
    ]
    assert template_of_pod.gpus_per_pod(inventory.gpu_names) == 4


def test_device_counts_that_cannot_be_told_leave_gpus_per_pod_unknown() -> None:
    template = _object(
        "ResourceClaimTemplate",
        "v1",
        [
            {
                "name": "either",
                "firstAvailable": [
                    {"name": "two", "deviceClassName": "gpu.nvidia.com", "count": 2},
                    {"name": "slices", "deviceClassName": "mig.nvidia.com", "count": 2},
                ],
            },
            {
                "name": "maybe",
                "firstAvailable": [
                    {"name": "gpu", "deviceClassName": "gpu.nvidia.com"},
                    {"name": "nic", "deviceClassName": "sriov.example.com"},
                ],
            },
        ],
    )
    inventory = _inventory(template, _deployment([TEMPLATE_CLAIM], []))
    either, maybe = _gpus(inventory)
    # Two GPUs or two MIG slices: two devices with a series each, whichever is allocated
    # (MIG slices count as nvidia.com/mig-* requests do); not MIG for sure.
    assert (either.count, either.is_mig) == (2, False)
    assert either.resource == (
        "DRA device class gpu.nvidia.com or mig.nvidia.com of ResourceClaimTemplate gpus"
    )
    # A GPU, or else a NIC: a GPU workload (the first choice), but how many GPUs is unknown.
    assert (maybe.count, maybe.resource.split()[3]) == (None, "gpu.nvidia.com")
    assert pod_templates(inventory.workloads[0])[0].gpus_per_pod(inventory.gpu_names) is None


def test_a_claim_whose_class_cannot_be_told_counts_only_when_a_container_uses_it() -> None:
    unused = _inventory(_deployment([TEMPLATE_CLAIM], []))
    assert _gpus(unused) == []
    used = _inventory(_deployment([TEMPLATE_CLAIM], ["gpus"]))
    (gpu,) = _gpus(used)
    assert (gpu.untold, gpu.count, gpu.source, gpu.container) == (True, None, None, "server")
    assert gpu.resource == (
        "DRA claim gpus taken for a GPU since its device class cannot be told: "
        "ResourceClaimTemplate gpus is not in the input"
    )
    placeholder = _object(
        "ResourceClaimTemplate", "v1", [{"name": "r", "exactly": {"deviceClassName": "{{ x }}"}}]
    )
    (gpu,) = _gpus(_inventory(placeholder, _deployment([TEMPLATE_CLAIM], ["gpus"])))
    assert gpu.untold and gpu.source is placeholder
    assert gpu.resource.endswith(
        "ResourceClaimTemplate gpus does not write out the device class of request r"
    )
    nameless = _inventory(_deployment([{"name": "gpus", "resourceClaimName": "{{ x }}"}], ["gpus"]))
    (gpu,) = _gpus(nameless)
    assert gpu.resource.endswith("the name of its ResourceClaim is not written out")


def test_claims_are_found_in_the_pods_namespace_only() -> None:
    elsewhere = _object(
        "ResourceClaimTemplate",
        "v1",
        [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
        namespace="research",
    )
    assert _gpus(_inventory(elsewhere, _deployment([TEMPLATE_CLAIM], []))) == []
    # A file that leaves the namespace to kubectl -n: the one template of that name.
    (gpu,) = _gpus(_inventory(elsewhere, _deployment([TEMPLATE_CLAIM], [], namespace=None)))
    assert gpu.source is elsewhere
    # Not a DRA object: a CRD of the same kind name in another group.
    other = copy.deepcopy(elsewhere.data)
    other["apiVersion"] = "example.com/v1"
    other["metadata"]["namespace"] = "ml"
    assert _gpus(_inventory(Manifest(other, "x.yaml"), _deployment([TEMPLATE_CLAIM], []))) == []


def test_configured_device_classes_count_as_gpus() -> None:
    template = _object(
        "ResourceClaimTemplate",
        "v1",
        [
            {"name": "amd", "exactly": {"deviceClassName": "gpu.amd.com"}},
            {"name": "intel", "exactly": {"deviceClassName": "gpu.intel.com"}},
        ],
    )
    deployment = _deployment([TEMPLATE_CLAIM], [])
    # AMD's DRA driver's class is known (ROCm/k8s-gpu-dra-driver#73); Intel's is configured.
    built_in = _gpus(_inventory(template, deployment))
    assert [g.resource.split()[3] for g in built_in] == ["gpu.amd.com"]
    settings = settings_from_data({"gpu-device-classes": ["gpu.intel.*"]}, ".gpulint.yaml", {})
    assert settings.gpu_device_classes == ["gpu.intel.*"]
    found = _gpus(_inventory(template, deployment, settings=settings))
    assert [g.resource.split()[3] for g in found] == ["gpu.amd.com", "gpu.intel.com"]
    with pytest.raises(ConfigError, match="gpu-device-classes"):
        settings_from_data({"gpu-device-classes": "gpu.amd.com"}, ".gpulint.yaml", {})


def _device_class(name: str, extended: str | None = None) -> Manifest:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": "true"}}]}
    if extended:
        spec["extendedResourceName"] = extended
    data = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }
    return Manifest(data, "classes.yaml")


def _asking(resource: str) -> dict[str, Any]:
    deployment = _deployment([], [])
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {resource: 1}}
    deployment["spec"]["template"]["spec"].pop("resourceClaims", None)
    return deployment


def _requested(inventory: Inventory) -> list[Any]:
    (deployment,) = inventory.workloads
    (template,) = pod_templates(deployment)
    return template.gpu_requests(inventory.gpu_names)


def test_dra_extended_resources_are_gpus_when_their_class_is_one() -> None:
    """KEP-5004: ``deviceclass.resource.kubernetes.io/<class>`` and a DeviceClass's
    ``extendedResourceName`` name the class that serves a container's extended resource."""
    implicit = _inventory(_asking("deviceclass.resource.kubernetes.io/gpu.nvidia.com"))
    assert [g.resource for g in _requested(implicit)] == [
        "deviceclass.resource.kubernetes.io/gpu.nvidia.com"
    ]
    assert (
        _requested(_inventory(_asking("deviceclass.resource.kubernetes.io/nic.example.com"))) == []
    )
    # A name of the cluster's own is a GPU's once a GPU DeviceClass serves it.
    inventory = _inventory(_asking("example.com/h100"))
    assert _requested(inventory) == []
    served = _device_class("gpu.nvidia.com", "example.com/h100")
    inventory.add_manifest(served)
    assert [g.resource for g in _requested(inventory)] == ["example.com/h100"]
    assert inventory.gpu_names.dra_class_of("example.com/h100") == "gpu.nvidia.com"
    assert inventory.remove_manifest(served)
    assert _requested(inventory) == []
    # ... and so is a class of one's own that serves nvidia.com/gpu, for claims naming it.
    own = _inventory(_device_class("a100.example.com", "nvidia.com/gpu"))
    assert own.gpu_names.is_gpu_class("a100.example.com")
    assert not own.gpu_names.is_gpu_class("nic.example.com")
    fpga = _inventory(
        _device_class("fpga.example.com", "example.com/fpga"), _asking("example.com/fpga")
    )
    assert _requested(fpga) == []


def test_a_template_that_comes_or_goes_changes_the_answer() -> None:
    """Pod templates keep what they worked out, until a claim comes or goes."""
    template = _object(
        "ResourceClaimTemplate", "v1", [{"name": "r", "exactly": {"deviceClassName": "a.b"}}]
    )
    inventory = _inventory(_deployment([TEMPLATE_CLAIM], ["gpus"]))
    (before,) = _gpus(inventory)
    assert before.untold
    assert _gpus(inventory)[0] is before  # asked again: the same answer, kept
    inventory.add_manifest(template)
    assert _gpus(inventory) == []  # a NIC after all
    gpu_template = _object(
        "ResourceClaimTemplate",
        "v1",
        [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
    )
    inventory.replace_manifest(template, gpu_template)
    assert [g.source for g in _gpus(inventory)] == [gpu_template]
    assert inventory.remove_manifest(gpu_template)
    assert [g.untold for g in _gpus(inventory)] == [True]
    # Another inventory asks about the same objects: its own answer, not the first one's.
    other = _inventory(gpu_template, inventory.workloads[0])
    assert [g.source for g in _gpus(other)] == [gpu_template]
    assert [g.untold for g in _gpus(inventory)] == [True]


def test_who_names_a_claim_is_indexed_as_objects_come_and_go() -> None:
    template = _object("ResourceClaimTemplate", "v1", [])
    first = Manifest(_deployment([TEMPLATE_CLAIM], []), "a.yaml")
    unnamespaced = Manifest(_deployment([TEMPLATE_CLAIM], [], namespace=None), "b.yaml")
    other = _deployment([TEMPLATE_CLAIM], [], namespace="web")
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "llm", "namespace": "ml"},
        "spec": {"predictor": {"resourceClaims": [TEMPLATE_CLAIM], "model": {}}},
    }
    inventory = _inventory(template, first, other, isvc)
    users = inventory.device_claim_users(template)
    assert sorted(m.kind for m in users) == ["Deployment", "InferenceService"]
    inventory.add_manifest(unnamespaced)  # after the index was built
    assert unnamespaced in inventory.device_claim_users(template)
    assert inventory.remove_manifest(first)
    assert first not in inventory.device_claim_users(template)
    assert len(inventory.device_claim_users(template)) == 2


# --- through the rules, the cluster reader and the watched kinds -----------------------------


def test_gl101_names_the_template_its_gpu_comes_through() -> None:
    (finding,) = lint_text(
        """
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplate
        metadata: {name: gpus, namespace: ml}
        spec:
          spec:
            devices:
              requests:
              - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: llm, namespace: ml}
        spec:
          template:
            spec:
              resourceClaims: [{name: gpu, resourceClaimTemplateName: gpus}]
              containers: [{name: server, image: vllm}]
        ---
        apiVersion: autoscaling/v2
        kind: HorizontalPodAutoscaler
        metadata: {name: llm, namespace: ml}
        spec:
          scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
          maxReplicas: 4
        """,
        select=["GL101"],
    )
    assert "asks for DRA device class gpu.nvidia.com of ResourceClaimTemplate gpus)" in (
        finding.message
    )
    assert [(r.ref.kind, r.ref.name, r.location and r.location.line) for r in finding.related] == [
        ("Deployment", "llm", 10),
        ("ResourceClaimTemplate", "gpus", 8),
    ]


def test_claims_made_for_one_pod_are_not_kept_from_a_cluster() -> None:
    (stream,) = [k for k in RESOURCES if k.kind == "ResourceClaim"]
    made = {
        "metadata": {
            "name": "llm-7d9f-gpus-x2k4p",
            "namespace": "ml",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpus"},
        },
        "spec": {"devices": {"requests": []}},
    }
    assert cluster_manifest(copy.deepcopy(made), stream, "v1") is None
    shared = copy.deepcopy(made)
    shared["metadata"] = {"name": "shared", "namespace": "ml"}
    manifest = cluster_manifest(shared, stream, "v1")
    assert manifest is not None and manifest.api_version == "resource.k8s.io/v1"
    assert manifest.file == cluster_file(shared)
