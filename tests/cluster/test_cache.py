"""The list/watch caches against the fake API server, through the real kubernetes client."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from gpulint.cluster.cache import ClusterCache
from gpulint.cluster.kinds import AdapterConfigMapSelector
from gpulint.cluster.mode import connect
from gpulint.engine.config import Settings

from ..kubefake import FakeCluster, KubeFake
from .conftest import cached, cached_names, knative_config_by_name, wait_for

WORLD = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: triton, namespace: ml, labels: {app: triton}}
spec:
  selector: {matchLabels: {app: triton}}
  template:
    metadata: {labels: {app: triton}}
    spec:
      containers:
      - {name: server, image: triton, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: triton, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: triton}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "60"}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: embedder, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: embedder}
  maxReplicas: 2
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: adapter
  namespace: monitoring
  labels: {app.kubernetes.io/name: prometheus-adapter}
data:
  config.yaml: |
    rules:
    - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
      resources:
        overrides:
          exported_namespace: {resource: namespace}
          exported_pod: {resource: pod}
      metricsQuery: avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated, namespace: monitoring}
data: {key: value}
"""

HPA_LIST = "/apis/autoscaling/v2/horizontalpodautoscalers"


def _lists(fake: KubeFake, path: str) -> list[dict[str, str]]:
    return [q for method, p, q in fake.cluster.requests if p == path and "watch" not in q]


def _watching(fake: KubeFake, resource: str) -> bool:
    with fake.cluster.lock:
        return any(w.resource == resource for w in fake.cluster.watchers)


def test_caches_sync_and_follow_what_is_written_through_the_api(
    fake: KubeFake, kubeconfig: Path, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(WORLD)
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    assert set(cache.sync_state().values()) == {"synced"}
    assert cached_names(cache, "HorizontalPodAutoscaler") == {"triton", "embedder"}
    # Only the selected ConfigMaps are read, and built-in list items get their kind back.
    assert cached_names(cache, "ConfigMap") == {"adapter"}
    assert cached_names(cache, "Deployment") == {"triton"}
    with cache.lock:
        assert len(cache.inventory.adapter_configs) == 1
    wait_for(lambda: _watching(fake, "scaledobjects.keda.sh"), what="watch")

    api = client.CustomObjectsApi(connect(str(kubeconfig))[0])
    api.create_namespaced_custom_object(
        "keda.sh",
        "v1alpha1",
        "ml",
        "scaledobjects",
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {"name": "triton"},
            "spec": {"scaleTargetRef": {"name": "triton"}, "triggers": []},
        },
    )
    wait_for(lambda: cached_names(cache, "ScaledObject") == {"triton"}, what="ADDED")

    deployment = api.get_namespaced_custom_object("apps", "v1", "ml", "deployments", "triton")
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
    api.replace_namespaced_custom_object("apps", "v1", "ml", "deployments", "triton", deployment)

    def gpu_gone() -> bool:
        with cache.lock:
            (manifest,) = [m for m in cache.inventory.workloads if m.name == "triton"]
            return manifest.get(("spec", "template", "spec", "containers", 0, "resources")) == {}

    wait_for(gpu_gone, what="MODIFIED")
    api.delete_namespaced_custom_object(
        "autoscaling", "v2", "ml", "horizontalpodautoscalers", "embedder"
    )
    wait_for(lambda: cached_names(cache, "HorizontalPodAutoscaler") == {"triton"}, what="DELETED")
    with cache.lock:
        groups = cache.inventory.target_groups()
    assert [a.kind for a in groups[("Deployment", "ml", "triton")].autoscalers] == [
        "HorizontalPodAutoscaler",
        "ScaledObject",
    ]


def test_an_expired_watch_relists(fake: KubeFake, new_cache: Callable[..., ClusterCache]) -> None:
    fake.cluster.load(WORLD)
    cache = new_cache(watch_timeout=1)
    wait_for(cache.synced, what="sync")
    assert len(_lists(fake, HPA_LIST)) == 1
    wait_for(lambda: _watching(fake, "horizontalpodautoscalers.autoscaling"), what="watch")
    # Writes elsewhere move the server's revision past what the HPA watch has seen; once
    # history is compacted, its next watch (after timeoutSeconds) is answered 410.
    fake.cluster.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a"}}
    )
    fake.cluster.compact()
    wait_for(lambda: fake.cluster.expired_watches >= 1, what="a 410 ERROR event")
    wait_for(lambda: len(_lists(fake, HPA_LIST)) >= 2, what="a relist")
    assert cache.sync_state()["horizontalpodautoscalers.autoscaling"] == "synced"
    fake.cluster.delete("autoscaling/v2", "HorizontalPodAutoscaler", "ml", "embedder")
    wait_for(lambda: cached_names(cache, "HorizontalPodAutoscaler") == {"triton"}, what="resume")


