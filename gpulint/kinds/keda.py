"""KEDA ScaledObjects: what they scale and the HPA KEDA makes for them.

Facts (kedacore/keda v2.20): a ScaledObject creates an HPA named ``keda-hpa-<name>`` (or
``spec.advanced.horizontalPodAutoscalerConfig.name``); scaleTargetRef.kind defaults to
Deployment; the annotation ``scaledobject.keda.sh/transfer-hpa-ownership`` adopts an existing
HPA, and an HPA annotated ``validations.keda.sh/hpa-ownership: "false"`` is left out of KEDA's
webhook check (apis/keda/v1alpha1/scaledobject_webhook.go ``verifyHpas``).

Pausing (apis/keda/v1alpha1/scaledobject_types.go, controllers/keda/hpa.go): with
``autoscaling.keda.sh/paused-replicas`` (any value) or ``autoscaling.keda.sh/paused`` KEDA
stops scaling the workload; ``paused-scale-in`` and ``paused-scale-out`` set the HPA's
``scaleDown`` or ``scaleUp`` ``selectPolicy`` to ``Disabled``. A boolean annotation that is not
a Go boolean counts as true (``getBoolAnnotation``).

``advanced.scalingModifiers`` (``formula``, ``target``, ``activationTarget``, ``metricType``)
replaces the HPA metrics of the triggers the formula names by one composite metric
(keda-docs 2.20 reference/scaledobject-spec.md "scalingModifiers").

Its ``type: prometheus`` triggers are read in ``gpulint.kinds.triggers`` (a ScaledJob's too).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from gpulint.chain.address import PrometheusUrl
from gpulint.input.document import Manifest, Path, as_dict, as_list
from gpulint.kinds.scaletarget import ReplicaClaim, TargetRef
from gpulint.kinds.scaling import ScalingRange
from gpulint.kinds.triggers import KEDA_GROUP, PrometheusTrigger, keda_range
from gpulint.kinds.view import KindView, QueryTrace, TraceSource

TRANSFER_OWNERSHIP = "scaledobject.keda.sh/transfer-hpa-ownership"
HPA_OWNERSHIP_VALIDATION = "validations.keda.sh/hpa-ownership"
PAUSED = "autoscaling.keda.sh/paused"
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"
PAUSED_SCALE_IN = "autoscaling.keda.sh/paused-scale-in"
PAUSED_SCALE_OUT = "autoscaling.keda.sh/paused-scale-out"
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")


def _bool_annotation(annotations: dict[str, Any], key: str) -> bool:
    """KEDA's getBoolAnnotation: absent is false; a value that is no Go boolean is true."""
    if key not in annotations:
        return False
    value = str(annotations[key]).strip()
    return value not in _GO_FALSE


class Pause(NamedTuple):
    """What KEDA's pause annotations stop, and the annotation that says it."""

    scaling: bool  # paused or paused-replicas: no autoscaling at all
    replicas: Any  # the paused-replicas value, as written (None without it)
    scale_in: bool
    scale_out: bool
    annotation: str

    @property
    def any(self) -> bool:
        return self.scaling or self.scale_in or self.scale_out


def pause_of(annotations: dict[str, Any]) -> Pause:
    if PAUSED_REPLICAS in annotations:
        return Pause(True, annotations[PAUSED_REPLICAS], False, False, PAUSED_REPLICAS)
    if _bool_annotation(annotations, PAUSED):
        return Pause(True, None, False, False, PAUSED)
    scale_in = _bool_annotation(annotations, PAUSED_SCALE_IN)
    scale_out = _bool_annotation(annotations, PAUSED_SCALE_OUT)
    which = PAUSED_SCALE_IN if scale_in else PAUSED_SCALE_OUT if scale_out else ""
    return Pause(False, None, scale_in, scale_out, which)


