"""Which autoscalers of an inventory can be replayed, and with which queries.

An HPA's Pods, Object and External metrics are read through the adapter rule of the input
that serves them, rendered as the adapter renders it for that HPA (gpulint.live.adapterquery:
its namespace, the pods its target's controller names, its metric selector). A KEDA
ScaledObject's prometheus triggers are sent as KEDA sends them (gpulint.live.kedaquery:
``namespace`` and ``queryParameters`` as parameters, ``customHeaders`` as headers); its HPA
reads each as an External metric against ``threshold``. An autoscaler with a metric gpulint
cannot trace to a query (Resource metrics come from metrics-server, not Prometheus) is not
replayed, and the report says why: the controller takes the largest proposal over all
metrics, so replaying a part of them would not be the same controller.

An autoscaler lint says the cluster does not run as written is not replayed either, whatever
its metrics: an error of ``CANNOT_SCALE`` on it (run by the engine on the same inventory, with
the same settings and release) is the reason, in lint's words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from gpulint.chain.adapter import CUSTOM, EXTERNAL, AdapterRule, canonical_resource
from gpulint.core.model import Finding, Severity
from gpulint.core.quantity import INT32_MAX, try_quantity
from gpulint.engine.registry import Selection
from gpulint.engine.runner import run
from gpulint.input.document import Path, as_dict
from gpulint.inventory import Inventory
from gpulint.kinds.hpa import HPA, HPA_KIND, HpaMetric
from gpulint.kinds.keda import ScaledObject
from gpulint.kinds.registry import VIEW_SCOPES
from gpulint.kinds.view import generated_by
from gpulint.kinds.workload import PodTemplate
from gpulint.live.adapterquery import QueryLabels, mapping_for, pod_name_pattern, render_query
from gpulint.live.kedaquery import request_for
from gpulint.metrics.names import Scale, scale_of
from gpulint.metrics.querytemplate import RenderUnsupported, TemplateError
from gpulint.replay.activation import (
    KEDA_COOLDOWN_S,
    KEDA_INITIAL_COOLDOWN_S,
    KedaActivation,
    hpa_min_replicas,
)
from gpulint.replay.behavior import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, Behavior, Tolerances
from gpulint.replay.formula import FormulaError, parse
from gpulint.replay.model import Composite, ReplayMetric, ReplaySpec, Skipped

# When the pod template has no probe to tell: a GPU inference pod pulls a large image and
# loads a model before it serves; two minutes is a common floor. --pod-ready-after says better.
DEFAULT_POD_READY_AFTER_S = 120.0
# Kubernetes' probe defaults (core/v1 Probe): periodSeconds 10, initialDelaySeconds 0.
_PROBE_PERIOD_S = 10.0


# Lint's errors that mean the autoscaler does not scale as written, so that a replay of it
# would show a controller the cluster does not run:
# GL103 (another autoscaler on the same target: from Kubernetes 1.26 every HPA of it is
# AmbiguousSelector and none scales, before they overwrite each other), GL108 (the API server
# refuses the HPA: minReplicas 0 before 1.37 among others), GL119 (KEDA refuses or fails on
# the ScaledObject) and GL401 (no adapter rule serves a metric: FailedGetPodsMetric, and the
# HPA does not scale down while a metric is missing).
CANNOT_SCALE = ("GL103", "GL108", "GL119", "GL401")


def lint_verdicts(inventory: Inventory) -> dict[tuple[str, str, str], Finding]:
    """(kind, namespace, name) -> lint's first error of ``CANNOT_SCALE`` on that object."""
    verdicts: dict[tuple[str, str, str], Finding] = {}
    for finding in run(inventory, Selection(select=list(CANNOT_SCALE))):
        ref = finding.object
        if ref is None or finding.severity < Severity.ERROR or finding.rule not in CANNOT_SCALE:
            continue
        verdicts.setdefault((ref.kind, ref.namespace or "default", ref.name), finding)
    return verdicts


def lint_reason(finding: Finding) -> str:
    """Why an autoscaler lint judged is not replayed, the same words in every report."""
    return f"lint says it does not scale as written ({finding.rule} {finding.name}): " + (
        finding.message
    )


