"""What a fix writes about the scrape chain, taken from the repository's own chain rather than
from gpulint's defaults, so that the fix agrees with what the other rules check it against:

* ``prometheus_address``: the Prometheus a new KEDA trigger queries, as the repository's other
  triggers or its prometheus-adapter query it (``gpulint.chain.urls``);
* ``dcgm_labels``: the labels that name a GPU workload's namespace and pod in dcgm-exporter's
  series, as its scrape stores them (``gpulint.chain.scrapelabels``) or as the adapter rule
  serving them maps them;
* ``series_labels``: the same for any series an adapter rule serves, from that rule.

Each answers None when the repository does not say; the fix then writes gpulint's default
and says so.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from gpulint.chain.adapter import AdapterRule
from gpulint.chain.address import PrometheusUrl
from gpulint.chain.urltarget import url_problem
from gpulint.core.quantity import format_number, try_quantity
from gpulint.input.document import Document, Manifest
from gpulint.inventory import Autoscaler, Inventory, key_of
from gpulint.kinds.hpa import CUSTOM_METRIC_TYPES, HPA, RESOURCE_METRIC_TYPES, behavior_fix
from gpulint.kinds.keda import ScaledObject
from gpulint.kinds.knative import MIN_SCALE
from gpulint.kinds.kserve import CLASS_ANNOTATION as KSERVE_CLASS
from gpulint.kinds.kserve import Component, InferenceService
from gpulint.kinds.revisions import (
    CLASS_ANNOTATION,
    HPA_CLASS,
    METRIC_ANNOTATION,
    TARGET_ANNOTATION,
)

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"


class PodLabels(NamedTuple):
    """The labels of a series that hold a pod's namespace and name."""

    namespace: str
    pod: str | None  # None: the series names no pod (a namespace-wide metric)


def prometheus_address(inventory: Inventory, near: Document) -> str | None:
    """The address a KEDA trigger written next to ``near`` should query: the one ``near``'s
    own triggers query, else another trigger's, else prometheus-adapter's, each only when it
    reaches a Prometheus as far as the unit tells (GL603 says nothing against it). A bare
    Service name of the adapter's is qualified with the adapter's namespace: KEDA's operator
    dials from its own."""
    urls = inventory.prometheus_urls()
    ordered = sorted(
        urls,
        key=lambda url: (url.document is not near, url.source != "keda"),
    )
    for url in ordered:
        address = _usable(url, inventory)
        if address is not None:
            return address
    return None


def _usable(url: PrometheusUrl, inventory: Inventory) -> str | None:
    parsed = url.parsed
    if parsed is None or url_problem(url, inventory) is not None:
        return None
    host = url.service
    if host is None or host.namespace is not None or url.source == "keda":
        return url.url.strip()
    if url.client_namespace is None:
        return None
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{host.name}.{url.client_namespace}.svc{port}{parsed.path}"


def adapter_prometheus_address(inventory: Inventory) -> str | None:
    """The Prometheus prometheus-adapter queries, as a client in another namespace must
    write it (a bare Service name qualified with the adapter's namespace): what a KEDA trigger
    that replaces an adapter-served metric reads. None when the unit names none, or names
    several that differ."""
    found: dict[str, None] = {}
    for url in inventory.prometheus_urls():
        if url.source not in ("adapter-values", "adapter-deployment") or url.parsed is None:
            continue
        host, parsed = url.service, url.parsed
        if host is None or host.namespace is not None or url.client_namespace is None:
            found[url.url.strip()] = None
            continue
        port = f":{parsed.port}" if parsed.port is not None else ""
        address = f"{parsed.scheme}://{host.name}.{url.client_namespace}.svc{port}{parsed.path}"
        found[address] = None
    return next(iter(found)) if len(found) == 1 else None


def dcgm_labels(inventory: Inventory, near: Document) -> PodLabels | None:
    """The labels naming the workload's namespace and pod in dcgm-exporter's series near
    ``near``: from how its scrape stores them (``honorLabels``), else from the adapter rule
    that serves its GPU utilization; None when neither says."""
    scrapes = inventory.dcgm_scrapes_near(near)
    if scrapes and not any(s.relabels_pod_labels for s in scrapes):
        honored = {s.honor_labels for s in scrapes}
        if len(honored) == 1:
            return PodLabels(scrapes[0].namespace_label, scrapes[0].pod_label)
    for rule, _ in inventory.serving(GPU_UTIL, near):
        labels = series_labels(rule)
        if labels is not None and labels.pod is not None:
            return labels
    return None


def series_labels(rule: AdapterRule) -> PodLabels | None:
    """The labels ``rule`` maps to namespaces and pods; None when it maps no namespace."""
    namespace = rule.resources.label_for("namespaces")
    if namespace is None:
        return None
    return PodLabels(namespace, rule.resources.label_for("pods"))


# --- Knative's HPA class, as the fixes of GL105, GL201 and GL204 write it -------------------

# Knative's autoscaler-keda extension reads these beside the HPA class and makes a KEDA
# ScaledObject instead of an HPA (knative-extensions/autoscaler-keda
# pkg/reconciler/autoscaling/hpa/resources/keda.go).
PROMETHEUS_QUERY_ANNOTATION = "autoscaling.knative.dev/prometheus-query"


