"""What every kind's view answers: the one protocol the inventory, admission, the trace and the
engine read kinds through.

A kind is one view module plus one ``KindSpec`` entry in ``gpulint.kinds.registry``. The view
is a subclass of ``KindView`` built from the object (``KindSpec.view``); it overrides the
questions that apply to its kind and inherits an empty answer for the others (a
HorizontalPodAutoscaler has no pod templates, a Knative Service claims no replicas through an
HPA). Readers never ask which view class they hold:

* ``pod_templates()``: the pods the object makes, with their GPU claims (pod-owner rules);
* ``replica_claims()``: the workloads whose replicas it sets, written as a scaleTargetRef
  (the inventory resolves it) or named by the controller (``ReplicaClaim``);
* ``target_refs()``: the workloads it acts on as written (an HPA's scaleTargetRef; a kind that
  targets a workload without setting its replicas says so here only, and admission brings it
  in whenever that workload or an autoscaler on it changes);
* ``scaling_range_of(workload)``: the replicas it gives one of the workloads it claims;
* ``written_replicas(workload)``: where the object writes a replica count its controller
  sets on a workload it makes on every reconcile (an LLMInferenceService's ``replicas``), so
  that an autoscaler on that workload is overwritten;
* ``generated_names()``: the names a controller gives the workloads it makes for the object
  (KServe's ``<isvc>-predictor``, Knative's ``<service>-NNNNN-deployment`` parent), which
  admission follows to the autoscalers on them;
* ``generated_workloads()``: the workloads a controller makes for parts of the object under
  names it gives them, with their pod templates (KServe's ``<isvc>-predictor`` Deployment of
  each component), to which a scaleTargetRef naming one resolves;
* ``reads_metrics_api``: whether it reads the Kubernetes metrics APIs itself, as the HPA
  controller does for an HPA, or through the HPA its controller makes from it and nothing
  else (a Knative Service on the HPA class); KEDA and KServe's KEDA class query Prometheus
  themselves: the adapter configs nearest to it serve it, and where it is written counts in
  which configs each directory of a repository sees;
* ``adapter_reads()``: the metrics it reads through prometheus-adapter (``AdapterMetric``), and
  ``adapter_metrics()`` their names and APIs, whose adapter rules admission re-checks with it;
* ``scope_items()``: what it adds to rule scopes besides its own (``autoscaler``;
  ``metrics-reader`` when it reads through prometheus-adapter; the ``prometheus-query`` of a
  trigger that queries Prometheus itself);
* ``prometheus_urls()``: the Prometheus addresses it queries (the scrape chain checks them);
* ``trace_sources()``: the metrics ``gpulint trace`` follows from it, each one of three shapes
  (``AdapterTrace``, ``QueryTrace``, ``RevisionTrace``) whose stages the trace knows;
* ``metric_source(series, labels)``: how the object is where a series an autoscaler reads
  comes from (llm-d's WVA publishes ``wva_desired_replicas`` for a VariantAutoscaling; an
  endpoint picker labels its pool's series with an InferencePool's name), for the trace;
* ``generated_autoscalers()``: the HPAs and ScaledObjects a controller makes from settings
  written inside the object (a NIMService's ``spec.scale.hpa``), read as the HPA or
  ScaledObject they become (``gpulint.kinds.generated``): ``gpulint replay`` replays them, and
  the view hands them to the rule scopes the HPA and KEDA rules iterate; each says in
  ``written_at`` the node of the object it is written under, so that the trace of one (an
  LLMInferenceService's prefill ScaledObject) is not broken by a finding on another;
* ``generator()``: the object whose controller made it (``generator_of``), the one answer to
  "who generated this object" for every reader and rule.

Adding a kind: write ``gpulint/kinds/<kind>.py`` with a ``KindView`` subclass that overrides
what applies, and add its ``KindSpec`` (group, versions, plural, role, rule scope, the view's
constructor, claim rank, evaluated/watched) to ``KINDS`` in ``gpulint.kinds.registry``. This
module imports no view and no registry, so every view can import it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, Protocol

from gpulint.chain.address import PrometheusUrl
from gpulint.input.document import Manifest, ManifestView, Path
from gpulint.kinds.revisions import RevisionTrace
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef, WrittenReplicas
from gpulint.kinds.scaling import ScalingRange
from gpulint.kinds.workload import PodTemplate


class Generator(NamedTuple):
    """The object whose controller made another one (KEDA's HPA, KServe's Knative Service)."""

    kind: str
    name: str
    group: str


# Controllers that make autoscalers and Services for objects of these kinds, by the kind and
# API group their ownerReferences name: KEDA makes an HPA per ScaledObject (kedacore/keda
# controllers/keda/hpa.go), KServe a Knative Service, HPA or ScaledObject per InferenceService
# component (kserve pkg/controller/v1beta1/inferenceservice/reconcilers), Knative's HPA class an
# HPA per PodAutoscaler (knative/serving pkg/reconciler/autoscaling/hpa); the LLM serving
# stacks theirs: KServe an HPA or ScaledObject per LLMInferenceService workload
# (pkg/controller/v1alpha2/llmisvc/scaling.go), the NIM operator an HPA per NIMService
# (NVIDIA/k8s-nim-operator api/apps/v1alpha1 GetHPAParams), AIBrix an HPA per PodAutoscaler of
# the HPA strategy (vllm-project/aibrix pkg/controller/podautoscaler/hpa_resources.go), the
# production-stack operator a ScaledObject per VLLMRuntime (operator/internal/controller).
GENERATOR_KINDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("ScaledObject", "keda.sh"),
        ("InferenceService", "serving.kserve.io"),
        ("PodAutoscaler", "autoscaling.internal.knative.dev"),
        ("LLMInferenceService", "serving.kserve.io"),
        ("NIMService", "apps.nvidia.com"),
        ("PodAutoscaler", "autoscaling.aibrix.ai"),
        ("VLLMRuntime", "production-stack.vllm.ai"),
    }
)
# KEDA labels the HPA it makes with its ScaledObject's name (kedacore/keda
# controllers/keda/hpa.go: labels["scaledobject.keda.sh/name"]); dumps that dropped
# ownerReferences keep it.
SCALED_OBJECT_LABEL = "scaledobject.keda.sh/name"


def generator_of(manifest: Manifest) -> Generator | None:
    """The object whose controller made ``manifest``: its ownerReference to a ScaledObject,
    InferenceService or PodAutoscaler, else KEDA's label; None for an object a user wrote.
    What a generated object says is fixed on its generator, not on the object itself."""
    for owner in manifest.owner_references:
        kind, name, api_version = owner.get("kind"), owner.get("name"), owner.get("apiVersion")
        if not isinstance(kind, str) or not isinstance(name, str) or not name:
            continue
        group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
        if (kind, group) in GENERATOR_KINDS:
            return Generator(kind, name, group)
    label = manifest.labels.get(SCALED_OBJECT_LABEL)
    if isinstance(label, str) and label:
        return Generator("ScaledObject", label, "keda.sh")
    return None


def generated_by(manifest: Manifest, kind: str) -> str | None:
    """The name of the ``kind`` object (ScaledObject, InferenceService ...) that made
    ``manifest``, per ``generator_of``; None when it was not made by one."""
    generator = generator_of(manifest)
    return generator.name if generator is not None and generator.kind == kind else None


def is_generated(manifest: Manifest) -> bool:
    """``generator_of(manifest) is not None``, kept on the object (rules ask it often)."""
    found = manifest.generated
    if found is None:
        found = manifest.generated = generator_of(manifest) is not None
    return found


class GeneratedWorkload(NamedTuple):
    """A workload a controller makes for one part of an object, under the name it gives it."""

    name: str  # llm-predictor: what a scaleTargetRef to it names
    part: str  # predictor: the part of the object it is made for
    templates: list[PodTemplate]  # the pods it runs, as the object writes them


class AdapterMetric(Protocol):
    """A metric an autoscaler reads through prometheus-adapter (``HpaMetric`` is one)."""

    @property
    def index(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def name_path(self) -> Path: ...
    @property
    def api(self) -> str: ...
    @property
    def target(self) -> Any: ...
    @property
    def described_object(self) -> dict[str, Any] | None: ...
    @property
    def selector(self) -> dict[str, Any] | None: ...


class AdapterTrace(NamedTuple):
    """A metric read through prometheus-adapter: workload, exporter, scrape, Prometheus,
    adapter rule, metrics API, autoscaler."""

    autoscaler: KindView
    metric: AdapterMetric
    ref: TargetRef | None


class QueryTrace(NamedTuple):
    """A query the autoscaler sends Prometheus itself (KEDA): no adapter in between."""

    name: str  # the external metric KEDA serves it as (s0-prometheus)
    query: str
    url: PrometheusUrl | None
    path: Path
    ref: TargetRef | None  # the workload it scales
    detail: str  # "KEDA prometheus trigger"
    # The node of its object the autoscaler is written under, when the object holds several
    # (``KindView.written_at``); None: the whole object is the autoscaler.
    within: Path | None = None


TraceSource = AdapterTrace | QueryTrace | RevisionTrace


class KindView(ManifestView):
    """The protocol of a kind's view (see the module docstring); empty answers by default."""

    manifest: Manifest
    # A view may decide it per object (a Knative Service reads only on the HPA class).
    reads_metrics_api: bool = False
    # Where in ``manifest`` the view is written when it is made from settings inside another
    # object (``gpulint.kinds.generated``: an LLMInferenceService's ``spec.prefill``); None
    # for an object of its own.
    written_at: Path | None = None

    def pod_templates(self) -> list[PodTemplate]:
        """The pod templates the object makes pods from (with their GPU claims)."""
        return []

    def replica_claims(self) -> list[ReplicaClaim]:
        """The workloads whose replicas the object sets."""
        return []

    def target_refs(self) -> list[TargetRef]:
        """The workloads the object acts on, as written; by default those it claims."""
        return [claim.ref for claim in self.replica_claims() if claim.ref is not None]

    def scaling_range_of(self, workload: str) -> ScalingRange | None:
        """The replicas the object gives the workload named ``workload`` (one it claims)."""
        return None

    def written_replicas(self, workload: str) -> WrittenReplicas | None:
        """The replicas the object's controller writes to ``workload`` (one it makes) on
        every reconcile; None when it leaves them to an autoscaler."""
        return None

    def generated_names(self) -> list[str]:
        """Names a controller gives the workloads it makes for the object."""
        return []

    def generated_workloads(self) -> list[GeneratedWorkload]:
        """Workloads a controller makes for parts of the object, under names it gives them."""
        return []

    def adapter_reads(self) -> list[AdapterMetric]:
        """The metrics it reads through prometheus-adapter's custom and external metrics APIs,
        in the order written, each with a name."""
        return []

    def adapter_metrics(self) -> list[tuple[str, str]]:
        """``(name, api)`` of the metrics read through prometheus-adapter (api ``custom`` or
        ``external``)."""
        return [(metric.name, metric.api) for metric in self.adapter_reads() if metric.name]

    def scope_items(self) -> Iterator[tuple[str, Any]]:
        """``(scope, item)`` for the rule scopes it takes part in besides its own."""
        return iter(())

    def prometheus_urls(self) -> list[PrometheusUrl]:
        """The Prometheus addresses the object's controller queries."""
        return []

    def trace_sources(self) -> list[TraceSource]:
        """The metrics ``gpulint trace`` follows from the object, in the order written."""
        return []

    def metric_source(self, series: str, labels: Mapping[str, str]) -> str | None:
        """How the object is the source of ``series`` as an autoscaler selects it
        (``labels``: its label matchers, name to value), for ``gpulint trace``; None when
        it is not."""
        return None

    def generated_autoscalers(self) -> list[KindView]:
        """The HPAs and ScaledObjects a controller makes from settings written inside the
        object (``gpulint.kinds.generated``), each a view of the HPA or ScaledObject kind."""
        return []

    def generator(self) -> Generator | None:
        """The object whose controller made this one (``generator_of``)."""
        return generator_of(self.manifest)
