"""How an adapter rule maps series labels to Kubernetes resources (``resources.overrides``
and ``resources.template``), and the resource names the adapter accepts for each."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from gpulint.input.document import as_dict

_RESOURCE_ALIASES = {
    "pod": "pods",
    "pods": "pods",
    "po": "pods",
    "namespace": "namespaces",
    "namespaces": "namespaces",
    "ns": "namespaces",
    "node": "nodes",
    "nodes": "nodes",
    "service": "services",
    "services": "services",
    "svc": "services",
    "deployment": "deployments",
    "deployments": "deployments",
    "statefulset": "statefulsets",
    "statefulsets": "statefulsets",
    "ingress": "ingresses",
    "ingresses": "ingresses",
    "job": "jobs",
    "jobs": "jobs",
}


def canonical_resource(resource: str) -> str:
    lowered = resource.strip().lower()
    if "." in lowered:
        lowered = lowered.split(".", 1)[0]
    return _RESOURCE_ALIASES.get(lowered, lowered if lowered.endswith("s") else lowered + "s")


def singular(resource: str) -> str:
    canonical = canonical_resource(resource)
    if canonical.endswith("ses"):
        return canonical[:-2]
    return canonical[:-1] if canonical.endswith("s") else canonical


class ResourceMapping(NamedTuple):
    """``resources``: Prometheus labels that name Kubernetes objects."""

    overrides: dict[str, str]  # label -> canonical resource ("pods", "namespaces" ...)
    template: str | None
    namespaced: bool | None

    def label_for(self, resource: str) -> str | None:
        """The Prometheus label that holds objects of ``resource`` (override or template)."""
        wanted = canonical_resource(resource)
        for label, mapped in self.overrides.items():
            if mapped == wanted:
                return label
        if self.template:
            return render_resource_template(self.template, wanted)
        return None

    def labels_for(self, resource: str) -> list[str]:
        wanted = canonical_resource(resource)
        labels = [label for label, mapped in self.overrides.items() if mapped == wanted]
        if self.template:
            rendered = render_resource_template(self.template, wanted)
            if rendered and rendered not in labels:
                labels.append(rendered)
        return labels

    @property
    def is_empty(self) -> bool:
        return not self.overrides and not self.template


def render_resource_template(template: str, resource: str) -> str | None:
    """``kube_<<.Group>>_<<.Resource>>`` for a resource (the group of core objects is empty)."""
    text = template.replace("<<.Resource>>", singular(resource)).replace("<<.Group>>", "")
    text = re.sub(r"<<\s*\.Resource\s*>>", singular(resource), text)
    text = re.sub(r"<<\s*\.Group\s*>>", "", text)
    return None if "<<" in text else text


def read_resources(data: Any) -> ResourceMapping:
    resources = as_dict(data)
    overrides: dict[str, str] = {}
    for label, target in as_dict(resources.get("overrides")).items():
        resource = as_dict(target).get("resource")
        if isinstance(label, str) and isinstance(resource, str):
            overrides[label] = canonical_resource(resource)
    template = resources.get("template")
    namespaced = resources.get("namespaced")
    return ResourceMapping(
        overrides,
        template if isinstance(template, str) and template else None,
        namespaced if isinstance(namespaced, bool) else None,
    )
