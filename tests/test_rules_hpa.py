"""HPA rules GL102, GL103, GL105-GL110: options, edge cases and what the fixtures' snapshots
do not show. Each finding's position, severity, message and fix, word for word, are in
tests/fixtures/GL1*/ and their snapshots (tests/test_snapshots.py).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpulint.core.model import Finding, Severity
from gpulint.engine.config import RuleSettings, Settings
from gpulint.engine.versions import Release

from .conftest import FIXTURES, lint_paths, lint_text

GPU_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: ml}
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
      - {name: vllm, image: vllm/vllm-openai, resources: {limits: {nvidia.com/gpu: 1}}}
---
"""


def _only(findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in findings if f.rule == rule]


# --- GL102 options ---------------------------------------------------------------------------

SCALE_DOWN_ONLY = (
    GPU_DEPLOYMENT
    + """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: vllm, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  maxReplicas: 4
  behavior:
    scaleDown:
      policies: [{type: Pods, value: 1, periodSeconds: 60}]
"""
)


def _settings(rule: str, **options: object) -> Settings:
    return Settings(rules={rule: RuleSettings(options=dict(options))})


def test_gl102_reports_the_missing_scale_up_and_accepts_the_default_window() -> None:
    findings = _only(lint_text(SCALE_DOWN_ONLY, select=["GL102"]), "GL102")
    assert [f.headline for f in findings] == [
        "HorizontalPodAutoscaler vllm scales Deployment ml/vllm, which asks for GPUs, but "
        "sets no behavior.scaleUp."
    ]
    assert (findings[0].location.line, findings[0].location.column) == (18, 3)


def test_gl102_option_turns_off_the_missing_scale_up_report() -> None:
    settings = _settings("GL102", **{"report-missing-scale-up": False})
    assert _only(lint_text(SCALE_DOWN_ONLY, settings=settings, select=["GL102"]), "GL102") == []


def test_gl102_minimum_window_option_judges_the_300_s_default() -> None:
    settings = _settings(
        "GL102",
        **{"report-missing-scale-up": False, "min-scale-down-stabilization-seconds": 600},
    )
    (finding,) = _only(lint_text(SCALE_DOWN_ONLY, settings=settings, select=["GL102"]), "GL102")
    assert (
        "sets no stabilizationWindowSeconds, so the default 300 s applies, less than the "
        "600 s of option min-scale-down-stabilization-seconds" in finding.message
    )
    assert finding.fix == "stabilizationWindowSeconds: 600"
    assert (finding.location.line, finding.location.column) == (19, 5)


def test_gl102_minimum_window_zero_disables_the_window_check() -> None:
    text = SCALE_DOWN_ONLY.replace("    scaleDown:\n", "    scaleUp: {}\n    scaleDown:\n")
    text = text.replace("policies: [", "stabilizationWindowSeconds: 0\n      policies: [")
    assert len(_only(lint_text(text, select=["GL102"]), "GL102")) == 1
    settings = _settings("GL102", **{"min-scale-down-stabilization-seconds": 0})
    assert _only(lint_text(text, settings=settings, select=["GL102"]), "GL102") == []


# --- GL103 -----------------------------------------------------------------------------------


def test_gl103_joins_an_hpa_without_namespace_to_the_namespaced_isvc(tmp_path: Path) -> None:
    (tmp_path / "isvc.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: serving.kserve.io/v1beta1
            kind: InferenceService
            metadata:
              name: llm
              namespace: genai
              annotations: {serving.kserve.io/deploymentMode: Standard}
            spec:
              predictor:
                model: {modelFormat: {name: huggingface}}
            """
        )
    )
    (tmp_path / "hpa.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: autoscaling/v2
            kind: HorizontalPodAutoscaler
            metadata: {name: llm-gpu}
            spec:
              scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm-predictor}
              maxReplicas: 4
            """
        )
    )
    (finding,) = _only(lint_paths(tmp_path, select=["GL103"]), "GL103")
    assert finding.location.file.endswith("hpa.yaml")
    assert [r.ref.name for r in finding.related] == ["llm"]
    assert finding.related[0].location is not None
    assert finding.related[0].location.line == 6  # the annotations of the InferenceService


