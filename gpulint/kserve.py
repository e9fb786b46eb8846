"""KServe InferenceService: deployment mode, autoscaler class, components and generated names.

Facts (kserve/kserve v0.20, pkg/constants/constants.go and the HPA/KEDA reconcilers):
* the mode is the annotation ``serving.kserve.io/deploymentMode`` (Standard, Knative, ModelMesh;
  deprecated aliases RawDeployment and Serverless); without it the cluster default applies,
  which is Knative on a default install (configmap inferenceservice-config, key deploy);
* the autoscaler class is ``serving.kserve.io/autoscalerClass`` (hpa by default, external,
  keda, none);
* in Standard mode KServe creates a Deployment, Service and HPA (or ScaledObject) all named
  ``<isvc>-predictor``; in Knative mode a Knative Service ``<isvc>-predictor`` whose revision
  Deployments are ``<isvc>-predictor-00001-deployment``; before v0.11 the name had a
  ``-default`` suffix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpulint.document import Manifest, Path, as_dict
from gpulint.workload import (
    KSERVE_CONTAINER_KEYS,
    Container,
    PodTemplate,
    containers_of,
)

KSERVE_GROUP = "serving.kserve.io"
MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
CLASS_ANNOTATION = "serving.kserve.io/autoscalerClass"

STANDARD, KNATIVE, MODELMESH = "Standard", "Knative", "ModelMesh"
# Canonical value of each accepted annotation value (constants.go ParseDeploymentMode).
MODE_VALUES = {
    "Standard": STANDARD,
    "RawDeployment": STANDARD,
    "Knative": KNATIVE,
    "Serverless": KNATIVE,
    "ModelMesh": MODELMESH,
}
DEPRECATED_MODES = {"RawDeployment": "Standard", "Serverless": "Knative"}
AUTOSCALER_CLASSES = ("hpa", "external", "keda", "none")
COMPONENTS = ("predictor", "transformer", "explainer")


@dataclass(slots=True)
class Component:
    """One InferenceService component (predictor, transformer, explainer)."""

    name: str
    path: Path
    data: dict[str, Any]
    template: PodTemplate

    def get(self, key: str) -> Any:
        return self.data.get(key)


class InferenceService:
    def __init__(self, manifest: Manifest, default_mode: str = KNATIVE) -> None:
        self.manifest = manifest
        annotations = manifest.annotations
        raw_mode = annotations.get(MODE_ANNOTATION)
        self.mode_annotation: str | None = raw_mode if isinstance(raw_mode, str) else None
        self.default_mode = default_mode
        raw_class = annotations.get(CLASS_ANNOTATION)
        self.class_annotation: str | None = raw_class if isinstance(raw_class, str) else None
        self.components = self._components()

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def namespace(self) -> str | None:
        return self.manifest.namespace

    @property
    def mode(self) -> str:
        """The effective mode; unknown annotation values fall back to the cluster default."""
        if self.mode_annotation in MODE_VALUES:
            return MODE_VALUES[self.mode_annotation]
        return self.default_mode

    @property
    def mode_is_explicit(self) -> bool:
        return self.mode_annotation in MODE_VALUES

    @property
    def autoscaler_class(self) -> str:
        return self.class_annotation or "hpa"

    def component_name(self, component: str) -> str:
        """The name of the Deployment/Service/HPA KServe generates for a component."""
        custom = as_dict(self.manifest.data.get("spec")).get(component)
        custom_name = as_dict(custom).get("name") if component == "predictor" else None
        if isinstance(custom_name, str) and custom_name:
            return f"{self.name}-{custom_name}-{component}"
        return f"{self.name}-{component}"

    def _components(self) -> list[Component]:
        spec = as_dict(self.manifest.data.get("spec"))
        base: Path = ("spec",)
        if self.manifest.api_version.endswith("/v1alpha2"):
            spec = as_dict(spec.get("default"))
            base = ("spec", "default")
        found = []
        for name in COMPONENTS:
            data = spec.get(name)
            if not isinstance(data, dict):
                continue
            path: Path = (*base, name)
            containers: list[Container] = containers_of(data, path)
            for key in KSERVE_CONTAINER_KEYS:
                item = data.get(key)
                if isinstance(item, dict):
                    containers.append(Container(key, (*path, key), item))
            worker = data.get("workerSpec")
            if isinstance(worker, dict):
                containers.extend(containers_of(worker, (*path, "workerSpec")))
            template = PodTemplate(path, {}, containers, f"{name} component")
            found.append(Component(name, path, data, template))
        return found

    def component(self, name: str) -> Component | None:
        for component in self.components:
            if component.name == name:
                return component
        return None


def is_kserve_isvc(manifest: Manifest) -> bool:
    return manifest.kind == "InferenceService" and manifest.group == KSERVE_GROUP


def default_mode_from_configmap(manifest: Manifest) -> str | None:
    """``defaultDeploymentMode`` of KServe's inferenceservice-config ConfigMap, if this is it."""
    if manifest.kind != "ConfigMap" or manifest.name != "inferenceservice-config":
        return None
    data = as_dict(manifest.data.get("data"))
    # OME (sgl-project/ome) ships a ConfigMap with the same name for its own controller.
    if manifest.namespace == "ome" or "omeIngressGateway" in str(data.get("ingress", "")):
        return None
    deploy = data.get("deploy")
    if not isinstance(deploy, str):
        return None
    try:
        value = json.loads(deploy).get("defaultDeploymentMode")
    except (ValueError, AttributeError):
        return None
    return MODE_VALUES.get(value) if isinstance(value, str) else None