class ScaledObject(KindView):
    """A KEDA ScaledObject. ``spec_path`` is where its spec is written in ``manifest``:
    ``spec`` for a ScaledObject; another place for the one a controller makes from settings
    written inside another object (``gpulint.kinds.generated.GeneratedScaledObject``)."""

    spec_path: Path = ("spec",)
    made_by: str | None = None

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
        self._prometheus_triggers: list[PrometheusTrigger] | None = None
        self.asks_for_none = "asks for no replicas"
        hpa_config = as_dict(as_dict(spec.get("advanced")).get("horizontalPodAutoscalerConfig"))
        self.hpa_config = hpa_config
        custom_name = hpa_config.get("name")
        self.hpa_name: str = (
            custom_name
            if isinstance(custom_name, str) and custom_name
            else f"keda-hpa-{manifest.name}"
        )

    @property
    def prometheus_triggers(self) -> list[PrometheusTrigger]:
        """The ``type: prometheus`` triggers, built once (rules and the live check share them)."""
        if self._prometheus_triggers is None:
            self._prometheus_triggers = [
                PrometheusTrigger(self, index, trigger)
                for index, trigger in enumerate(as_list(self.spec.get("triggers")))
                if isinstance(trigger, dict) and trigger.get("type") == "prometheus"
            ]
        return self._prometheus_triggers

    def scaling_range(self) -> ScalingRange:
        """The replicas KEDA and its HPA can set (``gpulint.kinds.scaling``)."""
        return keda_range(self.spec, f"KEDA ScaledObject {self.name}")

    @property
    def title(self) -> str:
        """``KEDA ScaledObject llm``: how messages name it (a generated one says who makes
        it)."""
        return f"KEDA ScaledObject {self.name}"

    @property
    def triggers_path(self) -> Path:
        return (*self.spec_path, "triggers")

    @property
    def behavior_path(self) -> Path | None:
        """Where KEDA reads the behavior it copies into its HPA; None when the controller that
        makes the ScaledObject writes it itself, from settings of another shape."""
        return (*self.spec_path, "advanced", "horizontalPodAutoscalerConfig", "behavior")

    def describe_target(self) -> str:
        """``Deployment llm``: what it scales."""
        ref = self.target_ref
        return f"{ref.kind} {ref.name}" if ref is not None else "its target"

    def on_failing_poll(self) -> str:
        """The HPA gets no value for the trigger, and ``spec.fallback`` (when set) takes over
        after ``failureThreshold`` failures (kedacore/keda pkg/fallback)."""
        fallback = self.spec.get("fallback")
        said = "the HPA gets no value for this trigger (FailedGetExternalMetric)"
        if isinstance(fallback, dict) and "replicas" in fallback:
            failures = fallback.get("failureThreshold", "?")
            return (
                f"{said}; spec.fallback sets {fallback['replicas']} replicas after {failures} "
                "failures"
            )
        return f"{said}, and no spec.fallback stands in"

    def on_zero(self) -> str:
        """A trigger at 0 asks for no replicas: with no other trigger active KEDA scales to
        ``minReplicaCount`` (kedacore/keda pkg/scaling/executor/scale_scaledobjects.go)."""
        minimum = self.scaling_range().minimum
        others = len(self.triggers) > 1
        if minimum == 0:
            unless = " unless another trigger is active" if others else ""
            return f"KEDA scales {self.describe_target()} to zero{unless}"
        at = f"minReplicaCount {minimum}" if minimum is not None else "its minReplicaCount"
        return (
            f"{self.describe_target()} stays at {at}"
            + (" unless another trigger asks for more" if others else "")
            + ", whatever its load"
        )

    # --- the kind protocol (gpulint.kinds.view) ---------------------------------------------

    def replica_claims(self) -> list[ReplicaClaim]:
        if self.target_ref is None or self.generator() is not None:
            return []  # made by KServe for a component: the InferenceService claims it
        return [
            ReplicaClaim(
                "ScaledObject",
                self.target_ref.path,
                self.hpa_name,
                f"KEDA ScaledObject {self.name} (HPA {self.hpa_name})",
                ref=self.target_ref,
            )
        ]

    def scaling_range_of(self, workload: str) -> ScalingRange | None:
        return self.scaling_range()

    def scope_items(self) -> Iterator[tuple[str, Any]]:
        yield "autoscaler", self
        for trigger in self.prometheus_triggers:
            yield "prometheus-query", trigger

    def prometheus_urls(self) -> list[PrometheusUrl]:
        return keda_urls(self.manifest)

    def trace_sources(self) -> list[TraceSource]:
        urls = {url.path: url for url in self.prometheus_urls()}
        found: list[TraceSource] = []
        for index, trigger in enumerate(self.triggers):
            if trigger.get("type") != "prometheus":
                continue
            query = as_dict(trigger.get("metadata")).get("query")
            path: Path = (*self.triggers_path, index)
            if isinstance(query, str):
                url = urls.get((*path, "metadata", "serverAddress"))
                found.append(
                    QueryTrace(
                        f"s{index}-prometheus",
                        query.strip(),
                        url,
                        path,
                        self.target_ref,
                        "KEDA prometheus trigger",
                        self.written_at,
                    )
                )
        return found

    @property
    def behavior(self) -> Any:
        """``advanced.horizontalPodAutoscalerConfig.behavior``: KEDA copies it into its HPA."""
        return self.hpa_config.get("behavior")

    @property
    def pause(self) -> Pause:
        """What the pause annotations stop (``autoscaling.keda.sh/paused*``)."""
        return pause_of(self.manifest.annotations)

    @property
    def scaling_modifiers(self) -> dict[str, Any] | None:
        """``advanced.scalingModifiers`` when it says anything (KEDA's IsUsingModifiers)."""
        modifiers = as_dict(self.spec.get("advanced")).get("scalingModifiers")
        if isinstance(modifiers, dict) and any(v not in (None, "") for v in modifiers.values()):
            return modifiers
        return None

    @property
    def adopts_hpa(self) -> str | None:
        """The existing HPA this ScaledObject takes over, if it asks to."""
        value = self.manifest.annotations.get(TRANSFER_OWNERSHIP)
        if str(value).lower() == "true" and isinstance(self.hpa_config.get("name"), str):
            return str(self.hpa_config["name"])
        return None