KSERVE_KEDA = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: asr
  annotations:
    serving.kserve.io/deploymentMode: Standard
    serving.kserve.io/autoscalerClass: keda
spec:
  predictor:
    model: {modelFormat: {name: onnx}}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: asr-predictor}
spec:
  scaleTargetRef: {name: asr-predictor}
  triggers:
  - {type: cpu, metricType: Utilization, metadata: {value: "60"}}
"""


def test_gl103_scaled_object_named_like_kserves_is_taken_over() -> None:
    (finding,) = _only(lint_text(KSERVE_KEDA, select=["GL103"]), "GL103")
    assert finding.message == (
        "KEDA ScaledObject asr-predictor (HPA keda-hpa-asr-predictor) has the name of the "
        "ScaledObject KServe creates for InferenceService asr (autoscalerClass keda) in the same "
        "namespace. The controller takes it over and overwrites its spec with its own, so what "
        "is written here never applies to Deployment asr-predictor (generated by "
        "InferenceService asr)."
    )
    assert finding.fix.startswith("# on InferenceService asr: KServe deletes its own autoscaler")


def test_gl103_scaled_object_kserve_made_is_not_a_second_claimant() -> None:
    owned = KSERVE_KEDA.replace(
        "metadata: {name: asr-predictor}",
        "metadata:\n  name: asr-predictor\n  ownerReferences:\n"
        "  - {apiVersion: serving.kserve.io/v1beta1, kind: InferenceService, name: asr}",
    )
    assert _only(lint_text(owned, select=["GL103"]), "GL103") == []


def _deployment(name: str) -> str:
    """A Deployment to append after the autoscalers of a test: GL103 judges only workloads in
    the input."""
    return (
        f"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\n"
        f"spec: {{template: {{spec: {{containers: [{{name: c, image: i}}]}}}}}}\n"
    )


def test_gl103_three_claimants_are_all_named() -> None:
    text = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: a}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: w}
  maxReplicas: 2
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: b}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: w}
  maxReplicas: 2
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: c}
spec:
  scaleTargetRef: {name: w}
  triggers: [{type: cpu, metricType: Utilization, metadata: {value: "60"}}]
"""
    findings = _only(lint_text(text + _deployment("w"), select=["GL103"]), "GL103")
    assert len(findings) == 3
    # Without the workload, they may be alternatives: a note, no finding.
    assert _only(lint_text(text, select=["GL103"]), "GL103") == []
    assert findings[0].message.startswith(
        "Deployment w is scaled by 3 autoscalers. They are this HorizontalPodAutoscaler a, "
        "HorizontalPodAutoscaler b and KEDA ScaledObject c (HPA keda-hpa-c);"
    )
    assert findings[0].fix == (
        "# keep ScaledObject c with every trigger (KEDA's HPA acts on the largest) and delete "
        "HorizontalPodAutoscaler a and HorizontalPodAutoscaler b:\n"
        "spec:\n"
        "  triggers:\n"
        "  - type: cpu\n"
        "    metricType: Utilization\n"
        "    metadata:\n"
        "      value: '60'\n"
        "  - type: cpu\n"
        "    metricType: Utilization\n"
        "    metadata:\n"
        "      value: '80'"
    )


# --- GL105 / GL106 ----------------------------------------------------------------------------


def test_gl105_skips_a_scaled_object_knative_made_for_a_revision() -> None:
    text = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: hello-00001
  ownerReferences:
  - {apiVersion: autoscaling.internal.knative.dev/v1alpha1, kind: PodAutoscaler, name: hello-00001}
spec:
  scaleTargetRef: {name: hello-00001-deployment}
  triggers: [{type: cpu, metricType: Utilization, metadata: {value: "60"}}]
"""
    assert _only(lint_text(text, select=["GL105"]), "GL105") == []


def test_gl105_names_the_knative_hpa_class_conflict() -> None:
    text = """\
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: hello}
spec:
  template:
    metadata:
      annotations: {autoscaling.knative.dev/class: hpa.autoscaling.knative.dev}
    spec:
      containers: [{image: hello}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: hello}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: hello-00002-deployment}
  maxReplicas: 3
