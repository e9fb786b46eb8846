"""The ResourceClaims and ResourceClaimTemplates pods name (DRA), and who names each; and the
DeviceClasses that serve extended resources (``spec.extendedResourceName``, KEP-5004).

Pod templates look their claims up here (``gpulint.kinds.workload.ClaimSource``): by kind,
namespace and name, as the API server resolves them, and among copies in several
directories the one nearest to the pod's object. ``generation`` counts the claims that came
and went, so that what a pod template worked out from them is worked out again.

``users_of`` answers the other way round, for an admission's focus: the objects whose pods
name a claim. Its index is built on first use and then kept up to date, object by object.
"""

from __future__ import annotations

from typing import Any

from gpulint.input.document import Document, Manifest
from gpulint.inventory.store import Key, ObjectStore, key_of
from gpulint.kinds.dra import (
    DEVICE_CLASS,
    GPU_DRIVERS,
    GROUP,
    class_drivers,
    extended_resource_name,
    is_device_claim,
    is_device_class,
)
from gpulint.kinds.workload import PodTemplate, pod_templates


class DeviceClaims:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.generation = 0
        self._users: dict[Key, dict[int, Manifest]] | None = None
        self._named: dict[int, list[Key]] = {}  # id(pod owner) -> the claims it names
        self._classes: tuple[int, dict[str, str], frozenset[str]] | None = None

    def _read_classes(self) -> tuple[int, dict[str, str], frozenset[str]]:
        """What the input's DeviceClasses say, worked out again when one comes or goes."""
        if self._classes is None or self._classes[0] != self.generation:
            extended: dict[str, str] = {}
            gpu_classes: set[str] = set()
            for manifest in self.store.of_kind(DEVICE_CLASS):
                if manifest.group != GROUP:
                    continue
                name = extended_resource_name(manifest)
                if name is not None:
                    extended.setdefault(name, manifest.name)
                if any(driver in GPU_DRIVERS for driver in class_drivers(manifest)):
                    gpu_classes.add(manifest.name)
            self._classes = (self.generation, extended, frozenset(gpu_classes))
        return self._classes

    def extended_resources(self) -> dict[str, str]:
        """Extended resource name -> the DeviceClass of the input that serves it."""
        return self._read_classes()[1]

    def gpu_classes(self) -> frozenset[str]:
        """The input's DeviceClasses that pick devices of a GPU driver."""
        return self._read_classes()[2]

    def find(
        self, kind: str, namespace: str | None, name: str, near: Document | None
    ) -> Manifest | None:
        found = self.store.find(kind, namespace, name, near)
        return found if found is not None and found.group == GROUP else None

    def added(self, manifest: Manifest, view: Any) -> None:
        if is_device_claim(manifest) or is_device_class(manifest):
            self.generation += 1
        elif self._users is not None:
            self._index(manifest, view)

    def removed(self, manifest: Manifest) -> None:
        if is_device_claim(manifest) or is_device_class(manifest):
            self.generation += 1
        elif self._users is not None:
            for key in self._named.pop(id(manifest), []):
                users = self._users.get(key)
                if users is not None:
                    users.pop(id(manifest), None)
                    if not users:
                        del self._users[key]

    def users_of(self, claim: Manifest) -> list[Manifest]:
        """The objects (workloads, Knative Services, InferenceServices) whose pods name
        ``claim`` in its namespace, or name it without a namespace of their own."""
        if self._users is None:
            self._users = {}
            for manifest in self.store.workloads.items:
                self._index(manifest, None)
            for items in self.store.scoped.values():
                for view in items.items:
                    self._index(view.manifest, view)
        found: dict[int, Manifest] = {}
        for namespace in dict.fromkeys((claim.namespace or "", "")):
            found.update(self._users.get(key_of(claim.kind, namespace, claim.name), {}))
        return list(found.values())

    def _index(self, manifest: Manifest, view: Any) -> None:
        assert self._users is not None
        keys = [
            key_of(claim.kind, manifest.namespace, claim.object_name)
            for template in _templates(manifest, view)
            for claim in template.claims
            if claim.object_name
        ]
        if keys:
            self._named[id(manifest)] = keys
            for key in keys:
                self._users.setdefault(key, {})[id(manifest)] = manifest


def _templates(manifest: Manifest, view: Any) -> list[PodTemplate]:
    if view is None:
        return pod_templates(manifest)
    templates = getattr(view, "pod_templates", None)
    found: list[PodTemplate] = templates() if callable(templates) else []
    return found
