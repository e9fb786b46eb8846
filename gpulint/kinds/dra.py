"""Dynamic Resource Allocation (DRA): the devices pods claim through ResourceClaims.

A pod can get its GPU without asking for ``nvidia.com/gpu``: it names a ResourceClaim, or a
ResourceClaimTemplate from which the control plane makes one claim per pod, and its
containers use the claim by name. What the claim asks for is a number of devices of a
device class, ``gpu.nvidia.com`` (whole GPUs) or ``mig.nvidia.com`` (MIG slices) with
NVIDIA's DRA driver. This module reads both sides; ``gpulint.kinds.workload`` decides which
claims are GPUs.

What the API says (kubernetes/api at 10b39a3, ``resource/v1*/types.go`` and
``core/v1/types.go``):

* ``resource.k8s.io/v1`` is served since Kubernetes 1.34 (DRA is GA), ``v1beta2`` since
  1.33, ``v1beta1`` since 1.32 (``+k8s:prerelease-lifecycle-gen:introduced``).
* A ResourceClaim's requests are ``spec.devices.requests[]`` (at most 32,
  ``DeviceRequestsMaxSize``); a ResourceClaimTemplate holds the same claim spec under
  ``spec.spec``.
* In v1 and v1beta2 a request sets one of ``exactly`` (``deviceClassName``,
  ``allocationMode``, ``count``, ``selectors`` ...) or ``firstAvailable``: at most 8
  subrequests, each with its own ``deviceClassName``/``allocationMode``/``count``, of which
  the scheduler allocates the first it can satisfy. In v1beta1 (and v1alpha3, Kubernetes
  1.31) ``deviceClassName``, ``allocationMode`` and ``count`` sit on the request itself,
  next to ``firstAvailable``.
* ``allocationMode`` is ``ExactCount`` (the default: ``count`` devices, 1 when unset, more
  than 0) or ``All`` (every matching device of a pool: how many cannot be told from the
  claim). A claim is allocated at most 32 devices (``AllocationResultsMaxSize``).
* A pod names its claims in ``spec.resourceClaims[]``: ``{name, resourceClaimName}`` or
  ``{name, resourceClaimTemplateName}``, in the pod's namespace (before Kubernetes 1.31:
  ``{name, source: {resourceClaimName | resourceClaimTemplateName}}``). Containers use them
  in ``resources.claims[]``: ``{name}``, optionally with the ``request`` of the claim they
  use.
* A claim the control plane made from a template for one pod carries the annotation
  ``resource.kubernetes.io/pod-claim-name`` (``PodResourceClaimAnnotation``).

NVIDIA/k8s-dra-driver-gpu (deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*)
installs the classes ``gpu.nvidia.com`` (``type == 'gpu'``), ``mig.nvidia.com``
(``type == 'mig'``), ``vfio.gpu.nvidia.com`` (passthrough to virtual machines) and
``compute-domain-*.nvidia.com`` (IMEX channels, not GPUs); AMD's DRA driver installs
``gpu.amd.com`` (ROCm/k8s-gpu-dra-driver#73).

DRA extended resources (KEP-5004, beta and on by default in Kubernetes 1.36, GA in 1.37:
kubernetes/kubernetes#138488) let a container ask for a device the old way, as an extended
resource in ``resources.limits``, and be served by DRA: a DeviceClass names the resource in
``spec.extendedResourceName`` (NVIDIA's chart sets ``nvidia.com/gpu`` on ``gpu.nvidia.com``,
NVIDIA/k8s-dra-driver-gpu@2240711:deployments/helm/dra-driver-nvidia-gpu/templates/
deviceclass-gpu.yaml; AMD's ``amd.com/gpu`` on ``gpu.amd.com``), and every class also answers
to ``deviceclass.resource.kubernetes.io/<class name>`` (kubernetes/enhancements
keps/sig-scheduling/5004-dra-extended-resource).

Everything read here is bounded: at most the number of entries the API server accepts, and
counts outside what a claim can be allocated are unknown.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from gpulint.input.document import Manifest, Path, as_dict, as_list, dig
from gpulint.input.yamlparse import looks_templated

GROUP = "resource.k8s.io"
CLAIM, CLAIM_TEMPLATE = "ResourceClaim", "ResourceClaimTemplate"

# Device classes of whole GPUs and of GPU slices: NVIDIA's DRA driver (a GPU passed through to a
# virtual machine is one too) and AMD's.
GPU_DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com", "gpu.amd.com")
MIG_DEVICE_CLASSES = ("mig.nvidia.com",)
DEVICE_CLASS = "DeviceClass"
# The extended resource name every DeviceClass answers to (KEP-5004).
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"

MAX_REQUESTS = 32  # DeviceRequestsMaxSize
MAX_SUBREQUESTS = 8  # FirstAvailableDeviceRequestMaxSize
MAX_DEVICES = 32  # AllocationResultsMaxSize: devices one claim can be allocated
# Entries read of a pod's resourceClaims and of a container's resources.claims: the API sets
# no maximum, but a pod that names more claims than this is not one gpulint can judge.
MAX_POD_CLAIMS = 64

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# A DeviceClass holds at most 32 selectors (DeviceSelectorsMaxSize), each CEL expression at
# most 10 Ki characters (CELSelectorExpressionMaxLength).
MAX_SELECTORS = 32
MAX_CEL_CHARS = 10 * 1024


class Alternative(NamedTuple):
    """What one request (or one ``firstAvailable`` subrequest) asks for."""

    device_class: str | None  # None: not written out (a template placeholder, a typo)
    devices: int | None  # None: allocationMode All, or a count that is not a number of devices


class DeviceRequest(NamedTuple):
    """One request of a claim: the alternatives it may be served by, in order (one for
    ``exactly``), and where it is written in the claim's object."""

    name: str
    alternatives: tuple[Alternative, ...]
    path: Path