"""
    (finding,) = _only(lint_text(text, select=["GL105"]), "GL105")
    assert finding.message.endswith(
        "and while it serves, Knative's own HPA for the revision (class "
        "hpa.autoscaling.knative.dev) claims it too, so Kubernetes >= 1.26 stops both "
        "(AmbiguousSelector)."
    )
    assert [r.ref.name for r in finding.related] == ["hello"]


def test_gl106_points_a_knative_mode_isvc_to_standard_mode() -> None:
    text = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: flowers}
spec:
  predictor:
    model: {modelFormat: {name: tensorflow}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: flowers}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: flowers-predictor-default}
  maxReplicas: 4
"""
    (finding,) = _only(lint_text(text, select=["GL106"]), "GL106")
    assert finding.message.endswith(
        "never scales. InferenceService flowers runs in Knative mode, where KServe creates no "
        "Deployment flowers-predictor either (its revisions are "
        "flowers-predictor-NNNNN-deployment)."
    )
    # The InferenceService's part of the fix, addressed to it (the name of the KServe judged
    # for: 0.20 by default, gpulint.engine.versions).
    assert "\n---\n# on InferenceService flowers: " in finding.fix
    assert "\n    serving.kserve.io/deploymentMode: Standard\n" in finding.fix


# --- GL107 ----------------------------------------------------------------------------------


ADAPTER_RENAMED = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: adapter-config}
data:
  config.yaml: |
    rules:
    - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'
      resources:
        overrides:
          exported_namespace: {resource: namespace}
          exported_pod: {resource: pod}
      name: {matches: "^DCGM_FI_DEV_GPU_UTIL$", as: "gpu_utilization"}
      metricsQuery: 'QUERY'
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}
      target: {type: AverageValue, averageValue: 70m}
"""


@pytest.mark.parametrize(
    ("query", "reported"),
    [
        ("avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)", True),
        ('avg(<<.Series>>{<<.LabelMatchers>>,exported_pod=~"llm-.*"}) by (<<.GroupBy>>)', True),
        ("avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) / 100", False),
    ],
)
def test_gl107_follows_the_adapter_rename_unless_the_query_rescales(
    query: str, reported: bool
) -> None:
    findings = _only(lint_text(ADAPTER_RENAMED.replace("QUERY", query), select=["GL107"]), "GL107")
    assert bool(findings) is reported
    if reported:
        assert "(prometheus-adapter serves it from DCGM_FI_DEV_GPU_UTIL)" in findings[0].message
        assert findings[0].severity is Severity.ERROR


def test_gl107_metric_aliases_give_a_scale() -> None:
    text = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: busy}
      target: {type: AverageValue, averageValue: "80"}
"""
    assert _only(lint_text(text, select=["GL107"]), "GL107") == []
    settings = Settings(metric_aliases={"busy": "DCGM_FI_PROF_SM_ACTIVE"})
    (finding,) = _only(lint_text(text, settings=settings, select=["GL107"]), "GL107")
    assert finding.severity is Severity.WARNING
    assert finding.fix == 'averageValue: "800m"   # 80% on the 0-1 scale'


def test_gl107_config_severity_replaces_the_per_finding_severity() -> None:
    text = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_PROF_GR_ENGINE_ACTIVE}
      target: {type: AverageValue, averageValue: "70"}
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: 70m}
"""
    default = _only(lint_text(text, select=["GL107"]), "GL107")
    assert [f.severity for f in default] == [Severity.WARNING, Severity.ERROR]
    settings = Settings(rules={"GL107": RuleSettings(severity=Severity.INFO)})
    overridden = _only(lint_text(text, settings=settings, select=["GL107"]), "GL107")
    assert [f.severity for f in overridden] == [Severity.INFO, Severity.INFO]


# --- GL108 ----------------------------------------------------------------------------------


SCALE_TO_ZERO = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: worker}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
  minReplicas: 0
  maxReplicas: 4
  metrics:
  - type: External
    external:
      metric: {name: queue_depth}
      target: {type: AverageValue, averageValue: "20"}
"""


