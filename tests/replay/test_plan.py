"""Which autoscalers a replay takes, and why it leaves the others."""

from __future__ import annotations

from pathlib import Path

from gpulint.engine.config import Settings
from gpulint.engine.runner import inventory_from_paths
from gpulint.engine.versions import CONFIG, KUBERNETES, Release
from gpulint.replay.behavior import Tolerances
from gpulint.replay.plan import DEFAULT_POD_READY_AFTER_S, Plan, plan

KSERVE = """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llm
  namespace: ml
  annotations:
    serving.kserve.io/deploymentMode: Standard
    serving.kserve.io/autoscalerClass: hpa
spec:
  predictor:
    minReplicas: 1
    maxReplicas: 4
    model:
      modelFormat: {name: huggingface}
      resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: cpu, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: cpu}
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
"""


def test_what_is_not_replayed_says_why(tmp_path: Path) -> None:
    (tmp_path / "objects.yaml").write_text(KSERVE)
    found = plan(inventory_from_paths([str(tmp_path)], Settings()))
    assert found.specs == []
    reasons = {(s.kind, s.name): s.reason for s in found.skipped}
    assert reasons[("HorizontalPodAutoscaler", "cpu")] == (
        "metric 1 is a Resource metric, which comes from metrics-server, not Prometheus"
    )
    assert (
        "the autoscaler it generates (autoscalerClass hpa, llm-predictor) is not in the input"
        in (reasons[("KServe", "llm")])
    )


def test_pod_start_time_from_probes_option_or_default() -> None:
    scenarios = Path(__file__).resolve().parent / "fixtures"
    inventory = inventory_from_paths([str(scenarios)], Settings())
    by_name = {s.name: s for s in plan(inventory).specs}
    # readinessProbe initialDelaySeconds 170 + periodSeconds 10
    assert by_name["step"].pod_ready_after_s == 180
    assert by_name["step"].pod_ready_source == "readinessProbe of container server"
    # the ScaledObject's Deployment is not in the input: the stated default
    assert by_name["spikes-keda"].pod_ready_after_s == DEFAULT_POD_READY_AFTER_S
    assert by_name["spikes-keda"].min_replicas == 1  # KEDA's HPA: at least 1
    assert by_name["spikes-keda"].keda is not None
    assert by_name["spikes-keda"].keda.min_replica_count == 0
    overridden = {s.name: s for s in plan(inventory, 300.0).specs}
    assert overridden["step"].pod_ready_after_s == 300
    assert overridden["step"].pod_ready_source == "--pod-ready-after"


KEDA_PAUSED = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: ml}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      containers:
      - {name: server, image: vllm, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: NAME
  namespace: ml
  annotations: ANNOTATIONS
spec:
  scaleTargetRef: {name: llm}
  minReplicaCount: 1
  maxReplicaCount: 4
  advanced: ADVANCED
  triggers:
  - type: prometheus
    name: waiting
    metadata:
      serverAddress: http://prometheus:9090
      query: sum(vllm:num_requests_waiting)
      threshold: "5"
"""


def _keda(tmp_path: Path, name: str, annotations: str, advanced: str = "{}") -> Plan:
    text = KEDA_PAUSED.replace("NAME", name).replace("ANNOTATIONS", annotations)
    (tmp_path / f"{name}.yaml").write_text(text.replace("ADVANCED", advanced))
    return plan(inventory_from_paths([str(tmp_path / f"{name}.yaml")], Settings()))


def test_keda_pause_annotations_and_scaling_modifiers(tmp_path: Path) -> None:
    """A paused ScaledObject is not replayed; paused-scale-in/out disable that direction, as
    KEDA's HPA does; with scalingModifiers the controller reads the composite metric (the
    formula over the named triggers against its target), not the triggers' thresholds."""
    paused = _keda(tmp_path, "paused", '{autoscaling.keda.sh/paused-replicas: "2"}')
    assert paused.specs == []
    (skipped,) = paused.skipped
    assert "autoscaling.keda.sh/paused-replicas" in skipped.reason
    scale_in = _keda(tmp_path, "scale-in", '{autoscaling.keda.sh/paused-scale-in: "true"}')
    (spec,) = scale_in.specs
    assert spec.behavior.down.select == "Disabled" and spec.behavior.up.select == "Max"
    modifiers = _keda(
        tmp_path,
        "composite",
        "{}",
        '{scalingModifiers: {formula: "waiting * 2", target: "10"}}',
    )
    (spec,) = modifiers.specs
    assert spec.composite is not None
    assert spec.controlled == (spec.composite.metric,)
    assert (spec.composite.metric.target, spec.composite.metric.target_type) == (
        10.0,
        "AverageValue",
    )
    assert spec.composite.value([7.0]) == 14.0
    unnamed = _keda(
        tmp_path,
        "unnamed",
        "{}",
        '{scalingModifiers: {formula: "queue * 2", target: "10"}}',
    )
    (skipped,) = unnamed.skipped  # KEDA's webhook refuses it: lint's GL119 says so
    assert skipped.reason.startswith(
        "lint says it does not scale as written (GL119 keda-spec-refused): "
    )
    unread = _keda(
        tmp_path,
        "unread",
        "{}",
        '{scalingModifiers: {formula: "waiting ?? 0", target: "10"}}',
    )
    assert unread.skipped[0].reason == "its scalingModifiers.formula: unexpected '?' in the formula"