@dataclass
class Plan:
    specs: list[ReplaySpec]
    skipped: list[Skipped]


def plan(inventory: Inventory, pod_ready_after_s: float | None = None) -> Plan:
    """Every HPA (KServe's and Knative's generated ones included, as a cluster holds them;
    not those KEDA makes, which their ScaledObject stands for) and every ScaledObject."""
    specs: list[ReplaySpec] = []
    skipped: list[Skipped] = []
    present: set[tuple[str, str]] = set()
    verdicts = lint_verdicts(inventory)

    def add(kind: str, namespace: str, name: str, build: Any) -> None:
        present.add((namespace, name))
        verdict = verdicts.get((kind, namespace, name))
        if verdict is not None:
            skipped.append(Skipped(kind, namespace, name, lint_reason(verdict)))
            return
        try:
            specs.append(build())
        except Untraceable as why:
            skipped.append(Skipped(kind, namespace, name, str(why)))

    # The HPAs and ScaledObjects controllers make from settings written inside other objects
    # (a NIMService's spec.scale, an LLMInferenceService's spec.scaling: KindView
    # .generated_autoscalers), replayed as the autoscalers they become; in a cluster the
    # objects they became are those, replayed once.
    generated = [
        made
        for scope in VIEW_SCOPES
        for view in inventory.items_of(scope)
        for made in view.generated_autoscalers()
    ]
    hpas = [h for h in inventory.hpas if not inventory.judged_at_generator(h.manifest)]
    hpas += [made for made in generated if isinstance(made, HPA)]
    scaled_objects = [
        s for s in inventory.scaled_objects if not inventory.judged_at_generator(s.manifest)
    ]
    scaled_objects += [made for made in generated if isinstance(made, ScaledObject)]
    for hpa in hpas:
        if hpa.is_fragment or generated_by(hpa.manifest, "ScaledObject") is not None:
            continue
        namespace = hpa.namespace or "default"
        add(HPA_KIND, namespace, hpa.name, lambda h=hpa: hpa_spec(h, inventory, pod_ready_after_s))
    for scaled in scaled_objects:
        namespace = scaled.namespace or "default"
        present.add((namespace, scaled.hpa_name))
        add(
            "ScaledObject",
            namespace,
            scaled.name,
            lambda so=scaled: scaled_object_spec(so, inventory, pod_ready_after_s),
        )
    for claim in inventory.autoscalers():
        namespace = claim.manifest.namespace or "default"
        if claim.implicit and (namespace, claim.hpa_name) not in present:
            present.add((namespace, claim.hpa_name))
            skipped.append(
                Skipped(
                    claim.kind,
                    namespace,
                    claim.manifest.name,
                    f"the autoscaler it generates ({claim.note}, {claim.hpa_name}) is not in "
                    "the input: replay it where it exists, with --cluster",
                )
            )
    return Plan(specs, skipped)


class Untraceable(Exception):
    """An autoscaler with a metric gpulint cannot read from Prometheus."""


def _number(value: Any) -> float | None:
    quantity = try_quantity(value)
    if quantity is None:
        return None
    number = float(quantity)
    return number if math.isfinite(number) else None


def hpa_spec(hpa: HPA, inventory: Inventory, ready_after: float | None) -> ReplaySpec:
    if hpa.target_ref is None:
        raise Untraceable("it has no scaleTargetRef")
    scaling = hpa.scaling_range()
    if scaling.minimum is None or scaling.maximum is None:
        raise Untraceable("its minReplicas or maxReplicas is not a number")
    _within_int32(scaling.minimum, scaling.maximum, "minReplicas", "maxReplicas")
    if not hpa.metrics:
        raise Untraceable("it has no metrics: the API server defaults it to CPU 80%")
    namespace = hpa.namespace or "default"
    metrics = tuple(_hpa_metric(hpa, metric, inventory, namespace) for metric in hpa.metrics)
    seconds, source, gpus = _pods(inventory, hpa, ready_after)
    return ReplaySpec(
        "HorizontalPodAutoscaler",
        namespace,
        hpa.name,
        hpa.target_ref.kind,
        hpa.target_ref.name,
        scaling.minimum,
        scaling.maximum,
        Behavior.from_spec(hpa.behavior),
        metrics,
        seconds,
        source,
        gpus,
        document=hpa.manifest,
        path=(*hpa.spec_path, "metrics"),
        behavior_path=(
            hpa.behavior_path
            if hpa.behavior is not None and hpa.behavior_path is not None
            else hpa.spec_path
        ),
        max_path=_max_path(scaling.path, hpa.spec_path),
        tolerances=Tolerances.from_spec(hpa.behavior, inventory.settings.versions.kubernetes),
    )