def test_gl108_scale_to_zero_depends_on_the_feature_gate_option() -> None:
    assert _only(lint_text(SCALE_TO_ZERO, select=["GL108"]), "GL108") == []
    settings = _settings("GL108", **{"scale-to-zero-gate": False})
    (finding,) = _only(lint_text(SCALE_TO_ZERO, settings=settings, select=["GL108"]), "GL108")
    assert finding.message == (
        "HorizontalPodAutoscaler worker: minReplicas 0 is not allowed. It needs the "
        "HPAScaleToZero feature gate, and option scale-to-zero-gate is false; the API server "
        "rejects the object."
    )
    assert (finding.location.line, finding.location.column) == (6, 3)
    # Before 1.37 the gate is off by default, and the option turns it on.
    settings = _settings("GL108", **{"scale-to-zero-gate": True})
    settings.versions = settings.versions.with_release("kubernetes", Release(1, 34), "config")
    assert _only(lint_text(SCALE_TO_ZERO, settings=settings, select=["GL108"]), "GL108") == []


# --- every rule: malformed input is not a traceback -----------------------------------------

MALFORMED = [
    "spec: []",
    "spec: {scaleTargetRef: web, maxReplicas: [1], minReplicas: {a: 1}}",
    "spec: {scaleTargetRef: {kind: [], name: 5}, metrics: nope, behavior: []}",
    "spec:\n  scaleTargetRef: {name: x}\n  maxReplicas: 1.5\n  behavior: {scaleUp: 5, "
    "scaleDown: {policies: {a: b}, stabilizationWindowSeconds: true, selectPolicy: [Max]}}",
    "spec:\n  scaleTargetRef: {name: x-00001-deployment, kind: Deployment}\n  maxReplicas: 2\n"
    "  metrics:\n  - 5\n  - {type: Pods, pods: []}\n  - {type: Pods, pods: {metric: 3, target: "
    "{type: [], averageValue: [1]}}}\n  - {type: Object, object: {target: {type: Value}}}\n"
    "  - {type: External, external: {metric: {name: DCGM_FI_DEV_GPU_UTIL}, target: "
    "{type: AverageValue, averageValue: .nan}}}\n"
    "  - {type: Resource, resource: {name: cpu, target: {type: Utilization, "
    "averageUtilization: [80]}}}\n"
    "  - {type: ContainerResource, containerResource: {name: cpu, target: {averageValue: true}}}",
    "spec:\n  scaleTargetRef: {name: a-predictor-default}\n  maxReplicas: 3\n  minReplicas: 3\n"
    "  behavior:\n    scaleDown:\n      policies:\n      - 7\n      - {type: 1, value: x, "
    "periodSeconds: null}",
]
RULES = ["GL102", "GL103", "GL105", "GL106", "GL107", "GL108", "GL109", "GL110"]


@pytest.mark.parametrize("spec", MALFORMED)
@pytest.mark.parametrize("version", ["autoscaling/v1", "autoscaling/v2beta1", "autoscaling/v2"])
def test_malformed_hpas_give_findings_not_tracebacks(spec: str, version: str) -> None:
    text = f"apiVersion: {version}\nkind: HorizontalPodAutoscaler\nmetadata: {{name: h}}\n{spec}\n"
    text += "---\napiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: s}\n"
    text += "spec: {scaleTargetRef: {name: x}, triggers: 7}\n"
    for finding in lint_text(text, select=RULES):
        assert finding.location.line >= 1 and finding.message and finding.fix


# --- the real-world corpus ------------------------------------------------------------------

