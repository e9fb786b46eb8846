"""HorizontalPodAutoscaler as rules read it, whatever API version it was written in.

autoscaling/v1 (``targetCPUUtilizationPercentage``) and the removed v2beta1 field names are
translated into the v2 shape so that every rule reads one model. Paths always point at what
the user wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from gpulint.input.document import Manifest, Path, as_dict, as_list, plain_data
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef
from gpulint.kinds.scaling import ScalingRange, replica_count
from gpulint.kinds.view import AdapterMetric, AdapterTrace, KindView, TraceSource

HPA_KIND = "HorizontalPodAutoscaler"
RESOURCE_METRIC_TYPES = ("Resource", "ContainerResource")
CUSTOM_METRIC_TYPES = ("Pods", "Object", "External")
# The field of a metric entry that holds its source, by ``type``.
_SOURCE_FIELDS = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}


class MetricTarget(NamedTuple):
    type: Any
    value: Any
    average_value: Any
    average_utilization: Any
    path: Path
    # Where each v2 field is written when the API version names it otherwise (v2beta1
    # ``targetAverageValue``; "" for autoscaling/v1, whose target is the path itself).
    written_as: tuple[tuple[str, str], ...] = ()

    def field_path(self, field: str) -> Path:
        """The path of ``value``, ``averageValue``, ``averageUtilization`` or ``type``."""
        written = dict(self.written_as).get(field, field)
        return (*self.path, written) if written else self.path

    def set_fields(self) -> list[str]:
        fields = []
        if self.value is not None:
            fields.append("value")
        if self.average_value is not None:
            fields.append("averageValue")
        if self.average_utilization is not None:
            fields.append("averageUtilization")
        return fields


class HpaMetric:
    """One entry of ``spec.metrics``."""

    __slots__ = (
        "described_object",
        "index",
        "name",
        "name_path",
        "path",
        "selector",
        "target",
        "type",
    )

    def __init__(
        self,
        index: int,
        type: str,
        path: Path,
        name: str | None,
        name_path: Path,
        target: MetricTarget | None,
        selector: dict[str, Any] | None = None,
        described_object: dict[str, Any] | None = None,
    ) -> None:
        self.index = index
        self.type = type
        self.path = path
        self.name = name
        self.name_path = name_path
        self.target = target
        self.selector = selector
        self.described_object = described_object

    def __repr__(self) -> str:
        return f"HpaMetric({self.index}, {self.type!r}, {self.name!r})"

    @property
    def is_cpu_or_memory(self) -> bool:
        return self.type in RESOURCE_METRIC_TYPES and self.name in ("cpu", "memory")

    @property
    def is_custom(self) -> bool:
        """Served by a metrics adapter (custom.metrics.k8s.io or external.metrics.k8s.io)."""
        return self.type in CUSTOM_METRIC_TYPES

    @property
    def api(self) -> str:
        return "external" if self.type == "External" else "custom"


def hpa_range(spec: dict[str, Any], by: str) -> ScalingRange:
    """``minReplicas`` (default 1) to ``maxReplicas`` (Kubernetes autoscaling/v2 types.go)."""
    minimum = replica_count(spec.get("minReplicas"), 1)
    maximum = replica_count(spec.get("maxReplicas"), None)
    return ScalingRange(minimum, maximum, by, ("spec", "maxReplicas"))


class HPA(KindView):
    """A HorizontalPodAutoscaler object, in any API version.

    ``spec_path`` is where its spec is written in ``manifest``: ``spec`` for an HPA object;
    another place for the HPA a controller makes from a spec written inside another object
    (``gpulint.kinds.generated.GeneratedHPA``), so that rules place what they say, and the
    edits of their fixes, in the object a user wrote."""

    spec_path: Path = ("spec",)

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.version = manifest.api_version.rpartition("/")[2]
        spec = as_dict(manifest.data.get("spec"))
        self.spec = spec
        ref = spec.get("scaleTargetRef")
        self.target_ref: TargetRef | None = None
        if isinstance(ref, dict) and isinstance(ref.get("name"), str):
            kind = ref.get("kind")
            api_version = ref.get("apiVersion")
            self.target_ref = TargetRef(
                kind if isinstance(kind, str) else "",
                ref["name"],
                api_version if isinstance(api_version, str) else "",
                ("spec", "scaleTargetRef"),
            )
        self.min_replicas: Any = spec.get("minReplicas")
        self.max_replicas: Any = spec.get("maxReplicas")
        self.behavior: dict[str, Any] | None = (
            spec["behavior"] if isinstance(spec.get("behavior"), dict) else None
        )
        self.metrics: list[HpaMetric] = self._read_metrics(spec)
        # With no metrics at all the API server defaults to CPU 80% (autoscaling/v2 defaults.go).
        self.defaults_to_cpu = not self.metrics

    def scaling_range(self) -> ScalingRange:
        """The replicas this HPA can set (``gpulint.kinds.scaling``)."""
        return hpa_range(self.spec, f"HorizontalPodAutoscaler {self.name}")

    @property
    def title(self) -> str:
        """``HPA llm``: how messages name it (a generated HPA says who makes it)."""
        return f"HPA {self.name}"

    @property
    def full_title(self) -> str:
        """``HorizontalPodAutoscaler llm``, for messages that spell the kind out."""
        return f"HorizontalPodAutoscaler {self.name}"

    @property
    def behavior_path(self) -> Path | None:
        """Where ``behavior`` is (or would be) written; None when the controller that makes the
        HPA writes its behavior itself, from settings of its own (AIBrix)."""
        return (*self.spec_path, "behavior")

    # --- the kind protocol (gpulint.kinds.view) ---------------------------------------------

    def replica_claims(self) -> list[ReplicaClaim]:
        if self.target_ref is None or self.generator() is not None:
            return []  # a generated HPA: its generator's claim counts
        return [
            ReplicaClaim(
                "HorizontalPodAutoscaler",
                self.target_ref.path,
                self.name,
                f"HorizontalPodAutoscaler {self.name}",
                ref=self.target_ref,
            )
        ]

    def scaling_range_of(self, workload: str) -> ScalingRange | None:
        return self.scaling_range()

    reads_metrics_api = True  # the HPA controller reads them (pkg/controller/podautoscaler)

    def adapter_reads(self) -> list[AdapterMetric]:
        return [m for m in self.metrics if m.is_custom and m.name]

    def scope_items(self) -> Iterator[tuple[str, Any]]:
        yield "autoscaler", self
        yield "metrics-reader", self

    def trace_sources(self) -> list[TraceSource]:
        return [
            AdapterTrace(self, metric, self.target_ref)
            for metric in self.metrics
            if metric.is_custom and metric.name
        ]

    @property
    def is_fragment(self) -> bool:
        """No ``scaleTargetRef``: a kustomize patch that sets a few fields of an HPA defined
        elsewhere, not an object of its own (the API server requires scaleTargetRef)."""
        return "scaleTargetRef" not in self.spec

    def metrics_in_v2(self) -> list[dict[str, Any]]:
        """``spec.metrics`` as autoscaling/v2 spells it (plain data, for fixes).

        v2beta2 has the v2 shape already; v2beta1 moves ``metricName``/``target*`` into
        ``metric`` and ``target`` (kubernetes/website deprecation guide); v1's
        ``targetCPUUtilizationPercentage`` is a Resource cpu Utilization metric.
        """
        if self.version == "v1":
            return [_resource_v2("cpu", m.target) for m in self.metrics if m.target is not None]
        entries = [e for e in as_list(self.spec.get("metrics")) if isinstance(e, dict)]
        if self.version != "v2beta1":
            return [plain_data(entry) for entry in entries]
        pairs = zip(entries, self.metrics, strict=True)  # one HpaMetric per mapping entry
        return [_v2beta1_to_v2(entry, metric) for entry, metric in pairs]

    def _read_metrics(self, spec: dict[str, Any]) -> list[HpaMetric]:
        if self.version == "v1":
            percent = spec.get("targetCPUUtilizationPercentage")
            if percent is None:
                return []
            path: Path = ("spec", "targetCPUUtilizationPercentage")
            target = MetricTarget(
                "Utilization", None, None, percent, path, (("averageUtilization", ""),)
            )
            return [HpaMetric(0, "Resource", path, "cpu", path, target)]
        metrics = []
        for index, entry in enumerate(as_list(spec.get("metrics"))):
            if isinstance(entry, dict):
                metrics.append(self._read_metric(index, entry))
        return metrics

    def _read_metric(self, index: int, entry: dict[str, Any]) -> HpaMetric:
        base: Path = (*self.spec_path, "metrics", index)
        kind = entry.get("type")
        kind = kind if isinstance(kind, str) else ""
        field = _SOURCE_FIELDS.get(kind, "")
        source = as_dict(entry.get(field)) if field else {}
        source_path: Path = (*base, field)
        if self.version == "v2beta1":
            return self._read_v2beta1(index, kind, source, source_path, base)
        name: Any
        if kind in RESOURCE_METRIC_TYPES:
            name = source.get("name")
            name_path: Path = (*source_path, "name")
        else:
            name = as_dict(source.get("metric")).get("name")
            name_path = (*source_path, "metric", "name")
        target_data = source.get("target")
        target = None
        if isinstance(target_data, dict):
            target = MetricTarget(
                target_data.get("type"),
                target_data.get("value"),
                target_data.get("averageValue"),
                target_data.get("averageUtilization"),
                (*source_path, "target"),
            )
        selector = as_dict(source.get("metric")).get("selector")
        described = source.get("describedObject")
        return HpaMetric(
            index,
            kind,
            base,
            name if isinstance(name, str) else None,
            name_path,
            target,
            selector if isinstance(selector, dict) else None,
            described if isinstance(described, dict) else None,
        )

    def _read_v2beta1(
        self, index: int, kind: str, source: dict[str, Any], source_path: Path, base: Path
    ) -> HpaMetric:
        if kind in RESOURCE_METRIC_TYPES:
            name = source.get("name")
            name_path: Path = (*source_path, "name")
            utilization = source.get("targetAverageUtilization")
            average = source.get("targetAverageValue")
            target_type = "Utilization" if utilization is not None else "AverageValue"
            target = MetricTarget(
                target_type,
                None,
                average,
                utilization,
                source_path,
                (
                    ("averageValue", "targetAverageValue"),
                    ("averageUtilization", "targetAverageUtilization"),
                ),
            )
        else:
            name = source.get("metricName")
            name_path = (*source_path, "metricName")
            value = source.get("targetValue")
            # v2beta1 ObjectMetricSource says averageValue; Pods and External targetAverageValue.
            average_field = "averageValue" if kind == "Object" else "targetAverageValue"
            average = source.get(average_field)
            target_type = "Value" if value is not None else "AverageValue"
            target = MetricTarget(
                target_type,
                value,
                average,
                None,
                source_path,
                (("value", "targetValue"), ("averageValue", average_field)),
            )
        selector = source.get("selector") or source.get("metricSelector")
        described = source.get("target") if kind == "Object" else None
        return HpaMetric(
            index,
            kind,
            base,
            name if isinstance(name, str) else None,
            name_path,
            target,
            selector if isinstance(selector, dict) else None,
            described if isinstance(described, dict) else None,
        )


def _target_v2(target: MetricTarget | None) -> dict[str, Any]:
    if target is None:
        return {}
    if target.average_utilization is not None:
        return {"type": "Utilization", "averageUtilization": plain_data(target.average_utilization)}
    if target.value is not None:
        return {"type": "Value", "value": plain_data(target.value)}
    if target.average_value is not None:
        return {"type": "AverageValue", "averageValue": plain_data(target.average_value)}
    return {}


def _resource_v2(name: Any, target: MetricTarget | None) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": name, "target": _target_v2(target)}}


def _v2beta1_to_v2(entry: dict[str, Any], metric: HpaMetric) -> dict[str, Any]:
    kind = metric.type
    field = _SOURCE_FIELDS.get(kind, "")
    source = as_dict(entry.get(field))
    if kind == "Resource":
        return _resource_v2(source.get("name"), metric.target)
    if kind == "ContainerResource":
        converted: dict[str, Any] = {"name": source.get("name")}
        converted["container"] = source.get("container")
        converted["target"] = _target_v2(metric.target)
        return {"type": kind, field: converted}
    if kind not in CUSTOM_METRIC_TYPES:
        return as_dict(plain_data(entry))
    identifier: dict[str, Any] = {"name": metric.name}
    if metric.selector is not None:
        identifier["selector"] = plain_data(metric.selector)
    converted = {}
    if kind == "Object" and metric.described_object is not None:
        converted["describedObject"] = plain_data(metric.described_object)
    converted["metric"] = identifier
    converted["target"] = _target_v2(metric.target)
    return {"type": kind, field: converted}


# --- the behavior gpulint proposes for GPU pods ----------------------------------------------
# Pods that take minutes to load a model: add at most two per minute with no delay, remove
# one per two minutes after the stabilization window (GL102 explains the defaults it beats).


def scale_up_fix() -> str:
    """``scaleUp`` under ``behavior:``, indented two spaces."""
    return (
        "  scaleUp:\n"
        "    stabilizationWindowSeconds: 0\n"
        "    policies:\n"
        "    - type: Pods\n"
        "      value: 2            # GPU pods added at most per period\n"
        "      periodSeconds: 60"
    )


def scale_down_fix(window: int = 300) -> str:
    """``scaleDown`` under ``behavior:``, indented two spaces."""
    return (
        "  scaleDown:\n"
        f"    stabilizationWindowSeconds: {window}\n"
        "    policies:\n"
        "    - type: Pods\n"
        "      value: 1            # GPU pods removed at most per period\n"
        "      periodSeconds: 120"
    )


def behavior_fix(indent: str = "", window: int = 300) -> str:
    """The whole ``behavior:`` block, each line prefixed with ``indent``."""
    text = "behavior:\n" + scale_up_fix() + "\n" + scale_down_fix(window)
    return "\n".join(indent + line for line in text.splitlines())