def _hpa_metric(hpa: HPA, metric: HpaMetric, inventory: Inventory, namespace: str) -> ReplayMetric:
    if not metric.is_custom or not metric.name:
        raise Untraceable(
            f"metric {metric.index + 1} is a {metric.type} metric, which comes from "
            "metrics-server, not Prometheus"
        )
    target = metric.target
    if target is None:
        raise Untraceable(f"metric {metric.name} has no target")
    kind = str(target.type or "")
    value = _number(target.average_value if kind == "AverageValue" else target.value)
    if kind not in ("AverageValue", "Value") or value is None or value <= 0:
        raise Untraceable(f"metric {metric.name} has no AverageValue or Value target gpulint reads")
    served = adapter_query(hpa, metric, inventory, namespace)
    return ReplayMetric(
        metric.name,
        metric.type,
        "AverageValue" if metric.type == "Pods" else kind,
        value,
        served.query,
        _cap(served.series) if metric.type == "Pods" else None,
    )


class AdapterQuery(NamedTuple):
    """The adapter rule that serves an HPA metric, the series it reads and the query it sends
    for this HPA."""

    rule: AdapterRule
    series: str
    query: str


def adapter_query(
    hpa: HPA, metric: HpaMetric, inventory: Inventory, namespace: str
) -> AdapterQuery:
    """The query prometheus-adapter sends for ``metric`` of ``hpa``: the first rule of the
    input that serves it, rendered for the HPA's namespace, its target's pods (or the described
    object) and its metric selector. Raises ``Untraceable`` with the reason it cannot."""
    if not metric.name:
        raise Untraceable(f"metric {metric.index + 1} has no name")
    api = EXTERNAL if metric.type == "External" else CUSTOM
    # The HPA lowercases External metric names when it asks (kubernetes/kubernetes#72996).
    wanted = metric.name.lower() if api == EXTERNAL else metric.name
    for rule in inventory.rules_exposing(wanted, api, hpa.manifest):
        series = rule.series_for(wanted)
        if not series:
            continue
        labels, pattern, objects = _query_objects(hpa, metric, rule)
        try:
            query = render_query(
                rule, labels, series[0], namespace, objects, pattern, metric.selector
            )
        except (TemplateError, RenderUnsupported) as error:
            raise Untraceable(f"gpulint cannot render the metricsQuery: {error}") from None
        return AdapterQuery(rule, series[0], query)
    raise Untraceable(
        f"no adapter rule of the input serves {metric.type} metric {metric.name} from a "
        "series gpulint can name"
    )


def _query_objects(
    hpa: HPA, metric: HpaMetric, rule: AdapterRule
) -> tuple[QueryLabels, str | None, list[str]]:
    """What the adapter asks the rule for this metric: its label mapping, and the pods (a
    name pattern) or the objects."""
    if metric.type == "Pods":
        assert hpa.target_ref is not None
        pattern, _ = pod_name_pattern(hpa.target_ref.kind, hpa.target_ref.name)
        return mapping_for(rule, "pods"), pattern, []
    if metric.type == "Object":
        described = metric.described_object or {}
        kind_name, name = described.get("kind"), described.get("name")
        if not isinstance(kind_name, str) or not isinstance(name, str):
            raise Untraceable(f"metric {metric.name} has no describedObject")
        return mapping_for(rule, canonical_resource(kind_name)), None, [name]
    return mapping_for(rule), None, []


def _cap(series: str) -> float | None:
    """The highest value a per-pod series can have (a percent, a ratio), when it has one."""
    scale = scale_of(series)
    return 100.0 if scale is Scale.PERCENT else 1.0 if scale is Scale.RATIO else None