# Every finding these rules make on ../shared/corpus, by file, rule and line. The HPA pairs
# in kubernetes/examples and in production-stack's tutorials are alternatives in their
# repositories (the corpus notes say so, the files do not): production-stack's target
# Deployment is not in the input, so GL103 does not run on its pair (a note says so);
# kubernetes/examples holds its Deployment, and applied as a directory its two HPAs conflict.
CORPUS_FINDINGS = {
    ("ai-ml__llm-multi-cluster-gw__hpa-custom-metrics.yaml", "GL102", 18),
    ("ai-ml__llm-multihost-gpus__vllm-hpa.yaml", "GL102", 21),
    ("AI__vllm-deployment__hpa__gpu-horizontal-pod-autoscaler.yaml", "GL102", 60),
    ("AI__vllm-deployment__hpa__horizontal-pod-autoscaler.yaml", "GL102", 32),
    ("AI__vllm-deployment__hpa__horizontal-pod-autoscaler.yaml", "GL102", 44),
    ("AI__vllm-deployment__hpa__gpu-horizontal-pod-autoscaler.yaml", "GL103", 12),
    ("AI__vllm-deployment__hpa__horizontal-pod-autoscaler.yaml", "GL103", 12),
    # KEDA on a GPU Deployment (1 to 2 replicas) with no advanced...behavior: KEDA's HPA
    # has the defaults, the same as an HPA without behavior.
    ("examples__gpu__prometheus-scaledObject.yaml", "GL102", 6),
}
V2BETA_DUMPS = {
    "cost-optimization__gke-shift-left-cost__api__testdata__hpa__hpa-v2beta1.yaml": 11,
    "cost-optimization__gke-shift-left-cost__api__testdata__hpa__hpa-v2beta2.yaml": 11,
}


def test_corpus_findings_are_exactly_the_reviewed_ones(corpus: Path) -> None:
    findings = lint_paths(corpus, select=RULES)
    gl109: dict[str, int] = {}
    others = set()
    for finding in findings:
        name = finding.location.file.rsplit("/", 1)[-1]
        if finding.rule == "GL109":
            gl109[name] = gl109.get(name, 0) + 1
        else:
            others.add((name, finding.rule, finding.location.line))
    assert gl109 == V2BETA_DUMPS
    assert others == CORPUS_FINDINGS


def test_options_are_read_from_the_configuration_file() -> None:
    from gpulint.engine.config import settings_from_data
    from gpulint.engine.registry import rule_option_schemas

    data = {
        "rules": {
            "GL102": {
                "min-scale-down-stabilization-seconds": 600,
                "report-missing-scale-up": False,
                "report-missing-scale-down": False,
            },
            "GL108": {"scale-to-zero-gate": False},
        }
    }
    settings = settings_from_data(data, ".gpulint.yaml", rule_option_schemas())
    gl102 = _only(lint_text(SCALE_DOWN_ONLY, settings=settings, select=["GL102"]), "GL102")
    assert [f.fix for f in gl102] == ["stabilizationWindowSeconds: 600"]
    assert len(_only(lint_text(SCALE_TO_ZERO, settings=settings, select=["GL108"]), "GL108")) == 1


def test_unquoted_helm_actions_are_not_judged() -> None:
    text = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: x}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  minReplicas: {{ .Values.min }}
  maxReplicas: {{ .Values.max }}
  behavior: {{ toYaml .Values.behavior }}
  metrics:
  - {{ toYaml .Values.metric }}
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {{ toYaml .Values.target }}
"""
    assert [f.rule for f in lint_text(GPU_DEPLOYMENT + text, select=RULES)] == []
    # the same HPA with the placeholders filled in is judged (GL102: no behavior)
    filled = text.replace("{{ toYaml .Values.behavior }}", "{}").replace("{{ .Values.min }}", "1")
    assert [f.rule for f in lint_text(GPU_DEPLOYMENT + filled, select=["GL102"])] == ["GL102"]


def test_gl103_two_scaled_objects_asking_for_one_hpa_name() -> None:
    text = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: a}
spec:
  scaleTargetRef: {name: w}
  advanced: {horizontalPodAutoscalerConfig: {name: shared}}
  triggers: [{type: cpu, metricType: Utilization, metadata: {value: "60"}}]
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: b}
spec:
  scaleTargetRef: {name: w}
  advanced: {horizontalPodAutoscalerConfig: {name: shared}}
  triggers: [{type: memory, metricType: Utilization, metadata: {value: "60"}}]
"""
    (finding,) = _only(lint_text(text + _deployment("w"), select=["GL103"]), "GL103")
    assert (finding.location.line, finding.location.column) == (13, 3)
    assert finding.message.startswith(
        "KEDA ScaledObject b (HPA shared) asks KEDA for the HPA name shared, which ScaledObject a "
        "already uses"
    )


