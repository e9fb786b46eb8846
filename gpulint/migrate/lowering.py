"""An HPA served by prometheus-adapter, lowered to the KEDA ScaledObject that scales the same.

prometheus-adapter's maintainers propose deprecating it in favour of KEDA
(kubernetes-sigs/prometheus-adapter#701); the proposal's DEPRECATION.md
(kubernetes-sigs/prometheus-adapter#703) maps the adapter's configuration to KEDA's prometheus,
cpu and memory scalers, and says what a user must do by hand: KEDA's queries take no template,
so each must be written out for the workload it scales and return a single number. gpulint
writes them out as the adapter renders them. Each field, from the facts of both projects:

* each Pods, Object and External metric becomes a ``prometheus`` trigger whose ``query`` is the
  adapter rule's ``metricsQuery`` rendered exactly as the adapter renders it for this HPA
  (``gpulint.replay.plan.adapter_query``: the metric selector's matchers first, sorted by key,
  then the HPA's namespace and its target's pods or the described object), wrapped in
  ``sum(...)``. KEDA's prometheus scaler reads one sample and fails with "prometheus query ...
  returned multiple elements" on more (kedacore/keda pkg/scalers/prometheus_scaler.go,
  ``ExecutePromQuery``), and what the HPA does with the adapter's answer is a sum too: for a
  Pods metric the HPA averages the pods' values and multiplies by the pods again
  (kubernetes pkg/controller/podautoscaler/replica_calculator.go, ``GetMetricReplicas``), for
  an External metric it adds up every series the adapter returns (``GetExternalMetric``);
* ``threshold`` is the HPA's ``averageValue`` or ``value`` and the trigger's ``metricType`` its
  target type (KEDA's trigger field ``metricType``, AverageValue by default); a Pods metric is
  an ``AverageValue`` over the pods, which the sum divided by KEDA's HPA's pods is;
* the pods of the target are named by the pattern their controller gives their names
  (``pod_name_pattern``): the adapter lists the pods that carry the target's labels and names
  each in its query, which a query written once cannot do, and the pods a controller makes
  for the workload are those it names so;
* ``minReplicaCount`` is the HPA's ``minReplicas`` (default 1: KEDA's default of 0 would
  scale to zero, which the HPA never did), ``maxReplicaCount`` its ``maxReplicas``, and its
  ``behavior`` goes to ``advanced.horizontalPodAutoscalerConfig.behavior``, which KEDA copies
  into the HPA it makes;
* ``serverAddress`` is the Prometheus the adapter queries (its Helm values' ``prometheus.url``
  and ``port``, or its Deployment's ``--prometheus-url``);
* ``advanced.horizontalPodAutoscalerConfig.name`` is the HPA's name and the annotation
  ``scaledobject.keda.sh/transfer-hpa-ownership: "true"`` asks KEDA to take over the HPA that
  is running rather than make a second one beside it (kedacore/keda
  apis/keda/v1alpha1/scaledobject_types.go; KEDA's admission webhook refuses a ScaledObject
  whose workload has an HPA of its own when the annotation comes without the name,
  scaledobject_webhook_test.go);
* ``Resource`` metrics (cpu, memory) become KEDA's ``cpu`` and ``memory`` triggers with
  ``metricType`` (kedacore/keda pkg/scalers/cpu_memory_scaler.go); KEDA hands them to its
  HPA as they are.

What cannot be lowered faithfully is refused with the reason: a metric no rule of the input
serves, a target gpulint cannot read, a selector label no Prometheus label can be, a Prometheus
the input does not name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpulint.chain.adapter import AdapterRule
from gpulint.core.quantity import format_number, try_quantity
from gpulint.input.document import as_dict, plain_data
from gpulint.inventory import Inventory
from gpulint.kinds.hpa import HPA, HpaMetric
from gpulint.kinds.keda import TRANSFER_OWNERSHIP
from gpulint.kinds.view import generated_by
from gpulint.replay.plan import Untraceable, adapter_query

KEDA_API_VERSION = "keda.sh/v1alpha1"
# What a Prometheus label name can be (prometheus docs, "Metric names and labels").
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# KEDA's triggers for the HPA's Resource metrics (keda-docs scalers/cpu.md, memory.md).
RESOURCE_TRIGGERS = ("cpu", "memory")

__all__ = [
    "KEDA_API_VERSION",
    "Lowered",
    "Refusal",
    "Trigger",
    "candidates",
    "lower",
]


@dataclass(frozen=True)
class Trigger:
    """One trigger of the ScaledObject and the HPA metric it stands for."""

    metric: str  # the HPA's metric name
    metric_type: str  # Pods, Object, External, Resource
    target_type: str  # AverageValue, Value, Utilization
    threshold: str  # as written in the trigger
    adapter_query: str | None  # what the adapter sends for this HPA (None: a Resource metric)
    query: str | None  # the trigger's query
    rule: AdapterRule | None

    def data(self, server_address: str) -> dict[str, Any]:
        """The trigger as the ScaledObject holds it."""
        if self.query is None:
            return {
                "type": self.metric,
                "metricType": self.target_type,
                "metadata": {"value": self.threshold},
            }
        return {
            "type": "prometheus",
            "metricType": self.target_type,
            "metadata": {
                "serverAddress": server_address,
                "query": self.query,
                "threshold": self.threshold,
            },
        }


@dataclass(frozen=True)
class Lowered:
    """An HPA and the ScaledObject that replaces it."""

    hpa: HPA
    triggers: tuple[Trigger, ...]
    scaled_object: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.hpa.namespace or 'default'}/{self.hpa.name}"


@dataclass(frozen=True)
class Refusal:
    """An HPA gpulint does not migrate, and why."""

    hpa: HPA
    reason: str

    @property
    def key(self) -> str:
        return f"{self.hpa.namespace or 'default'}/{self.hpa.name}"


def candidates(inventory: Inventory) -> list[HPA]:
    """The HPAs of an inventory with a metric a metrics adapter serves (Pods, Object,
    External), written in the input: not the ones KEDA, KServe or Knative make."""
    found = []
    for hpa in inventory.hpas:
        if hpa.is_fragment or generated_by(hpa.manifest, "ScaledObject") is not None:
            continue
        if hpa.manifest.generated:
            continue
        if any(metric.is_custom for metric in hpa.metrics):
            found.append(hpa)
    return found


def lower(hpa: HPA, inventory: Inventory, server_address: str | None) -> Lowered | Refusal:
    """The ScaledObject for ``hpa``, or why there is none."""
    try:
        return _lower(hpa, inventory, server_address)
    except Untraceable as why:
        return Refusal(hpa, str(why))


def _lower(hpa: HPA, inventory: Inventory, server_address: str | None) -> Lowered:
    if hpa.target_ref is None:
        raise Untraceable("it has no scaleTargetRef")
    scaling = hpa.scaling_range()
    if scaling.minimum is None or scaling.maximum is None:
        raise Untraceable("its minReplicas or maxReplicas is not a number")
    if server_address is None:
        raise Untraceable(
            "the input does not say which Prometheus prometheus-adapter queries (its Helm "
            "values' prometheus.url, or its Deployment's --prometheus-url): give it with "
            "--server-address"
        )
    namespace = hpa.namespace or "default"
    triggers = tuple(_trigger(hpa, metric, inventory, namespace) for metric in hpa.metrics)
    return Lowered(hpa, triggers, _scaled_object(hpa, triggers, server_address))


def _threshold(hpa: HPA, metric: HpaMetric) -> tuple[str, str]:
    """(target type, threshold) of a metric, as a KEDA trigger writes them."""
    target = metric.target
    if target is None:
        raise Untraceable(f"metric {metric.name} has no target")
    kind = str(target.type or "")
    written = {
        "AverageValue": target.average_value,
        "Value": target.value,
        "Utilization": target.average_utilization,
    }.get(kind)
    quantity = try_quantity(written)
    if quantity is None or quantity.value <= 0:
        raise Untraceable(f"metric {metric.name} has no {kind or 'target'} gpulint can read")
    return kind, format_number(quantity.value)


def _trigger(hpa: HPA, metric: HpaMetric, inventory: Inventory, namespace: str) -> Trigger:
    if metric.type == "Resource" and metric.name in RESOURCE_TRIGGERS:
        kind, threshold = _threshold(hpa, metric)
        if kind not in ("Utilization", "AverageValue"):
            raise Untraceable(f"the {metric.name} metric's target type {kind} has no KEDA trigger")
        return Trigger(metric.name, metric.type, kind, threshold, None, None, None)
    if not metric.is_custom or not metric.name:
        raise Untraceable(
            f"metric {metric.index + 1} is a {metric.type} metric, which KEDA's triggers do "
            "not take as it is"
        )
    kind, threshold = _threshold(hpa, metric)
    if kind not in ("AverageValue", "Value"):
        raise Untraceable(f"metric {metric.name} has a {kind} target, which KEDA has no use for")
    for key in sorted(_selector_labels(metric.selector)):
        if not LABEL_NAME.match(key):
            # The adapter puts the key in its query as it is: the query it sends is not PromQL.
            raise Untraceable(
                f"metric {metric.name}'s selector names label {key!r}, which no Prometheus "
                "label can be: the adapter's own query for it fails"
            )
    served = adapter_query(hpa, metric, inventory, namespace)
    for label in served.rule.resources.overrides:
        if not LABEL_NAME.match(label):
            raise Untraceable(f"adapter rule label {label!r} is not a Prometheus label name")
    query = f"sum({served.query})"
    return Trigger(metric.name, metric.type, kind, threshold, served.query, query, served.rule)


def _selector_labels(selector: dict[str, Any] | None) -> list[str]:
    data = as_dict(selector)
    keys = [k for k in as_dict(data.get("matchLabels")) if isinstance(k, str)]
    for item in data.get("matchExpressions") or []:
        key = as_dict(item).get("key")
        if isinstance(key, str):
            keys.append(key)
    return keys


def _scaled_object(hpa: HPA, triggers: tuple[Trigger, ...], server_address: str) -> dict[str, Any]:
    assert hpa.target_ref is not None
    scaling = hpa.scaling_range()
    metadata: dict[str, Any] = {"name": hpa.name}
    if hpa.namespace:
        metadata["namespace"] = hpa.namespace
    labels = as_dict(as_dict(hpa.manifest.data.get("metadata")).get("labels"))
    if labels:
        metadata["labels"] = plain_data(labels)
    metadata["annotations"] = {TRANSFER_OWNERSHIP: "true"}
    target: dict[str, Any] = {}
    if hpa.target_ref.api_version:
        target["apiVersion"] = hpa.target_ref.api_version
    if hpa.target_ref.kind:
        target["kind"] = hpa.target_ref.kind
    target["name"] = hpa.target_ref.name
    hpa_config: dict[str, Any] = {"name": hpa.name}
    if hpa.behavior is not None:
        hpa_config["behavior"] = plain_data(hpa.behavior)
    written = [trigger.data(server_address) for trigger in triggers]
    return {
        "apiVersion": KEDA_API_VERSION,
        "kind": "ScaledObject",
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": target,
            "minReplicaCount": scaling.minimum,
            "maxReplicaCount": scaling.maximum,
            "advanced": {"horizontalPodAutoscalerConfig": hpa_config},
            "triggers": written,
        },
    }
