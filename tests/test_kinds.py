"""The kinds protocol: every registered view implements it, the registry sits above the views,
and one answer to "who generated this object"."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from gpulint.input.document import Manifest
from gpulint.input.loader import load_file
from gpulint.inventory import Inventory
from gpulint.inventory.exposure import Consumer, Exposure
from gpulint.kinds.hpa import HPA
from gpulint.kinds.registry import KINDS, VIEW_SCOPES, ViewContext, build_view
from gpulint.kinds.scaletarget import TargetRef
from gpulint.kinds.view import (
    AdapterMetric,
    GeneratedWorkload,
    Generator,
    KindView,
    generated_by,
    generator_of,
    is_generated,
)
from gpulint.kinds.workload import PodTemplate, pod_template_at

KINDS_DIR = Path(__file__).resolve().parent.parent / "gpulint" / "kinds"


def _manifest(text: str) -> Manifest:
    loaded = load_file("input.yaml", textwrap.dedent(text).lstrip("\n").encode())
    (document,) = loaded.documents
    return Manifest(document.data, "input.yaml")


def _minimal(api_version: str, kind: str) -> Manifest:
    return Manifest(
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "ml"}},
        "input.yaml",
    )


@pytest.mark.parametrize(
    "spec", [s for s in KINDS if s.view is not None], ids=lambda s: f"{s.group}/{s.kind}"
)
def test_every_registered_view_implements_the_protocol(spec: Any) -> None:
    manifest = _minimal(spec.api_versions[0], spec.kind)
    view = build_view(manifest, ViewContext("Knative"))
    assert isinstance(view, KindView)
    assert view.manifest is manifest
    assert spec.scope in VIEW_SCOPES
    # An object with nothing written answers every question without failing.
    for answer in (
        view.pod_templates(),
        view.replica_claims(),
        view.target_refs(),
        view.generated_names(),
        view.generated_workloads(),
        view.adapter_reads(),
        view.adapter_metrics(),
        list(view.scope_items()),
        view.prometheus_urls(),
        view.trace_sources(),
    ):
        assert isinstance(answer, list)
    assert isinstance(view.reads_metrics_api, bool)


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_view_imports_the_registry() -> None:
    """The registry points at the views; a view importing it back makes the cycle that the
    registry's deferred imports used to hide."""
    views = [p for p in KINDS_DIR.glob("*.py") if p.name not in ("registry.py", "classify.py")]
    assert {p.name for p in views} >= {"view.py", "hpa.py", "keda.py", "kserve.py", "workload.py"}
    for path in views:
        assert "gpulint.kinds.registry" not in _imported_modules(path), path.name


KEDA_HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: keda-hpa-queue
  namespace: ml
  {made_by}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: queue-worker}}
  maxReplicas: 10
"""


@pytest.mark.parametrize(
    ("made_by", "expected"),
    [
        (
            "ownerReferences: [{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, name: queue}]",
            Generator("ScaledObject", "queue", "keda.sh"),
        ),
        # A dump that dropped ownerReferences keeps KEDA's label.
        (
            "labels: {scaledobject.keda.sh/name: queue}",
            Generator("ScaledObject", "queue", "keda.sh"),
        ),
        (
            "ownerReferences: [{apiVersion: serving.kserve.io/v1beta1, kind: InferenceService, "
            "name: llm}]",
            Generator("InferenceService", "llm", "serving.kserve.io"),
        ),
        (
            "ownerReferences: [{apiVersion: autoscaling.internal.knative.dev/v1alpha1, "
            "kind: PodAutoscaler, name: hello-00001}]",
            Generator("PodAutoscaler", "hello-00001", "autoscaling.internal.knative.dev"),
        ),
        # Another API group's kind of the same name is not KServe's.
        (
            "ownerReferences: [{apiVersion: example.com/v1, kind: InferenceService, name: llm}]",
            None,
        ),
        ("labels: {app: queue}", None),
    ],
)
def test_generator_of_an_autoscaler(made_by: str, expected: Generator | None) -> None:
    manifest = _manifest(KEDA_HPA.format(made_by=made_by))
    assert generator_of(manifest) == expected
    assert is_generated(manifest) is (expected is not None)
    hpa = HPA(manifest)
    assert hpa.generator() == expected
    # What a controller made is fixed on its generator: the generator's claim counts.
    assert (hpa.replica_claims() == []) is (expected is not None)


def test_generated_by_names_the_generator_of_that_kind_only() -> None:
    manifest = _manifest(KEDA_HPA.format(made_by="labels: {scaledobject.keda.sh/name: queue}"))
    assert generated_by(manifest, "ScaledObject") == "queue"
    assert generated_by(manifest, "InferenceService") is None


class _Tuner(KindView):
    """A kind that acts on a workload without setting its replicas (a VPA, say)."""

    def __init__(self, manifest: Manifest, target: str) -> None:
        self.manifest = manifest
        self.target = target

    def target_refs(self) -> list[TargetRef]:
        return [TargetRef("Deployment", self.target, "apps/v1", ("spec", "targetRef"))]


def test_views_targeting_a_workload_are_found_by_their_target_refs() -> None:
    inventory = Inventory()
    tuner = _Tuner(_minimal("example.com/v1", "Tuner"), "llm")
    elsewhere = _Tuner(
        Manifest(
            {"apiVersion": "example.com/v1", "kind": "Tuner", "metadata": {"name": "y"}},
            "other.yaml",
        ),
        "other",
    )
    inventory.claims.view_added(tuner)
    inventory.claims.view_added(elsewhere)
    assert inventory.views_targeting(("Deployment", "ml", "llm")) == [tuner]
    assert inventory.views_targeting(("Deployment", "other-namespace", "llm")) == []
    assert inventory.views_targeting(("StatefulSet", "ml", "llm")) == []
    inventory.claims.view_removed(tuner)
    assert inventory.views_targeting(("Deployment", "ml", "llm")) == []


# What the inventory asks every view, answered by a kind it has never heard of: resolving a
# scaleTargetRef to a workload a controller generates, and which adapter rules serve the metrics
# an object reads through the metrics APIs, need no edit for a new kind.

MAKER = """\
apiVersion: example.com/v1
kind: BatchPool
metadata: {name: batch, namespace: ml}
spec:
  template:
    metadata: {labels: {app: batch}}
    spec:
      containers:
        - name: runner
          resources: {limits: {nvidia.com/gpu: 2}}