class PodClaim(NamedTuple):
    """One entry of a pod's ``spec.resourceClaims``."""

    name: str  # the pod's name for it, which containers use
    kind: str  # ResourceClaimTemplate or ResourceClaim; "" when it names neither
    object_name: str  # "" when not written out
    path: Path  # the entry, in the object that holds the pod template
    used_by: tuple[str, ...]  # the containers that use it (resources.claims)

    def describe(self) -> str:
        """``ResourceClaimTemplate llm-gpu``."""
        if not self.kind or not self.object_name:
            return f"claim {self.name}"
        return f"{self.kind} {self.object_name}"


def claim_spec_path(kind: str) -> Path:
    """Where an object of ``kind`` keeps its claim spec."""
    return ("spec", "spec") if kind == CLAIM_TEMPLATE else ("spec",)


def is_device_claim(manifest: Manifest) -> bool:
    return manifest.group == GROUP and manifest.kind in (CLAIM, CLAIM_TEMPLATE)


def is_device_class(manifest: Manifest) -> bool:
    return manifest.group == GROUP and manifest.kind == DEVICE_CLASS


# DRA drivers of GPUs: a DeviceClass whose selector picks their devices is a GPU class (the
# drivers' own classes say ``device.driver == 'gpu.nvidia.com'``).
GPU_DRIVERS = ("gpu.nvidia.com", "gpu.amd.com")
_DRIVER_IN_CEL = re.compile(r"""device\.driver\s*==\s*['"]([^'"]+)['"]""")


def class_drivers(manifest: Manifest) -> tuple[str, ...]:
    """The drivers a DeviceClass's CEL selectors pick devices of (``device.driver == '...'``)."""
    found: list[str] = []
    for item in as_list(as_dict(manifest.data.get("spec")).get("selectors"))[:MAX_SELECTORS]:
        expression = as_dict(as_dict(item).get("cel")).get("expression")
        if isinstance(expression, str):
            found += _DRIVER_IN_CEL.findall(expression[:MAX_CEL_CHARS])
    return tuple(dict.fromkeys(found))


def extended_resource_name(manifest: Manifest) -> str | None:
    """The extended resource a DeviceClass serves (``spec.extendedResourceName``), if any."""
    name = as_dict(manifest.data.get("spec")).get("extendedResourceName")
    if not isinstance(name, str) or not name or looks_templated(name):
        return None
    return name


