"""Boil a ``/api/v1/series`` answer down to what the live rules ask about.

A seriesQuery can match tens of thousands of series; gpulint keeps counts, the label names,
the values of the labels that name Kubernetes objects, and per node which GPUs report which
``pod`` (the tell-tale of an exporter's own pod), then drops the series.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from operator import methodcaller
from typing import cast

from gpulint.live.snapshot import (
    GPU_LABELS,
    MAX_SIGHTINGS,
    MAX_VALUES_PER_LABEL,
    MIG_INSTANCE_LABEL,
    MIG_PROFILE_LABEL,
    NAMESPACE_LABELS,
    NODE_LABELS,
    POD_LABELS,
    SeriesSummary,
    Sighting,
)
from gpulint.metrics.promql import Matcher


def summarize(
    series: Iterable[Mapping[str, str]],
    object_labels: Sequence[str] = (),
    namespace_labels: Sequence[str] = (),
    matchers: Sequence[Matcher] = (),
) -> SeriesSummary:
    """Summarize label sets; ``object_labels`` are tracked with their namespace labels.

    A seriesQuery may return tens of thousands of series: every pass below reads one label
    of all of them with C-level ``map``/``Counter``/``set``, and Python only loops over
    distinct values.
    """
    rows = [labels for labels in series if isinstance(labels, dict)]
    summary = SeriesSummary(count=len(rows))
    summary.names.update(map(methodcaller("get", "__name__", ""), rows))
    summary.label_counts.update(chain.from_iterable(rows))
    carried = summary.label_counts
    objects = [label for label in dict.fromkeys((*POD_LABELS, *object_labels))]
    namespaces = [label for label in dict.fromkeys((*NAMESPACE_LABELS, *namespace_labels))]
    for label in dict.fromkeys((*objects, *namespaces)):
        summary.values[label] = _values(rows, label) if carried.get(label) else Counter()
    # Pairs that travel together (pod/namespace, exported_pod/exported_namespace ...) and
    # those the rules map.
    wanted = {(label, _PAIRED_NAMESPACE[label]) for label in POD_LABELS}
    wanted.update((o, n) for o in object_labels for n in namespace_labels)
    _pair_objects(rows, summary, objects, namespaces, wanted)
    _devices(rows, summary)
    if carried.get(MIG_PROFILE_LABEL):
        summary.mig_names = {r.get("__name__", "") for r in rows if MIG_PROFILE_LABEL in r}
    if matchers:
        _count_rejected(rows, matchers, summary)
    return summary


def _count_rejected(
    rows: list[dict[str, str]], matchers: Sequence[Matcher], summary: SeriesSummary
) -> None:
    """How many series each label matcher rejects."""
    for labels in rows:
        for matcher in matchers:
            if not matcher.matches(labels.get(matcher.label)):
                summary.rejected[str(matcher)] += 1


def _pair_objects(
    rows: list[dict[str, str]],
    summary: SeriesSummary,
    objects: list[str],
    namespaces: list[str],
    wanted: set[tuple[str, str]],
) -> None:
    """Each object label's values, alone and in each namespace label ``wanted`` with it."""
    carried = summary.label_counts
    for object_label in (label for label in objects if carried.get(label)):
        summary.objects[(object_label, "")] = {"": set(summary.values[object_label])}
        for namespace_label in namespaces:
            if (object_label, namespace_label) not in wanted or not carried.get(namespace_label):
                continue
            by_namespace = _by_namespace(rows, object_label, namespace_label)
            if by_namespace:
                summary.objects[(object_label, namespace_label)] = by_namespace


def _values(rows: list[dict[str, str]], label: str) -> Counter[str]:
    """How many series carry each value of ``label`` (empty values left out), the most
    common ``MAX_VALUES_PER_LABEL``."""
    counter: Counter[str] = Counter()
    counter.update(cast(Iterator[str], _column(rows, label)))
    counter.pop(cast(str, None), None)
    counter.pop("", None)
    if len(counter) > MAX_VALUES_PER_LABEL:
        counter = Counter(dict(counter.most_common(MAX_VALUES_PER_LABEL)))
    return counter


def _by_namespace(
    rows: list[dict[str, str]], object_label: str, namespace_label: str
) -> dict[str, set[str]]:
    """The values of ``object_label`` in each value of ``namespace_label``."""
    by_namespace: dict[str, set[str]] = {}
    pairs = set(zip(_column(rows, namespace_label), _column(rows, object_label), strict=True))
    for namespace, value in pairs:
        if namespace and value:
            members = by_namespace.setdefault(namespace, set())
            if len(members) < MAX_VALUES_PER_LABEL:
                members.add(value)
    return by_namespace


