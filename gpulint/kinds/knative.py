"""Knative Serving Services and Configurations, and the names of what they generate.

Facts (knative/serving v1.23):
* the autoscaler class, metric and target are annotations on the revision template, read as
  KServe's Knative mode reads them too (``gpulint.kinds.revisions``);
* autoscaling annotations on the Service/Configuration's own metadata are rejected
  (pkg/apis/serving/metadata_validation.go);
* each template change creates a revision ``<configuration>-%05d`` and a Deployment
  ``<revision>-deployment`` owned by the Revision; KPA writes that Deployment's replicas.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpulint.input.document import Manifest, Path, as_dict
from gpulint.kinds.revisions import (
    CLASS_ANNOTATION,
    DEFAULT_METRICS,
    KPA_CLASS,
    METRIC_ANNOTATION,
    TARGET_ANNOTATION,
    AutoscalingSetting,
    RevisionAutoscaling,
    RevisionMetric,
    annotation_text,
    revision_adapter_reads,
    revision_trace,
)
from gpulint.kinds.scaling import ScalingRange, replica_count
from gpulint.kinds.view import AdapterMetric, KindView, TraceSource
from gpulint.kinds.workload import PodTemplate, pod_template_at

KNATIVE_SERVING_GROUP = "serving.knative.dev"
AUTOSCALING_PREFIX = "autoscaling.knative.dev/"
REVISION_LABEL = "serving.knative.dev/revision"
CONFIGURATION_LABEL = "serving.knative.dev/configuration"
# Knative rejects any annotation key with this prefix on a Service/Configuration's own
# metadata (metadata_validation.go ValidateHasNoAutoscalingAnnotation: strings.HasPrefix).
AUTOSCALING_GROUP = "autoscaling.knative.dev"
MIN_SCALE = ("autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/minScale")
MAX_SCALE = ("autoscaling.knative.dev/max-scale", "autoscaling.knative.dev/maxScale")


def is_autoscaling_annotation(key: Any) -> bool:
    return isinstance(key, str) and key.startswith(AUTOSCALING_GROUP)


# <configuration>-00001-deployment (names.go: ChildName(revision, "-deployment")).
REVISION_DEPLOYMENT = re.compile(r"^(?P<configuration>.+)-(?P<generation>\d{5})-deployment$")


def knative_range(annotations: dict[str, Any], path: Path, by: str) -> ScalingRange:
    """``min-scale`` (default 0) to ``max-scale`` (default 0, no bound) on the revision
    template (knative/serving pkg/apis/autoscaling/register.go)."""

    def first(keys: tuple[str, ...]) -> tuple[int | None, Path | None]:
        for key in keys:
            if key in annotations:
                return replica_count(annotation_text(annotations[key]), None), (*path, key)
        return (0, None)

    minimum, _ = first(MIN_SCALE)
    maximum, max_path = first(MAX_SCALE)
    return ScalingRange(minimum, None if maximum == 0 else maximum, by, max_path)


# The cluster's default autoscaler class: key pod-autoscaler-class of ConfigMap
# config-autoscaler (knative/serving@98e5ef9: config/core/configmaps/autoscaler.yaml;
# pkg/apis/autoscaling/register.go, pkg/autoscaler/config/autoscalerconfig ``PodAutoscalerClass``).
CONFIG_AUTOSCALER = "config-autoscaler"
CLASS_KEY = "pod-autoscaler-class"
CONFIGURED_CLASS = f"the cluster's default class, {CONFIG_AUTOSCALER} {CLASS_KEY}"


def default_class_from_configmap(manifest: Manifest) -> str | None:
    """The default autoscaler class a ``config-autoscaler`` ConfigMap sets, if this is one."""
    if manifest.kind != "ConfigMap" or manifest.name != CONFIG_AUTOSCALER:
        return None
    value = as_dict(manifest.data.get("data")).get(CLASS_KEY)
    text = annotation_text(value)
    return text if text else None


class KnativeService(KindView):
    """A Knative Service or Configuration (both carry a revision template at spec.template).

    ``default_class`` is the class of revisions that name none: KPA, unless the cluster's
    ``config-autoscaler`` ConfigMap in the input says otherwise (the inventory sets it)."""

    def __init__(self, manifest: Manifest, default_class: str = KPA_CLASS) -> None:
        self.manifest = manifest
        self.default_class = default_class
        self.template_path: Path = ("spec", "template")
        self.template: PodTemplate | None = pod_template_at(
            manifest.data, self.template_path, "revision template", manifest
        )
        template_meta = as_dict(
            as_dict(as_dict(manifest.data.get("spec")).get("template")).get("metadata")
        )
        self.template_annotations: dict[str, Any] = as_dict(template_meta.get("annotations"))
        self._reads: list[RevisionMetric] = []
        self.reads_metrics_api = False
        self._read_metrics()

    def _read_metrics(self) -> None:
        self._reads = revision_adapter_reads(self.revision_autoscaling(), self.template_annotations)
        # On the HPA class, serving-hpa makes each revision an HPA that reads the metric
        # (gpulint.kinds.revisions).
        self.reads_metrics_api = bool(self._reads)

    def use_default_class(self, default_class: str) -> None:
        """The cluster's default class changed (its config-autoscaler came or went)."""
        self.default_class = default_class
        self._read_metrics()

    def scaling_range(self) -> ScalingRange:
        """The replicas the revisions can have (``gpulint.kinds.scaling``)."""
        return knative_range(
            self.template_annotations,
            (*self.template_path, "metadata", "annotations"),
            f"Knative {self.manifest.kind} {self.name}",
        )

    def pod_templates(self) -> list[PodTemplate]:
        """The revision template, as the pod-owner rules read it."""
        return [self.template] if self.template is not None else []

    @property
    def autoscaler_class(self) -> str:
        value = self.template_annotations.get(CLASS_ANNOTATION)
        return value if isinstance(value, str) and value else self.default_class

    @property
    def uses_kpa(self) -> bool:
        return self.autoscaler_class == KPA_CLASS

    @property
    def metric(self) -> str:
        value = self.template_annotations.get(METRIC_ANNOTATION)
        if isinstance(value, str) and value:
            return value
        return "concurrency" if self.uses_kpa else "cpu"

    def annotation_path(self, key: str) -> Path:
        return (*self.template_path, "metadata", "annotations", key)

    # --- the kind protocol (gpulint.kinds.view) ---------------------------------------------

    def generated_names(self) -> list[str]:
        """Revisions are ``<name>-NNNNN`` with Deployments ``<name>-NNNNN-deployment``."""
        return [self.name]

    def adapter_reads(self) -> list[AdapterMetric]:
        """The Pods metric of the HPA Knative makes for each revision, on the HPA class."""
        return list(self._reads)

    def scope_items(self) -> Iterator[tuple[str, Any]]:
        if self.reads_metrics_api:
            yield "metrics-reader", self

    def trace_sources(self) -> list[TraceSource]:
        return [*revision_trace(self.revision_autoscaling())]

    def revision_autoscaling(self) -> RevisionAutoscaling:
        """Class, metric and target from the revision template's annotations."""

        def setting(key: str) -> AutoscalingSetting | None:
            text = annotation_text(self.template_annotations.get(key))
            if text is None:
                return None
            return AutoscalingSetting(text, self.annotation_path(key), f"annotation {key}")

        klass = setting(CLASS_ANNOTATION)
        if klass is None or not klass.value:
            origin = "the default class" if self.default_class == KPA_CLASS else CONFIGURED_CLASS
            klass = AutoscalingSetting(self.default_class, None, origin)
        metric = setting(METRIC_ANNOTATION)
        if metric is None and klass.value in DEFAULT_METRICS:
            metric = AutoscalingSetting(DEFAULT_METRICS[klass.value], None, "default metric")
        return RevisionAutoscaling(self.manifest, klass, metric, setting(TARGET_ANNOTATION))


def is_knative_service(manifest: Manifest) -> bool:
    return manifest.group == KNATIVE_SERVING_GROUP and manifest.kind in ("Service", "Configuration")


def revision_deployment_parent(name: str) -> str | None:
    """``hello`` for ``hello-00001-deployment``; None for any other name."""
    match = REVISION_DEPLOYMENT.match(name)
    return match.group("configuration") if match else None


def owning_revision(manifest: Manifest) -> str | None:
    """The name of the Knative Revision an object's ownerReferences name, if any."""
    for owner in manifest.owner_references:
        name = owner.get("name")
        if (
            owner.get("kind") == "Revision"
            and str(owner.get("apiVersion", "")).startswith(KNATIVE_SERVING_GROUP + "/")
            and isinstance(name, str)
        ):
            return name
    return None


def is_knative_owned(manifest: Manifest) -> bool:
    """A Deployment Knative created for a revision (label or controller ownerReference)."""
    return REVISION_LABEL in manifest.labels or owning_revision(manifest) is not None
