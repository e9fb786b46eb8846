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
from collections.abc import Iterator
from typing import Any, NamedTuple

from gpulint.chain.address import PrometheusUrl
from gpulint.input.document import Manifest, Path, as_dict, as_list
from gpulint.kinds import revisions
from gpulint.kinds.dra import pod_claims
from gpulint.kinds.revisions import (
    AutoscalingSetting,
    RevisionAutoscaling,
    annotation_text,
    revision_trace,
)
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef
from gpulint.kinds.scaling import ScalingRange, replica_count
from gpulint.kinds.view import GeneratedWorkload, KindView, QueryTrace, TraceSource
from gpulint.kinds.workload import (
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
LEGACY_NAMES = {canonical: alias for alias, canonical in DEPRECATED_MODES.items()}
# KServe 0.16 (PR #4608) renamed the modes; earlier releases know only the old names.
RENAMED_IN = (0, 16)


def mode_spelling(mode: str, version: tuple[int, int] | None) -> str:
    """How to write a deployment mode for the KServe in use: the 0.16 names (``Standard``,
    ``Knative``) from 0.16; otherwise the old ones (``RawDeployment``, ``Serverless``), which
    every release accepts (0.16 and later rewrite them). ``version`` is ``kserve.version``
    from ``.gpulint.yaml``; None when not configured."""
    canonical = MODE_VALUES.get(mode, mode)
    if version is not None and version >= RENAMED_IN:
        return canonical
    return LEGACY_NAMES.get(canonical, canonical)


def mode_note(version: tuple[int, int] | None, defaulted: bool = False) -> str:
    """What a fix that writes a mode should say about the spelling it chose; ``defaulted``:
    nobody said which KServe the clusters run (gpulint.engine.versions)."""
    if version is None:
        return "the name every KServe release accepts; set kserve.version for 0.16's names"
    where = "the default: set kserve.version in .gpulint.yaml" if defaulted else "kserve.version"
    if version >= RENAMED_IN:
        return f"KServe {version[0]}.{version[1]} ({where})"
    return f"KServe before 0.16 ({where} {version[0]}.{version[1]})"


AUTOSCALER_CLASSES = ("hpa", "external", "keda", "none")
COMPONENTS = ("predictor", "transformer", "explainer")
# Annotations older KServe read or validated; v0.15 and later read neither (the constants
# remain in constants.go, unused). ``serving.kserve.io/metric`` was never a KServe key.
LEGACY_AUTOSCALING_ANNOTATIONS = {
    "serving.kserve.io/metrics": "scaleMetric",
    "serving.kserve.io/metric": "scaleMetric",
    "serving.kserve.io/targetUtilizationPercentage": "scaleTarget",
}


class Component:
    """One InferenceService component (predictor, transformer, explainer)."""

    __slots__ = ("data", "name", "path", "template")

    def __init__(
        self,
        name: str,
        path: Path,
        data: dict[str, Any],
        template: PodTemplate,
    ) -> None:
        self.name = name
        self.path = path
        self.data = data
        self.template = template

    def __repr__(self) -> str:
        return f"Component(name={self.name!r}, path={self.path!r})"

    def get(self, key: str) -> Any:
        return self.data.get(key)


def known_modes(version: tuple[int, int] | None) -> dict[str, str]:
    """The annotation values a KServe release knows, each with its canonical mode: before
    0.16 ``Standard`` and ``Knative`` are not among them (unknown version: all are)."""
    if version is not None and version < RENAMED_IN:
        return {k: v for k, v in MODE_VALUES.items() if k not in LEGACY_NAMES}
    return MODE_VALUES


def kserve_range(component: dict[str, Any], path: Path, standard: bool, by: str) -> ScalingRange:
    """Standard mode: ``max(minReplicas, 1)`` to ``maxReplicas`` raised to the minimum, so no
    ``maxReplicas`` means fixed (reconcilers/hpa/hpa_reconciler.go); Knative mode:
    ``minReplicas`` is ``min-scale`` (default 1), ``maxReplicas`` ``max-scale`` (0: no bound)
    (pkg/controller/v1alpha1/utils SetAutoScalingAnnotations)."""
    written_min = replica_count(component.get("minReplicas"), None if not standard else 1)
    written_max = replica_count(component.get("maxReplicas"), None)
    if standard:
        minimum = max(written_min, 1) if written_min is not None else None
        if written_max is None or minimum is None:
            maximum = minimum if "maxReplicas" not in component else None
        else:
            maximum = max(written_max, minimum)
        return ScalingRange(minimum, maximum, by, (*path, "maxReplicas"))
    minimum = written_min if written_min is not None else 1
    maximum = None if written_max in (None, 0) else written_max
    return ScalingRange(minimum, maximum, by, (*path, "maxReplicas"))


class InferenceService(KindView):
    def __init__(
        self,
        manifest: Manifest,
        default_mode: str = KNATIVE,
        version: tuple[int, int] | None = None,
    ) -> None:
        self.manifest = manifest
        annotations = manifest.annotations
        raw_mode = annotations.get(MODE_ANNOTATION)
        self.mode_annotation: str | None = raw_mode if isinstance(raw_mode, str) else None
        self.default_mode = default_mode
        self.known_modes = known_modes(version)
        raw_class = annotations.get(CLASS_ANNOTATION)
        self.class_annotation: str | None = raw_class if isinstance(raw_class, str) else None
        self.components = self._components()

    @property
    def mode(self) -> str:
        """The effective mode; unknown annotation values fall back to the cluster default."""
        if self.mode_annotation in self.known_modes:
            return self.known_modes[self.mode_annotation]
        return self.default_mode

    @property
    def mode_is_explicit(self) -> bool:
        return self.mode_annotation in self.known_modes

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
            # A component is a pod spec (its containers, resourceClaims ...), and so is the
            # multi-node predictor's workerSpec.
            claims = pod_claims(data, path, containers)
            worker = data.get("workerSpec")
            if isinstance(worker, dict):
                workers = containers_of(worker, (*path, "workerSpec"))
                containers.extend(workers)
                claims.extend(pod_claims(worker, (*path, "workerSpec"), workers))
            template = PodTemplate(path, {}, containers, f"{name} component", claims, self.manifest)
            found.append(Component(name, path, data, template))
        return found

    def scaling_range(self, component: Component) -> ScalingRange:
        """The replicas of one component's Deployment (``gpulint.kinds.scaling``)."""
        return kserve_range(
            component.data,
            component.path,
            self.mode == STANDARD,
            f"InferenceService {self.name} ({component.name})",
        )

    def pod_templates(self) -> list[PodTemplate]:
        """One template per component, as the pod-owner rules read them."""
        return [component.template for component in self.components]

    # --- the kind protocol (gpulint.kinds.view) ---------------------------------------------

    def replica_claims(self) -> list[ReplicaClaim]:
        """Standard mode with autoscaler class ``hpa`` or ``keda``: KServe's own HPA (or
        ScaledObject, whose HPA is ``keda-hpa-<name>``) on each component's Deployment."""
        if self.mode != STANDARD or self.autoscaler_class not in ("hpa", "keda"):
            return []
        found = []
        for component in self.components:
            name = self.component_name(component.name)
            hpa_name = name if self.autoscaler_class == "hpa" else f"keda-hpa-{name}"
            found.append(
                ReplicaClaim(
                    "KServe",
                    ("metadata", "annotations"),
                    hpa_name,
                    f"KServe's own HPA {hpa_name} (from InferenceService {self.name})",
                    workload=name,
                    implicit=True,
                    note=f"autoscalerClass {self.autoscaler_class}",
                )
            )
        return found

    def scaling_range_of(self, workload: str) -> ScalingRange | None:
        for component in self.components:
            if self.component_name(component.name) == workload:
                return self.scaling_range(component)
        return None

    def generated_names(self) -> list[str]:
        return [workload.name for workload in self.generated_workloads()]

    def generated_workloads(self) -> list[GeneratedWorkload]:
        """The Deployment KServe makes for each component (``component_name``)."""
        return [
            GeneratedWorkload(self.component_name(c.name), c.name, [c.template])
            for c in self.components
        ]

    def trace_sources(self) -> list[TraceSource]:
        """Knative mode: the revisions' metric on the HPA class; Standard mode with class
        ``keda``: the prometheus queries KServe hands the ScaledObject it makes."""
        found: list[TraceSource] = []
        for component in self.components:
            if self.mode == KNATIVE:
                found.extend(revision_trace(self.revision_autoscaling(component)))
            elif self.autoscaler_class == "keda":
                found.extend(self._keda_queries(component))
        return found

    def _keda_queries(self, component: Component) -> list[TraceSource]:
        found: list[TraceSource] = []
        ref = TargetRef("Deployment", self.component_name(component.name), "apps/v1", ())
        auto_scaling = as_dict(component.get("autoScaling"))
        for index, entry in enumerate(as_list(auto_scaling.get("metrics"))):
            item = as_dict(entry)
            source_field = "external" if "external" in item else "podmetric"
            settings = as_dict(as_dict(item.get("external") or item.get("podmetric")).get("metric"))
            query = settings.get("query")
            if settings.get("backend") != "prometheus" or not isinstance(query, str):
                continue
            path: Path = (*component.path, "autoScaling", "metrics", index)
            address = settings.get("serverAddress")
            url = None
            if isinstance(address, str) and address:
                url = PrometheusUrl(
                    address,
                    self.manifest,
                    (*path, source_field, "metric", "serverAddress"),
                    "keda",
                    f"InferenceService {self.name} {component.name} metric {index}",
                    None,
                    self.manifest,
                )
            name = f"s{index}-prometheus"
            found.append(QueryTrace(name, query.strip(), url, path, ref, "KServe KEDA autoscaler"))
        return found

    def component(self, name: str) -> Component | None:
        for component in self.components:
            if component.name == name:
                return component
        return None

    def component_annotation(self, component: Component, key: str) -> tuple[str, Path] | None:
        """An annotation as KServe hands it to a component's objects, with where it was
        written: the component's ``annotations`` win over the InferenceService's
        (components/predictor.go buildObjectMeta: Union(runtime, isvc, component))."""
        own = as_dict(component.get("annotations"))
        text = annotation_text(own.get(key))
        if text is not None:
            return text, (*component.path, "annotations", key)
        text = annotation_text(self.manifest.annotations.get(key))
        if text is not None:
            return text, ("metadata", "annotations", key)
        return None

    def component_autoscaler_class(self, component: Component) -> tuple[str, Path | None]:
        """``serving.kserve.io/autoscalerClass`` of a component (autoscaler_reconciler.go reads
        the component's merged annotations), with its path; ``hpa`` and None when unset."""
        found = self.component_annotation(component, CLASS_ANNOTATION)
        if found is None:
            return "hpa", None
        return found

    def components_under_kserve_hpa(self) -> Iterator[tuple[Component, Path | None]]:
        """Components KServe scales with an HPA of its own: Standard mode, autoscaler class
        ``hpa``, not multi-node (``workerSpec`` requires class ``none``); with the path of
        the class annotation (None when the default applies)."""
        if self.mode != STANDARD:
            return
        for component in self.components:
            if isinstance(component.get("workerSpec"), dict):
                continue
            klass, class_path = self.component_autoscaler_class(component)
            if klass == "hpa":
                yield component, class_path

    def revision_autoscaling(self, component: Component) -> RevisionAutoscaling:
        """What the Knative Service KServe makes for a component in Knative mode scales with.

        KServe copies the annotations to the revision template, sets the KPA class unless one
        is given, and lets ``scaleMetric``/``scaleTarget`` override the metric and target
        annotations (pkg/controller/v1alpha1/utils SetAutoScalingAnnotations).
        """

        def from_annotation(key: str) -> AutoscalingSetting | None:
            found = self.component_annotation(component, key)
            if found is None:
                return None
            return AutoscalingSetting(found[0], found[1], f"annotation {key}")

        def from_field(field: str) -> AutoscalingSetting | None:
            text = annotation_text(component.get(field))
            if text is None:
                return None
            return AutoscalingSetting(text, (*component.path, field), field)

        klass = from_annotation(revisions.CLASS_ANNOTATION)
        if klass is None or not klass.value:
            klass = AutoscalingSetting(revisions.KPA_CLASS, None, "KServe's default class")
        metric = from_field("scaleMetric") or from_annotation(revisions.METRIC_ANNOTATION)
        if metric is None and klass.value in revisions.DEFAULT_METRICS:
            metric = AutoscalingSetting(
                revisions.DEFAULT_METRICS[klass.value], None, "default metric"
            )
        target = from_field("scaleTarget") or from_annotation(revisions.TARGET_ANNOTATION)
        return RevisionAutoscaling(self.manifest, klass, metric, target)

    def mode_source(self, configmap: Manifest | None = None) -> str:
        """How a message says where the effective mode comes from; ``configmap`` is the
        inferenceservice-config that set the cluster default, if the input has it."""
        if self.mode_is_explicit:
            return f"annotation {MODE_ANNOTATION}: {self.mode_annotation}"
        lead = (
            f"{MODE_ANNOTATION} {self.mode_annotation!r} is not a mode KServe knows"
            if self.mode_annotation is not None
            else f"no {MODE_ANNOTATION} annotation"
        )
        return f"{lead}: {self.default_mode_source(configmap)}"

    def default_mode_source(self, configmap: Manifest | None = None) -> str:
        """``the cluster default applies, Knative on a default install`` and the like."""
        if configmap is not None:
            where = f"{configmap.namespace}/" if configmap.namespace else ""
            return (
                f"the cluster default applies, {self.default_mode} per ConfigMap "
                f"{where}{configmap.name}"
            )
        if self.default_mode == KNATIVE:
            return "the cluster default applies, Knative on a default install"
        return (
            f"the cluster default applies, {self.default_mode} per "
            "kserve.default-deployment-mode in the gpulint configuration"
        )


class GeneratedHpaMetric(NamedTuple):
    """One metric of the HPA KServe's HPA reconciler creates for a component."""

    description: str  # "CPU 80% utilization"
    path: Path | None  # what in the InferenceService asked for it; None for a default


def external_class_fix(isvc: str) -> str:
    """KServe's own autoscaler stepping aside for the user's (the fix of GL103 and GL303 when
    an autoscaler of the user's already scales the component: the same text, printed once)."""
    return (
        f"# on InferenceService {isvc}: KServe deletes its own autoscaler and leaves "
        "scaling to yours\n"
        f"metadata:\n  annotations:\n    {CLASS_ANNOTATION}: external"
    )


def generated_hpa_metrics(component: Component) -> list[GeneratedHpaMetric]:
    """The metrics of the HPA KServe makes for a component with autoscalerClass hpa.

    reconcilers/hpa/hpa_reconciler.go getHPAMetrics: with ``autoScaling`` only its Resource
    cpu/memory entries count (cpu defaults to 80%); without it ``scaleMetric`` cpu (target
    ``scaleTarget`` or 80) or memory (only with ``scaleTarget``). An HPA left without metrics
    is defaulted by the API server to CPU 80% utilization (autoscaling/v2 defaults.go).
    """
    found: list[GeneratedHpaMetric] = []
    auto_scaling = component.get("autoScaling")
    if isinstance(auto_scaling, dict):
        metrics = auto_scaling.get("metrics")
        for index, entry in enumerate(metrics if isinstance(metrics, list) else []):
            resource = as_dict(as_dict(entry).get("resource"))
            if as_dict(entry).get("type") != "Resource" or not resource:
                continue
            name = resource.get("name")
            target = as_dict(resource.get("target"))
            path: Path = (*component.path, "autoScaling", "metrics", index)
            if name == "cpu":
                utilization = target.get("averageUtilization", 80)
                found.append(GeneratedHpaMetric(f"CPU {utilization}% utilization", path))
            elif name == "memory":
                if target.get("type") == "AverageValue":
                    value = target.get("averageValue")
                    found.append(GeneratedHpaMetric(f"memory {value} per pod", path))
                else:
                    value = target.get("averageUtilization")
                    found.append(GeneratedHpaMetric(f"memory {value}% utilization", path))
    else:
        metric = component.get("scaleMetric")
        target = component.get("scaleTarget")
        metric_path: Path = (*component.path, "scaleMetric")
        target_path: Path = (*component.path, "scaleTarget")
        if metric is None or metric == "cpu":
            where = (
                metric_path if metric is not None else target_path if target is not None else None
            )
            value = target if target is not None else 80
            found.append(GeneratedHpaMetric(f"CPU {value}% utilization", where))
        elif metric == "memory" and target is not None:
            found.append(GeneratedHpaMetric(f"memory {target}% utilization", metric_path))
    if not found:
        found.append(
            GeneratedHpaMetric(
                "CPU 80% utilization (the API server's default for an HPA without metrics)", None
            )
        )
    return found


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
