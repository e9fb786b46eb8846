"""KServe LLMInferenceService: the workloads KServe makes for it and the autoscaler of each.

Facts (kserve/kserve@aaac4e2, v0.20.0 and later; the kind exists since v0.17.0):

* ``serving.kserve.io`` serves ``v1alpha2`` (the storage version) and ``v1alpha1``; both
  carry the same workload settings (pkg/apis/serving/v1alpha{1,2}/llm_inference_service_types.go).
  The spec holds one workload inline (``replicas``, ``scaling``, ``template``, ``worker``,
  ``labels``, ``annotations``: ``WorkloadSpec``), the decode workload when ``prefill`` is set,
  and ``prefill`` another ``WorkloadSpec``. ``template`` and ``worker`` are pod specs (not pod
  templates): the head pod and, with ``worker``, the workers of a multi-node workload.
* What KServe makes (pkg/controller/v1alpha2/llmisvc/workload_single_node.go
  ``mainDeploymentName``/``prefillDeploymentName``, workload_multi_node.go
  ``mainLWSName``/``prefillLWSName``): a Deployment ``<name>-kserve`` and
  ``<name>-kserve-prefill``, or with ``worker`` a LeaderWorkerSet ``<name>-kserve-mn`` and
  ``<name>-kserve-mn-prefill``, each name made by knative.dev/pkg kmeta.ChildName.
* ``replicas`` is written to the workload on every reconcile when set; only when it is unset
  does KServe keep the replicas the workload has (workload.go ``PreserveDeploymentReplicas``,
  ``PreserveLWSReplicas``: "when the owner doesn't explicitly set it").
* ``scaling`` (``ScalingSpec``): ``minReplicas`` (default 1), ``maxReplicas`` (required), and
  either ``wva`` (the Workload Variant Autoscaler decides, an actuator applies: ``wva.hpa``
  with an optional ``behavior``, or ``wva.keda`` with a ScaledObject's polling, cooldown,
  idle, fallback and advanced settings) or ``keda`` (those settings plus ``triggers``: a
  ScaledObject of the user's triggers, no WVA). The CRD rejects ``replicas`` beside
  ``scaling`` in one workload ("replicas and scaling are mutually exclusive", an
  x-kubernetes-validations rule of ``WorkloadSpec`` since v0.17.0).
* The actuators (pkg/controller/v1alpha2/llmisvc/scaling.go): ``wva.hpa`` makes an HPA
  ``<name>-kserve-hpa`` (``-kserve-prefill-hpa``) on the workload with ``minReplicas``
  (default 1), ``maxReplicas``, the given behavior and one External metric
  ``wva_desired_replicas`` selected by ``variant_name: <the HPA's name>`` with a ``Value``
  target of 1 (``expectedHPA``), read through prometheus-adapter; ``wva.keda`` and ``keda``
  make a ScaledObject ``<name>-kserve-keda`` (``-kserve-prefill-keda``); for ``wva.keda`` its
  one trigger queries ``wva_desired_replicas{variant_name="<the ScaledObject's name>",
  exported_namespace="<namespace>"}`` with threshold 1 at the Prometheus of KServe's
  ``autoscaling-wva-controller-config`` (``expectedScaledObject``, ``prometheusTrigger``).
  The annotation ``serving.kserve.io/stop: "true"`` removes the actuators
  (``utils.GetForceStopRuntime``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any, NamedTuple

from gpulint.chain.address import PrometheusUrl
from gpulint.input.document import Manifest, Path, as_dict
from gpulint.kinds.dra import pod_claims
from gpulint.kinds.generated import GeneratedHPA, GeneratedScaledObject
from gpulint.kinds.hpa import HpaMetric, MetricTarget
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef, WrittenReplicas
from gpulint.kinds.scaling import ScalingRange, replica_count
from gpulint.kinds.view import GeneratedWorkload, KindView, TraceSource
from gpulint.kinds.workload import PodTemplate, containers_of

LLMISVC_KIND = "LLMInferenceService"
KSERVE_GROUP = "serving.kserve.io"
STOP_ANNOTATION = "serving.kserve.io/stop"
WVA_METRIC = "wva_desired_replicas"
LWS_API = "leaderworkerset.x-k8s.io/v1"
# The CRD's refusal of replicas beside scaling in one workload (WorkloadSpec's
# x-kubernetes-validations rule, llm_inference_service_types.go).
REPLICAS_REFUSED = (
    "replicas and scaling are mutually exclusive; use scaling for autoscaled deployments or "
    "replicas for static deployments"
)

# knative.dev/pkg kmeta.ChildName: names longer than 63 characters keep a prefix of the parent
# and the MD5 of the whole parent, then the suffix.
_LONGEST = 63
_HEAD = _LONGEST - 32


def child_name(parent: str, suffix: str) -> str:
    """``parent + suffix``, shortened as knative.dev/pkg kmeta.ChildName shortens it."""
    if len(parent) <= _LONGEST - len(suffix):
        return parent + suffix
    if _HEAD - len(suffix) <= 0:
        digest = hashlib.md5((parent + suffix).encode(), usedforsecurity=False).hexdigest()
        shortened = parent[:_HEAD] + digest
        room = _LONGEST - len(shortened)
        return (shortened + suffix[:room] if room > 0 else shortened).rstrip("-.")
    digest = hashlib.md5(parent.encode(), usedforsecurity=False).hexdigest()
    return parent[: _HEAD - len(suffix)] + digest + suffix


class Part(NamedTuple):
    """One workload of an LLMInferenceService: the decode (main) one, or the prefill one."""

    role: str  # "main" | "prefill"
    path: Path  # where its WorkloadSpec is written: ("spec",) or ("spec", "prefill")
    data: dict[str, Any]

    @property
    def multi_node(self) -> bool:
        return isinstance(self.data.get("worker"), dict)

    @property
    def scaling(self) -> dict[str, Any] | None:
        scaling = self.data.get("scaling")
        return scaling if isinstance(scaling, dict) else None


class LLMInferenceService(KindView):
    """An LLMInferenceService. Of the kinds protocol it answers ``pod_templates`` (each
    workload's head and worker pod specs), ``generated_workloads`` (``<name>-kserve``,
    ``<name>-kserve-prefill``), ``replica_claims`` (the actuator ``scaling`` makes, on its
    workload), ``written_replicas`` (a workload's ``replicas``, which KServe writes on every
    reconcile), ``generated_autoscalers`` (that actuator, an HPA or a ScaledObject), the
    metrics its HPA reads through prometheus-adapter, the prometheus triggers and Prometheus
    addresses of its ScaledObject, and their traces."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        spec = as_dict(manifest.data.get("spec"))
        self.spec = spec
        self.parts: list[Part] = [Part("main", ("spec",), spec)]
        prefill = spec.get("prefill")
        if isinstance(prefill, dict):
            self.parts.append(Part("prefill", ("spec", "prefill"), prefill))
        self.stopped = str(manifest.annotations.get(STOP_ANNOTATION, "")).lower() == "true"
        self._autoscalers: list[tuple[Part, GeneratedHPA | GeneratedScaledObject]] | None = None
        # Its HPA reads wva_desired_replicas through prometheus-adapter (wva.hpa).
        self.reads_metrics_api = any(isinstance(made, GeneratedHPA) for _, made in self.actuators())

    # --- names -------------------------------------------------------------------------------

    def workload_ref(self, part: Part) -> TargetRef:
        """The Deployment (or LeaderWorkerSet) KServe makes for a workload, as a ref."""
        suffix = "-kserve" if part.role == "main" else "-kserve-prefill"
        if part.multi_node:
            suffix = "-kserve-mn" if part.role == "main" else "-kserve-mn-prefill"
            return TargetRef(
                "LeaderWorkerSet", child_name(self.name, suffix), LWS_API, (*part.path, "worker")
            )
        return TargetRef("Deployment", child_name(self.name, suffix), "apps/v1", part.path)

    def hpa_name(self, part: Part) -> str:
        return child_name(
            self.name, "-kserve-hpa" if part.role == "main" else "-kserve-prefill-hpa"
        )

    def scaled_object_name(self, part: Part) -> str:
        suffix = "-kserve-keda" if part.role == "main" else "-kserve-prefill-keda"
        return child_name(self.name, suffix)

    def describe_part(self, part: Part) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        role = "" if part.role == "main" else " (prefill)"
        return f"LLMInferenceService {where}{self.name}{role}"

    # --- pods --------------------------------------------------------------------------------

    def part_templates(self, part: Part) -> list[PodTemplate]:
        """The head pod spec (``template``) and, multi-node, the workers' (``worker``)."""
        metadata = {
            key: part.data[key]
            for key in ("labels", "annotations")
            if isinstance(part.data.get(key), dict)
        }
        found = []
        for key in ("template", "worker"):
            pod = part.data.get(key)
            if not isinstance(pod, dict):
                continue
            path: Path = (*part.path, key)
            containers = containers_of(pod, path)
            label = f"{'prefill ' if part.role == 'prefill' else ''}{key}"
            claims = pod_claims(pod, path, containers)
            found.append(PodTemplate(path, metadata, containers, label, claims, self.manifest))
        return found

    # --- scaling -----------------------------------------------------------------------------

    def scaling_range(self, part: Part) -> ScalingRange | None:
        """``minReplicas`` (default 1) to ``maxReplicas`` of a workload's ``scaling``."""
        scaling = part.scaling
        if scaling is None:
            return None
        minimum = replica_count(scaling.get("minReplicas"), 1)
        maximum = replica_count(scaling.get("maxReplicas"), None)
        return ScalingRange(
            minimum, maximum, self.describe_part(part), (*part.path, "scaling", "maxReplicas")
        )

    def actuators(self) -> list[tuple[Part, GeneratedHPA | GeneratedScaledObject]]:
        """The HPA or ScaledObject KServe makes for each workload with ``scaling``."""
        if self._autoscalers is None:
            self._autoscalers = []
            for part in self.parts:
                made = None if self.stopped else self._actuator(part)
                if made is not None:
                    self._autoscalers.append((part, made))
        return self._autoscalers

    def _actuator(self, part: Part) -> GeneratedHPA | GeneratedScaledObject | None:
        scaling = part.scaling
        scaling_range = self.scaling_range(part)
        if scaling is None or scaling_range is None:
            return None
        base: Path = (*part.path, "scaling")
        ref = self.workload_ref(part)
        wva = scaling.get("wva")
        if isinstance(wva, dict) and isinstance(wva.get("hpa"), dict):
            return self._wva_hpa(
                part, ref, as_dict(wva.get("hpa")), (*base, "wva", "hpa"), scaling_range
            )
        if isinstance(wva, dict) and isinstance(wva.get("keda"), dict):
            settings = as_dict(wva.get("keda"))
            at: Path = (*base, "wva", "keda")
            name = self.scaled_object_name(part)
            where = self.namespace or "<namespace>"
            trigger = {
                "type": "prometheus",
                "name": "wva-desired-replicas",
                "metadata": {
                    "query": f'{WVA_METRIC}{{variant_name="{name}",exported_namespace="{where}"}}',
                    "threshold": "1",
                },
            }
            spec = {**settings, "triggers": [trigger]}
            return GeneratedScaledObject(
                self.manifest,
                name,
                ref,
                spec,
                at,
                scaling_range,
                triggers_at=at,
                behavior_at=(*at, "advanced", "horizontalPodAutoscalerConfig", "behavior"),
                written_at=part.path,
            )
        keda = scaling.get("keda")
        if isinstance(keda, dict):
            at = (*base, "keda")
            # KServe writes minReplicaCount as minReplicas or 1, never KEDA's default 0
            # (scaling.go expectedDirectScaledObject: ptr.Deref(scaling.MinReplicas, 1)).
            return GeneratedScaledObject(
                self.manifest,
                self.scaled_object_name(part),
                ref,
                keda,
                at,
                scaling_range,
                behavior_at=(*at, "advanced", "horizontalPodAutoscalerConfig", "behavior"),
                written_at=part.path,
            )
        return None

    def _wva_hpa(
        self, part: Part, ref: TargetRef, settings: dict[str, Any], at: Path, scaling: ScalingRange
    ) -> GeneratedHPA:
        name = self.hpa_name(part)
        # One External metric: wva_desired_replicas of this HPA's variant, target Value 1.
        metric = HpaMetric(
            0,
            "External",
            at,
            WVA_METRIC,
            at,
            MetricTarget("Value", 1, None, None, at),
            {"matchLabels": {"variant_name": name}},
        )
        return GeneratedHPA(
            self.manifest,
            name,
            ref,
            settings,
            at,
            scaling,
            metrics=[metric],
            metric_names_written=False,
            written_at=part.path,
        )

    # --- the kind protocol (gpulint.kinds.view) ---------------------------------------------

    def pod_templates(self) -> list[PodTemplate]:
        found = self.manifest.templates
        if found is None:
            found = self.manifest.templates = [
                template for part in self.parts for template in self.part_templates(part)
            ]
        return found

    def generated_workloads(self) -> list[GeneratedWorkload]:
        return [
            GeneratedWorkload(self.workload_ref(part).name, part.role, self.part_templates(part))
            for part in self.parts
        ]

    def generated_names(self) -> list[str]:
        return [self.workload_ref(part).name for part in self.parts]

    def replica_claims(self) -> list[ReplicaClaim]:
        found = []
        for part, made in self.actuators():
            if isinstance(made, GeneratedHPA):
                hpa_name, what = made.name, f"the HPA {made.name}"
            else:
                hpa_name, what = made.hpa_name, f"the ScaledObject {made.name}"
            found.append(
                ReplicaClaim(
                    LLMISVC_KIND,
                    (*part.path, "scaling"),
                    hpa_name,
                    f"{what} that KServe makes for {self.describe_part(part)} (spec.scaling)",
                    ref=made.target_ref,
                    implicit=True,
                    note=f"{'.'.join(str(s) for s in (*part.path, 'scaling'))}",
                )
            )
        return found

    def scaling_range_of(self, workload: str) -> ScalingRange | None:
        for part in self.parts:
            if self.workload_ref(part).name == workload:
                return self.scaling_range(part)
        return None

    def written_replicas(self, workload: str) -> WrittenReplicas | None:
        for part in self.parts:
            if self.workload_ref(part).name == workload and "replicas" in part.data:
                return WrittenReplicas((*part.path, "replicas"), "KServe", REPLICAS_REFUSED)
        return None

    def generated_autoscalers(self) -> list[KindView]:
        return [made for _, made in self.actuators()]

    def adapter_reads(self) -> list[Any]:
        return [
            m
            for _, made in self.actuators()
            if isinstance(made, GeneratedHPA)
            for m in made.adapter_reads()
        ]

    def scope_items(self) -> Iterator[tuple[str, Any]]:
        for _, made in self.actuators():
            yield "autoscaler", made
            if isinstance(made, GeneratedHPA):
                yield "metrics-reader", made
            else:
                for trigger in made.prometheus_triggers:
                    yield "prometheus-query", trigger

    def prometheus_urls(self) -> list[PrometheusUrl]:
        return [
            url
            for _, made in self.actuators()
            if isinstance(made, GeneratedScaledObject)
            for url in made.prometheus_urls()
        ]

    def trace_sources(self) -> list[TraceSource]:
        return [source for _, made in self.actuators() for source in made.trace_sources()]


def is_llm_inference_service(manifest: Manifest) -> bool:
    return manifest.kind == LLMISVC_KIND and manifest.group == KSERVE_GROUP