def test_gl103_fix_merges_the_largest_max_replicas_and_the_most_cautious_behavior() -> None:
    text = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: a}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: w}
  maxReplicas: 5
  behavior:
    scaleDown: {stabilizationWindowSeconds: 300}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: b}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: w}
  maxReplicas: 10
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 60
      policies: [{type: Pods, value: 1, periodSeconds: 120}]
    scaleDown: {stabilizationWindowSeconds: 900}
"""
    findings = _only(lint_text(text + _deployment("w"), select=["GL103"]), "GL103")
    # One fix for the group, printed on the first member; the other points at it.
    assert len(findings) == 2 and findings[1].fix.startswith("the fix of GL103 on ")
    fix = findings[0].fix
    assert fix.startswith(
        "# keep HorizontalPodAutoscaler a with every metric (it acts on the largest proposal), "
        "the largest maxReplicas, the most cautious behavior of each direction and delete "
        "HorizontalPodAutoscaler b:\n"
    )
    assert "  maxReplicas: 10\n" in fix
    assert "    scaleDown:\n      stabilizationWindowSeconds: 900" in fix
    assert "    scaleUp:\n      stabilizationWindowSeconds: 60" in fix


def test_gl103_a_group_of_thousands_is_reported_in_linear_size() -> None:
    """2,000 HPAs on one Deployment: one finding each, naming a few others and the count."""
    hpa = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: h{i}}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
  minReplicas: 1
  maxReplicas: 3
"""
    text = "---\n".join(hpa.format(i=i) for i in range(2000)) + _deployment("web")
    findings = _only(lint_text(text, select=["GL103"]), "GL103")
    assert len(findings) == 2000
    first = findings[0]
    assert "2,000 autoscalers. They are this HorizontalPodAutoscaler h0, " in first.message
    assert first.message.count("HorizontalPodAutoscaler h") == 6
    assert "and 1,994 more" in first.message
    assert len(first.related) == 10
    assert "and 1,994 more:" in first.fix
    assert max(len(f.message) + len(f.fix) for f in findings) < 2000


def test_gl102_writes_lists_as_the_file_indents_them() -> None:
    indented = FIXTURES / "GL102" / "fail_indented_lists.yaml"
    (finding,) = [f for f in lint_paths(indented) if f.rule == "GL102"]
    assert "\n    policies:\n      - type: Pods\n        value: 2 " in finding.fix
    # A file whose lists start at their key's column gets them there.
    (finding,) = [
        f
        for f in lint_paths(FIXTURES / "GL102" / "fail_no_behavior_on_a_gpu_deployment.yaml")
        if f.rule == "GL102"
    ]
    assert "\n    policies:\n    - type: Pods\n      value: 2 " in finding.fix


def test_gl101_keda_fix_queries_the_repository_s_prometheus_with_its_labels() -> None:
    """The trigger GL101 writes for a ScaledObject queries the Prometheus the repository's
    other triggers query, with the labels its dcgm-exporter scrape stores (honorLabels: true
    keeps the exporter's namespace and pod), and needs no label note then."""
    text = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: asr}
spec:
  template:
    spec:
      containers:
      - {name: asr, image: asr, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: asr}
spec:
  scaleTargetRef: {name: asr}
  minReplicaCount: 1
  maxReplicaCount: 4
  triggers:
  - type: cpu
    metricType: Utilization
    metadata: {value: "80"}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: other}
spec:
  scaleTargetRef: {name: other}
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://kps-prometheus.observability.svc:9090
      query: sum(queue_depth)
      threshold: "5"
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: dcgm-exporter, labels: {app: dcgm-exporter}}
spec:
  selector: {matchLabels: {app: dcgm-exporter}}
  endpoints:
  - port: metrics
    honorLabels: true
"""
    (finding,) = _only(lint_text(text, select=["GL101"]), "GL101")
    assert "serverAddress: http://kps-prometheus.observability.svc:9090" in finding.fix
    assert 'query: avg(DCGM_FI_DEV_GPU_UTIL{namespace="' in finding.fix
    assert 'pod=~"asr-.*"})\n' in finding.fix and "honorLabels" not in finding.fix
