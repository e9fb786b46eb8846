"""KEDA ScaledJob (keda.sh/v1alpha1): Jobs made from a template as events arrive.

Facts (kedacore/keda, commit 8b4f083; kedacore/keda-docs content/docs/2.21):

* ``spec.jobTargetRef`` is a ``batch/v1`` JobSpec, its pod template at
  ``jobTargetRef.template`` (apis/keda/v1alpha1/scaledjob_types.go ``ScaledJobSpec``).
* ``maxReplicaCount`` defaults to 100 and ``minReplicaCount`` to 0
  (scaledjob_types.go ``defaultScaledJobMaxReplicaCount``); it is "the max number of pods
  that is created within a single polling period", running jobs deducted
  (reference/scaledjob-spec.md).
* KEDA reads a ScaledJob's triggers through the scalers' external metrics only: the cpu and
  memory scalers give a Resource metric, which ``getScaledJobMetrics`` skips
  (pkg/scaling/scale_handler.go, "skip cpu/memory resource scaler"); the docs of both say
  "This scaler only applies to ScaledObject, not to Scaling Jobs" (scalers/cpu.md,
  scalers/memory.md).
* A ``type: prometheus`` trigger is read by the same prometheus scaler as a ScaledObject's
  (gpulint.kinds.triggers ``PrometheusTrigger``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from gpulint.chain.address import PrometheusUrl
from gpulint.input.document import Manifest, Path, as_dict, as_list
from gpulint.kinds.scaletarget import TargetRef
from gpulint.kinds.scaling import ScalingRange
from gpulint.kinds.triggers import KEDA_GROUP, PrometheusTrigger, keda_range, trigger_urls
from gpulint.kinds.view import KindView
from gpulint.kinds.workload import PodTemplate, pod_template_at

SCALED_JOB_KIND = "ScaledJob"
TEMPLATE_PATH: Path = ("spec", "jobTargetRef", "template")
RESOURCE_TRIGGERS = ("cpu", "memory")


class Trigger(NamedTuple):
    number: int  # its place in spec.triggers
    type: str
    data: dict[str, Any]

    @property
    def path(self) -> Path:
        return ("spec", "triggers", self.number)


class ScaledJob(KindView):
    """A KEDA ScaledJob. Of the kinds protocol it answers ``pod_templates`` (the job's),
    ``scope_items`` (its prometheus triggers are ``prometheus-query`` items, judged as a
    ScaledObject's are) and ``prometheus_urls``; it claims no workload's replicas
    (``target_ref`` is None: its jobs come from its own template). It has no
    ``trace_sources``: ``gpulint trace`` follows a metric to the HPA that reads it through a
    metrics API, and KEDA starts a ScaledJob's jobs itself, with no HPA in between."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        spec = as_dict(manifest.data.get("spec"))
        self.spec = spec
        self.job_spec = as_dict(spec.get("jobTargetRef"))
        self.triggers: list[dict[str, Any]] = [
            t for t in as_list(spec.get("triggers")) if isinstance(t, dict)
        ]
        self.target_ref: TargetRef | None = None
        self.triggers_path: Path = ("spec", "triggers")
        self.made_by: str | None = None
        self.asks_for_none = "counts no work waiting"
        self.prometheus_triggers: list[PrometheusTrigger] = [
            PrometheusTrigger(self, index, trigger)
            for index, trigger in enumerate(as_list(spec.get("triggers")))
            if isinstance(trigger, dict) and trigger.get("type") == "prometheus"
        ]

    def typed_triggers(self) -> list[Trigger]:
        return [
            Trigger(index, str(t.get("type")), t)
            for index, t in enumerate(as_list(self.spec.get("triggers")))
            if isinstance(t, dict)
        ]

    def resource_triggers(self) -> list[Trigger]:
        """The cpu and memory triggers, which KEDA never reads for a ScaledJob."""
        return [t for t in self.typed_triggers() if t.type in RESOURCE_TRIGGERS]

    def scaling_range(self) -> ScalingRange:
        """The jobs KEDA may start in one polling interval (``minReplicaCount`` to
        ``maxReplicaCount``, 0 to 100 by default)."""
        return keda_range(self.spec, f"KEDA ScaledJob {self.name}")

    # --- the kind protocol (gpulint.kinds.view) ---------------------------------------------

    def pod_templates(self) -> list[PodTemplate]:
        """The job's pod template, read once (objects are never changed in place)."""
        found = self.manifest.templates
        if found is None:
            template = pod_template_at(
                self.manifest.data, TEMPLATE_PATH, "job template", self.manifest
            )
            found = self.manifest.templates = [template] if template is not None else []
        return found

    def scope_items(self) -> Iterator[tuple[str, Any]]:
        for trigger in self.prometheus_triggers:
            yield "prometheus-query", trigger

    def prometheus_urls(self) -> list[PrometheusUrl]:
        """``serverAddress`` of its prometheus triggers (KEDA's operator dials them)."""
        return trigger_urls(self.prometheus_triggers, self.manifest, f"ScaledJob {self.name}")

    @property
    def parallelism(self) -> int:
        """Pods each Job runs at once (``parallelism``, default 1: batch/v1 JobSpec)."""
        value = self.job_spec.get("parallelism")
        return value if isinstance(value, int) and not isinstance(value, bool) else 1

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"ScaledJob {where}{self.name}"

    def describe_target(self) -> str:
        return f"the jobs of {self.describe()}"

    def on_failing_poll(self) -> str:
        """KEDA records a KEDAScalerFailed event and skips the trigger for that poll
        (pkg/scaling/scale_handler.go ``getScaledJobMetrics``: "but continue")."""
        return (
            "KEDA skips this trigger at every poll (event KEDAScalerFailed) and starts no job on it"
        )

    def on_zero(self) -> str:
        """A trigger at 0 is inactive and counts no work waiting: KEDA starts no job on it."""
        minimum = self.scaling_range().minimum or 0
        others = " (its other triggers still can)" if len(self.triggers) > 1 else ""
        kept = f" beyond minReplicaCount {minimum}" if minimum else ""
        return f"KEDA starts no job on it{kept}{others}, whatever work waits"


def is_scaled_job(manifest: Manifest) -> bool:
    return manifest.kind == SCALED_JOB_KIND and manifest.group == KEDA_GROUP
