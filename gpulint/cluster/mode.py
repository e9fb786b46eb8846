"""``gpulint lint --cluster``: the same rules over what the cluster holds.

Every watched kind is listed once (kubeconfig or in-cluster credentials); kinds the cluster
does not serve are skipped and said so. When GL901 runs, each HPA's metrics are asked of the
custom and external metrics APIs as the HPA controller asks them, and the answers go on
``inventory.cluster`` for the rules that need them (GL901, GL902).
"""

from __future__ import annotations

import os
from typing import Any

from gpulint.cluster.api import ApiError, KubeApi
from gpulint.cluster.endpoints import read_endpoints
from gpulint.cluster.kinds import (
    DEFAULT_CONFIGMAP_NAMESPACES,
    NAMED_CONFIGMAPS,
    AdapterConfigMapSelector,
    cluster_kinds,
    configmap_scopes,
)
from gpulint.cluster.metrics import probe_metrics
from gpulint.cluster.reading import (
    Discovery,
    ObjectKey,
    cluster_manifest,
    list_objects,
    too_deep_note,
)
from gpulint.cluster.snapshot import ClusterSnapshot
from gpulint.cluster.versions import read_versions
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection, rule_index
from gpulint.input.loader import InputError
from gpulint.inventory import Inventory


class ClusterError(InputError):
    """The cluster could not be read at all (no credentials, no answer, refused)."""


def connect(kubeconfig: str | None = None, context: str | None = None) -> tuple[Any, str]:
    """An ApiClient from a kubeconfig (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``)
    or, without one, the pod's in-cluster credentials; and how to name the cluster."""
    from kubernetes import client, config

    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    has_kubeconfig = bool(kubeconfig or os.environ.get("KUBECONFIG")) or os.path.isfile(path)
    try:
        if has_kubeconfig:
            api_client = config.new_client_from_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]
            if context is None:
                _, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
                context = str(active.get("name", "")) if isinstance(active, dict) else ""
            return api_client, f"context {context}" if context else "the current context"
        if context:
            raise ClusterError(f"--context {context} needs a kubeconfig, and none was found")
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except Exception as error:  # ConfigException: not in a pod, or no token mounted
            raise ClusterError(_no_credentials(path, error)) from None
        return client.ApiClient(configuration), "the in-cluster service account"
    except ClusterError:
        raise
    except Exception as error:  # ConfigException, a malformed file, an unreadable path
        where = kubeconfig or os.environ.get("KUBECONFIG") or path
        raise ClusterError(f"cannot load cluster credentials ({where}): {error}") from None


def _no_credentials(path: str, in_cluster: Exception) -> str:
    """Why no cluster can be reached without a kubeconfig: the two places credentials come
    from, each with why it gave none."""
    if "KUBERNETES_SERVICE_HOST" not in os.environ:
        # The kubelet sets it in every container (Kubernetes docs, "Environment variables").
        pod = "gpulint is not running in a pod (KUBERNETES_SERVICE_HOST is not set)"
    else:
        pod = f"the pod's service account gave none ({str(in_cluster).rstrip('.')})"
    return (
        "no cluster credentials:\n"
        f"  no kubeconfig: $KUBECONFIG is not set and {path} does not exist (name one with "
        "--kubeconfig);\n"
        f"  no in-cluster service account: {pod}."
    )


def read_cluster(
    api: KubeApi,
    settings: Settings,
    *,
    namespace: str | None = None,
    adapter_configmaps: AdapterConfigMapSelector | None = None,
    configmap_namespaces: tuple[str, ...] = DEFAULT_CONFIGMAP_NAMESPACES,
) -> tuple[Inventory, dict[str, str], list[str]]:
    """Every kind cluster mode reads, listed once: the inventory, each stream's state and
    notes."""
    inventory = Inventory(settings)
    discovery = Discovery(api)
    states: dict[str, str] = {}
    notes: list[str] = []
    seen: set[ObjectKey] = set()
    for kind in cluster_kinds(adapter_configmaps, configmap_namespaces):
        try:
            version = discovery.version(kind)
            if version is None:
                states[kind.key] = "absent"
                continue
            try:
                items, _, too_deep = list_objects(api, kind, version, namespace)
            except ApiError as error:
                if not error.gone:
                    raise
                # the list moved on
                items, _, too_deep = list_objects(api, kind, version, namespace)
        except ApiError as error:
            if error.status is None:
                raise ClusterError(
                    f"cannot reach the Kubernetes API server at {api.server}: {error.message}"
                ) from None
            if error.status == 401:
                raise ClusterError(
                    f"the Kubernetes API server at {api.server} refused the credentials (401)"
                ) from None
            states[kind.key] = "forbidden" if error.status == 403 else "error"
            notes.append(f"{kind.key} not read: {error.message}")
            continue
        states[kind.key] = "synced"
        notes.extend(too_deep_note(obj, kind) for obj in too_deep)
        for obj in items:
            manifest = cluster_manifest(obj, kind, version)
            if manifest is None:
                continue
            key = (manifest.group, manifest.kind, manifest.namespace or "", manifest.name)
            if key not in seen:  # a ConfigMap may match two selectors
                seen.add(key)
                inventory.add_manifest(manifest)
    return inventory, states, notes


def cluster_inventory(
    settings: Settings,
    selection: Selection,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str | None = None,
    adapter_configmaps: AdapterConfigMapSelector | None = None,
    configmap_namespaces: tuple[str, ...] = DEFAULT_CONFIGMAP_NAMESPACES,
) -> tuple[Inventory, list[str]]:
    """The inventory cluster mode lints, with ``inventory.cluster`` filled, and notes for the
    report. Raises ClusterError when the cluster cannot be read."""
    api_client, name = connect(kubeconfig, context)
    try:
        api = KubeApi(api_client)
        try:
            versions, version_notes = read_versions(api, settings.versions)
        except ApiError as error:
            raise ClusterError(
                f"cannot reach the Kubernetes API server at {api.server}: {error.message}"
            ) from None
        settings = settings.with_versions(versions)
        inventory, states, notes = read_cluster(
            api,
            settings,
            namespace=namespace,
            adapter_configmaps=adapter_configmaps,
            configmap_namespaces=configmap_namespaces,
        )
        snapshot = ClusterSnapshot(api.server, states, notes=notes)
        snapshot.endpoints_read, endpoint_notes = read_endpoints(api, inventory, Discovery(api))
        notes.extend(endpoint_notes)
        if any(
            info.probes_cluster and selection.allows(info) and settings.rule(info.id).enabled
            for info in rule_index()
        ):
            snapshot.probes, snapshot.apis, probe_notes = probe_metrics(api, inventory)
            notes.extend(probe_notes)
    finally:
        api_client.close()
    inventory.cluster = snapshot
    absent = sorted(key for key, state in states.items() if state == "absent")
    scope = f"namespace {namespace}" if namespace else "all namespaces"
    scopes = configmap_scopes(
        adapter_configmaps or AdapterConfigMapSelector(), configmap_namespaces
    )
    if None not in scopes:  # where the adapter and KServe configs were looked for
        scope += f"; ConfigMaps in {', '.join(s for s in scopes if s)}"
    # and the platform configs read by name, wherever the others were looked for
    scope += "".join(
        f"; ConfigMap {namespace}/{name}"
        for namespace, names in NAMED_CONFIGMAPS.items()
        for name in names
    )
    count = len(inventory)
    summary = f"read {count} object{'s' * (count != 1)} from {api.server} ({name}, {scope})"
    if absent:
        summary += f"; not served there: {', '.join(absent)}"
    return inventory, [summary, *version_notes, *notes]