"""


class _Maker(KindView):
    """A kind whose controller makes a Deployment ``<name>-runner`` from its template."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        template = pod_template_at(manifest.data, ("spec", "template"), owner=manifest)
        self.templates: list[PodTemplate] = [template] if template is not None else []

    def generated_workloads(self) -> list[GeneratedWorkload]:
        return [GeneratedWorkload(f"{self.name}-runner", "runner", self.templates)]


def test_a_scale_target_resolves_to_the_workload_a_kind_generates() -> None:
    inventory = Inventory()
    maker = _Maker(_manifest(MAKER))
    ref = TargetRef("Deployment", "batch-runner", "apps/v1", ("spec", "scaleTargetRef"))
    assert not inventory.resolve_target("ml", ref).found
    inventory.resolver.view_added(maker)
    inventory.resolver.changed()
    target = inventory.resolve_target("ml", ref)
    assert target.owner is maker.manifest
    assert target.templates == maker.templates
    assert [r.count for r in target.gpu_requests(inventory.gpu_names)] == [2]
    assert not inventory.resolve_target("other", ref).found
    # Not an InferenceService: the KServe question does not take it for one.
    assert inventory.isvc_for_component("ml", "batch-runner") is None
    inventory.resolver.view_removed(maker)
    inventory.resolver.changed()
    assert not inventory.resolve_target("ml", ref).found


ADAPTER = """\
rules:
  - seriesQuery: 'queue_depth{namespace!="",pod!=""}'
    resources:
      overrides:
        namespace: {resource: namespace}
        pod: {resource: pod}
    name: {matches: "^queue_depth$", as: "queue_depth"}
    metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""


class _QueueMetric(NamedTuple):
    """A Pods metric read through the custom metrics API (what ``AdapterMetric`` asks)."""

    index: int
    type: str
    name: str | None
    name_path: tuple[str | int, ...]
    api: str
    target: Any
    described_object: dict[str, Any] | None


class _QueueScaler(KindView):
    """A kind whose controller reads a Pods metric through the metrics APIs, as the HPA
    controller does."""

    reads_metrics_api = True

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.metric = _QueueMetric(0, "Pods", "queue_depth", ("spec", "metric"), "custom", 5, None)

    def adapter_reads(self) -> list[AdapterMetric]:
        return [self.metric]


def test_adapter_rules_serve_any_kind_that_reads_the_metrics_api() -> None:
    probe = Inventory()
    probe.add_file(load_file("adapter/config.yaml", ADAPTER.encode()))
    (config,) = probe.adapter_configs
    (rule,) = config.rules
    # As the inventory does: the readers are its views that read the metrics APIs.
    views: list[KindView] = []
    exposure = Exposure(lambda: [view for view in views if view.reads_metrics_api])
    exposure.add_configs([config])
    assert exposure.readers() == {}
    assert exposure.asked_of(rule) == {}
    scaler = _QueueScaler(_manifest(MAKER.replace("BatchPool", "QueueScaler")))
    other = _Maker(_manifest(MAKER))  # reads no metrics API
    for view in (scaler, other):
        views.append(view)
        exposure.view_added(view)
    assert exposure.readers() == {("custom", "queue_depth"): {id(scaler): scaler}}
    assert exposure.asked_of(rule) == {"pods": Consumer(scaler, scaler.metric)}
    assert scaler.adapter_metrics() == [("queue_depth", "custom")]
    views.remove(scaler)
    exposure.view_removed(scaler)
    assert exposure.readers() == {}
    assert exposure.asked_of(rule) == {}
    # Built from scratch, the readers are those the inventory hands it.
    views.append(scaler)
    fresh = Exposure(lambda: [view for view in views if view.reads_metrics_api])
    fresh.add_configs([config])
    assert fresh.readers() == {("custom", "queue_depth"): {id(scaler): scaler}}
    assert fresh.asked_of(rule) == {"pods": Consumer(scaler, scaler.metric)}
