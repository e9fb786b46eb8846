"""NVIDIA NIM operator NIMService: the Deployment it makes and the HPA of ``spec.scale``.

Facts (NVIDIA/k8s-nim-operator@f63f74d):

* ``apps.nvidia.com/v1alpha1`` NIMService (api/apps/v1alpha1/nimservice_types.go). The model
  server is one container, ``<name>-ctr`` (``GetContainerName``), whose resources are
  ``spec.resources`` (a core/v1 ResourceRequirements).
* In the standalone platform (``spec.inferencePlatform``, default ``standalone``; ``kserve``
  makes a KServe InferenceService instead) the operator makes a Deployment named after the
  NIMService (``GetDeploymentParams``), or with ``spec.multiNode`` a LeaderWorkerSet
  ``<name>-lws`` (``GetLWSName``).
* ``spec.scale`` (api/apps/v1alpha1/common_types.go ``Autoscaling``): with ``enabled: true``
  the operator makes an HPA named after the NIMService on ``apps/v1`` Deployment ``<name>``
  with ``spec.scale.hpa``'s ``minReplicas`` (default 1), ``maxReplicas``, ``metrics`` and
  ``behavior`` as written (``GetHPAParams``; internal/controller/platform/standalone/
  nimservice.go syncs it). An HPA without metrics is defaulted by the API server to CPU 80%.
* ``spec.replicas`` beside ``scale.enabled: true`` is rejected by the CRD ("spec.replicas
  cannot be set when spec.scale.enabled is true", an x-kubernetes-validations rule since
  v3.1.0). With autoscaling off, the operator writes ``spec.replicas`` back to the Deployment
  whenever they differ, checking again every 5 s (nimservice.go ``deploymentReplicasOutOfSync``,
  ``autoscalingDisableRequeue``; not for multi-node).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpulint.input.document import Manifest, Path, as_dict
from gpulint.kinds.dra import pod_claims
from gpulint.kinds.generated import GeneratedHPA
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef, WrittenReplicas
from gpulint.kinds.scaling import ScalingRange, replica_count
from gpulint.kinds.view import GeneratedWorkload, KindView, TraceSource
from gpulint.kinds.workload import Container, PodTemplate

NIM_GROUP = "apps.nvidia.com"
NIMSERVICE_KIND = "NIMService"
SCALE_HPA: Path = ("spec", "scale", "hpa")
# The CRD's refusal of spec.replicas beside spec.scale.enabled (an x-kubernetes-validations
# rule of NIMServiceSpec, nimservice_types.go, since v3.1.0).
REPLICAS_REFUSED = "spec.replicas cannot be set when spec.scale.enabled is true"


class NIMService(KindView):
    """A NIMService. Of the kinds protocol it answers ``pod_templates`` (its model server),
    ``generated_workloads`` (the Deployment ``<name>``), ``replica_claims`` and
    ``generated_autoscalers`` (the HPA of ``spec.scale``), ``written_replicas``
    (``spec.replicas``, which the operator writes back while it does not autoscale), the
    metrics that HPA reads through prometheus-adapter and their traces."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        spec = as_dict(manifest.data.get("spec"))
        self.spec = spec
        self.scale = as_dict(spec.get("scale"))
        self.multi_node = isinstance(spec.get("multiNode"), dict)
        platform = spec.get("inferencePlatform")
        self.standalone = platform in (None, "", "standalone")
        # On the KServe platform the operator makes an InferenceService instead, from
        # spec.annotations and some of spec.scale (GetInferenceServiceParams; GL133).
        self.on_kserve = platform == "kserve"
        self.annotations = as_dict(spec.get("annotations"))
        enabled = self.scale.get("enabled")
        self.scale_enabled = enabled is True or str(enabled).lower() == "true"
        self.autoscaled = self.standalone and self.scale_enabled
        self._hpa: GeneratedHPA | None = self._generated_hpa() if self.autoscaled else None
        self.reads_metrics_api = self._hpa is not None and bool(self._hpa.adapter_reads())

    def _generated_hpa(self) -> GeneratedHPA:
        settings = as_dict(self.scale.get("hpa"))
        minimum = replica_count(settings.get("minReplicas"), 1)
        maximum = replica_count(settings.get("maxReplicas"), None)
        scaling = ScalingRange(
            minimum, maximum, f"NIMService {self.name}", (*SCALE_HPA, "maxReplicas")
        )
        ref = TargetRef("Deployment", self.name, "apps/v1", SCALE_HPA)
        return GeneratedHPA(self.manifest, self.name, ref, settings, SCALE_HPA, scaling)

    def describe(self) -> str:
        """``nim-service/llama``."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def hpa(self) -> GeneratedHPA | None:
        """The HPA the operator makes from ``spec.scale``, when autoscaling is enabled."""
        return self._hpa

    @property
    def workload(self) -> TargetRef | None:
        """The Deployment the operator makes (None: a LeaderWorkerSet, or KServe's)."""
        if not self.standalone or self.multi_node:
            return None
        return TargetRef("Deployment", self.name, "apps/v1", ("spec",))

    # --- the kind protocol (gpulint.kinds.view) ---------------------------------------------

    def pod_templates(self) -> list[PodTemplate]:
        """Its model server: one container whose resources are ``spec.resources``."""
        found = self.manifest.templates
        if found is None:
            container = Container(f"{self.name}-ctr", ("spec",), self.spec)
            metadata = {"labels": as_dict(self.spec.get("labels"))}
            claims = pod_claims({}, ("spec",), [container])
            found = self.manifest.templates = [
                PodTemplate(("spec",), metadata, [container], "model server", claims, self.manifest)
            ]
        return found

    def generated_workloads(self) -> list[GeneratedWorkload]:
        workload = self.workload
        if workload is None:
            return []
        return [GeneratedWorkload(workload.name, "model server", self.pod_templates())]

    def generated_names(self) -> list[str]:
        return [w.name for w in self.generated_workloads()]

    def replica_claims(self) -> list[ReplicaClaim]:
        hpa = self._hpa
        if hpa is None or hpa.target_ref is None:
            return []
        return [
            ReplicaClaim(
                NIMSERVICE_KIND,
                ("spec", "scale"),
                hpa.name,
                f"the HPA {hpa.name} that the NIM operator makes for NIMService {self.name} "
                "(spec.scale)",
                ref=hpa.target_ref,
                implicit=True,
                note="spec.scale",
            )
        ]

    def scaling_range_of(self, workload: str) -> ScalingRange | None:
        if self._hpa is not None and workload == self.name:
            return self._hpa.scaling_range()
        return None

    def written_replicas(self, workload: str) -> WrittenReplicas | None:
        if workload != self.name or "replicas" not in self.spec or self.multi_node:
            return None
        return WrittenReplicas(("spec", "replicas"), "the NIM operator", REPLICAS_REFUSED)

    def generated_autoscalers(self) -> list[KindView]:
        return [self._hpa] if self._hpa is not None else []

    def adapter_reads(self) -> list[Any]:
        return list(self._hpa.adapter_reads()) if self._hpa is not None else []

    def scope_items(self) -> Iterator[tuple[str, Any]]:
        if self._hpa is not None:
            yield "autoscaler", self._hpa
            yield "metrics-reader", self._hpa

    def trace_sources(self) -> list[TraceSource]:
        return self._hpa.trace_sources() if self._hpa is not None else []


def is_nim_service(manifest: Manifest) -> bool:
    return manifest.kind == NIMSERVICE_KIND and manifest.group == NIM_GROUP
