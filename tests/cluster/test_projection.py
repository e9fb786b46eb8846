"""The cluster caches keep each object's projection (gpulint.cluster.projection): what views
and rules read. Every rule's fixtures, read as a cluster serves them, must give the same
findings from projected objects as from whole ones; a view that starts reading a part the
projection drops fails here until its kind's registry entry keeps it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpulint.cluster.kinds import WatchedKind
from gpulint.cluster.projection import project, projection_tree
from gpulint.cluster.reading import cluster_manifest
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection
from gpulint.engine.runner import run
from gpulint.input.loader import load_file
from gpulint.inventory import Inventory

from ..conftest import FIXTURES

_RENDERED = {"kustomization.yaml", "kustomization.yml", "Kustomization", "Chart.yaml"}
# Only what the list's apiVersion and kind fill in is read of it; objects carry their own.
_STREAM = WatchedKind("fixtures", "Unknown", "", ("v1",), "unknowns")


def _rule_dirs() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name.startswith("GL"))


def _cases(rule_dir: Path) -> list[Path]:
    """Each fixture of a rule that is plain YAML (rendered ones are the renderers' tests)."""
    cases = []
    for path in sorted(rule_dir.iterdir()):
        if not path.name.startswith(("fail_", "pass_")):
            continue
        plain = path.suffix in (".yaml", ".yml") and path.is_file()
        if plain or (path.is_dir() and not {p.name for p in path.rglob("*")} & _RENDERED):
            cases.append(path)
    return cases


def _objects(path: Path) -> list[dict[str, Any]]:
    """The fixture's objects as the API server serves them: plain JSON values."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*.y*ml") if p.is_file())
    objects = []
    for file in files:
        for document in load_file(str(file)).documents:
            data = document.data
            if isinstance(data, dict) and isinstance(data.get("metadata"), dict):
                objects.append(json.loads(json.dumps(data, default=str)))
    return objects


def _findings(objects: list[dict[str, Any]], projected: bool) -> list[tuple[Any, ...]]:
    inventory = Inventory(Settings(), by_directory=False)
    for obj in objects:
        manifest = cluster_manifest(copy.deepcopy(obj), _STREAM, "v1", projected=projected)
        if manifest is not None:
            inventory.add_manifest(manifest)
    return sorted(
        (f.rule, str(f.location), f.message, f.fix, f.path, tuple(map(str, f.related)))
        for f in run(inventory, Selection([]))
    )


@pytest.mark.parametrize("rule_dir", _rule_dirs(), ids=lambda p: p.name)
def test_projected_objects_give_the_findings_of_whole_ones(rule_dir: Path) -> None:
    cut = 0
    for case in _cases(rule_dir):
        objects = _objects(case)
        whole = _findings(objects, projected=False)
        assert _findings(objects, projected=True) == whole, case
        cut += sum(project(copy.deepcopy(o)) != o for o in objects)
    if rule_dir.name == "GL501":  # GPU requests: Deployments whose templates lose parts
        assert cut


def test_a_deployment_keeps_what_is_read_and_loses_the_rest() -> None:
    container = {
        "name": "server",
        "image": "vllm/vllm-openai:v0.8.0",
        "args": ["--port=8000"],
        "env": [{"name": "HF_HOME", "value": "/cache"}],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
        "readinessProbe": {"initialDelaySeconds": 60},
        "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
        "securityContext": {"runAsNonRoot": True},
    }
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "llm",
            "namespace": "serving",
            "labels": {"app": "llm"},
            "ownerReferences": [{"kind": "InferenceService", "name": "llm"}],
            "resourceVersion": "42",
            "managedFields": [{"manager": "kubectl"}],
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "llm"}},
            "strategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"app": "llm"}},
                "spec": {
                    "containers": [container],
                    "nodeSelector": {"nvidia.com/gpu.product": "H100"},
                    "volumes": [{"name": "cache", "emptyDir": {}}],
                },
            },
        },
        "status": {"replicas": 2, "conditions": [{"type": "Available"}]},
    }
    kept = project(copy.deepcopy(obj))
    assert kept["metadata"] == {
        "name": "llm",
        "namespace": "serving",
        "labels": {"app": "llm"},
        "ownerReferences": [{"kind": "InferenceService", "name": "llm"}],
        "resourceVersion": "42",
    }
    assert set(kept) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(kept["spec"]) == {"replicas", "selector", "template"}
    pod = kept["spec"]["template"]["spec"]
    assert set(pod) == {"containers", "nodeSelector"}
    assert pod["containers"] == [
        {
            "name": "server",
            "image": "vllm/vllm-openai:v0.8.0",
            "args": ["--port=8000"],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "readinessProbe": {"initialDelaySeconds": 60},
        }
    ]
    # Strings that repeat across objects are one object.
    other = project(copy.deepcopy(obj))
    assert other["metadata"]["namespace"] is kept["metadata"]["namespace"]
    assert (
        other["spec"]["template"]["spec"]["containers"][0]["image"] is pod["containers"][0]["image"]
    )


def test_kinds_without_a_projection_are_kept_whole() -> None:
    assert projection_tree("apps/v1", "DaemonSet") is None  # dcgm-exporter, read once
    obj = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "e"}, "x": 1}
    assert project(obj) is obj
    # Workload kinds are matched by group and kind: a Deployment of a fork is kept whole.
    assert projection_tree("apps/v1", "Deployment") is not None
    assert projection_tree("extensions/v1beta1", "Deployment") is None
