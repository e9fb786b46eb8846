"""KubeAI Model: a model server KubeAI runs and scales itself.

Facts (kubeai-project/kubeai@f442a2c, chart 0.22.1):

* ``kubeai.org/v1`` Model (api/k8s/v1/model_types.go). KubeAI's controller makes the model
  server's Pods itself (internal/modelcontroller), no Deployment; the Model serves the
  ``/scale`` subresource on ``spec.replicas`` (``+kubebuilder:subresource:scale``), so an
  HPA or a KEDA ScaledObject can name the Model as its target.
* Unless ``autoscalingDisabled: true``, KubeAI's own autoscaler writes ``spec.replicas``
  through ``/scale`` from the active requests it counts (internal/modelautoscaler,
  internal/modelclient/scale.go ``Scale``), between ``minReplicas`` (0 by default) and
  ``maxReplicas`` (no bound when unset), aiming at ``targetRequests`` per Pod (default 100)
  and waiting ``scaleDownDelaySeconds`` (default 30) before scaling down; its proxy also
  scales a Model at zero to one replica when a request arrives (``ScaleAtLeastOneReplica``).
  With ``autoscalingDisabled`` it leaves ``spec.replicas`` alone ("will stop the controller
  from managing the replicas").
* The GPUs come from ``resourceProfile`` (``<profile>:<count>``), a profile of KubeAI's
  system configuration (the chart's ``resourceProfiles``), not from the Model: gpulint does
  not read them from the Model.
"""

from __future__ import annotations

from gpulint.input.document import Manifest, as_dict
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef
from gpulint.kinds.scaling import ScalingRange, replica_count
from gpulint.kinds.view import KindView

KUBEAI_GROUP = "kubeai.org"
MODEL_KIND = "Model"
DEFAULT_TARGET_REQUESTS = 100
DEFAULT_SCALE_DOWN_DELAY_S = 30


class KubeAIModel(KindView):
    """A KubeAI Model. Of the kinds protocol it answers ``replica_claims``: KubeAI's own
    autoscaler claims the Model's replicas, unless ``autoscalingDisabled``."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        spec = as_dict(manifest.data.get("spec"))
        self.spec = spec
        disabled = spec.get("autoscalingDisabled")
        self.autoscaling_disabled = disabled is True or str(disabled).lower() == "true"

    @property
    def ref(self) -> TargetRef:
        """The Model as an autoscaler's scaleTargetRef names it (its ``/scale``)."""
        return TargetRef(MODEL_KIND, self.name, self.manifest.api_version, ("spec",))

    def scaling_range(self) -> ScalingRange:
        minimum = replica_count(self.spec.get("minReplicas"), 0)
        maximum = replica_count(self.spec.get("maxReplicas"), None)
        path = ("spec", "maxReplicas") if "maxReplicas" in self.spec else ("spec",)
        return ScalingRange(minimum, maximum, f"KubeAI Model {self.name}", path)

    def settings(self) -> str:
        """``targetRequests 100, 0 or more replicas``: what KubeAI scales it by."""
        target = self.spec.get("targetRequests", DEFAULT_TARGET_REQUESTS)
        return f"targetRequests {target}, {self.scaling_range().describe()}"

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"KubeAI's own autoscaler of Model {where}{self.name} ({self.settings()})"

    # --- the kind protocol (gpulint.kinds.view) ---------------------------------------------

    def replica_claims(self) -> list[ReplicaClaim]:
        if self.autoscaling_disabled:
            return []
        return [
            ReplicaClaim(
                MODEL_KIND,
                ("spec",),
                self.name,
                self.describe(),
                ref=self.ref,
                implicit=True,
                note="autoscalingDisabled is not set",
            )
        ]

    def scaling_range_of(self, workload: str) -> ScalingRange | None:
        return self.scaling_range() if workload == self.name else None

    def target_refs(self) -> list[TargetRef]:
        return [self.ref]


def is_kubeai_model(manifest: Manifest) -> bool:
    return manifest.kind == MODEL_KIND and manifest.group == KUBEAI_GROUP
