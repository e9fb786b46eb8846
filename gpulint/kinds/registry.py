"""Every kind of Kubernetes object gpulint knows, written down once.

A ``KindSpec`` says what gpulint needs to know of a kind: where the API serves it (group,
versions, plural), what it is to the rules (a workload with pod templates, an autoscaler that
claims a workload's replicas, a generator of workloads, configuration), which typed view rules
read it through and under which rule scope, whether the admission webhook evaluates it and
whether cluster mode lists and watches it. The inventory, the rule scopes, the cluster
resources and the webhook's evaluated kinds are all derived from ``KINDS``; a new CRD is one
entry here plus its view.

Adding a kind: write its view, a subclass of ``gpulint.kinds.view.KindView`` in
``gpulint/kinds/<kind>.py`` that answers the protocol's questions for the kind (pod templates,
replica claims, scaling range, generated names, adapter metrics, scope items, Prometheus URLs,
trace sources; ``gpulint.kinds.view`` lists them), then add one ``KindSpec`` to ``KINDS`` with
a constructor ``(manifest, ViewContext) -> view``, the rule scope its rules iterate and, for an
autoscaler, its claim rank; then run ``python -m gpulint.webhook.deploy``, which writes the RBAC
and webhook rules of deploy/ from ``KINDS``. Nothing else names view classes. The registry
imports the views and no view imports the registry: a view that needs a fact of its kind keeps
it in its own module (workload template paths live in ``gpulint.kinds.workload``).

Kinds are matched by API group and kind. Workload kinds also match in any group
(``extensions/v1beta1`` Deployments in old dumps, forks of Argo Rollouts), and any other object
with a pod template at ``spec.template`` counts as a workload too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from gpulint.input.document import Manifest, Path
from gpulint.kinds.aibrix import AIBrixPodAutoscaler
from gpulint.kinds.hpa import HPA
from gpulint.kinds.inferencepool import InferencePool
from gpulint.kinds.keda import ScaledObject
from gpulint.kinds.knative import KnativeService
from gpulint.kinds.kserve import InferenceService
from gpulint.kinds.kubeai import KubeAIModel
from gpulint.kinds.llmisvc import LLMInferenceService
from gpulint.kinds.nim import NIMService
from gpulint.kinds.scaledjob import TEMPLATE_PATH as SCALED_JOB_TEMPLATE
from gpulint.kinds.scaledjob import ScaledJob
from gpulint.kinds.view import KindView
from gpulint.kinds.vllmruntime import VLLMRuntime
from gpulint.kinds.vpa import VPA
from gpulint.kinds.workload import TEMPLATE_PATHS
from gpulint.kinds.wva import VariantAutoscaling

WORKLOAD, AUTOSCALER, GENERATOR, CONFIG, MONITORING, NETWORK = (
    "workload",
    "autoscaler",
    "generator",
    "config",
    "monitoring",
    "network",
)
DEVICE_CLAIM = "device-claim"  # what pods claim devices through (DRA, gpulint.kinds.dra)
# Sets the requests of a workload's pods, not their number (VerticalPodAutoscaler).
RESIZER = "resizer"


class ViewContext(NamedTuple):
    """What a view needs from the inventory when it is built."""

    kserve_default_mode: str
    kserve_version: tuple[int, int] | None = None
    # Knative's default autoscaler class (config-autoscaler pod-autoscaler-class).
    knative_default_class: str = "kpa.autoscaling.knative.dev"


class KindSpec(NamedTuple):
    kind: str
    group: str  # "" for the core group
    versions: tuple[str, ...]  # served versions gpulint reads, preferred first
    plural: str
    # workload | autoscaler | resizer | generator | config | monitoring | network | device-claim
    role: str
    # The rule scope whose items are this kind's view, and how to build the view.
    scope: str | None = None
    view: Callable[[Manifest, ViewContext], KindView] | None = None
    # Where pod templates live (workloads); () with the default spec.template.
    template_paths: tuple[Path, ...] = ()
    # Order of claims on one workload: explicit HPAs, then ScaledObjects, then the HPA a
    # controller (KServe) makes. None: the kind claims no replicas.
    claim_rank: int | None = None
    evaluated: bool = False  # the admission webhook evaluates it
    watched: bool = False  # cluster mode and the webhook list and watch it
    # Cluster mode lists it once (the scrape chain before the adapter); the webhook does
    # not watch it (gpulint.cluster.kinds.cluster_kinds).
    read: bool = False
    any_group: bool = False  # matched by kind alone (workloads)
    # Why a watched kind the webhook does not evaluate is read: written above its rule in
    # deploy/'s RBAC (gpulint.webhook.deploy), which refuses a watched-only kind without one.
    why_watched: str = ""
    # What the webhook's cache and cluster mode keep of its objects besides their metadata
    # and, for a workload, its pod templates (gpulint.cluster.projection): the paths its view
    # and rules read. None: kept whole.
    keeps: tuple[Path, ...] | None = None

    @property
    def api_versions(self) -> tuple[str, ...]:
        return tuple(f"{self.group}/{v}" if self.group else v for v in self.versions)

    @property
    def resource(self) -> str:
        """``horizontalpodautoscalers.autoscaling``, ``configmaps``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _hpa(manifest: Manifest, context: ViewContext) -> HPA:
    return HPA(manifest)


