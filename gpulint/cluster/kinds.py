"""The kinds gpulint reads from a cluster, and where the API serves each of them.

Exactly what the rules read: autoscalers (HPA, KEDA ScaledObject), the workloads they scale
(Deployment, StatefulSet), what generates workloads (KServe InferenceService, Knative Service
and Configuration), and three kinds of ConfigMap: the prometheus-adapter configuration,
KServe's ``inferenceservice-config`` (its ``deploy`` key sets the default deployment mode) and
Knative's ``config-autoscaler`` in ``knative-serving`` (its ``pod-autoscaler-class`` sets the
class of revisions that name none).
Cluster mode also lists the scrape chain once (``cluster_kinds``): DaemonSets, Services,
ServiceMonitors, PodMonitors, Prometheus objects, Namespaces and ClusterPolicies; and reads
the endpoints of the few Services the chain names.
ConfigMaps are read through server-side selectors, never all of them, and only in a few
namespaces (``--configmap-namespaces``), so that RBAC can grant them there alone; Knative's
one ConfigMap is read by name in its one namespace, which RBAC can grant by name.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from gpulint.core.selectors import parse_label_selector, selector_matches
from gpulint.kinds.knative import CONFIG_AUTOSCALER
from gpulint.kinds.registry import KindSpec, read_specs, watched_specs

KSERVE_CONFIGMAP = "inferenceservice-config"
# prometheus-community/prometheus-adapter chart: its ConfigMap carries the chart's name
# label; kubernetes-sigs/prometheus-adapter deploy/manifests name theirs adapter-config.
ADAPTER_LABEL = "app.kubernetes.io/name=prometheus-adapter"
ADAPTER_NAMES = ("prometheus-adapter", "adapter-config")
# Where ConfigMaps are read unless --configmap-namespaces says otherwise: the prometheus-adapter
# chart is commonly installed in monitoring, beside kube-prometheus-stack, and KServe's
# manifests and chart install it, inferenceservice-config included, in kserve.
DEFAULT_CONFIGMAP_NAMESPACES = ("monitoring", "kserve")
ALL_NAMESPACES = "*"


class WatchedKind(NamedTuple):
    """One list/watch stream: a resource, optionally narrowed by selectors."""

    key: str  # what sync_state() reports it as, e.g. "horizontalpodautoscalers.autoscaling"
    kind: str
    group: str  # "" for the core group
    versions: tuple[str, ...]  # served versions gpulint reads, preferred first
    plural: str
    label_selector: str | None = None
    field_selector: str | None = None
    namespace: str | None = None  # a fixed namespace (a ConfigMap named in one)
    settings: bool = False  # cluster-wide settings: read in every namespace even with -n

    def collection_path(self, version: str, namespace: str | None) -> str:
        """``/apis/apps/v1/namespaces/ns/deployments`` (or all namespaces without one)."""
        base = f"/apis/{self.group}/{version}" if self.group else f"/api/{version}"
        if namespace:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    def scope(self, namespace: str | None) -> str | None:
        """The namespace this stream lists in: its own, else the one asked for (unless it
        reads cluster-wide settings), else all."""
        if self.namespace:
            return self.namespace
        return None if self.settings else namespace


# Kinds without a namespace: listed cluster-wide even with --namespace.
CLUSTER_SCOPED = ("Namespace", "ClusterPolicy", "DeviceClass")


def _resource(spec: KindSpec) -> WatchedKind:
    return WatchedKind(
        spec.resource,
        spec.kind,
        spec.group,
        spec.versions,
        spec.plural,
        settings=spec.kind in CLUSTER_SCOPED,
    )


# The kinds gpulint.kinds.registry marks as watched, each in the versions it reads
# (autoscaling/v2beta2 only where v2 is not served, before Kubernetes 1.23).
RESOURCES: tuple[WatchedKind, ...] = tuple(_resource(spec) for spec in watched_specs())
# What cluster mode lists besides: the scrape chain (dcgm-exporter's DaemonSets, Services,
# monitors, Prometheus objects, namespaces, gpu-operator's ClusterPolicy). The webhook does not
# watch these: it evaluates autoscalers and adapter configs, which do not read them.
READ_RESOURCES: tuple[WatchedKind, ...] = tuple(_resource(spec) for spec in read_specs())
# Endpoints are read per Service the chain names (gpulint.cluster.endpoints), never listed.
ENDPOINT_SLICES = WatchedKind(
    "endpointslices.discovery.k8s.io",
    "EndpointSlice",
    "discovery.k8s.io",
    ("v1",),
    "endpointslices",
)
ENDPOINTS = WatchedKind("endpoints", "Endpoints", "", ("v1",), "endpoints")


class AdapterConfigMapSelector:
    """Which ConfigMaps hold the prometheus-adapter configuration.

    A name (with an optional namespace), a label selector, or both (either matches). The
    default matches what the adapter's Helm chart and its plain manifests create: the label
    ``app.kubernetes.io/name=prometheus-adapter``, or the name ``prometheus-adapter`` or
    ``adapter-config``.
    """

    __slots__ = ("label_selector", "name", "namespace")

    def __init__(
        self,
        name: str | None = None,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> None:
        self.name = name or None
        self.namespace = namespace or None
        self.label_selector = label_selector or None

    def __repr__(self) -> str:
        return (
            f"AdapterConfigMapSelector(name={self.name!r}, namespace={self.namespace!r}, "
            f"label_selector={self.label_selector!r})"
        )

    @classmethod
    def parse(
        cls, configmap: str | None = None, label_selector: str | None = None
    ) -> AdapterConfigMapSelector:
        """From ``[NAMESPACE/]NAME`` and a label selector, as the command line takes them.
        Raises ValueError for a malformed value."""
        name = namespace = None
        if configmap:
            namespace, _, name = configmap.rpartition("/")
            if not _NAME.match(name) or (namespace and not _NAME.match(namespace)):
                raise ValueError(f"{configmap!r} is not a ConfigMap as NAMESPACE/NAME or NAME")
        if label_selector is not None and parse_label_selector(label_selector) is None:
            raise ValueError(f"{label_selector!r} is not a label selector")
        return cls(name, namespace, label_selector)

    @property
    def is_default(self) -> bool:
        return self.name is None and self.label_selector is None

    def streams(self, namespace: str | None = None) -> list[WatchedKind]:
        """The ConfigMap list/watch streams that find the configuration in ``namespace``
        (None: in every namespace). A ConfigMap named with its namespace is looked for there
        only: in another namespace there are no streams."""
        if self.namespace:
            if namespace not in (None, self.namespace):
                return []
            namespace = self.namespace
        if self.is_default:
            selections = [(ADAPTER_LABEL, None)] + [
                (None, f"metadata.name={n}") for n in ADAPTER_NAMES
            ]
        else:
            selections = []
            if self.label_selector:
                selections.append((self.label_selector, None))
            if self.name:
                selections.append((None, f"metadata.name={self.name}"))
        return [_configmaps(label, field, namespace) for label, field in selections]

    def matches(self, obj: dict[str, Any]) -> bool:
        """Is this ConfigMap (an admitted object, say) the adapter configuration?"""
        if obj.get("kind") != "ConfigMap" or obj.get("apiVersion") != "v1":
            return False
        metadata = obj.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        if self.namespace and metadata.get("namespace") != self.namespace:
            return False
        labels = metadata.get("labels")
        labels = (
            {k: v for k, v in labels.items() if isinstance(v, str)}
            if isinstance(labels, dict)
            else {}
        )
        names: tuple[str, ...] = ADAPTER_NAMES
        selectors = [ADAPTER_LABEL]
        if not self.is_default:
            names = (self.name,) if self.name else ()
            selectors = [self.label_selector] if self.label_selector else []
        if metadata.get("name") in names:
            return True
        return any(selector_matches(s, labels) for s in selectors)


def _configmaps(label: str | None, field: str | None, namespace: str | None) -> WatchedKind:
    shown = label or field or ""
    where = f"{namespace}: " if namespace else ""
    return WatchedKind(
        f"configmaps[{where}{shown}]",
        "ConfigMap",
        "",
        ("v1",),
        "configmaps",
        label,
        field,
        namespace,
        settings=True,
    )


def parse_configmap_namespaces(values: list[str] | None) -> tuple[str, ...]:
    """``--configmap-namespaces`` (repeatable, each comma-separated) as a tuple, in order
    and without repeats; ``DEFAULT_CONFIGMAP_NAMESPACES`` when not given, and ``("*",)`` for
    every namespace. Raises ValueError for a name that is not a namespace."""
    if values is None:
        return DEFAULT_CONFIGMAP_NAMESPACES
    names = [part.strip() for value in values for part in value.split(",") if part.strip()]
    if not names:
        raise ValueError("needs a namespace, or * for every namespace")
    if ALL_NAMESPACES in names:
        return (ALL_NAMESPACES,)
    for name in names:
        if len(name) > 63 or not _LABEL.match(name):
            raise ValueError(f"{name!r} is not a namespace name")
    return tuple(dict.fromkeys(names))


def configmap_scopes(
    adapter: AdapterConfigMapSelector, namespaces: tuple[str, ...]
) -> list[str | None]:
    """The namespaces ConfigMaps are listed and watched in: ``namespaces``, and the one
    ``--adapter-configmap NAMESPACE/NAME`` names; ``[None]`` (every namespace) for ``*``."""
    if ALL_NAMESPACES in namespaces:
        return [None]
    scopes: list[str | None] = list(namespaces)
    if adapter.namespace and adapter.namespace not in scopes:
        scopes.append(adapter.namespace)
    return scopes


def kserve_config_stream(namespace: str | None) -> WatchedKind:
    return _configmaps(None, f"metadata.name={KSERVE_CONFIGMAP}", namespace)


# Knative Serving reads config-autoscaler in its system namespace, knative-serving
# (knative/serving: config/core/configmaps/autoscaler.yaml; knative.dev/pkg/system reads the
# namespace from SYSTEM_NAMESPACE, which serving's manifests set to it). Listed by name there
# alone, whatever --configmap-namespaces says: RBAC grants it by resourceNames.
KNATIVE_NAMESPACE = "knative-serving"


# Namespace -> the ConfigMaps read there by name alone, whatever --configmap-namespaces says
# (deploy/'s Roles grant them by resourceNames: gpulint.webhook.deploy).
NAMED_CONFIGMAPS: dict[str, tuple[str, ...]] = {KNATIVE_NAMESPACE: (CONFIG_AUTOSCALER,)}


def named_config_streams() -> list[WatchedKind]:
    return [
        _configmaps(None, f"metadata.name={name}", namespace)
        for namespace, names in NAMED_CONFIGMAPS.items()
        for name in names
    ]


def watched_kinds(
    adapter: AdapterConfigMapSelector | None = None,
    configmap_namespaces: tuple[str, ...] = DEFAULT_CONFIGMAP_NAMESPACES,
) -> list[WatchedKind]:
    """Every stream gpulint keeps: the resources, then the ConfigMaps, namespace by
    namespace (the adapter's selectors, then KServe's), then Knative's config-autoscaler."""
    selector = adapter if adapter is not None else AdapterConfigMapSelector()
    streams = list(RESOURCES)
    for namespace in configmap_scopes(selector, configmap_namespaces):
        for stream in [*selector.streams(namespace), kserve_config_stream(namespace)]:
            if all(s.key != stream.key for s in streams):
                streams.append(stream)
    streams.extend(named_config_streams())
    return streams


def cluster_kinds(
    adapter: AdapterConfigMapSelector | None = None,
    configmap_namespaces: tuple[str, ...] = DEFAULT_CONFIGMAP_NAMESPACES,
) -> list[WatchedKind]:
    """What ``gpulint lint --cluster`` lists once: the watched streams, then the scrape chain."""
    return [*watched_kinds(adapter, configmap_namespaces), *READ_RESOURCES]


def is_kserve_config(obj: dict[str, Any]) -> bool:
    metadata = obj.get("metadata")
    return (
        obj.get("kind") == "ConfigMap"
        and isinstance(metadata, dict)
        and metadata.get("name") == KSERVE_CONFIGMAP
    )


# --- label selectors (the string form: "a=b,c!=d,e in (f,g),!h") ------------------------------

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a namespace: an RFC 1123 label
