"""The LLM serving kinds judged in a cluster and at admission as in files.

Every failing fixture of tests/fixtures/ that holds one of the kinds (an LLMInferenceService,
a NIMService, a VLLMRuntime, an AIBrix PodAutoscaler, a KubeAI Model, a VariantAutoscaling)
and nothing but Kubernetes objects is served by the fake API server: ``gpulint lint
--cluster`` must report its rule on the objects ``gpulint lint`` reports it on, and the
webhook's cache, holding every other object of the fixture, must report it when the kind's
object is admitted. Their passing fixtures must stay clean in the cluster too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpulint.cli import main
from gpulint.cluster.cache import ClusterCache
from gpulint.engine.registry import Selection

from ..conftest import FIXTURES, lint_paths
from ..kubefake import KubeFake
from .conftest import wait_for

# The kinds, by API group (a KServe InferenceService shares its group with the
# LLMInferenceService, an AIBrix PodAutoscaler its kind with Knative's).
KINDS = {
    ("LLMInferenceService", "serving.kserve.io"),
    ("NIMService", "apps.nvidia.com"),
    ("VLLMRuntime", "production-stack.vllm.ai"),
    ("PodAutoscaler", "autoscaling.aibrix.ai"),
    ("Model", "kubeai.org"),
    ("VariantAutoscaling", "llmd.ai"),
}

Object = tuple[str, str, str]  # kind, namespace, name


def _group(document: dict[str, Any]) -> str:
    return str(document.get("apiVersion", "")).rpartition("/")[0]


def _documents(path: Path) -> list[dict[str, Any]] | None:
    """The fixture's objects; None when it holds anything a cluster cannot (chart values,
    an adapter's config file)."""
    try:
        found = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError:
        return None  # a template, a broken file: other rules' fixtures
    if not all(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d in found):
        return None
    return found


def _is_kind(document: dict[str, Any]) -> bool:
    return (document["kind"], _group(document)) in KINDS


def _cases(prefix: str) -> list[tuple[str, Path]]:
    found = []
    for path in sorted(FIXTURES.glob(f"GL[1-5]*/{prefix}*.yaml")):
        documents = _documents(path)
        if documents and any(_is_kind(d) for d in documents):
            found.append((path.parent.name, path))
    return found


# The version the fake API server serves each kind at; a real one converts an object written
# at another served version (KServe's LLMInferenceService: v1alpha1 and v1alpha2 carry the
# same workload settings).
SERVED = {("LLMInferenceService", "serving.kserve.io"): "serving.kserve.io/v1alpha2"}


def _served(document: dict[str, Any]) -> dict[str, Any]:
    served = copy.deepcopy(document)
    version = SERVED.get((document["kind"], _group(document)))
    if version is not None:
        served["apiVersion"] = version
    return served


def _key(document: dict[str, Any]) -> Object:
    metadata = document.get("metadata") or {}
    return (document["kind"], metadata.get("namespace") or "default", metadata["name"])


def _in_files(rule: str, path: Path) -> set[Object]:
    return {
        (f.object.kind, f.object.namespace or "default", f.object.name)
        for f in lint_paths(path)
        if f.rule == rule and f.object is not None
    }


def _cluster_object(file: str) -> Object:
    """``cluster://llm/NIMService/llama`` as (kind, namespace, name)."""
    namespace, kind, name = file.removeprefix("cluster://").split("/")
    return (kind, namespace, name)


def _in_cluster(
    fake: KubeFake, kubeconfig: Path, rule: str, capsys: pytest.CaptureFixture[str]
) -> set[Object]:
    main(["lint", "--cluster", "--kubeconfig", str(kubeconfig), "-f", "json", "--select", rule])
    report = json.loads(capsys.readouterr().out)
    return {_cluster_object(f["file"]) for f in report["findings"] if f["rule"] == rule}


FAILING = _cases("fail_")
PASSING = _cases("pass_")


def test_every_kind_has_failing_fixtures_a_cluster_can_hold() -> None:
    """The cases below cover each kind (a fixture with Helm values cannot be served)."""
    covered = {
        (d["kind"], _group(d)) for _, path in FAILING for d in _documents(path) or [] if _is_kind(d)
    }
    assert covered == KINDS


@pytest.mark.parametrize(("rule", "path"), FAILING, ids=lambda v: str(v)[-60:])
def test_a_failing_fixture_fails_alike_in_the_cluster_and_at_admission(
    rule: str,
    path: Path,
    fake: KubeFake,
    kubeconfig: Path,
    new_cache: Callable[..., ClusterCache],
    capsys: pytest.CaptureFixture[str],
) -> None:
    documents = _documents(path)
    assert documents is not None
    in_files = _in_files(rule, path)
    assert in_files, f"{path.name}: no {rule} in files"
    for document in documents:
        fake.cluster.apply(_served(document))
    assert _in_cluster(fake, kubeconfig, rule, capsys) == in_files
    # At admission: the kind's objects come in one by one over a cluster that holds the
    # rest. Each gets the findings on itself; a neighbour's finding of the same conflict is
    # left to the neighbour (gpulint.admission.focus: "the subject's side says it").
    admitted = [d for d in documents if _is_kind(d)]
    for document in admitted:
        served = _served(document)
        kind, namespace, name = _key(served)
        fake.cluster.delete(served["apiVersion"], kind, namespace, name)
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    selection = Selection(select=[rule])
    at_admission: set[Object] = set()
    for document in admitted:
        findings = cache.evaluate(copy.deepcopy(document), "CREATE", selection=selection)
        at_admission |= {_cluster_object(f.location.file) for f in findings if f.rule == rule}
    assert at_admission, f"{path.name}: {rule} not reported at admission"
    assert at_admission <= in_files
    assert in_files & {_key(d) for d in admitted} <= at_admission


@pytest.mark.parametrize(("rule", "path"), PASSING, ids=lambda v: str(v)[-60:])
def test_a_passing_fixture_passes_in_the_cluster(
    rule: str,
    path: Path,
    fake: KubeFake,
    kubeconfig: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for document in _documents(path) or []:
        fake.cluster.apply(_served(document))
    assert _in_cluster(fake, kubeconfig, rule, capsys) == set()
