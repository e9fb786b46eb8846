"""Evaluating one object costs what relates to it, whatever the size of the cluster."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from gpulint.admission.focus import related_items
from gpulint.cluster.cache import ClusterCache
from gpulint.engine import registry as engine
from gpulint.engine.config import Settings
from gpulint.engine.runner import run
from gpulint.inventory import Inventory

from ..kubefake import FakeCluster, KubeFake
from .bigworld import big_world
from .conftest import wait_for


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every rule's check, counted per rule (items handed to it)."""
    counted: Counter[str] = Counter()
    for spec in engine.all_rules():

        def check(item: Any, inventory: Any, ctx: Any, _spec: Any = spec) -> Iterator[Any]:
            counted[_spec.id] += 1
            return _spec.check(item, inventory, ctx)  # type: ignore[no-any-return]

        monkeypatch.setitem(engine._loaded, spec.id, spec._replace(check=check))
    return counted


def _cache_of(world: list[dict[str, Any]], tmp_path: Any) -> tuple[KubeFake, ClusterCache]:
    fake = KubeFake(FakeCluster()).start()
    for obj in world:
        fake.cluster.create(obj)
    from gpulint.cluster.mode import connect

    api_client, _ = connect(str(fake.write_kubeconfig(tmp_path / f"kubeconfig-{len(world)}")))
    cache = ClusterCache(api_client, Settings(), backoff=(0.05, 0.5))
    cache.start()
    return fake, cache


def _admitted(world: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
    """One of each kind of request, on objects that exist in every size of the world."""
    hpa = copy.deepcopy(world[2])
    assert hpa["kind"] == "HorizontalPodAutoscaler"
    deployment = copy.deepcopy(world[1])
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 2}
    }
    second = copy.deepcopy(hpa)
    second["metadata"]["name"] = "second"
    scaled = next(copy.deepcopy(o) for o in world if o["kind"] == "ScaledObject")
    configmap = copy.deepcopy(world[0])
    configmap["data"]["config.yaml"] = configmap["data"]["config.yaml"].replace(
        "as: gpu_utilization", "as: gpu_util"
    )
    template = next(copy.deepcopy(o) for o in world if o["kind"] == "ResourceClaimTemplate")
    requests = template["spec"]["spec"]["devices"]["requests"]
    requests[0]["exactly"]["deviceClassName"] = "sriov.example.com"  # no GPU after all
    return [
        ("hpa update", hpa, "UPDATE"),
        ("deployment gains gpus", deployment, "UPDATE"),
        ("second hpa", second, "CREATE"),
        ("scaledobject update", scaled, "UPDATE"),
        ("adapter rename", configmap, "UPDATE"),
        ("claim template update", template, "UPDATE"),
    ]


@pytest.mark.slow
def test_evaluate_hands_the_rules_the_same_items_in_a_small_and_a_large_cluster(
    tmp_path: Any, calls: Counter[str]
) -> None:
    per_size: dict[int, dict[str, Counter[str]]] = {}
    findings_per_size: dict[int, dict[str, list[str]]] = {}
    for size in (500, 5000):
        world = big_world(size)
        fake, cache = _cache_of(world, tmp_path)
        try:
            wait_for(cache.synced, timeout=60, what=f"sync of {size} objects")
            assert len(cache) == size
            per_size[size] = {}
            findings_per_size[size] = {}
            for label, obj, operation in _admitted(world):
                calls.clear()
                findings = cache.evaluate(obj, operation)
                per_size[size][label] = Counter(calls)
                findings_per_size[size][label] = sorted(f.rule for f in findings)
        finally:
            cache.stop()
            fake.stop()
    assert per_size[500] == per_size[5000]
    assert findings_per_size[500] == findings_per_size[5000]
    for label, counted in per_size[5000].items():
        # A handful of items per rule, never a sweep of the cluster: at most 4 for any rule,
        # and no more in all than 2 for each rule that judges the admission's items.
        assert sum(counted.values()) <= 2 * len(counted), (label, counted)
        assert max(counted.values()) <= 4, (label, counted)
    assert findings_per_size[5000] == {
        "hpa update": [],
        "deployment gains gpus": [],
        "second hpa": ["GL103"],
        "scaledobject update": [],
        "adapter rename": ["GL401", "GL401", "GL401"],
        "claim template update": [],
    }


def _inventory(world: list[dict[str, Any]], by_directory: bool = True) -> Inventory:
    from gpulint.cluster.reading import cluster_file
    from gpulint.input.document import Manifest

    inventory = Inventory(Settings(), by_directory=by_directory)
    for obj in world:
        inventory.add_manifest(Manifest(copy.deepcopy(obj), cluster_file(obj)))
    return inventory


