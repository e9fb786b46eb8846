"""vLLM production-stack VLLMRuntime: the Deployment its operator makes and the KEDA
ScaledObject of ``autoscalingConfig``.

Facts (vllm-project/production-stack@a6c01db, operator/):

* ``production-stack.vllm.ai/v1alpha1`` VLLMRuntime (operator/api/v1alpha1/
  vllmruntime_types.go), with a ``/scale`` subresource on ``spec.deploymentConfig.replicas``.
* The operator makes a Deployment named after the VLLMRuntime whose replicas are
  ``deploymentConfig.replicas``, rewritten whenever the Deployment's differ
  (operator/internal/controller/vllmruntime_controller.go ``deploymentForVLLMRuntime``,
  ``deploymentNeedsUpdate``: "Compare replicas"). Its container ``vllm`` requests and limits
  ``deploymentConfig.resources.gpu`` of ``gpuType`` (default ``nvidia.com/gpu``).
* ``autoscalingConfig.enabled`` makes a KEDA ScaledObject ``<name>-scaledobject`` whose target
  is the VLLMRuntime itself (its ``/scale``), ``minReplicaCount`` ``minReplicas`` (default 1),
  ``maxReplicaCount`` ``maxReplicas``, ``pollingInterval`` (default 15), ``cooldownPeriod``
  ``scaleDownPolicy.scaleToZeroDelaySeconds`` (default 1800), a behavior of Pods policies
  from ``scaleUpPolicy`` and ``scaleDownPolicy``, and four prometheus triggers at
  ``triggers.prometheusAddress`` (``reconcileScaledObject``): a keep-alive on the router's
  request counter (``metricType: Value``, threshold 1) and, per pod, the running requests and
  the generation and prompt token rates of the Service's job, against
  ``requestsRunningThreshold`` (default 5), ``generationTokensThreshold`` and
  ``promptTokensThreshold`` (default 100). The defaults are the CRD's (``+kubebuilder:default``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpulint.chain.address import PrometheusUrl
from gpulint.input.document import Manifest, Path, as_dict
from gpulint.kinds.generated import GeneratedScaledObject
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef, WrittenReplicas
from gpulint.kinds.scaling import ScalingRange, replica_count
from gpulint.kinds.view import GeneratedWorkload, KindView, TraceSource
from gpulint.kinds.workload import Container, PodTemplate

PRODUCTION_STACK_GROUP = "production-stack.vllm.ai"
VLLMRUNTIME_KIND = "VLLMRuntime"
AUTOSCALING: Path = ("spec", "autoscalingConfig")
DEFAULT_PROMETHEUS = "http://kube-prom-stack-kube-prome-prometheus.monitoring.svc:9090"


def _number(settings: dict[str, Any], key: str, default: int) -> int:
    value = replica_count(settings.get(key), default)
    return value if value is not None else default


class VLLMRuntime(KindView):
    """A VLLMRuntime. Of the kinds protocol it answers ``pod_templates`` (the vLLM container
    and its GPUs), ``generated_workloads`` (the Deployment ``<name>``), ``written_replicas``
    (``deploymentConfig.replicas``), and with ``autoscalingConfig.enabled``
    ``replica_claims`` and ``generated_autoscalers`` (the ScaledObject on the VLLMRuntime),
    its prometheus triggers, Prometheus address and traces."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        spec = as_dict(manifest.data.get("spec"))
        self.spec = spec
        self.deployment_config = as_dict(spec.get("deploymentConfig"))
        self.autoscaling = as_dict(spec.get("autoscalingConfig"))
        enabled = self.autoscaling.get("enabled")
        self.autoscaled = enabled is True or str(enabled).lower() == "true"
        self._scaled_object = self._generated_scaled_object() if self.autoscaled else None

    @property
    def ref(self) -> TargetRef:
        """The VLLMRuntime as its ScaledObject names it (its ``/scale``)."""
        return TargetRef(VLLMRUNTIME_KIND, self.name, self.manifest.api_version, AUTOSCALING)

    def served_model_name(self) -> str:
        """``--served-model-name=`` of ``vllmConfig.extraArgs``, else ``model.modelURL``."""
        extra = as_dict(self.spec.get("vllmConfig")).get("extraArgs")
        for arg in extra if isinstance(extra, list) else []:
            if isinstance(arg, str) and arg.startswith("--served-model-name="):
                return arg.removeprefix("--served-model-name=")
        url = as_dict(self.spec.get("model")).get("modelURL")
        return url if isinstance(url, str) else ""

    def _generated_scaled_object(self) -> GeneratedScaledObject:
        config = self.autoscaling
        minimum = replica_count(config.get("minReplicas"), 1)
        maximum = replica_count(config.get("maxReplicas"), None)
        scaling = ScalingRange(
            minimum, maximum, f"VLLMRuntime {self.name}", (*AUTOSCALING, "maxReplicas")
        )
        up = as_dict(config.get("scaleUpPolicy"))
        down = as_dict(config.get("scaleDownPolicy"))
        triggers = as_dict(config.get("triggers"))
        address = triggers.get("prometheusAddress")
        address = address if isinstance(address, str) and address else DEFAULT_PROMETHEUS
        namespace = self.namespace or "<namespace>"

        def trigger(name: str, query: str, threshold: int, value: bool = False) -> dict[str, Any]:
            found: dict[str, Any] = {"type": "prometheus"}
            if value:
                found["metricType"] = "Value"
            found["metadata"] = {
                "serverAddress": address,
                "metricName": name,
                "query": query,
                "threshold": str(threshold),
            }
            return found

        spec = {
            "pollingInterval": _number(config, "pollingInterval", 15),
            "cooldownPeriod": _number(down, "scaleToZeroDelaySeconds", 1800),
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleUp": {
                            "stabilizationWindowSeconds": _number(
                                up, "stabilizationWindowSeconds", 0
                            ),
                            "policies": [
                                {
                                    "type": "Pods",
                                    "value": _number(up, "podValue", 1),
                                    "periodSeconds": _number(up, "periodSeconds", 60),
                                }
                            ],
                        },
                        "scaleDown": {
                            "stabilizationWindowSeconds": _number(
                                down, "stabilizationWindowSeconds", 300
                            ),
                            "policies": [
                                {
                                    "type": "Pods",
                                    "value": _number(down, "podValue", 1),
                                    "periodSeconds": _number(down, "periodSeconds", 60),
                                }
                            ],
                        },
                    }
                }
            },
            "triggers": [
                trigger(
                    "vllm_incoming_keepalive",
                    f'sum(rate(vllm:num_incoming_requests_total{{namespace="{namespace}", '
                    f'model="{self.served_model_name()}"}}[2m]) > bool 0)',
                    1,
                    value=True,
                ),
                trigger(
                    "vllm_requests_running",
                    f'sum(vllm:num_requests_running{{job="{self.name}"}})',
                    _number(triggers, "requestsRunningThreshold", 5),
                ),
                trigger(
                    "vllm_generation_tokens_rate",
                    f'sum(rate(vllm:generation_tokens_total{{job="{self.name}"}}[1m]))',
                    _number(triggers, "generationTokensThreshold", 100),
                ),
                trigger(
                    "vllm_prompt_tokens_rate",
                    f'sum(rate(vllm:prompt_tokens_total{{job="{self.name}"}}[1m]))',
                    _number(triggers, "promptTokensThreshold", 100),
                ),
            ],
        }
        return GeneratedScaledObject(
            self.manifest,
            f"{self.name}-scaledobject",
            self.ref,
            spec,
            AUTOSCALING,
            scaling,
            triggers_at=(*AUTOSCALING, "triggers"),
        )

    @property
    def scaled_object(self) -> GeneratedScaledObject | None:
        return self._scaled_object

    # --- the kind protocol (gpulint.kinds.view) ---------------------------------------------

    def pod_templates(self) -> list[PodTemplate]:
        """The ``vllm`` container with the GPUs ``deploymentConfig.resources`` asks for (as
        requests and limits both, as the operator writes them)."""
        found = self.manifest.templates
        if found is None:
            resources = as_dict(self.deployment_config.get("resources"))
            gpu = resources.get("gpu")
            kind = resources.get("gpuType")
            kind = kind if isinstance(kind, str) and kind else "nvidia.com/gpu"
            asked: dict[str, Any] = {}
            if isinstance(gpu, str | int) and not isinstance(gpu, bool) and str(gpu):
                asked = {"requests": {kind: gpu}, "limits": {kind: gpu}}
            path: Path = ("spec", "deploymentConfig")
            count_at: Path = (*path, "resources", "gpu")
            container = Container("vllm", path, {"resources": asked}, count_at=count_at)
            found = self.manifest.templates = [
                PodTemplate(path, {}, [container], "vllm container", [], self.manifest)
            ]
        return found

    def generated_workloads(self) -> list[GeneratedWorkload]:
        return [GeneratedWorkload(self.name, "vllm", self.pod_templates())]

    def generated_names(self) -> list[str]:
        return [self.name]

    def replica_claims(self) -> list[ReplicaClaim]:
        made = self._scaled_object
        if made is None:
            return []
        return [
            ReplicaClaim(
                VLLMRUNTIME_KIND,
                AUTOSCALING,
                made.hpa_name,
                f"the ScaledObject {made.name} that the production-stack operator makes for "
                f"VLLMRuntime {self.name} (spec.autoscalingConfig)",
                ref=self.ref,
                implicit=True,
                note="spec.autoscalingConfig",
            )
        ]

    def scaling_range_of(self, workload: str) -> ScalingRange | None:
        if self._scaled_object is not None and workload == self.name:
            return self._scaled_object.scaling_range()
        return None

    def written_replicas(self, workload: str) -> WrittenReplicas | None:
        if workload != self.name:
            return None
        return WrittenReplicas(
            ("spec", "deploymentConfig", "replicas"),
            "the production-stack operator",
            scale_ref=self.ref,
        )

    def generated_autoscalers(self) -> list[KindView]:
        return [self._scaled_object] if self._scaled_object is not None else []

    def scope_items(self) -> Iterator[tuple[str, Any]]:
        made = self._scaled_object
        if made is not None:
            yield "autoscaler", made
            for trigger in made.prometheus_triggers:
                yield "prometheus-query", trigger

    def prometheus_urls(self) -> list[PrometheusUrl]:
        made = self._scaled_object
        return made.prometheus_urls() if made is not None else []

    def trace_sources(self) -> list[TraceSource]:
        made = self._scaled_object
        return made.trace_sources() if made is not None else []


def is_vllm_runtime(manifest: Manifest) -> bool:
    return manifest.kind == VLLMRUNTIME_KIND and manifest.group == PRODUCTION_STACK_GROUP
