"""What an object says about the workloads it acts on: a scaleTargetRef as written
(``TargetRef``), and the claims it makes on their replicas (``ReplicaClaim``), before the
inventory resolves them (``gpulint.inventory.targets``).

Views answer with these (``gpulint.kinds.view``); so does what several kinds share below the
views (KEDA's triggers, ``gpulint.kinds.triggers``), which is why they live apart from the
protocol."""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.input.document import Path, as_dict


class TargetRef(NamedTuple):
    """A scaleTargetRef: the workload an autoscaler scales."""

    kind: str
    name: str
    api_version: str
    path: Path

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0] if "/" in self.api_version else ""


def named_target(spec: dict[str, Any]) -> TargetRef | None:
    """``spec.scaleTargetRef`` of an object whose controller takes a Deployment of apps/v1
    when kind or apiVersion is left out (AIBrix's PodAutoscaler, WVA's VariantAutoscaling);
    None without a name."""
    ref = as_dict(spec.get("scaleTargetRef"))
    name = ref.get("name")
    if not isinstance(name, str) or not name:
        return None
    kind, api_version = ref.get("kind"), ref.get("apiVersion")
    return TargetRef(
        kind if isinstance(kind, str) and kind else "Deployment",
        name,
        api_version if isinstance(api_version, str) and api_version else "apps/v1",
        ("spec", "scaleTargetRef"),
    )


class ReplicaClaim(NamedTuple):
    """A claim one object makes on a workload's replicas, before the inventory resolves it.

    Either ``ref`` (a scaleTargetRef as written, resolved against the loaded objects) or
    ``workload`` (the name of the Deployment a controller makes, in the object's namespace)
    is set.
    """

    kind: str  # HorizontalPodAutoscaler | ScaledObject | KServe: what rules call the claimant
    path: Path  # where the claim is written
    hpa_name: str  # the HPA that sets the replicas (KEDA and KServe make their own)
    description: str  # "KEDA ScaledObject llm (HPA keda-hpa-llm)", for messages
    ref: TargetRef | None = None
    workload: str | None = None
    implicit: bool = False  # made by a controller, not written as an autoscaler
    note: str = ""


class WrittenReplicas(NamedTuple):
    """A replica count an object writes to a workload its controller makes, on every
    reconcile (``KindView.written_replicas``)."""

    path: Path  # where the object writes it
    controller: str  # who writes it: "KServe", "the NIM operator"
    # The API server's refusal when the object autoscales the workload itself beside it (an
    # x-kubernetes-validations rule of its CRD); None when it may.
    refused: str | None = None
    # The object's own /scale, when the count is written whether or not the object says it
    # (a default): an autoscaler must scale the object, not the workload.
    scale_ref: TargetRef | None = None
