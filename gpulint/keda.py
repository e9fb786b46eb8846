"""KEDA ScaledObjects: what they scale and the HPA KEDA makes for them.

Facts (kedacore/keda v2.20): a ScaledObject creates an HPA named ``keda-hpa-<name>`` (or
``spec.advanced.horizontalPodAutoscalerConfig.name``); scaleTargetRef.kind defaults to
Deployment; the annotation ``scaledobject.keda.sh/transfer-hpa-ownership`` adopts an existing HPA.
"""

from __future__ import annotations

from typing import Any

from gpulint.document import Manifest, ManifestView, as_dict, as_list
from gpulint.hpa import TargetRef
from gpulint.scaling import ScalingRange, keda_range

KEDA_GROUP = "keda.sh"
TRANSFER_OWNERSHIP = "scaledobject.keda.sh/transfer-hpa-ownership"


class ScaledObject(ManifestView):
    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        spec = as_dict(manifest.data.get("spec"))
        self.spec = spec
        ref = as_dict(spec.get("scaleTargetRef"))
        self.target_ref: TargetRef | None = None
        if isinstance(ref.get("name"), str):
            kind = ref.get("kind")
            api_version = ref.get("apiVersion")
            self.target_ref = TargetRef(
                kind if isinstance(kind, str) and kind else "Deployment",
                ref["name"],
                api_version if isinstance(api_version, str) and api_version else "apps/v1",
                ("spec", "scaleTargetRef"),
            )
        self.triggers: list[dict[str, Any]] = [
            t for t in as_list(spec.get("triggers")) if isinstance(t, dict)
        ]
        hpa_config = as_dict(as_dict(spec.get("advanced")).get("horizontalPodAutoscalerConfig"))
        self.hpa_config = hpa_config
        custom_name = hpa_config.get("name")
        self.hpa_name: str = (
            custom_name
            if isinstance(custom_name, str) and custom_name
            else f"keda-hpa-{manifest.name}"
        )

    def scaling_range(self) -> ScalingRange:
        """The replicas KEDA and its HPA can set (``gpulint.scaling``)."""
        return keda_range(self.spec, f"KEDA ScaledObject {self.name}")

    @property
    def behavior(self) -> Any:
        """``advanced.horizontalPodAutoscalerConfig.behavior``: KEDA copies it into its HPA."""
        return self.hpa_config.get("behavior")

    @property
    def adopts_hpa(self) -> str | None:
        """The existing HPA this ScaledObject takes over, if it asks to."""
        value = self.manifest.annotations.get(TRANSFER_OWNERSHIP)
        if str(value).lower() == "true" and isinstance(self.hpa_config.get("name"), str):
            return str(self.hpa_config["name"])
        return None


SCALED_OBJECT_LABEL = "scaledobject.keda.sh/name"


def scaled_object_of(manifest: Manifest) -> str | None:
    """The ScaledObject that made an HPA (its ownerReference, else KEDA's label), if any."""
    for owner in manifest.owner_references:
        if owner.get("kind") == "ScaledObject" and isinstance(owner.get("name"), str):
            return str(owner["name"])
    label = manifest.labels.get(SCALED_OBJECT_LABEL)
    return label if isinstance(label, str) and label else None


def is_scaled_object(manifest: Manifest) -> bool:
    return manifest.kind == "ScaledObject" and manifest.group == KEDA_GROUP
