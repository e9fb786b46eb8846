"""Knative Serving Services and Configurations, and the names of what they generate.

Facts (knative/serving v1.23):
* the autoscaler class is ``autoscaling.knative.dev/class`` on the revision template's
  annotations: ``kpa.autoscaling.knative.dev`` (the default) or ``hpa.autoscaling.knative.dev``;
* autoscaling annotations on the Service/Configuration's own metadata are rejected
  (pkg/apis/serving/metadata_validation.go);
* each template change creates a revision ``<configuration>-%05d`` and a Deployment
  ``<revision>-deployment`` owned by the Revision; KPA writes that Deployment's replicas.
"""

from __future__ import annotations

import re
from typing import Any

from gpulint.document import Manifest, Path, as_dict
from gpulint.workload import PodTemplate, pod_template_at

KNATIVE_SERVING_GROUP = "serving.knative.dev"
AUTOSCALING_PREFIX = "autoscaling.knative.dev/"
CLASS_ANNOTATION = "autoscaling.knative.dev/class"
METRIC_ANNOTATION = "autoscaling.knative.dev/metric"
TARGET_ANNOTATION = "autoscaling.knative.dev/target"
KPA_CLASS = "kpa.autoscaling.knative.dev"
HPA_CLASS = "hpa.autoscaling.knative.dev"
KPA_METRICS = ("concurrency", "rps")
REVISION_LABEL = "serving.knative.dev/revision"

# <configuration>-00001-deployment (names.go: ChildName(revision, "-deployment")).
REVISION_DEPLOYMENT = re.compile(r"^(?P<configuration>.+)-(?P<generation>\d{5})-deployment$")


class KnativeService:
    """A Knative Service or Configuration (both carry a revision template at spec.template)."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.template_path: Path = ("spec", "template")
        self.template: PodTemplate | None = pod_template_at(
            manifest.data, self.template_path, "revision template"
        )
        template_meta = as_dict(
            as_dict(as_dict(manifest.data.get("spec")).get("template")).get("metadata")
        )
        self.template_annotations: dict[str, Any] = as_dict(template_meta.get("annotations"))

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def namespace(self) -> str | None:
        return self.manifest.namespace

    @property
    def autoscaler_class(self) -> str:
        value = self.template_annotations.get(CLASS_ANNOTATION)
        return value if isinstance(value, str) and value else KPA_CLASS

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


def is_knative_service(manifest: Manifest) -> bool:
    return manifest.group == KNATIVE_SERVING_GROUP and manifest.kind in ("Service", "Configuration")


def revision_deployment_parent(name: str) -> str | None:
    """``hello`` for ``hello-00001-deployment``; None for any other name."""
    match = REVISION_DEPLOYMENT.match(name)
    return match.group("configuration") if match else None


def is_knative_owned(manifest: Manifest) -> bool:
    """A Deployment Knative created for a revision (label or controller ownerReference)."""
    if REVISION_LABEL in manifest.labels:
        return True
    return any(
        owner.get("kind") == "Revision"
        and str(owner.get("apiVersion", "")).startswith(KNATIVE_SERVING_GROUP + "/")
        for owner in manifest.owner_references
    )