def _scaled_object(manifest: Manifest, context: ViewContext) -> ScaledObject:
    return ScaledObject(manifest)


def _vpa(manifest: Manifest, context: ViewContext) -> VPA:
    return VPA(manifest)


def _scaled_job(manifest: Manifest, context: ViewContext) -> ScaledJob:
    return ScaledJob(manifest)


def _inference_service(manifest: Manifest, context: ViewContext) -> InferenceService:
    return InferenceService(manifest, context.kserve_default_mode, context.kserve_version)


def _knative_service(manifest: Manifest, context: ViewContext) -> KnativeService:
    return KnativeService(manifest, context.knative_default_class)


def _llm_inference_service(manifest: Manifest, context: ViewContext) -> LLMInferenceService:
    return LLMInferenceService(manifest)


def _variant_autoscaling(manifest: Manifest, context: ViewContext) -> VariantAutoscaling:
    return VariantAutoscaling(manifest)


def _inference_pool(manifest: Manifest, context: ViewContext) -> InferencePool:
    return InferencePool(manifest)


def _aibrix_podautoscaler(manifest: Manifest, context: ViewContext) -> AIBrixPodAutoscaler:
    return AIBrixPodAutoscaler(manifest)


def _kubeai_model(manifest: Manifest, context: ViewContext) -> KubeAIModel:
    return KubeAIModel(manifest)


def _vllm_runtime(manifest: Manifest, context: ViewContext) -> VLLMRuntime:
    return VLLMRuntime(manifest)


def _nim_service(manifest: Manifest, context: ViewContext) -> NIMService:
    return NIMService(manifest)


def _workload(
    kind: str,
    group: str,
    plural: str,
    versions: tuple[str, ...] = ("v1",),
    *,
    watched: bool = False,
    read: bool = False,
) -> KindSpec:
    return KindSpec(
        kind,
        group,
        versions,
        plural,
        WORKLOAD,
        template_paths=TEMPLATE_PATHS.get(kind, ()),
        evaluated=watched,
        watched=watched,
        read=read,
        any_group=True,
        # The replica count and the selector; the pod templates are kept as pod templates
        # are read. A kind read once (DaemonSet: dcgm-exporter as deployed) is kept whole.
        keeps=(("spec", "replicas"), ("spec", "selector")) if watched else None,
    )