def scaled_object_spec(
    scaled: ScaledObject, inventory: Inventory, ready_after: float | None
) -> ReplaySpec:
    if scaled.target_ref is None:
        raise Untraceable("it has no scaleTargetRef")
    pause = scaled.pause
    if pause.scaling:
        raise Untraceable(f"KEDA does not scale it: it carries {pause.annotation}")
    others = [t.get("type") for t in scaled.triggers if t.get("type") != "prometheus"]
    if others:
        raise Untraceable(f"it has {others[0]} triggers, which gpulint cannot read back")
    if not scaled.prometheus_triggers:
        raise Untraceable("it has no prometheus trigger")
    metrics = []
    for trigger in scaled.prometheus_triggers:
        query, threshold = trigger.query, trigger.threshold
        if query is None or threshold is None or threshold <= 0:
            raise Untraceable(f"{trigger.describe()} has no query or threshold")
        request = request_for(trigger)
        metrics.append(
            ReplayMetric(
                f"s{trigger.index}-prometheus",
                "External",
                trigger.metric_type,
                threshold,
                query,
                activation=trigger.activation_threshold or 0.0,
                ignore_null=trigger.ignore_null_values is not False,
                params=tuple(request.params),
                headers=tuple(request.headers.items()),
            )
        )
    composite = (
        _composite(scaled, scaled.scaling_modifiers)
        if scaled.scaling_modifiers is not None
        else None
    )
    scaling = scaled.scaling_range()
    if scaling.minimum is None or scaling.maximum is None:
        raise Untraceable("its minReplicaCount or maxReplicaCount is not a number")
    _within_int32(scaling.minimum, scaling.maximum, "minReplicaCount", "maxReplicaCount")
    spec = scaled.spec
    idle = spec.get("idleReplicaCount")
    keda = KedaActivation(
        min_replica_count=scaling.minimum,
        idle_replica_count=(
            idle
            if isinstance(idle, int) and not isinstance(idle, bool) and 0 <= idle <= INT32_MAX
            else None
        ),
        cooldown_s=_seconds(spec.get("cooldownPeriod"), KEDA_COOLDOWN_S),
        initial_cooldown_s=_seconds(spec.get("initialCooldownPeriod"), KEDA_INITIAL_COOLDOWN_S),
    )
    seconds, source, gpus = _pods(inventory, scaled, ready_after)
    behavior = scaled.behavior
    replayed = Behavior.from_spec(behavior)
    if pause.scale_in or pause.scale_out:
        # paused-scale-in/out: KEDA sets that direction's selectPolicy to Disabled
        # (kedacore/keda controllers/keda/hpa.go).
        base = replayed or Behavior(DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN)
        replayed = Behavior(
            base.up._replace(select="Disabled") if pause.scale_out else base.up,
            base.down._replace(select="Disabled") if pause.scale_in else base.down,
        )
    return ReplaySpec(
        "ScaledObject",
        scaled.namespace or "default",
        scaled.name,
        scaled.target_ref.kind,
        scaled.target_ref.name,
        hpa_min_replicas(scaling.minimum),
        scaling.maximum,
        replayed,
        tuple(metrics),
        seconds,
        source,
        gpus,
        keda=keda,
        document=scaled.manifest,
        path=scaled.triggers_path,
        behavior_path=(
            scaled.behavior_path
            if isinstance(behavior, dict) and scaled.behavior_path is not None
            else scaled.spec_path
        ),
        # KEDA copies the behavior, tolerances included, into the HPA it makes
        tolerances=Tolerances.from_spec(behavior, inventory.settings.versions.kubernetes),
        max_path=_max_path(scaling.path, scaled.spec_path),
        composite=composite,
    )