def test_an_expired_continue_token_lists_again_from_the_start(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(WORLD)
    expired = []

    def compact_once(path: str) -> None:
        # Writes and a compaction between the first and the second page of the HPA list.
        if path == HPA_LIST and not expired:
            expired.append(path)
            fake.cluster.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
            )
            fake.cluster.compact()

    fake.cluster.pause_between_pages = compact_once
    cache = new_cache(page_size=1)
    wait_for(cache.synced, what="sync")
    assert expired
    assert cached_names(cache, "HorizontalPodAutoscaler") == {"triton", "embedder"}
    pages = _lists(fake, HPA_LIST)
    assert all(q["limit"] == "1" for q in pages)
    # first page, second page (410), then the whole list again: two pages
    assert ["continue" in q for q in pages] == [False, True, False, True]


def test_each_page_of_a_list_is_applied_as_it_comes(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    """The cache holds one page of the API's JSON at a time: what a page brought is cached
    before the next page is asked for."""
    fake.cluster.load(WORLD)
    between: list[set[str]] = []
    holder: list[ClusterCache] = []

    def look(path: str) -> None:
        if path == HPA_LIST:
            wait_for(lambda: holder, what="the cache made")
            between.append(cached_names(holder[0], "HorizontalPodAutoscaler"))

    fake.cluster.pause_between_pages = look
    cache = new_cache(page_size=1)
    holder.append(cache)
    wait_for(cache.synced, what="sync")
    assert len(between) == 1 and len(between[0]) == 1  # the first page's HPA, alone
    assert cached_names(cache, "HorizontalPodAutoscaler") == {"triton", "embedder"}


def test_a_list_that_outlasts_its_deadline_is_given_up_and_started_again(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(WORLD)
    fake.cluster.create(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "reranker", "namespace": "ml"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "x"}, "maxReplicas": 2},
        }
    )
    stalls: list[str] = []

    def stall_once(path: str) -> None:
        if path == HPA_LIST and not stalls:
            stalls.append(path)
            time.sleep(0.6)

    fake.cluster.pause_between_pages = stall_once
    cache = new_cache(page_size=1, list_timeout=0.3, backoff=(0.5, 0.5))
    stream = "horizontalpodautoscalers.autoscaling"
    wait_for(lambda: cache.sync_state()[stream] == "error", what="the list given up")
    assert not cache.synced()  # the webhook answers by its failure policy meanwhile
    assert "not listed in time" in cache.sync_details()[stream]
    wait_for(cache.synced, what="a second list")
    assert cached_names(cache, "HorizontalPodAutoscaler") == {"triton", "embedder", "reranker"}
    # Two pages, the second late: the third is not asked for; the next list starts over.
    assert ["continue" in q for q in _lists(fake, HPA_LIST)] == [False, True, False, True, True]


def test_a_forbidden_kind_is_recorded_and_the_others_sync(
    fake: KubeFake, new_cache: Callable[..., ClusterCache], caplog: pytest.LogCaptureFixture
) -> None:
    fake.cluster.load(WORLD)
    fake.cluster.forbidden = {"horizontalpodautoscalers.autoscaling"}
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    state = cache.sync_state()
    assert state["horizontalpodautoscalers.autoscaling"] == "forbidden"
    assert {v for k, v in state.items() if k != "horizontalpodautoscalers.autoscaling"} == {
        "synced"
    }
    assert (
        'cannot list resource "horizontalpodautoscalers"'
        in (cache.sync_details()["horizontalpodautoscalers.autoscaling"])
    )
    assert cached_names(cache, "HorizontalPodAutoscaler") == set()
    # RBAC fixed: the stream is tried again and syncs.
    fake.cluster.forbidden = set()
    wait_for(
        lambda: cache.sync_state()["horizontalpodautoscalers.autoscaling"] == "synced",
        what="recovery",
    )
    assert cached_names(cache, "HorizontalPodAutoscaler") == {"triton", "embedder"}


ELSEWHERE = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: adapter
  namespace: team-metrics
  labels: {app.kubernetes.io/name: prometheus-adapter}
data:
  config.yaml: |
    rules: []
---
apiVersion: v1
kind: ConfigMap
metadata: {name: inferenceservice-config, namespace: kserve}
data:
  deploy: '{"defaultDeploymentMode": "RawDeployment"}'
