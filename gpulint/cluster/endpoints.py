"""The endpoints of the Services the scrape chain names, read one Service at a time.

Cluster mode does not list every Endpoints or EndpointSlice object of a cluster (there is one
per Service, and they change with every pod). It reads those of the Services that matter:
the ones the adapter's (and KEDA's) Prometheus URLs name, and the ones dcgm-exporter's
monitors select. EndpointSlices (discovery.k8s.io/v1, Kubernetes >= 1.21) are listed by the
label ``kubernetes.io/service-name``; where they are not served, the Endpoints object of the
Service's name is read.
"""

from __future__ import annotations

from gpulint.chain.services import SERVICE_NAME_LABEL
from gpulint.cluster.api import ApiError, KubeApi
from gpulint.cluster.kinds import ENDPOINT_SLICES, ENDPOINTS
from gpulint.cluster.reading import Discovery, cluster_manifest, list_objects
from gpulint.inventory import Inventory

# Services whose endpoints one run reads at most: the chain names a handful.
MAX_SERVICES = 50


def services_to_read(inventory: Inventory) -> list[tuple[str, str]]:
    """(namespace, name) of the Services the chain names, that the cluster has."""
    pipeline = inventory.pipeline
    wanted: list[tuple[str, str]] = []
    for url in pipeline.all_urls():
        host = url.service
        namespace = (host.namespace if host is not None else None) or url.client_namespace
        if host is None or namespace is None:
            continue
        for service in pipeline.services_named(host.name, namespace):
            if service.made_by is None and service.namespace:
                wanted.append((service.namespace, service.name))
    for monitor in pipeline.all_monitors():
        for service in pipeline.services_selected(monitor).certain:
            if service.made_by is None and service.namespace:
                wanted.append((service.namespace, service.name))
    return list(dict.fromkeys(wanted))[:MAX_SERVICES]


def read_endpoints(
    api: KubeApi, inventory: Inventory, discovery: Discovery
) -> tuple[set[tuple[str, str]], list[str]]:
    """Add the endpoints of the chain's Services to the inventory: which Services were read,
    and notes for what could not be."""
    read: set[tuple[str, str]] = set()
    notes: list[str] = []
    wanted = services_to_read(inventory)
    if not wanted:
        return read, notes
    try:
        version = discovery.version(ENDPOINT_SLICES)
    except ApiError as error:
        return read, [f"endpoints not read: {error.message}"]
    for namespace, name in wanted:
        try:
            if version is not None:
                kind = ENDPOINT_SLICES._replace(
                    label_selector=f"{SERVICE_NAME_LABEL}={name}", namespace=namespace
                )
                items, _, _ = list_objects(api, kind, version, namespace)
            else:
                kind = ENDPOINTS
                try:
                    items = [api.get(f"/api/v1/namespaces/{namespace}/endpoints/{name}")]
                except ApiError as error:
                    if error.status != 404:
                        raise
                    items = []
        except ApiError as error:
            notes.append(f"endpoints of Service {namespace}/{name} not read: {error.message}")
            continue
        read.add((namespace, name))
        for obj in items:
            manifest = cluster_manifest(obj, kind, version or "v1")
            if manifest is not None:
                inventory.add_manifest(manifest)
    return read, notes