def test_the_tolerances_are_replayed_on_the_releases_that_honour_them(tmp_path: Path) -> None:
    """behavior.*.tolerance (which KEDA copies into its HPA) is on by default from Kubernetes
    1.35 (KEP-4951); on 1.34 the API server drops it and the controller's 10% applies."""
    advanced = "{horizontalPodAutoscalerConfig: {behavior: {scaleUp: {tolerance: 50m}, " + (
        'scaleDown: {tolerance: "0.2"}}}}'
    )
    text = KEDA_PAUSED.replace("NAME", "tolerant").replace("ANNOTATIONS", "{}")
    (tmp_path / "tolerant.yaml").write_text(text.replace("ADVANCED", advanced))
    by_release = {}
    for minor in (34, 35):
        settings = Settings()
        settings.versions = settings.versions.with_release(KUBERNETES, Release(1, minor), CONFIG)
        (spec,) = plan(inventory_from_paths([str(tmp_path)], settings)).specs
        by_release[minor] = spec.tolerances
    assert by_release[34] == Tolerances(down=0.1, up=0.1)
    assert by_release[35] == Tolerances(down=0.2, up=0.05)


SCALE_TO_ZERO = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 0
  maxReplicas: 4
  metrics:
  - type: External
    external:
      metric: {name: queue_depth}
      target: {type: AverageValue, averageValue: "5"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: adapter, namespace: monitoring}
data:
  config.yaml: |
    externalRules:
    - seriesQuery: 'queue_depth'
      metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
"""

SECOND_AUTOSCALER = """
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: web, namespace: ml}
spec:
  scaleTargetRef: {name: web}
  triggers:
  - type: prometheus
    metadata: {serverAddress: "http://p:9090", query: "sum(x)", threshold: "5"}
"""


def _plan_at(tmp_path: Path, text: str, minor: int) -> Plan:
    (tmp_path / "objects.yaml").write_text(text)
    settings = Settings()
    settings.versions = settings.versions.with_release(KUBERNETES, Release(1, minor), CONFIG)
    return plan(inventory_from_paths([str(tmp_path)], settings))


def test_min_replicas_zero_follows_the_release(tmp_path: Path) -> None:
    """minReplicas 0 is refused by the API server before 1.37 (GL108): not replayed, with
    lint's reason; from 1.37 (HPAScaleToZero on by default) it is replayed with minimum 0."""
    before = _plan_at(tmp_path, SCALE_TO_ZERO, 36)
    assert before.specs == []
    (skipped,) = before.skipped
    assert skipped.describe().startswith(
        "HorizontalPodAutoscaler ml/web not replayed: lint says it does not scale as written "
        "(GL108 hpa-invalid-spec): HorizontalPodAutoscaler web: minReplicas 0 is not allowed."
    )
    (spec,) = _plan_at(tmp_path, SCALE_TO_ZERO, 37).specs
    assert spec.min_replicas == 0


def test_two_autoscalers_on_one_target_are_not_replayed(tmp_path: Path) -> None:
    """GL103: an HPA and a ScaledObject on one Deployment; from Kubernetes 1.26 neither
    scales. Neither is replayed, each with lint's words."""
    found = _plan_at(tmp_path, SCALE_TO_ZERO + SECOND_AUTOSCALER, 37)
    assert found.specs == []
    reasons = {(s.kind, s.name): s.reason for s in found.skipped}
    assert set(reasons) == {("HorizontalPodAutoscaler", "web"), ("ScaledObject", "web")}
    for reason in reasons.values():
        assert reason.startswith(
            "lint says it does not scale as written (GL103 duplicate-autoscalers): "
        )
        assert "AmbiguousSelector" in reason