"""


def _configmap_requests(fake: KubeFake) -> set[str]:
    return {p for _, p, _ in fake.cluster.requests if p.endswith("/configmaps")}


def test_configmaps_are_read_only_in_the_namespaces_rbac_grants_them(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    """deploy/'s RBAC: a Role in monitoring and in kserve, no ClusterRole for ConfigMaps."""
    fake.cluster.load(WORLD + "---" + ELSEWHERE)
    fake.cluster.granted_in = {"configmaps": {"monitoring", "kserve"}}
    fake.cluster.granted_names = knative_config_by_name()
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    assert set(cache.sync_state().values()) == {"synced"}
    assert _configmap_requests(fake) == {
        "/api/v1/namespaces/monitoring/configmaps",
        "/api/v1/namespaces/kserve/configmaps",
        "/api/v1/namespaces/knative-serving/configmaps",
    }
    with cache.lock:
        configs = [(c.owner.namespace, c.owner.name) for c in cache.inventory.adapter_configs]
        assert configs == [("monitoring", "adapter")]
    assert {(m.namespace, m.name) for m in cached(cache, "ConfigMap")} == {
        ("monitoring", "adapter"),
        ("kserve", "inferenceservice-config"),
    }
    # An adapter ConfigMap that appears later in a watched namespace is followed.
    fake.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "adapter-config", "namespace": "kserve"},
            "data": {"config.yaml": "rules: []"},
        }
    )
    wait_for(lambda: "adapter-config" in cached_names(cache, "ConfigMap"), what="ADDED")
    assert "team-metrics" not in {m.namespace for m in cached(cache, "ConfigMap")}


def test_a_namespace_rbac_does_not_grant_is_forbidden_and_the_rest_is_read(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(WORLD + "---" + ELSEWHERE)
    fake.cluster.granted_in = {"configmaps": {"monitoring"}}  # no Role in kserve
    fake.cluster.granted_names = knative_config_by_name()
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    state = cache.sync_state()
    configmap_states = {k: v for k, v in state.items() if k.startswith("configmaps[")}
    assert {k for k, v in configmap_states.items() if v == "forbidden"} == {
        k for k in configmap_states if k.startswith("configmaps[kserve: ")
    }
    assert {k for k, v in configmap_states.items() if v == "synced"} == {
        k
        for k in configmap_states
        if k.startswith(("configmaps[monitoring: ", "configmaps[knative"))
    }
    details = cache.sync_details()["configmaps[kserve: metadata.name=inferenceservice-config]"]
    assert 'cannot list resource "configmaps" in API group "" in the namespace "kserve"' in details
    assert cached_names(cache, "ConfigMap") == {"adapter"}
    # A Role added in kserve: read at the next check, without a restart.
    fake.cluster.granted_in = {"configmaps": {"monitoring", "kserve"}}
    fake.cluster.granted_names = knative_config_by_name()
    wait_for(
        lambda: set(cache.sync_state().values()) == {"synced"},
        what="the kserve streams after the Role is added",
    )
    wait_for(lambda: "inferenceservice-config" in cached_names(cache, "ConfigMap"), what="kserve's")


def test_configmap_namespaces_and_a_named_adapter_configmap(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(WORLD + "---" + ELSEWHERE)
    fake.cluster.granted_in = {"configmaps": {"team-metrics"}}
    fake.cluster.granted_names = knative_config_by_name()
    selector = AdapterConfigMapSelector.parse("team-metrics/adapter")
    cache = new_cache(adapter_configmaps=selector, configmap_namespaces=("kserve",))
    wait_for(cache.synced, what="sync")
    # --adapter-configmap NS/NAME adds its namespace; kserve was asked for but not granted.
    assert _configmap_requests(fake) == {
        "/api/v1/namespaces/team-metrics/configmaps",
        "/api/v1/namespaces/kserve/configmaps",
        "/api/v1/namespaces/knative-serving/configmaps",
    }
    assert cache.sync_state()["configmaps[team-metrics: metadata.name=adapter]"] == "synced"
    assert cache.sync_state()["configmaps[kserve: metadata.name=inferenceservice-config]"] == (
        "forbidden"
    )
    assert {(m.namespace, m.name) for m in cached(cache, "ConfigMap")} == {
        ("team-metrics", "adapter")
    }


def test_kinds_whose_crds_are_not_installed_are_absent_without_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = KubeFake(FakeCluster(crds=("kserve",))).start()
    caplog.set_level(logging.INFO, logger="gpulint.cluster")
    try:
        fake.cluster.load(WORLD)
        api_client, _ = connect(str(fake.write_kubeconfig(tmp_path / "kubeconfig")))
        cache = ClusterCache(api_client, Settings())
        cache.start()
        try:
            wait_for(cache.synced, what="sync")
            state = cache.sync_state()
        finally:
            cache.stop()
    finally:
        fake.stop()
    assert state["scaledobjects.keda.sh"] == "absent"
    assert state["services.serving.knative.dev"] == "absent"
    assert state["configurations.serving.knative.dev"] == "absent"
    assert state["inferenceservices.serving.kserve.io"] == "synced"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("compacted", [False, True], ids=["resume", "relist"])
def test_the_api_server_going_away_mid_watch_and_coming_back(
    fake: KubeFake, new_cache: Callable[..., ClusterCache], compacted: bool
) -> None:
    fake.cluster.load(WORLD)
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    wait_for(lambda: _watching(fake, "horizontalpodautoscalers.autoscaling"), what="watch")
    lists_before = len(_lists(fake, HPA_LIST))
    fake.stop()
    # While it is down the cache keeps what it has and stays ready.
    fake.cluster.delete("autoscaling/v2", "HorizontalPodAutoscaler", "ml", "embedder")
    fake.cluster.create(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "ranker", "namespace": "ml"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "ranker"}, "maxReplicas": 2},
        }
    )
    if compacted:
        fake.cluster.compact()
    time.sleep(0.3)
    assert cache.synced()
    assert cached_names(cache, "HorizontalPodAutoscaler") == {"triton", "embedder"}
    fake.restart()
    wait_for(
        lambda: cached_names(cache, "HorizontalPodAutoscaler") == {"triton", "ranker"},
        what="catch up",
    )
    relisted = len(_lists(fake, HPA_LIST)) > lists_before
    assert relisted == compacted