def device_requests(manifest: Manifest) -> list[DeviceRequest]:
    """The device requests of a ResourceClaim or ResourceClaimTemplate, read as its API
    version writes them (an unknown version: whichever shape the request has)."""
    base = (*claim_spec_path(manifest.kind), "devices", "requests")
    spec = dig(manifest.data, base)
    version = manifest.api_version.rpartition("/")[2]
    found = []
    for index, item in enumerate(as_list(spec)[:MAX_REQUESTS]):
        if not isinstance(item, dict):
            continue
        path: Path = (*base, index)
        name = item.get("name")
        name = name if isinstance(name, str) else f"#{index}"
        read = _alternatives(item, version, path)
        if read is not None:
            found.append(DeviceRequest(name, *read))
    return found


def _alternatives(
    request: dict[str, Any], version: str, path: Path
) -> tuple[tuple[Alternative, ...], Path] | None:
    """The alternatives of one request, and the path of what they are read from."""
    subrequests = request.get("firstAvailable")
    if isinstance(subrequests, list) and subrequests:
        found = tuple(_alternative(s) for s in subrequests[:MAX_SUBREQUESTS] if isinstance(s, dict))
        return (found, (*path, "firstAvailable")) if found else None
    exactly = request.get("exactly")
    flat = version in ("v1beta1", "v1alpha3") or (
        version not in ("v1", "v1beta2") and not isinstance(exactly, dict)
    )
    if flat:
        return (_alternative(request),), path
    if isinstance(exactly, dict):
        return (_alternative(exactly),), (*path, "exactly")
    return None


def _alternative(request: dict[str, Any]) -> Alternative:
    device_class = request.get("deviceClassName")
    if not isinstance(device_class, str) or not device_class or looks_templated(device_class):
        device_class = None
    return Alternative(device_class, _count(request))


def _count(request: dict[str, Any]) -> int | None:
    mode = request.get("allocationMode", "ExactCount")
    if mode != "ExactCount":
        return None  # All, a placeholder, or a mode newer than gpulint
    count = request.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int):
        return None
    return count if 1 <= count <= MAX_DEVICES else None


def pod_claims(pod_spec: Any, spec_path: Path, containers: list[Any]) -> list[PodClaim]:
    """The claims a pod spec names, with the containers (``gpulint.kinds.workload.Container``)
    that use each."""
    entries = as_list(as_dict(pod_spec).get("resourceClaims"))[:MAX_POD_CLAIMS]
    if not entries:
        return []
    users: dict[str, list[str]] = {}
    for container in containers:
        for used in as_list(as_dict(container.data.get("resources")).get("claims"))[
            :MAX_POD_CLAIMS
        ]:
            name = as_dict(used).get("name")
            if isinstance(name, str) and container.name not in users.setdefault(name, []):
                users[name].append(container.name)
    found = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        name = entry.get("name")
        name = name if isinstance(name, str) else f"#{index}"
        kind, object_name = _claim_source(entry)
        if not kind:
            kind, object_name = _claim_source(as_dict(entry.get("source")))
        found.append(
            PodClaim(
                name,
                kind,
                object_name,
                (*spec_path, "resourceClaims", index),
                tuple(users.get(name, ())),
            )
        )
    return found


def _claim_source(entry: dict[str, Any]) -> tuple[str, str]:
    for key, kind in (("resourceClaimTemplateName", CLAIM_TEMPLATE), ("resourceClaimName", CLAIM)):
        value = entry.get(key)
        if isinstance(value, str) and value:
            return kind, "" if looks_templated(value) else value
    return "", ""


def made_for_one_pod(obj: Any) -> bool:
    """A ResourceClaim the control plane made from a template for one pod: pods name the
    template, never it, so no rule reads it (and a cluster holds one per pod)."""
    if not isinstance(obj, dict) or obj.get("kind") != CLAIM:
        return False
    metadata = as_dict(obj.get("metadata"))
    return POD_CLAIM_ANNOTATION in as_dict(metadata.get("annotations"))