def _column(rows: list[dict[str, str]], label: str) -> Iterator[str | None]:
    return map(methodcaller("get", label), rows)


def _devices(rows: list[dict[str, str]], summary: SeriesSummary) -> None:
    """Per node, the GPUs (or MIG instances) seen and the ``pod`` values of their series.

    Only asked for (GL802) when ``pod`` may be the exporter's without ``exported_pod`` to
    tell: series that carry ``exported_pod`` say so already.
    """
    carried = summary.label_counts
    if not carried.get("pod") or carried.get("exported_pod"):
        return
    if not any(carried.get(n) for n in NODE_LABELS) or not any(carried.get(g) for g in GPU_LABELS):
        return
    distinct = {tuple(map(row.get, _DEVICE_LABELS)) for row in rows}
    for values in distinct:
        device = _device(values)
        if device is None:
            continue
        node, gpu = device
        summary.node_gpus.setdefault(node, set()).add(gpu)
        pod = values[-1]
        if pod:
            summary.node_pods.setdefault(node, set()).add(pod)


def _device(values: tuple[str | None, ...]) -> tuple[str, str] | None:
    """The node and the GPU (``uuid/instance`` for a MIG instance) of a series' labels in
    ``_DEVICE_LABELS`` order; None without both."""
    hostname, lower, node_label, kube_node, instance = values[:5]
    uuid, old_uuid, index, minor, profile, instance_id = values[5:11]
    node = hostname or lower or node_label or kube_node or instance
    gpu = uuid or old_uuid or index or minor
    if not node or not gpu:
        return None
    if profile:
        gpu = f"{gpu}/{instance_id or ''}"
    return node, gpu


# The order _devices unpacks: NODE_LABELS, GPU_LABELS, the MIG labels, pod.
_DEVICE_LABELS = (*NODE_LABELS, *GPU_LABELS, MIG_PROFILE_LABEL, MIG_INSTANCE_LABEL, "pod")
assert len(NODE_LABELS) == 5 and len(GPU_LABELS) == 4


def sightings(series: Iterable[Mapping[str, str]], pod_labels: Iterable[str]) -> list[Sighting]:
    """Which metrics carry which pods, under which pod and namespace labels."""
    found: dict[Sighting, None] = {}
    labels_to_check = tuple(dict.fromkeys(pod_labels))
    for labels in series:
        if not isinstance(labels, Mapping):
            continue
        for pod_label in labels_to_check:
            pod = labels.get(pod_label)
            if not pod:
                continue
            namespace_label = _namespace_label_for(pod_label, labels)
            sighting = Sighting(
                labels.get("__name__", ""),
                pod_label,
                pod,
                namespace_label,
                labels.get(namespace_label, "") if namespace_label else "",
                labels.get(MIG_PROFILE_LABEL, ""),
            )
            found[sighting] = None
            if len(found) >= MAX_SIGHTINGS:
                return list(found)
    return list(found)


_PAIRED_NAMESPACE = {
    "pod": "namespace",
    "exported_pod": "exported_namespace",
    "pod_name": "pod_namespace",
    "kubernetes_pod_name": "kubernetes_namespace",
    "exported_pod_name": "exported_pod_namespace",
}


def paired_namespace_label(pod_label: str) -> str | None:
    """The namespace label that travels with a pod label (``exported_pod`` ->
    ``exported_namespace``)."""
    return _PAIRED_NAMESPACE.get(pod_label)


def _namespace_label_for(pod_label: str, labels: Mapping[str, str]) -> str:
    paired = _PAIRED_NAMESPACE.get(pod_label)
    if paired and labels.get(paired):
        return paired
    return next((n for n in NAMESPACE_LABELS if labels.get(n)), "")


# A pod named like dcgm-exporter's (nvidia-dcgm-exporter-7xk2p, dcgm-exporter-abcde).
_EXPORTER_POD = re.compile(r"dcgm|exporter", re.IGNORECASE)


def exporter_pods(series: SeriesSummary) -> dict[str, str]:
    """node -> pod when on every node all GPUs report one pod, and it looks like an
    exporter's: ``pod`` then names the exporter, not a workload (GL801, GL802)."""
    found: dict[str, str] = {}
    for node, gpus in series.node_gpus.items():
        pods = series.node_pods.get(node, set())
        if not gpus or len(pods) != 1:
            return {}
        pod = next(iter(pods))
        if not _EXPORTER_POD.search(pod):
            return {}
        found[node] = pod
    return found