def test_the_focus_of_an_object_holds_its_relations() -> None:
    world = big_world(300)
    inventory = _inventory(world)
    deployment = next(m for m in inventory.workloads if m.name == "app-00000")
    focus = related_items(inventory, deployment)
    assert [h.name for h in focus("hpa")] == ["app-00000"]
    assert [g.target for g in focus("target-group")] == [("Deployment", "team-000", "app-00000")]
    assert [o.manifest.name for o in focus("pod-owner")] == ["app-00000"]
    assert focus("isvc") == focus("knative") == focus("adapter-rule") == []
    hpa = next(h for h in inventory.hpas if h.name == "app-00000")
    focus = related_items(inventory, hpa.manifest)
    assert [h.name for h in focus("hpa")] == ["app-00000"]
    assert len(focus("adapter-rule")) == 1  # the rule that serves gpu_utilization
    assert focus("pod-owner") == []


def test_an_admitted_scaled_object_has_its_prometheus_queries_judged() -> None:
    world = big_world(100)
    scaled = next(copy.deepcopy(o) for o in world if o["kind"] == "ScaledObject")
    scaled["spec"]["triggers"].append(
        {
            "type": "prometheus",
            "metadata": {
                "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
                "query": 'avg(DCGM_FI_DEV_GPU_UTILIZATION{exported_namespace="team-000"})',
                "threshold": "70",
            },
        }
    )
    world = [scaled if o is not scaled and _same(o, scaled) else o for o in world]
    inventory = _inventory(world)
    manifest = next(
        s.manifest
        for s in inventory.scaled_objects
        if s.manifest.name == scaled["metadata"]["name"]
    )
    focus = related_items(inventory, manifest)
    assert [t.index for t in focus("prometheus-query")] == [1]
    findings = focus.select(run(inventory, items_for=focus))
    assert [(f.rule, f.location.file) for f in findings] == [("GL402", manifest.file)]
    assert "Did you mean DCGM_FI_DEV_GPU_UTIL" in findings[0].message


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (a["kind"], a["metadata"]) == (b["kind"], b["metadata"])


def test_findings_of_a_focused_run_are_those_of_a_full_run_about_the_object(
    calls: Counter[str],
) -> None:
    """Over a cluster with problems, the focused run finds about the object what a run over
    everything finds about it."""
    world = big_world(400)
    hpas = (obj for obj in world if obj["kind"] == "HorizontalPodAutoscaler")
    for index, obj in enumerate(hpas):  # CPU-only HPAs on GPU Deployments; some fixed
        obj["spec"]["metrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 70},
                },
            }
        ]
        if index % 2:
            obj["spec"]["minReplicas"] = obj["spec"]["maxReplicas"]
    inventory = _inventory(world)
    everything = run(inventory)
    assert {f.rule for f in everything} >= {"GL101", "GL110"}
    for hpa in inventory.hpas[:20]:
        focus = related_items(inventory, hpa.manifest)
        focused = focus.select(run(inventory, items_for=focus))
        expected = [f for f in everything if f.location.file == hpa.manifest.file]
        assert [(f.rule, f.message) for f in focused] == [(f.rule, f.message) for f in expected]


def test_incremental_indexes_match_a_fresh_inventory() -> None:
    """Objects taken out and put back: every index answers as if built from scratch."""
    world = big_world(600)
    inventory = _inventory(world)
    inventory.target_groups()
    inventory.metrics_read()
    inventory.isvc_for_component(None, "")
    removed = [m for i, m in enumerate(list(inventory.manifests)) if i % 3 == 0]
    for manifest in removed:
        assert inventory.remove_manifest(manifest)
        assert not inventory.remove_manifest(manifest)
    for manifest in removed[::2]:
        inventory.add_manifest(manifest)
    replaced = inventory.manifests[5]
    inventory.replace_manifest(replaced, replaced)
    fresh = Inventory(Settings())
    for manifest in inventory.manifests:
        fresh.add_manifest(manifest)

    def groups(of: Inventory) -> dict[Any, set[Any]]:
        return {
            key: {(a.kind, a.manifest.name) for a in group.autoscalers}
            for key, group in of.target_groups().items()
        }

    assert groups(inventory) == groups(fresh)
    assert sorted(map(id, inventory.manifests)) == sorted(map(id, fresh.manifests))
    assert {id(h) for h in inventory.hpas} == {
        id(inventory.view_of(h.manifest)) for h in inventory.hpas
    }
    assert sorted(h.name for h in inventory.hpas) == sorted(h.name for h in fresh.hpas)
    assert sorted(inventory.metrics_read()) == sorted(fresh.metrics_read())
    for api, name in fresh.metrics_read():
        assert sorted(h.name for h in inventory.readers_of(api, name)) == sorted(
            h.name for h in fresh.readers_of(api, name)
        )
    for isvc in fresh.inference_services:
        name = isvc.component_name("predictor")
        found = inventory.isvc_for_component(isvc.namespace, name)
        assert found is not None and found[0].name == isvc.name
    for manifest in removed[1::2]:
        if manifest.kind == "InferenceService":
            assert (
                inventory.isvc_for_component(manifest.namespace, f"{manifest.name}-predictor")
                is None
            )
    assert sorted((f.rule, f.message) for f in run(inventory)) == sorted(
        (f.rule, f.message) for f in run(fresh)
    )