class MetricChoice(NamedTuple):
    """The metric, whole-number target and (for KEDA) query a fix hands Knative's HPA class,
    and the comment that says where the metric comes from."""

    metric: str
    target: str
    query: str | None = None
    comment: str = ""


def revision_autoscalers(
    inventory: Inventory, namespace: str | None, configuration: str, *found: Autoscaler
) -> list[Autoscaler]:
    """The autoscalers written on the revision Deployments of ``configuration`` (a Knative
    Service, or a KServe component in Knative mode), with ``found``, once each, in the order
    of the files: the same list whichever of them a rule is looking at."""
    claims = [a for g in inventory.revision_groups(namespace, configuration) for a in g.autoscalers]
    unique: dict[tuple[str, str | None, str], Autoscaler] = {}
    for autoscaler in (*found, *claims):
        if autoscaler.implicit:
            continue
        manifest = autoscaler.manifest
        unique.setdefault((manifest.kind, manifest.namespace, manifest.name), autoscaler)
    return sorted(unique.values(), key=lambda a: (a.manifest.file, a.manifest.line))


def revision_metric(
    inventory: Inventory, autoscalers: list[Manifest], near: Document
) -> MetricChoice:
    """What the revisions should scale on: the first autoscaler's own metric that Knative can
    take (its custom metric with a whole-number target, its CPU utilization, a KEDA
    prometheus trigger with a whole-number threshold: Knative truncates the target to an
    integer), else GPU utilization under the name the adapter nearest to ``near`` serves it."""
    for manifest in autoscalers:
        view = inventory.view_of(manifest)
        found = None
        if isinstance(view, HPA):
            found = _hpa_metric(view)
        elif isinstance(view, ScaledObject):
            found = _trigger_metric(view)
        if found is not None:
            return found
    served = inventory.served_name(GPU_UTIL, near)
    if served:
        return MetricChoice(served, "70", None, f"{GPU_UTIL}, as your prometheus-adapter serves it")
    return MetricChoice(GPU_UTIL, "70", None, "the name your prometheus-adapter exposes")


def _hpa_metric(hpa: HPA) -> MetricChoice | None:
    for metric in hpa.metrics:
        if not metric.name or metric.target is None:
            continue
        if metric.type in CUSTOM_METRIC_TYPES:
            written = metric.target.average_value or metric.target.value
            quantity = try_quantity(written)
            if quantity is not None and quantity.is_integer and quantity.value > 0:
                return MetricChoice(metric.name, format_number(quantity.value))
        elif metric.type in RESOURCE_METRIC_TYPES and metric.name == "cpu":
            utilization = metric.target.average_utilization
            if isinstance(utilization, int) and utilization > 0:
                return MetricChoice("cpu", str(utilization))
    return None


def _trigger_metric(scaled: ScaledObject) -> MetricChoice | None:
    for trigger in scaled.triggers:
        metadata = trigger.get("metadata")
        if trigger.get("type") != "prometheus" or not isinstance(metadata, dict):
            continue
        query, threshold = metadata.get("query"), metadata.get("threshold")
        quantity = try_quantity(threshold)
        name = metadata.get("metricName")
        if isinstance(query, str) and quantity is not None and quantity.is_integer:
            name = name if isinstance(name, str) and name else scaled.name
            return MetricChoice(name, format_number(quantity.value), query)
    return None


def hpa_class_fix(
    owner: str,
    on_isvc: bool,
    choice: MetricChoice,
    deleted: list[str],
    min_scale: bool,
) -> str:
    """The revisions of ``owner`` (``Knative Service llm``) on Knative's HPA class: its
    annotations, after deleting the autoscalers ``deleted`` describes, which fight it. The
    same text whichever finding prints it, so that it is printed once
    (``gpulint.engine.fixes``)."""
    indent = "    " if on_isvc else "        "
    lines = []
    if deleted:
        lines.append(
            f"# delete {_and(deleted)}; Knative then creates and owns one HPA per revision"
        )
        lines.append(f"# on {owner}:")
    lines.append("metadata:\n  annotations:" if on_isvc else TEMPLATE_ANNOTATIONS)
    lines.append(
        f"{indent}{CLASS_ANNOTATION}: {HPA_CLASS}   # needs Knative's serving-hpa extension"
    )
    comment = f"   # {choice.comment}" if choice.comment else ""
    lines.append(f"{indent}{METRIC_ANNOTATION}: {choice.metric}{comment}")
    lines.append(f'{indent}{TARGET_ANNOTATION}: "{choice.target}"')
    if min_scale:
        lines.append(f'{indent}{MIN_SCALE[0]}: "1"   # the HPA class does not scale to zero')
    if choice.query is not None:
        lines.append(
            f"{indent}{PROMETHEUS_QUERY_ANNOTATION}: {json.dumps(choice.query)}"
            "   # read by Knative's autoscaler-keda extension"
        )
    return "\n".join(lines)


TEMPLATE_ANNOTATIONS = "spec:\n  template:\n    metadata:\n      annotations:"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