def prometheus_triggers(views: Iterable[KindView]) -> list[PrometheusTrigger]:
    """The prometheus triggers among the ``prometheus-query`` items of ``views`` (a
    ScaledObject's, a ScaledJob's): what KEDA itself sends to Prometheus."""
    return [
        item
        for view in views
        for scope, item in view.scope_items()
        if scope == "prometheus-query" and isinstance(item, PrometheusTrigger)
    ]


def is_scaled_object(manifest: Manifest) -> bool:
    return manifest.kind == "ScaledObject" and manifest.group == KEDA_GROUP


def keda_urls(manifest: Manifest) -> list[PrometheusUrl]:
    """``serverAddress`` of a ScaledObject's prometheus triggers (KEDA's operator dials it, so a
    bare host name resolves in KEDA's namespace, not the ScaledObject's)."""
    if manifest.kind != "ScaledObject" or manifest.group != "keda.sh":
        return []
    found = []
    triggers = as_list(as_dict(manifest.data.get("spec")).get("triggers"))
    for index, trigger in enumerate(triggers):
        entry = as_dict(trigger)
        if entry.get("type") != "prometheus":
            continue
        address = as_dict(entry.get("metadata")).get("serverAddress")
        if isinstance(address, str) and address.strip():
            found.append(
                PrometheusUrl(
                    address.strip(),
                    manifest,
                    ("spec", "triggers", index, "metadata", "serverAddress"),
                    "keda",
                    f"ScaledObject {manifest.name} trigger {index}",
                    None,
                    manifest,
                )
            )
    return found