def test_a_kserve_configmap_change_reaches_the_inferenceservices_it_governs() -> None:
    world = big_world(100)
    world.append(
        {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {"predictor": {"model": {"resources": {"limits": {"nvidia.com/gpu": 1}}}}},
        }
    )
    inventory = _inventory(world)
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "inferenceservice-config", "namespace": "kserve"},
        "data": {"deploy": '{"defaultDeploymentMode": "Standard"}'},
    }
    from gpulint.cluster.reading import cluster_file
    from gpulint.input.document import Manifest

    manifest = Manifest(configmap, cluster_file(configmap))
    inventory.add_manifest(manifest)
    focus = related_items(inventory, manifest)
    assert [i.name for i in focus("isvc")] == ["llm"]  # the others name their mode
    same = Manifest(copy.deepcopy(configmap), manifest.file)
    assert related_items(inventory, manifest, same)("isvc") == []  # the mode did not change
    assert inventory.kserve_default_mode == "Standard"
    assert inventory.remove_manifest(manifest)
    assert inventory.kserve_default_mode == Settings().kserve_default_mode


def test_sync_of_a_large_cluster_lists_in_pages(tmp_path: Any) -> None:
    world = big_world(2000)
    fake, cache = _cache_of(world, tmp_path)
    try:
        wait_for(cache.synced, timeout=60, what="sync")
        deployments = [
            q
            for method, path, q in fake.cluster.requests
            if path == "/apis/apps/v1/deployments" and "watch" not in q
        ]
        count = sum(1 for obj in world if obj["kind"] == "Deployment")
        assert count > 500
        assert [q["limit"] for q in deployments] == ["500"] * (1 + count // 500)
        assert [bool(q.get("continue")) for q in deployments][:2] == [False, True]
        assert len(cache) == 2000
    finally:
        cache.stop()
        fake.stop()


def test_an_hpa_coming_or_going_updates_the_rules_consumers_without_a_rebuild(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A review swaps one HPA in the cluster's inventory: the adapter rules' consumers follow
    it at the cost of that HPA's metrics, and agree with a fresh build."""
    from gpulint.input.document import Manifest
    from gpulint.inventory.exposure import Exposure

    world = big_world(600)
    inventory = _inventory(world, by_directory=False)  # as the webhook's cache holds it
    (rule,) = [r for config in inventory.adapter_configs for r in config.rules]
    before = inventory.asked_of(rule)
    readers = inventory.exposure._by_rule()[id(rule)]["pods"]
    assert set(before) == {"pods"} and len(readers) > 50
    added: list[object] = []
    original = Exposure._add_consumers

    def counting(self: Exposure, hpa: object, by_rule: object) -> None:
        added.append(hpa)
        original(self, hpa, by_rule)  # type: ignore[arg-type]

    monkeypatch.setattr(Exposure, "_add_consumers", counting)
    hpa = next(h for h in inventory.hpas if h.name == "app-00000")
    changed = copy.deepcopy(hpa.manifest.data)
    changed["spec"]["metrics"] = [
        {
            "type": "Object",
            "object": {
                "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "app-00000"},
                "metric": {"name": "gpu_utilization"},
                "target": {"type": "Value", "value": "70"},
            },
        }
    ]
    inventory.remove_manifest(hpa.manifest)
    inventory.add_manifest(Manifest(changed, hpa.manifest.file))
    after = inventory.asked_of(rule)
    assert len(added) == 1  # the new HPA alone
    assert set(after) == {"pods", "services"}
    fresh = _inventory([*(o for o in world if o is not world[2]), changed], by_directory=False)
    assert set(fresh.asked_of(next(r for c in fresh.adapter_configs for r in c.rules))) == set(
        after
    )
