"""The autoscalers a controller makes from settings written inside another object.

A NIMService's ``spec.scale.hpa`` becomes an HPA; an LLMInferenceService's ``spec.scaling`` an
HPA or a KEDA ScaledObject; an AIBrix PodAutoscaler with the HPA strategy an HPA; a
VLLMRuntime's ``autoscalingConfig`` a ScaledObject. gpulint reads each as the HPA or
ScaledObject it becomes (``GeneratedHPA``, ``GeneratedScaledObject``), so that the rules about
HPAs and KEDA judge it as they judge one written out and ``gpulint replay`` replays it. Its
``manifest`` is the object the user wrote and every path points into it: findings, and the
edits of fixes, land where the settings are written, not on an object no file holds.

These views are not objects of the inventory: the view of the object that holds the settings
hands them to the rule scopes (``KindView.scope_items``) and to the replay
(``KindView.generated_autoscalers``), and claims the workload for them
(``KindView.replica_claims``).
"""

from __future__ import annotations

from typing import Any

from gpulint.chain.address import PrometheusUrl
from gpulint.input.document import Manifest, Path, as_dict, as_list
from gpulint.kinds.hpa import HPA, HpaMetric
from gpulint.kinds.keda import ScaledObject
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef
from gpulint.kinds.scaling import ScalingRange
from gpulint.kinds.triggers import trigger_urls


def made_by(manifest: Manifest) -> str:
    """``NIMService ml/llm``: the object whose controller makes an autoscaler."""
    where = f"{manifest.namespace}/" if manifest.namespace else ""
    return f"{manifest.kind} {where}{manifest.name}"


class GeneratedHPA(HPA):
    """The HPA a controller makes from another object's settings.

    ``spec`` is the mapping written at ``spec_path`` that holds what the HPA's spec takes as
    written (``behavior``; for a NIMService its whole HPA spec); ``metrics`` are the HPA's
    metrics, each with the path of what asks for it (read from ``spec`` when None);
    ``scaling`` is the range the controller gives it; ``written_at`` the node of ``manifest``
    its settings belong to, when wider than ``spec_path``. ``behavior_written`` is False when the
    controller writes the behavior itself from settings of its own (AIBrix);
    ``metric_name_key`` is the key its metrics are named under there, when it is not
    ``metric.name``."""

    def __init__(
        self,
        manifest: Manifest,
        name: str,
        target_ref: TargetRef,
        spec: dict[str, Any],
        spec_path: Path,
        scaling: ScalingRange,
        *,
        metrics: list[HpaMetric] | None = None,
        behavior_written: bool = True,
        metric_name_key: str | None = None,
        metric_names_written: bool = True,
        written_at: Path | None = None,
    ) -> None:
        self.manifest = manifest
        self.generated_name = name
        self.made_by = made_by(manifest)
        self.version = "v2"
        self.spec = spec
        self.spec_path = spec_path
        self.written_at = spec_path if written_at is None else written_at
        self.target_ref = target_ref
        self.scaling = scaling
        self.min_replicas = scaling.minimum
        self.max_replicas = scaling.maximum
        behavior = spec.get("behavior") if behavior_written else None
        self.behavior = behavior if isinstance(behavior, dict) else None
        self.behavior_written = behavior_written
        # The key that names a metric where the settings are written, when it is not an HPA
        # metric's ``metric.name`` (AIBrix's ``targetMetric``).
        self.metric_name_key = metric_name_key
        # False when the controller writes the metrics' names itself (KServe's
        # wva_desired_replicas): only the adapter can be changed to serve them.
        self.metric_names_written = metric_names_written
        self.metrics = self._read_metrics(spec) if metrics is None else metrics
        # With no metrics the API server defaults an HPA to CPU 80% (autoscaling/v2 defaults.go).
        self.defaults_to_cpu = not self.metrics

    def __repr__(self) -> str:
        return f"<GeneratedHPA {self.generated_name} of {self.made_by}>"

    @property
    def name(self) -> str:
        return self.generated_name

    # Findings on it are placed in the object it is made from, which says who makes it: its
    # name alone keeps a headline short (tests/test_headline.py).
    @property
    def title(self) -> str:
        return f"HPA {self.generated_name}"

    @property
    def full_title(self) -> str:
        return f"HorizontalPodAutoscaler {self.generated_name}"

    @property
    def behavior_path(self) -> Path | None:
        return (*self.spec_path, "behavior") if self.behavior_written else None

    @property
    def is_fragment(self) -> bool:
        return False

    def scaling_range(self) -> ScalingRange:
        return self.scaling

    def replica_claims(self) -> list[ReplicaClaim]:
        return []  # the object that holds its settings claims the workload


class GeneratedScaledObject(ScaledObject):
    """The KEDA ScaledObject a controller makes from another object's settings.

    ``spec`` is shaped like a ScaledObject's spec (``triggers``, ``advanced``, ``fallback``
    ...) and written at ``spec_path``, or made up by the controller, in which case its paths
    point at the settings it is made from; ``triggers_at`` is where the triggers are written
    (by default ``spec_path`` + ``triggers``). ``behavior_at`` is where the behavior KEDA
    copies into its HPA is written; None when the controller writes it from settings of
    another shape. ``written_at`` is the node of ``manifest`` its settings belong to, when wider
    than ``spec_path``."""

    def __init__(
        self,
        manifest: Manifest,
        name: str,
        target_ref: TargetRef,
        spec: dict[str, Any],
        spec_path: Path,
        scaling: ScalingRange,
        *,
        triggers_at: Path | None = None,
        behavior_at: Path | None = None,
        written_at: Path | None = None,
    ) -> None:
        self.manifest = manifest
        self.generated_name = name
        self.made_by = made_by(manifest)
        self.spec = spec
        self.spec_path = spec_path
        self.written_at = spec_path if written_at is None else written_at
        self.target_ref = target_ref
        self.scaling = scaling
        self._triggers_at = triggers_at if triggers_at is not None else (*spec_path, "triggers")
        self._behavior_at = behavior_at
        self.triggers = [t for t in as_list(spec.get("triggers")) if isinstance(t, dict)]
        self._prometheus_triggers = None
        self.asks_for_none = "asks for no replicas"
        hpa_config = as_dict(as_dict(spec.get("advanced")).get("horizontalPodAutoscalerConfig"))
        self.hpa_config = hpa_config
        custom_name = hpa_config.get("name")
        self.hpa_name = (
            custom_name if isinstance(custom_name, str) and custom_name else f"keda-hpa-{name}"
        )

    def __repr__(self) -> str:
        return f"<GeneratedScaledObject {self.generated_name} of {self.made_by}>"

    @property
    def name(self) -> str:
        return self.generated_name

    @property
    def title(self) -> str:
        return f"KEDA ScaledObject {self.generated_name}"

    @property
    def triggers_path(self) -> Path:
        return self._triggers_at

    @property
    def behavior_path(self) -> Path | None:
        return self._behavior_at

    @property
    def adopts_hpa(self) -> str | None:
        return None

    def scaling_range(self) -> ScalingRange:
        return self.scaling

    def replica_claims(self) -> list[ReplicaClaim]:
        return []  # the object that holds its settings claims the workload

    def prometheus_urls(self) -> list[PrometheusUrl]:
        """``serverAddress`` of its prometheus triggers (KEDA's operator dials them)."""
        return trigger_urls(self.prometheus_triggers, self.manifest, f"ScaledObject {self.name}")
