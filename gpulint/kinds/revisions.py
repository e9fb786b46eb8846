"""How the revisions of a Knative Service are autoscaled: the class, metric and target on the
revision template, read the same way for a Knative Service and for a KServe component in
Knative mode (``gpulint.kinds.knative``, ``gpulint.kinds.kserve``).

Facts (knative/serving v1.23): the autoscaler class is ``autoscaling.knative.dev/class`` on the
revision template's annotations, ``kpa.autoscaling.knative.dev`` (the default) or
``hpa.autoscaling.knative.dev``; the metric and target are ``autoscaling.knative.dev/metric``
and ``autoscaling.knative.dev/target`` beside it.

On the HPA class, serving-hpa makes one HPA per revision, named after it
(pkg/reconciler/autoscaling/hpa/resources/hpa.go ``MakeHPA``): ``cpu`` becomes a Resource
metric, ``memory`` a Resource metric in MiB, and any other metric name a Pods metric of that
name with an ``AverageValue`` target of the target annotation cut to a whole number, which
the HPA controller reads from the custom metrics API, that is from prometheus-adapter. Without
a target annotation that parses as a number (``PodAutoscaler.Target``) it writes no metric at
all. Knative's autoscaler-keda extension takes the same class and makes a KEDA ScaledObject
that queries Prometheus itself instead; its annotations say it is in use.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from gpulint.input.document import Manifest, Path

CLASS_ANNOTATION = "autoscaling.knative.dev/class"
METRIC_ANNOTATION = "autoscaling.knative.dev/metric"
TARGET_ANNOTATION = "autoscaling.knative.dev/target"
KPA_CLASS = "kpa.autoscaling.knative.dev"
HPA_CLASS = "hpa.autoscaling.knative.dev"
KPA_METRICS = ("concurrency", "rps")
# The metric each class uses when no metric annotation is set (pa_defaults.go defaultMetric).
DEFAULT_METRICS = {KPA_CLASS: "concurrency", HPA_CLASS: "cpu"}
CLASS_NAMES = {KPA_CLASS: "KPA", HPA_CLASS: "HPA"}
# Metrics the HPA class reads from the resource metrics API or Knative itself: only other
# metric names go through prometheus-adapter (pkg/reconciler/autoscaling/hpa/resources).
BUILT_IN_METRICS = ("cpu", "memory", "concurrency", "rps")
# The annotations of Knative's autoscaler-keda extension, which queries Prometheus through
# KEDA instead of reading the metric from prometheus-adapter (knative-extensions/
# autoscaler-keda pkg/reconciler/autoscaling/hpa/resources/keda.go).
KEDA_ANNOTATIONS = (
    "autoscaling.knative.dev/prometheus-query",
    "autoscaling.knative.dev/prometheus-address",
    "autoscaling.knative.dev/extra-prometheus-triggers",
    "autoscaling.knative.dev/scaled-object-override",
)


class AutoscalingSetting(NamedTuple):
    """One autoscaling setting of a revision: its value, and where it was written.

    ``path`` is None for a default nobody wrote; ``origin`` names the field for messages.
    """

    value: str
    path: Path | None
    origin: str

    @property
    def is_default(self) -> bool:
        return self.path is None


class RevisionAutoscaling(NamedTuple):
    """The class, metric and target the revisions of a Knative Service (or of a KServe
    Knative-mode component) are scaled with, each with where it came from."""

    document: Manifest
    autoscaler_class: AutoscalingSetting
    metric: AutoscalingSetting | None  # None for a third-party class without a metric
    target: AutoscalingSetting | None

    @property
    def uses_kpa(self) -> bool:
        return self.autoscaler_class.value == KPA_CLASS

    @property
    def uses_hpa_class(self) -> bool:
        return self.autoscaler_class.value == HPA_CLASS

    def describe_class(self) -> str:
        """``KPA (the default class)``, ``HPA (hpa.autoscaling.knative.dev)`` ..."""
        value = self.autoscaler_class.value
        name = CLASS_NAMES.get(value, value)
        if self.autoscaler_class.is_default:
            return f"{name} ({self.autoscaler_class.origin})"
        return f"{name} ({value})" if name != value else value

    def describe_metric(self) -> str:
        """``concurrency (target 10 requests in flight per pod)`` and the like."""
        metric = self.metric.value if self.metric is not None else "its own metric"
        target = self.target.value if self.target is not None else None
        if metric == "concurrency":
            if target is None:
                # config-autoscaler container-concurrency-target-default (or the template's
                # containerConcurrency when set).
                return "concurrency (Knative's default target, 100 requests in flight per pod)"
            return f"concurrency (target {target} requests in flight per pod)"
        if metric == "rps":
            if target is None:
                return "rps (Knative's default target, 200 requests per second per pod)"
            return f"rps (target {target} requests per second per pod)"
        return f"{metric} (target {target})" if target is not None else metric


def annotation_text(value: Any) -> str | None:
    """An annotation value as Kubernetes reads it; numbers written unquoted count as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


class RevisionTrace(NamedTuple):
    """A Pods metric Knative's HPA class reads for each revision of the object."""

    metric: str
    path: Path  # where the metric is set


def revision_trace(autoscaling: RevisionAutoscaling) -> list[RevisionTrace]:
    """The Pods metric Knative's HPA class reads through prometheus-adapter, if any."""
    metric = autoscaling.metric
    if not autoscaling.uses_hpa_class or metric is None or metric.value in BUILT_IN_METRICS:
        return []
    return [RevisionTrace(metric.value, metric.path or ())]


class RevisionTarget(NamedTuple):
    """The AverageValue target of the Pods metric Knative's HPA class writes."""

    average_value: str
    value: None = None
    average_utilization: None = None


class RevisionMetric:
    """The Pods metric the HPA Knative makes for each revision reads from prometheus-adapter
    (an ``AdapterMetric``, judged as an HPA's is)."""

    __slots__ = ("name", "name_path", "target")

    index = 0  # the one metric of the HPA Knative makes
    type = "Pods"
    api = "custom"
    described_object = None
    selector = None  # Knative writes no metric selector

    def __init__(self, name: str, name_path: Path, target: RevisionTarget) -> None:
        self.name = name
        self.name_path = name_path  # where the metric annotation is written
        self.target = target

    def __repr__(self) -> str:
        return f"RevisionMetric({self.name!r})"


def revision_adapter_reads(
    autoscaling: RevisionAutoscaling, annotations: dict[str, Any]
) -> list[RevisionMetric]:
    """The Pods metric the revisions' HPA reads through prometheus-adapter, if any: on the HPA
    class, a metric Knative does not serve itself, with a target it can read, and not
    handed to autoscaler-keda (see the module docstring)."""
    metric, target = autoscaling.metric, autoscaling.target
    if not autoscaling.uses_hpa_class or metric is None or metric.value in BUILT_IN_METRICS:
        return []
    if metric.path is None or target is None or _whole_number(target.value) is None:
        return []
    if any(key in annotations for key in KEDA_ANNOTATIONS):
        return []
    return [
        RevisionMetric(metric.value, metric.path, RevisionTarget(str(_whole_number(target.value))))
    ]


def _whole_number(text: str) -> int | None:
    """The target as Knative hands it to the HPA: a decimal number as Go's ParseFloat reads
    it, cut to an integer (``resource.NewQuantity(int64(target))``)."""
    if not _DECIMAL.fullmatch(text):
        return None
    return int(float(text))


_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
