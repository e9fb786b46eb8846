"""Pod templates and the GPUs they ask for.

A GPU workload is any object with a pod template (Deployment, StatefulSet, ReplicaSet, Argo
Rollout, LeaderWorkerSet leader/worker templates, Knative Service/Configuration, a KServe
InferenceService component ...) whose containers or init containers ask for a GPU resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from gpulint.document import Manifest, Path, as_dict, as_list, dig
from gpulint.kinds import template_paths
from gpulint.quantity import is_unknown, try_quantity

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


class GpuNames:
    """Which resource names count as GPUs (the built-in ones plus configured extras)."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.exact = set(GPU_RESOURCE_NAMES)
        self.prefixes = list(GPU_RESOURCE_PREFIXES)
        for name in extra:
            if name.endswith("*"):
                self.prefixes.append(name[:-1])
            else:
                self.exact.add(name)
        self.prefix_tuple = tuple(self.prefixes)

    def is_gpu(self, resource: str) -> bool:
        return resource in self.exact or resource.startswith(self.prefix_tuple)


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


class Container(NamedTuple):
    name: str
    path: Path
    data: dict[str, Any]
    init: bool = False

    @property
    def resources(self) -> dict[str, Any]:
        return as_dict(self.data.get("resources"))


class PodTemplate:
    """A pod template (or a KServe component) inside an object, with its path."""

    __slots__ = ("_gpus", "containers", "label", "metadata", "path")

    def __init__(
        self,
        path: Path,
        metadata: dict[str, Any],
        containers: list[Container] | None = None,
        label: str = "pod template",
    ) -> None:
        self.path = path
        self.metadata = metadata
        self.containers: list[Container] = [] if containers is None else containers
        self.label = label
        self._gpus: tuple[GpuNames, list[GpuRequest]] | None = None

    def __repr__(self) -> str:
        return f"PodTemplate(path={self.path!r}, metadata={self.metadata!r})"

    @property
    def annotations(self) -> dict[str, Any]:
        return as_dict(self.metadata.get("annotations"))

    @property
    def labels(self) -> dict[str, Any]:
        return as_dict(self.metadata.get("labels"))

    def gpu_requests(self, names: GpuNames = DEFAULT_GPU_NAMES) -> list[GpuRequest]:
        # Several rules ask about the same template: answer once per set of GPU names.
        if self._gpus is None or self._gpus[0] is not names:
            self._gpus = (names, self._find_gpu_requests(names))
        return list(self._gpus[1])

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
        return found

    def gpus_per_pod(self, names: GpuNames = DEFAULT_GPU_NAMES) -> int | None:
        """GPUs one pod of this template holds (app containers; init containers run first)."""
        total = 0
        for request in self.gpu_requests(names):
            if request.container_path[-2] == "initContainers":
                continue
            count = request.count
            if count is None:
                return None
            total += count
        return total


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


def pod_template_at(data: Any, path: Path, label: str = "pod template") -> PodTemplate | None:
    """The pod template at ``path`` (a mapping with ``metadata`` and ``spec.containers``)."""
    template = dig(data, path)
    if not isinstance(template, dict):
        return None
    spec = template.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
        return None
    return PodTemplate(
        path, as_dict(template.get("metadata")), containers_of(spec, (*path, "spec")), label
    )


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
            return [PodTemplate((), manifest.metadata, containers_of(spec, ("spec",)), "pod")]
        return []
    paths = template_paths(kind, manifest.api_version)
    found = []
    for path in paths:
        label = "pod template" if len(paths) == 1 else f"{path[-1]}"
        template = pod_template_at(data, path, label)
        if template is not None:
            found.append(template)
    return found


def iter_gpu_requests(
    templates: Iterable[PodTemplate], names: GpuNames = DEFAULT_GPU_NAMES
) -> Iterator[GpuRequest]:
    for template in templates:
        yield from template.gpu_requests(names)