def test_an_object_leaving_a_label_selector_leaves_the_cache(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(WORLD)
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    wait_for(
        lambda: _watching(fake, "configmaps") and len(fake.cluster.watchers) >= 8,
        what="watches",
    )
    with fake.cluster.lock:
        stored = fake.cluster.objects["configmaps"][("monitoring", "adapter")]
    relabelled = {**stored, "metadata": {**stored["metadata"], "labels": {"team": "obs"}}}
    fake.cluster.replace(relabelled)
    wait_for(lambda: cached_names(cache, "ConfigMap") == set(), what="DELETED by selector")
    with cache.lock:
        assert cache.inventory.adapter_configs == []


@pytest.mark.slow
def test_bookmarks_keep_a_quiet_watch_current(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(WORLD)
    fake.cluster.bookmark_interval = 0.1
    cache = new_cache(watch_timeout=1)
    wait_for(cache.synced, what="sync")
    wait_for(lambda: _watching(fake, "horizontalpodautoscalers.autoscaling"), what="watch")
    fake.cluster.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a"}}
    )
    time.sleep(0.5)  # a bookmark carries the new revision to the quiet HPA watch
    fake.cluster.compact()
    time.sleep(1.5)  # the watch times out and resumes from the bookmark's revision
    assert all(q.get("allowWatchBookmarks") == "true" for q in _watches(fake))
    assert len(_lists(fake, HPA_LIST)) == 1
    assert fake.cluster.expired_watches == 0


def _watches(fake: KubeFake) -> list[dict[str, str]]:
    return [q for _, _, q in fake.cluster.requests if q.get("watch") == "1"]


def test_stop_ends_every_stream_promptly(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(WORLD)
    cache = new_cache(watch_timeout=300)
    wait_for(cache.synced, what="sync")
    wait_for(lambda: len(fake.cluster.watchers) >= 8, what="watches")
    started = time.monotonic()
    cache.stop(timeout=5)
    assert time.monotonic() - started < 2
    assert not any(stream.is_alive() for stream in cache._streams)


def test_a_server_that_cannot_be_reached_keeps_the_cache_unsynced(tmp_path: Path) -> None:
    fake = KubeFake().start()
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    fake.stop()
    api_client, _ = connect(str(kubeconfig))
    cache = ClusterCache(api_client, Settings(), backoff=(0.05, 0.1))
    cache.start()
    try:
        wait_for(lambda: "error" in cache.sync_state().values(), what="error state")
        assert not cache.synced()
        fake.restart()
        wait_for(cache.synced, what="sync after the server came up")
    finally:
        cache.stop()
        fake.stop()
