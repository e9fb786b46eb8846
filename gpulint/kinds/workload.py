"""Pod templates and the GPUs they ask for.

A GPU workload is any object with a pod template (Deployment, StatefulSet, ReplicaSet, Argo
Rollout, LeaderWorkerSet leader/worker templates, Knative Service/Configuration, a KServe
InferenceService component ...) whose containers or init containers ask for a GPU resource,
or whose pods claim a GPU through DRA: a ResourceClaim or ResourceClaimTemplate of the same
namespace whose request names a GPU device class (``gpulint.kinds.dra``). A claim whose device
class cannot be told (its object is not in the input, or does not write the class out)
still counts when a container uses it, and says so wherever it is described.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, Protocol

from gpulint.core.quantity import is_unknown, try_quantity
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list, dig
from gpulint.kinds.dra import (
    GPU_DEVICE_CLASSES,
    IMPLICIT_EXTENDED_PREFIX,
    MIG_DEVICE_CLASSES,
    DeviceRequest,
    PodClaim,
    device_requests,
    pod_claims,
)

# Where workload kinds keep their pod templates when not at ``spec.template`` (the registry's
# workload entries say the same: gpulint.kinds.registry reads this table). CronJob: batch/v1
# CronJobSpec.jobTemplate; LeaderWorkerSet: leaderworkerset.x-k8s.io/v1 LeaderWorkerTemplate.
TEMPLATE_PATHS: dict[str, tuple[Path, ...]] = {
    "CronJob": (("spec", "jobTemplate", "spec", "template"),),
    "LeaderWorkerSet": (
        ("spec", "leaderWorkerTemplate", "leaderTemplate"),
        ("spec", "leaderWorkerTemplate", "workerTemplate"),
    ),
}
DEFAULT_TEMPLATE_PATHS: tuple[Path, ...] = (("spec", "template"),)
# What gpulint reads of a pod template, relative to it; the cluster caches keep no more of
# a workload's templates (gpulint.cluster.projection). Containers: what they run (image,
# command and args: serving engines' flags and releases, prometheus-adapter's URL), what
# they request and expose; the probes say when a pod can first be ready (gpulint replay
# --cluster). The pod: where it may run, and the DRA claims it names. No env: only
# dcgm-exporter's is read (gpulint.chain.exporter), and its DaemonSet is kept whole.
POD_TEMPLATE_READS: tuple[Path, ...] = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    *(
        (*containers, field)
        for containers in (("spec", "containers"), ("spec", "initContainers"))
        for field in (
            "name",
            "image",
            "command",
            "args",
            "resources",
            "ports",
            "restartPolicy",
            "startupProbe",
            "readinessProbe",
        )
    ),
    ("spec", "resources"),  # pod-level requests (KEP-2837)
    ("spec", "nodeSelector"),
    ("spec", "affinity"),
    ("spec", "tolerations"),
    ("spec", "resourceClaims"),
)

# Resource names a device plugin advertises for GPUs (NVIDIA k8s-device-plugin README; AMD
# ROCm device plugin; intel-device-plugins-for-kubernetes).
GPU_RESOURCE_NAMES = ("nvidia.com/gpu", "nvidia.com/gpu.shared", "amd.com/gpu")
GPU_RESOURCE_PREFIXES = ("nvidia.com/mig-", "gpu.intel.com/")

# KServe component fields that hold a single container (model-format shorthand).
KSERVE_CONTAINER_KEYS = (
    "model",
    "tensorflow",
    "pytorch",
    "triton",
    "sklearn",
    "xgboost",
    "onnx",
    "huggingface",
    "lightgbm",
    "paddle",
    "pmml",
    "torchserve",
    "alibi",
    "art",
    "aix",
    "custom",
)


class ClaimSource(Protocol):
    """Where the ResourceClaims and ResourceClaimTemplates pods name are looked up (the
    inventory's ``DeviceClaims``); ``generation`` changes whenever one comes or goes."""

    @property
    def generation(self) -> int: ...

    def find(
        self, kind: str, namespace: str | None, name: str, near: Document | None
    ) -> Manifest | None: ...

    def extended_resources(self) -> dict[str, str]:
        """Extended resource name -> the DeviceClass that serves it (DRA, KEP-5004)."""
        ...

    def gpu_classes(self) -> frozenset[str]:
        """DeviceClasses whose selectors pick devices of a GPU driver."""
        ...


class GpuNames:
    """Which resource names and DRA device classes count as GPUs (the built-in ones plus
    configured extras; a trailing ``*`` matches a prefix), and where the claims pods name
    are found (none: every claim's device class is unknown).

    With DRA extended resources a resource name is a GPU's when the DeviceClass that serves it
    is a GPU class: ``deviceclass.resource.kubernetes.io/<class>`` names its class, and a
    DeviceClass of the input names its ``extendedResourceName``; a class is a GPU class when
    it is a known one, when its selectors pick a GPU driver's devices (``device.driver ==
    'gpu.nvidia.com'``), or when it serves a GPU resource name (``nvidia.com/gpu``)."""

    def __init__(
        self,
        extra: Iterable[str] = (),
        device_classes: Iterable[str] = (),
        claims: ClaimSource | None = None,
    ) -> None:
        self.exact, self.prefix_tuple = _names(GPU_RESOURCE_NAMES, GPU_RESOURCE_PREFIXES, extra)
        self.classes, self.class_prefixes = _names(GPU_DEVICE_CLASSES, (), device_classes)
        self.claims = claims

    def _named_gpu(self, resource: str) -> bool:
        return resource in self.exact or resource.startswith(self.prefix_tuple)

    def is_gpu(self, resource: str) -> bool:
        if self._named_gpu(resource):
            return True
        served_by = self.dra_class_of(resource)
        return served_by is not None and self.is_gpu_class(served_by)

    def is_gpu_class(self, device_class: str) -> bool:
        if device_class in self.classes or device_class.startswith(self.class_prefixes):
            return True
        if self.claims is None:
            return False
        if device_class in self.claims.gpu_classes():
            return True
        return any(
            served == device_class and self._named_gpu(name)
            for name, served in self.claims.extended_resources().items()
        )

    def dra_class_of(self, resource: str) -> str | None:
        """The DeviceClass that serves an extended resource through DRA: the one named in
        ``deviceclass.resource.kubernetes.io/<class>``, or a DeviceClass of the input whose
        ``extendedResourceName`` it is (None: a device plugin's, as far as gpulint knows)."""
        if resource.startswith(IMPLICIT_EXTENDED_PREFIX):
            return resource[len(IMPLICIT_EXTENDED_PREFIX) :] or None
        if self.claims is None:
            return None
        return self.claims.extended_resources().get(resource)

    @property
    def claims_generation(self) -> int:
        return self.claims.generation if self.claims is not None else 0


def _names(
    exact: Iterable[str], prefixes: Iterable[str], extra: Iterable[str]
) -> tuple[set[str], tuple[str, ...]]:
    found, starts = set(exact), list(prefixes)
    for name in extra:
        if name.endswith("*"):
            starts.append(name[:-1])
        else:
            found.add(name)
    return found, tuple(starts)


DEFAULT_GPU_NAMES = GpuNames()


class GpuRequest:
    """One GPU resource of one container: what it requests and what it limits."""

    __slots__ = ("container", "container_path", "limits", "requests", "resource")

    def __init__(
        self, container: str, resource: str, requests: Any, limits: Any, container_path: Path
    ) -> None:
        self.container = container
        self.resource = resource
        self.requests = requests
        self.limits = limits
        self.container_path = container_path

    def __repr__(self) -> str:
        return (
            f"GpuRequest({self.container!r}, {self.resource!r}, {self.requests!r}, {self.limits!r})"
        )

    @property
    def count(self) -> int | None:
        """GPUs per container (the limit, else the request); None when unknown."""
        value = self.limits if self.limits is not None else self.requests
        if is_unknown(value):
            return None
        quantity = try_quantity(value)
        if quantity is None or not quantity.is_integer:
            return None
        return int(quantity.value)

    @property
    def is_mig(self) -> bool:
        return self.resource.startswith("nvidia.com/mig-")


class ClaimedGpu(GpuRequest):
    """GPUs a pod claims through DRA: one request of a ResourceClaim or ResourceClaimTemplate
    whose device class is a GPU's, or (``untold``) a claim a container uses whose device class
    cannot be told. ``resource`` describes it for messages; ``container_path`` is the pod's
    ``resourceClaims`` entry; ``source`` the claim's object, when it is in the input."""

    __slots__ = ("_count", "_mig", "claim", "source", "source_path", "untold")

    def __init__(
        self,
        claim: PodClaim,
        resource: str,
        count: int | None,
        mig: bool,
        source: Manifest | None,
        source_path: Path,
        untold: bool,
    ) -> None:
        super().__init__(
            claim.used_by[0] if claim.used_by else "", resource, None, None, claim.path
        )
        self.claim = claim
        self._count = count
        self._mig = mig
        self.source = source
        self.source_path = source_path
        self.untold = untold

    def __repr__(self) -> str:
        return f"ClaimedGpu({self.claim.name!r}, {self.resource!r}, {self._count!r})"

    @property
    def count(self) -> int | None:
        """Devices allocated for the request; None for allocationMode All, for alternatives
        (``firstAvailable``) that differ, and when the device class cannot be told."""
        return self._count

    @property
    def is_mig(self) -> bool:
        return self._mig


class Container(NamedTuple):
    name: str
    path: Path
    data: dict[str, Any]
    init: bool = False
    # Where the object writes the one GPU count its controller sets as both request and
    # limit of this container (a VLLMRuntime's deploymentConfig.resources.gpu); None when the
    # container's resources are written out.
    count_at: Path | None = None

    @property
    def resources(self) -> dict[str, Any]:
        return as_dict(self.data.get("resources"))


class PodTemplate:
    """A pod template (or a KServe component) inside an object, with its path.

    ``claims`` are the DRA claims its pods name (``gpulint.kinds.dra``); ``owner`` is the object
    that holds it, whose namespace the claims are looked up in."""

    __slots__ = ("_gpus", "claims", "containers", "label", "metadata", "owner", "path")

    def __init__(
        self,
        path: Path,
        metadata: dict[str, Any],
        containers: list[Container] | None = None,
        label: str = "pod template",
        claims: list[PodClaim] | None = None,
        owner: Manifest | None = None,
    ) -> None:
        self.path = path
        self.metadata = metadata
        self.containers: list[Container] = [] if containers is None else containers
        self.label = label
        self.claims: list[PodClaim] = [] if claims is None else claims
        self.owner = owner
        self._gpus: tuple[GpuNames, int, list[GpuRequest]] | None = None

    def __repr__(self) -> str:
        return f"PodTemplate(path={self.path!r}, metadata={self.metadata!r})"

    @property
    def annotations(self) -> dict[str, Any]:
        return as_dict(self.metadata.get("annotations"))

    @property
    def labels(self) -> dict[str, Any]:
        return as_dict(self.metadata.get("labels"))

    def gpu_requests(self, names: GpuNames = DEFAULT_GPU_NAMES) -> list[GpuRequest]:
        # Several rules ask about the same template: answer once per set of GPU names (each
        # inventory has its own), and again once the claims it names, or the DeviceClasses
        # that say which extended resources are GPUs, may have changed.
        stamp = names.claims_generation
        cached = self._gpus
        if cached is None or cached[0] is not names or cached[1] != stamp:
            cached = self._gpus = (names, stamp, self._find_gpu_requests(names))
        return list(cached[2])

    def _find_gpu_requests(self, names: GpuNames) -> list[GpuRequest]:
        found = []
        for container in self.containers:
            resources = container.resources
            requests = as_dict(resources.get("requests"))
            limits = as_dict(resources.get("limits"))
            for resource in dict.fromkeys([*requests, *limits]):
                if isinstance(resource, str) and names.is_gpu(resource):
                    found.append(
                        GpuRequest(
                            container.name,
                            resource,
                            requests.get(resource),
                            limits.get(resource),
                            container.path,
                        )
                    )
        for claim in self.claims:
            found.extend(self._claimed_gpus(claim, names))
        return found

    def _claimed_gpus(self, claim: PodClaim, names: GpuNames) -> list[GpuRequest]:
        source = None
        if names.claims is not None and claim.object_name:
            namespace = self.owner.namespace if self.owner is not None else None
            source = names.claims.find(claim.kind, namespace, claim.object_name, self.owner)
        if source is None:
            return _untold(claim, _unfound_claim(claim), None, ())
        found: list[GpuRequest] = []
        untold: DeviceRequest | None = None
        for request in device_requests(source):
            classes = [a.device_class for a in request.alternatives]
            gpus = [c for c in classes if c is not None and names.is_gpu_class(c)]
            if gpus:
                found.append(_claimed_gpu(claim, source, request, classes, gpus))
            elif None in classes and untold is None:
                untold = request
        if untold is not None and not found:
            what = f"{claim.describe()} does not write out the device class of request"
            return _untold(claim, f"{what} {untold.name}", source, untold.path)
        return found

    def gpus_per_pod(self, names: GpuNames = DEFAULT_GPU_NAMES) -> int | None:
        """GPUs one pod of this template holds (app containers; init containers run first)."""
        total = 0
        for request in self.gpu_requests(names):
            # A view may hold a container at a path of one key (a NIMService's is ``spec``).
            if request.container_path[-2:-1] == ("initContainers",):
                continue
            count = request.count
            if count is None:
                return None
            total += count
        return total


def _unfound_claim(claim: PodClaim) -> str:
    """Why the object a pod claim names cannot be read."""
    if claim.object_name:
        return f"{claim.describe()} is not in the input"
    if claim.kind:
        return f"the name of its {claim.kind} is not written out"
    return "the pod names no ResourceClaim or ResourceClaimTemplate for it"


def _claimed_gpu(
    claim: PodClaim,
    source: Manifest,
    request: DeviceRequest,
    classes: list[str | None],
    gpus: list[str],
) -> ClaimedGpu:
    """GPUs one device request of a claim asks for: a count only when every alternative is
    a GPU class asking the same number."""
    counts = {a.devices for a in request.alternatives}
    count = counts.pop() if len(counts) == 1 and len(gpus) == len(classes) else None
    shown = " or ".join(dict.fromkeys(gpus))
    return ClaimedGpu(
        claim,
        f"DRA device class {shown} of {claim.describe()}",
        count,
        all(c in MIG_DEVICE_CLASSES for c in gpus),
        source,
        request.path,
        False,
    )


def _untold(
    claim: PodClaim, why: str, source: Manifest | None, source_path: Path
) -> list[GpuRequest]:
    """A claim whose device class cannot be told: a GPU for all gpulint knows when a
    container uses it (else nothing uses what it holds)."""
    if not claim.used_by:
        return []
    resource = (
        f"DRA claim {claim.name} taken for a GPU since its device class cannot be told: {why}"
    )
    return [ClaimedGpu(claim, resource, None, False, source, source_path, True)]


def containers_of(pod_spec: Any, spec_path: Path) -> list[Container]:
    found = []
    spec = as_dict(pod_spec)
    for key, init in (("containers", False), ("initContainers", True)):
        for index, item in enumerate(as_list(spec.get(key))):
            if isinstance(item, dict):
                name = item.get("name")
                found.append(
                    Container(
                        name if isinstance(name, str) else f"#{index}",
                        (*spec_path, key, index),
                        item,
                        init,
                    )
                )
    return found


def pod_template_at(
    data: Any, path: Path, label: str = "pod template", owner: Manifest | None = None
) -> PodTemplate | None:
    """The pod template at ``path`` (a mapping with ``metadata`` and ``spec.containers``) of
    ``owner``'s data."""
    template = dig(data, path)
    if not isinstance(template, dict):
        return None
    spec = template.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
        return None
    return _pod_template(path, as_dict(template.get("metadata")), spec, label, owner)


def _pod_template(
    path: Path, metadata: dict[str, Any], spec: dict[str, Any], label: str, owner: Manifest | None
) -> PodTemplate:
    spec_path = (*path, "spec") if path else ("spec",)
    containers = containers_of(spec, spec_path)
    claims = pod_claims(spec, spec_path, containers)
    return PodTemplate(path, metadata, containers, label, claims, owner)


def pod_templates(manifest: Manifest) -> list[PodTemplate]:
    """Every pod template of a Kubernetes object (not KServe components: see kserve.py).

    Read once per object: objects are never changed in place (a cluster cache replaces
    them), and every rule about pods asks."""
    found = manifest.templates
    if found is None:
        found = manifest.templates = _read_pod_templates(manifest)
    return found


def _read_pod_templates(manifest: Manifest) -> list[PodTemplate]:
    data = manifest.data
    kind = manifest.kind
    if kind == "Pod":
        spec = data.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            return [_pod_template((), manifest.metadata, spec, "pod", manifest)]
        return []
    paths = TEMPLATE_PATHS.get(kind, DEFAULT_TEMPLATE_PATHS)
    found = []
    for path in paths:
        label = "pod template" if len(paths) == 1 else f"{path[-1]}"
        template = pod_template_at(data, path, label, manifest)
        if template is not None:
            found.append(template)
    return found


def iter_gpu_requests(
    templates: Iterable[PodTemplate], names: GpuNames = DEFAULT_GPU_NAMES
) -> Iterator[GpuRequest]:
    for template in templates:
        yield from template.gpu_requests(names)
