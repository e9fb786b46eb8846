"""Gateway API Inference Extension InferencePool: the model server pods an endpoint picker
routes to, and whose load llm-d's autoscaling reads.

Facts (kubernetes-sigs/gateway-api-inference-extension@84436a9):

* ``inference.networking.k8s.io/v1`` InferencePool since GIE v1.0.0 (api/v1/
  inferencepool_types.go): ``spec.selector.matchLabels`` (only ``matchLabels``: api/v1/
  shared_types.go ``LabelSelector``) selects the model server pods, ``targetPorts`` the ports
  they serve on. (The earlier ``inference.networking.x-k8s.io/v1alpha2`` InferencePool, which
  KServe's LLMInferenceService still makes through a local shim, kserve/kserve@aaac4e2:
  pkg/apis/gie/v1alpha2pool, is not read.)
* The endpoint picker (EPP) labels its pool-level series with the pool's name
  (``inference_pool``); llm-d's autoscaling guides scale on them with KEDA, e.g.
  ``llm_d_epp_flow_control_pool_saturation{inference_pool="..."}`` (llm-d/llm-d#2051).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpulint.input.document import Manifest, as_dict
from gpulint.kinds.view import KindView
from gpulint.kinds.workload import PodTemplate

INFERENCE_POOL_KIND = "InferencePool"
GIE_GROUP = "inference.networking.k8s.io"
POOL_LABEL = "inference_pool"


class InferencePool(KindView):
    """An InferencePool: its label selector, and whether a pod template's pods are in it."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        spec = as_dict(manifest.data.get("spec"))
        labels = as_dict(as_dict(spec.get("selector")).get("matchLabels"))
        self.match_labels: dict[str, str] = {
            str(k): str(v) for k, v in labels.items() if isinstance(v, str | int)
        }

    def selects(self, template: PodTemplate) -> bool:
        """Are the pods of ``template`` in the pool (every label of the selector on them)?"""
        if not self.match_labels:
            return False
        labels = template.labels
        return all(str(labels.get(key)) == value for key, value in self.match_labels.items())

    def metric_source(self, series: str, labels: Mapping[str, str]) -> str | None:
        if labels.get(POOL_LABEL) != self.name:
            return None
        if self.namespace and labels.get("namespace") not in (None, self.namespace):
            return None
        where = f"{self.namespace}/" if self.namespace else ""
        return (
            f"{series} is the endpoint picker's, for InferencePool {where}{self.name} (the "
            f"model server pods with {self.describe_selector() or 'no selector'})"
        )

    def describe_selector(self) -> str:
        return ",".join(f"{key}={value}" for key, value in self.match_labels.items())


def is_inference_pool(manifest: Manifest) -> bool:
    return manifest.kind == INFERENCE_POOL_KIND and manifest.group == GIE_GROUP