def _composite(scaled: ScaledObject, modifiers: dict[str, Any]) -> Composite:
    """``advanced.scalingModifiers`` as the metric KEDA's HPA reads: the formula over the
    named triggers (each trigger the formula uses must have a ``name``), against ``target``
    (required, above 0), ``metricType`` AverageValue (the default) or Value, active above
    ``activationTarget`` (default 0). The triggers' own thresholds and activation thresholds
    are not used (keda-docs: concepts/scaling-deployments, scalingModifiers)."""
    text = modifiers.get("formula")
    if not isinstance(text, str) or not text.strip():
        raise Untraceable("its advanced.scalingModifiers has no formula")
    try:
        formula = parse(text)
    except FormulaError as error:
        raise Untraceable(f"its scalingModifiers.formula: {error}") from None
    target = _number(modifiers.get("target"))
    if target is None or target <= 0:
        raise Untraceable("its scalingModifiers.target is not a number above 0")
    activation = _number(modifiers.get("activationTarget") or 0)
    kind = modifiers.get("metricType") or "AverageValue"
    if activation is None or kind not in ("AverageValue", "Value"):
        raise Untraceable(
            "its scalingModifiers.activationTarget or metricType is not one KEDA takes"
        )
    named = {
        trigger.data.get("name"): index
        for index, trigger in enumerate(scaled.prometheus_triggers)
        if isinstance(trigger.data.get("name"), str)
    }
    missing = sorted(formula.names - set(named))
    if missing:
        raise Untraceable(
            f"its scalingModifiers.formula reads {missing[0]}, which no trigger is named"
        )
    metric = ReplayMetric(
        "composite-metric",
        "External",
        str(kind),
        target,
        f"scalingModifiers.formula: {text.strip()}",
        activation=activation,
    )
    return Composite(formula, tuple(sorted((n, named[n]) for n in formula.names)), metric)


def _max_path(written: Path | None, spec_path: Path) -> Path | None:
    """Where the maximum of an autoscaler made from another object's settings is written
    (None for an HPA's or ScaledObject's own spec, whose field the rules name)."""
    if spec_path == ("spec",) or written is None or not written:
        return None
    last = written[-1]
    return written if isinstance(last, str) and last.startswith("max") else None


def _within_int32(minimum: int, maximum: int, low: str, high: str) -> None:
    """Replica bounds the API server accepts: int32 fields (autoscaling/v2 and KEDA's
    ScaledObject types), not negative. Anything else is an object no cluster holds, and a
    replay of it would simulate more replicas than any controller sets."""
    for value, field in ((minimum, low), (maximum, high)):
        if not 0 <= value <= INT32_MAX:
            raise Untraceable(f"its {field} {value} is not a replica count (0 to 2^31-1)")


def _seconds(value: Any, default: float) -> float:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return default


def _pods(
    inventory: Inventory, view: HPA | ScaledObject, ready_after: float | None
) -> tuple[float, str, int]:
    """How long a new pod takes to serve (and where that comes
    from), and its GPUs (1 when the input does not say)."""
    assert view.target_ref is not None
    target = inventory.resolve_target(view.namespace, view.target_ref, view.manifest)
    templates = target.templates
    gpus = 1
    for template in templates:
        count = template.gpus_per_pod(inventory.gpu_names)
        if count:
            gpus = count
            break
    if ready_after is not None:
        return ready_after, "--pod-ready-after", gpus
    probed = _probe_seconds(templates)
    if probed is not None:
        return probed[0], probed[1], gpus
    return DEFAULT_POD_READY_AFTER_S, "default (no probe tells)", gpus


def _probe_seconds(templates: list[PodTemplate]) -> tuple[float, str] | None:
    """The earliest a pod can be ready by its probes: a startupProbe's first success (its
    initialDelaySeconds plus one period), then the readinessProbe's likewise. Kubernetes runs
    the readiness probe only once the startup probe has succeeded."""
    best: tuple[float, str] | None = None
    for template in templates:
        for container in template.containers:
            if container.init:
                continue
            total = 0.0
            named = []
            for probe in ("startupProbe", "readinessProbe"):
                data = as_dict(container.data.get(probe))
                if not data:
                    continue
                delay = _number(data.get("initialDelaySeconds")) or 0.0
                period = _number(data.get("periodSeconds")) or _PROBE_PERIOD_S
                total += delay + period
                named.append(probe)
            if named and (best is None or total > best[0]):
                best = (total, f"{' and '.join(named)} of container {container.name}")
    return best
