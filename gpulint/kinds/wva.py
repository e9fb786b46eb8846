"""llm-d Workload Variant Autoscaler: the VariantAutoscaling object and the replica count it
publishes.

Facts (llm-d/llm-d-workload-variant-autoscaler@b08b1c7):

* ``llmd.ai/v1alpha1`` VariantAutoscaling (api/v1alpha1/variantautoscaling_types.go):
  ``scaleTargetRef`` (an autoscaling/v1 CrossVersionObjectReference), ``modelID`` and
  ``variantCost``. WVA sets no replicas itself: it computes how many replicas the target
  should have and publishes them as the gauge ``wva_desired_replicas`` (beside
  ``wva_current_replicas`` and ``wva_desired_ratio``), labelled ``variant_name`` (the
  VariantAutoscaling's name), ``namespace`` and ``accelerator_type``
  (internal/constants/metrics.go). Prometheus stores the ``namespace`` label as
  ``exported_namespace`` when it scrapes WVA's endpoint (config/samples/
  prometheus-adapter-values.yaml selects on it).
* An HPA reads the gauge as an External metric through prometheus-adapter, or KEDA queries it
  (docs/integrations/hpa-integration.md, keda-integration.md). It is a replica count: WVA's
  own HPA sample reads it with an ``AverageValue`` target of 1 (config/samples/
  hpa-integration.yaml), so the HPA asks for as many replicas as the gauge says.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpulint.input.document import Manifest, as_dict
from gpulint.kinds.scaletarget import TargetRef, named_target
from gpulint.kinds.view import KindView

WVA_GROUP = "llmd.ai"
VARIANT_AUTOSCALING_KIND = "VariantAutoscaling"
# The gauges WVA publishes per variant, and the label that names the variant.
REPLICA_GAUGES = ("wva_desired_replicas", "wva_current_replicas")
PUBLISHED = (*REPLICA_GAUGES, "wva_desired_ratio")
# Where Prometheus keeps WVA's namespace label: exported_namespace behind a ServiceMonitor
# with honorLabels false (WVA's samples select on it), namespace otherwise.
NAMESPACE_LABELS = ("exported_namespace", "namespace")
VARIANT_LABEL = "variant_name"


class VariantAutoscaling(KindView):
    """A VariantAutoscaling. Of the kinds protocol it answers ``target_refs``: it acts on its
    target (WVA sizes it) without setting its replicas, which an HPA or KEDA reading
    ``wva_desired_replicas`` does."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        spec = as_dict(manifest.data.get("spec"))
        self.spec = spec
        self.target_ref: TargetRef | None = named_target(spec)

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        model = self.spec.get("modelID")
        of = f" (model {model})" if isinstance(model, str) and model else ""
        return f"VariantAutoscaling {where}{self.name}{of}"

    def metric_source(self, series: str, labels: Mapping[str, str]) -> str | None:
        if series not in PUBLISHED or labels.get(VARIANT_LABEL) != self.name:
            return None
        namespaces = {labels[key] for key in NAMESPACE_LABELS if key in labels}
        if self.namespace and namespaces and self.namespace not in namespaces:
            return None
        ref = self.target_ref
        sizes = f", which sizes {ref.kind} {ref.name}" if ref is not None else ""
        return (
            f"{series} is published by llm-d's Workload Variant Autoscaler for "
            f"{self.describe()}{sizes}"
        )

    def target_refs(self) -> list[TargetRef]:
        return [self.target_ref] if self.target_ref is not None else []


def is_variant_autoscaling(manifest: Manifest) -> bool:
    return manifest.kind == VARIANT_AUTOSCALING_KIND and manifest.group == WVA_GROUP