KINDS: tuple[KindSpec, ...] = (
    # Autoscalers. autoscaling/v2beta2 is read only where v2 is not served (Kubernetes < 1.23).
    KindSpec(
        "HorizontalPodAutoscaler",
        "autoscaling",
        ("v2", "v2beta2"),
        "horizontalpodautoscalers",
        AUTOSCALER,
        "hpa",
        _hpa,
        claim_rank=0,
        evaluated=True,
        watched=True,
        keeps=(("spec",), ("status",)),
    ),
    KindSpec(
        "ScaledObject",
        "keda.sh",
        ("v1alpha1",),
        "scaledobjects",
        AUTOSCALER,
        "scaledobject",
        _scaled_object,
        claim_rank=1,
        evaluated=True,
        watched=True,
        keeps=(("spec",),),
    ),
    # AIBrix's PodAutoscaler: an HPA of its own (HPA strategy), or AIBrix sets the replicas
    # through /scale (KPA, APA).
    KindSpec(
        "PodAutoscaler",
        "autoscaling.aibrix.ai",
        ("v1alpha1",),
        "podautoscalers",
        AUTOSCALER,
        "aibrix-podautoscaler",
        _aibrix_podautoscaler,
        claim_rank=1,
        evaluated=True,
        watched=True,
    ),
    # llm-d's Workload Variant Autoscaler sizes its target and publishes the replica count an
    # HPA or KEDA reads (no claim on the replicas itself).
    KindSpec(
        "VariantAutoscaling",
        "llmd.ai",
        ("v1alpha1",),
        "variantautoscalings",
        AUTOSCALER,
        "variantautoscaling",
        _variant_autoscaling,
        evaluated=True,
        watched=True,
    ),
    # Resizes a workload's pods (no claim on its replicas); evicts them in most modes.
    KindSpec(
        "VerticalPodAutoscaler",
        "autoscaling.k8s.io",
        ("v1",),
        "verticalpodautoscalers",
        RESIZER,
        "vpa",
        _vpa,
        evaluated=True,
        watched=True,
    ),
    # Generators: they make Deployments (and KServe its own HPA: claim rank 2), or Jobs.
    KindSpec(
        "ScaledJob",
        "keda.sh",
        ("v1alpha1",),
        "scaledjobs",
        GENERATOR,
        "scaledjob",
        _scaled_job,
        template_paths=(SCALED_JOB_TEMPLATE,),
        evaluated=True,
        watched=True,
    ),
    KindSpec(
        "InferenceService",
        "serving.kserve.io",
        ("v1beta1",),
        "inferenceservices",
        GENERATOR,
        "isvc",
        _inference_service,
        claim_rank=2,
        evaluated=True,
        watched=True,
        keeps=(("spec",),),
    ),
    # LLM serving stacks: each makes the model server's workload, and most an autoscaler of
    # it (claim rank 2: the HPA or ScaledObject a controller makes).
    KindSpec(
        "LLMInferenceService",
        "serving.kserve.io",
        ("v1alpha2", "v1alpha1"),
        "llminferenceservices",
        GENERATOR,
        "llmisvc",
        _llm_inference_service,
        claim_rank=2,
        evaluated=True,
        watched=True,
    ),
    KindSpec(
        "NIMService",
        "apps.nvidia.com",
        ("v1alpha1",),
        "nimservices",
        GENERATOR,
        "nimservice",
        _nim_service,
        claim_rank=2,
        evaluated=True,
        watched=True,
    ),
    KindSpec(
        "VLLMRuntime",
        "production-stack.vllm.ai",
        ("v1alpha1",),
        "vllmruntimes",
        GENERATOR,
        "vllmruntime",
        _vllm_runtime,
        claim_rank=2,
        evaluated=True,
        watched=True,
    ),
    # KubeAI makes the model server's pods itself and scales the Model through its /scale.
    KindSpec(
        "Model",
        "kubeai.org",
        ("v1",),
        "models",
        GENERATOR,
        "kubeai-model",
        _kubeai_model,
        claim_rank=2,
        evaluated=True,
        watched=True,
    ),
    KindSpec(
        "Service",
        "serving.knative.dev",
        ("v1",),
        "services",
        GENERATOR,
        "knative",
        _knative_service,
        evaluated=True,
        watched=True,
        keeps=(("spec",), ("status", "latestReadyRevisionName")),
    ),
    KindSpec(
        "Configuration",
        "serving.knative.dev",
        ("v1",),
        "configurations",
        GENERATOR,
        "knative",
        _knative_service,
        evaluated=True,
        watched=True,
        keeps=(("spec",), ("status", "latestReadyRevisionName")),
    ),
    # Workloads: kinds whose pod templates an autoscaler can scale, and a few that only hold
    # pods.
    _workload("Deployment", "apps", "deployments", watched=True),
    _workload("StatefulSet", "apps", "statefulsets", watched=True),
    _workload("ReplicaSet", "apps", "replicasets"),
    _workload("DaemonSet", "apps", "daemonsets", read=True),  # dcgm-exporter
    _workload("ReplicationController", "", "replicationcontrollers"),
    _workload("Pod", "", "pods"),  # the pod spec is the object's own (workload.pod_templates)
    _workload("Job", "batch", "jobs"),
    _workload("CronJob", "batch", "cronjobs"),  # its jobTemplate (kinds.workload)
    _workload("Rollout", "argoproj.io", "rollouts", ("v1alpha1",)),
    _workload("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "leaderworkersets"),
    _workload("DeploymentConfig", "apps.openshift.io", "deploymentconfigs"),
    _workload("CloneSet", "apps.kruise.io", "clonesets", ("v1alpha1",)),
    # What pods claim devices through (Dynamic Resource Allocation, gpulint.kinds.dra): a claim for
    # a GPU device class makes its pods' owner a GPU workload. A new template can change that
    # for a Deployment already there, so templates are evaluated; ResourceClaims are only
    # read (the control plane makes one per pod from a template; gpulint reads none of those).
    KindSpec(
        "ResourceClaimTemplate",
        "resource.k8s.io",
        ("v1", "v1beta2", "v1beta1"),
        "resourceclaimtemplates",
        DEVICE_CLAIM,
        evaluated=True,
        watched=True,
        keeps=(("spec",),),
    ),
    KindSpec(
        "ResourceClaim",
        "resource.k8s.io",
        ("v1", "v1beta2", "v1beta1"),
        "resourceclaims",
        DEVICE_CLAIM,
        watched=True,
        why_watched="DRA: the claims pods name say whether they hold GPUs.",
        keeps=(("spec",),),
    ),
    # A DeviceClass that serves an extended resource (spec.extendedResourceName, KEP-5004)
    # makes that resource name a GPU's when the class is a GPU class. Cluster mode reads them;
    # the webhook knows the implicit deviceclass.resource.kubernetes.io/<class> names only.
    KindSpec(
        "DeviceClass",
        "resource.k8s.io",
        ("v1", "v1beta2", "v1beta1"),
        "deviceclasses",
        DEVICE_CLAIM,
        read=True,
    ),
    # Configuration: ConfigMaps hold the prometheus-adapter config and KServe's
    # inferenceservice-config; PrometheusRules create series (record:).
    KindSpec("ConfigMap", "", ("v1",), "configmaps", CONFIG, keeps=(("data",),)),
    # What the VerticalPodAutoscaler updater may evict is bounded by these (gpulint.kinds.vpa).
    KindSpec(
        "PodDisruptionBudget",
        "policy",
        ("v1",),
        "poddisruptionbudgets",
        CONFIG,
        watched=True,
        why_watched="What bounds the evictions of a VerticalPodAutoscaler (GL112).",
        keeps=(("spec",),),
    ),
    KindSpec("PrometheusRule", "monitoring.coreos.com", ("v1",), "prometheusrules", CONFIG),
    # GitOps wrappers whose chart values gpulint reads (gpulint.input.gitops).
    KindSpec("HelmRelease", "helm.toolkit.fluxcd.io", ("v2", "v2beta2"), "helmreleases", CONFIG),
    KindSpec("Application", "argoproj.io", ("v1alpha1",), "applications", CONFIG),
    # gpu-operator's ClusterPolicy: its spec is the chart's values (dcgmExporter, daemonsets).
    KindSpec("ClusterPolicy", "nvidia.com", ("v1",), "clusterpolicies", CONFIG, read=True),
    # How dcgm-exporter is scraped: monitors, the Prometheus servers that select them (Prometheus
    # Operator), and the Services, endpoints and namespaces between them. Cluster mode reads
    # them; the webhook does not watch them (it evaluates autoscalers and adapter configs).
    # Endpoints and EndpointSlices are read only for the Services the chain names
    # (gpulint.cluster.endpoints), never listed whole.
    KindSpec(
        "ServiceMonitor", "monitoring.coreos.com", ("v1",), "servicemonitors", MONITORING, read=True
    ),
    KindSpec("PodMonitor", "monitoring.coreos.com", ("v1",), "podmonitors", MONITORING, read=True),
    KindSpec("Prometheus", "monitoring.coreos.com", ("v1",), "prometheuses", MONITORING, read=True),
    KindSpec("Service", "", ("v1",), "services", NETWORK, read=True),
    KindSpec("Endpoints", "", ("v1",), "endpoints", NETWORK),
    KindSpec("EndpointSlice", "discovery.k8s.io", ("v1",), "endpointslices", NETWORK),
    KindSpec("Namespace", "", ("v1",), "namespaces", CONFIG, read=True),
    # The model server pods an endpoint picker routes to (Gateway API Inference Extension):
    # read for the trace of a query on a pool's series.
    KindSpec(
        "InferencePool",
        "inference.networking.k8s.io",
        ("v1",),
        "inferencepools",
        NETWORK,
        "inferencepool",
        _inference_pool,
        read=True,
    ),
    KindSpec("PodMonitoring", "monitoring.googleapis.com", ("v1",), "podmonitorings", MONITORING),
    KindSpec(
        "ClusterPodMonitoring",
        "monitoring.googleapis.com",
        ("v1",),
        "clusterpodmonitorings",
        MONITORING,
    ),
)

_BY_GROUP_KIND: dict[tuple[str, str], KindSpec] = {(s.group, s.kind): s for s in KINDS}
_BY_KIND_ANY_GROUP: dict[str, KindSpec] = {s.kind: s for s in KINDS if s.any_group}

# The rule scopes that iterate views of kinds, in KINDS order, one per scope.
VIEW_SCOPES: tuple[str, ...] = tuple(dict.fromkeys(s.scope for s in KINDS if s.scope))


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def spec_of(api_version: str, kind: str) -> KindSpec | None:
    """The spec of an object's kind; None for kinds gpulint does not know."""
    found = _BY_GROUP_KIND.get((group_of(api_version), kind))
    if found is None:
        found = _BY_KIND_ANY_GROUP.get(kind)
    return found


def spec_for(manifest: Manifest) -> KindSpec | None:
    return spec_of(manifest.api_version, manifest.kind)


def evaluated_kinds() -> frozenset[tuple[str, str]]:
    """(API group, kind) of the objects the admission webhook evaluates, any version."""
    return frozenset((s.group, s.kind) for s in KINDS if s.evaluated)


def read_specs() -> tuple[KindSpec, ...]:
    """The kinds cluster mode lists once besides the watched ones (the scrape chain)."""
    return tuple(s for s in KINDS if s.read and not s.watched)


def watched_specs() -> tuple[KindSpec, ...]:
    """The kinds cluster mode and the webhook list and watch (ConfigMaps apart: they are read
    through selectors, see ``gpulint.cluster.kinds``)."""
    return tuple(s for s in KINDS if s.watched)


def build_view(manifest: Manifest, context: ViewContext) -> KindView | None:
    """The view rules read ``manifest`` through; None for kinds without one."""
    spec = spec_for(manifest)
    if spec is None or spec.view is None or spec.scope is None:
        return None
    return spec.view(manifest, context)