# --- KServe's Standard mode, as the fixes of GL203, GL301, GL302 and GL303 write it ---------

# DCGM reports GPU utilization per physical GPU, not per MIG instance; the graphics engine's
# activity is reported per instance, as a ratio (GL408; NVIDIA dcgm-exporter
# etc/default-counters.csv).
MIG_ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


class GpuMetric(NamedTuple):
    """The Pods metric a fix has an HPA read for GPU pods: its name, what the comment beside
    it says, and a target on its scale."""

    name: str
    comment: str
    target: str


def gpu_pods_metric(inventory: Inventory, near: Document, mig: bool) -> GpuMetric:
    """GPU utilization (the graphics engine's activity on MIG slices, GL408) under the name
    the adapter nearest to ``near`` serves it, else under the series' own name."""
    series, target = (MIG_ACTIVITY, "0.7") if mig else (GPU_UTIL, "70")
    served = inventory.served_name(series, near)
    if served:
        return GpuMetric(served, f"{series}, as your prometheus-adapter serves it", target)
    return GpuMetric(series, "the name your prometheus-adapter serves it under", target)


def kserve_gpu_hpa(isvc: InferenceService, component: Component, inventory: Inventory) -> str:
    """An HPA of the user's for a GPU component, on the GPU metric its adapter serves, under a
    name KServe does not rewrite; for KServe's ``autoscalerClass: external``."""
    hpa_name = isvc.component_name(component.name)
    minimum = component.get("minReplicas")
    maximum = component.get("maxReplicas")
    low = minimum if isinstance(minimum, int) and minimum >= 1 else 1
    high = maximum if isinstance(maximum, int) and maximum > low else max(low, 4)
    namespace = f"\n  namespace: {isvc.namespace}" if isvc.namespace else ""
    mig = any(g.is_mig for g in component.template.gpu_requests(inventory.gpu_names))
    found = gpu_pods_metric(inventory, isvc.manifest, mig)
    metric = f"{{name: {found.name}}}   # {found.comment}"
    target = found.target
    return f"""\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {hpa_name}-gpu   # not {hpa_name}: KServe would rewrite an HPA of that name{namespace}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {hpa_name}}}
  minReplicas: {low}
  maxReplicas: {high}
  metrics:
  - type: Pods
    pods:
      metric: {metric}
      target: {{type: AverageValue, averageValue: "{target}"}}
{behavior_fix("  ")}\
"""


def own_autoscaler(isvc: InferenceService, component: Component, inventory: Inventory) -> bool:
    """Does an autoscaler of the user's already scale the component's Deployment?"""
    target = key_of("Deployment", isvc.namespace, isvc.component_name(component.name))
    return any(not a.implicit for a in inventory.autoscalers_for(target))


EXTERNAL_LINE = f"{KSERVE_CLASS}: external   # KServe deletes its HPA and leaves scaling to you"


def standard_mode_fix(isvc: InferenceService, inventory: Inventory, mode_line: str) -> str:
    """``mode_line`` (the deployment mode annotation, as the rule writes it) in
    metadata.annotations, with what Standard mode then needs of the InferenceService so that
    the switch makes no finding of its own: its GPU components handed to HPAs of the user's
    (``autoscalerClass: external``, GL303), the range of KServe's HPA for the others
    (GL304)."""
    annotations = [mode_line]
    ranges: list[str] = []
    added: list[str] = []
    scaled = [
        c
        for c in isvc.components
        if not isinstance(c.get("workerSpec"), dict)
        and isvc.component_autoscaler_class(c)[0] == "hpa"
    ]
    gpus = [c for c in scaled if c.template.gpu_requests(inventory.gpu_names)]
    if gpus:
        annotations.append(EXTERNAL_LINE)
        added = [
            kserve_gpu_hpa(isvc, c, inventory)
            for c in gpus
            if not own_autoscaler(isvc, c, inventory)
        ]
    else:
        for component in scaled:
            if component.get("maxReplicas") not in (None, 0):
                continue
            minimum = component.get("minReplicas")
            pinned = minimum if isinstance(minimum, int) and minimum > 1 else 1
            ranges.append(
                f"  {component.name}:\n    minReplicas: {pinned}\n"
                f"    maxReplicas: {max(pinned * 2, 4)}   # KServe's HPA needs a range"
            )
    text = "metadata:\n  annotations:\n" + "\n".join(f"    {line}" for line in annotations)
    if ranges:
        text += "\nspec:\n" + "\n".join(ranges)
    for document in added:
        text += "\n---\n" + document.rstrip("\n")
    return text


__all__ = [
    "EXTERNAL_LINE",
    "GPU_UTIL",
    "MIG_ACTIVITY",
    "PROMETHEUS_QUERY_ANNOTATION",
    "GpuMetric",
    "MetricChoice",
    "PodLabels",
    "dcgm_labels",
    "gpu_pods_metric",
    "hpa_class_fix",
    "kserve_gpu_hpa",
    "own_autoscaler",
    "prometheus_address",
    "revision_autoscalers",
    "revision_metric",
    "series_labels",
    "standard_mode_fix",
]
