"""Knative, KServe and GPU-resource rules (GL201-GL204, GL301-GL306, GL501): what the
fixtures' snapshots do not show (each finding's position, severity, message and fix are in
tests/fixtures/GL2*/, GL3*/, GL501/ and their snapshots): catalog entries, configured
severities and modes, shared settings reported once, malformed objects, the reviewed corpus
findings and fixes that follow the configured KServe version.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulint.core.model import Severity
from gpulint.engine.config import RuleSettings, Settings
from gpulint.engine.registry import all_rules

from .conftest import lint_paths, lint_text


def test_rule_catalog_entries() -> None:
    expected = {
        "GL201": ("knative-kpa-with-hpa", Severity.ERROR),
        "GL202": ("knative-annotation-placement", Severity.ERROR),
        "GL203": ("knative-metric-class", Severity.ERROR),
        "GL204": ("knative-gpu-on-kpa", Severity.WARNING),
        "GL301": ("kserve-deploymentmode-field", Severity.ERROR),
        "GL302": ("kserve-deploymentmode-value", Severity.ERROR),
        "GL303": ("kserve-cpu-autoscaler-on-gpu", Severity.ERROR),
        "GL304": ("kserve-max-replicas-missing", Severity.WARNING),
        "GL305": ("kserve-ignored-autoscaling", Severity.WARNING),
        "GL306": ("kserve-gpu-on-knative", Severity.WARNING),
        "GL501": ("gpu-resource-requests", Severity.ERROR),
    }
    specs = {spec.id: spec for spec in all_rules()}
    for rule_id, (name, severity) in expected.items():
        spec = specs[rule_id]
        assert (spec.name, spec.severity) == (name, severity)
        for section in ("What it checks", "Why is this bad?", "Example", "Use instead"):
            assert spec.doc.section(section), f"{rule_id} lacks ## {section}"


ALIAS = """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: sklearn
  annotations: {serving.kserve.io/deploymentMode: Serverless}
spec:
  predictor: {sklearn: {storageUri: gs://models/sklearn}}
"""


def test_configured_severity_replaces_the_per_finding_severity() -> None:
    settings = Settings(rules={"GL302": RuleSettings(severity=Severity.ERROR)})
    settings.kserve_version = (0, 16)  # the alias is deprecated there
    findings = [f for f in lint_text(ALIAS, settings=settings) if f.rule == "GL302"]
    assert [f.severity for f in findings] == [Severity.ERROR]
    on_016 = Settings()
    on_016.kserve_version = (0, 16)
    default = [f for f in lint_text(ALIAS, settings=on_016) if f.rule == "GL302"]
    assert [f.severity for f in default] == [Severity.INFO]
    on_015 = Settings()
    on_015.kserve_version = (0, 15)  # the alias is the name that release knows
    assert [f for f in lint_text(ALIAS, settings=on_015) if f.rule == "GL302"] == []
    # Not configured: the newest release, where the alias is deprecated.
    assert [f.severity for f in lint_text(ALIAS) if f.rule == "GL302"] == [Severity.INFO]


NO_ANNOTATION_GPU = """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: llm}
spec:
  predictor:
    maxReplicas: 4
    model:
      modelFormat: {name: huggingface}
      resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_configured_cluster_default_mode_decides_between_gl303_and_gl306() -> None:
    knative = {f.rule for f in lint_text(NO_ANNOTATION_GPU, select=["GL303", "GL306"])}
    assert knative == {"GL306"}
    settings = Settings(kserve_default_mode="Standard")
    standard = lint_text(NO_ANNOTATION_GPU, settings=settings, select=["GL303", "GL306"])
    assert [f.rule for f in standard] == ["GL303"]
    assert (
        "(no serving.kserve.io/deploymentMode annotation: the cluster default applies, Standard "
        "per kserve.default-deployment-mode in the gpulint configuration)"
    ) in standard[0].message


def test_configmap_in_the_input_names_itself_as_the_mode_source() -> None:
    text = (
        NO_ANNOTATION_GPU
        + """---
apiVersion: v1
kind: ConfigMap
metadata: {name: inferenceservice-config, namespace: kserve}
data:
  deploy: '{"defaultDeploymentMode": "RawDeployment"}'
"""
    )
    findings = lint_text(text, select=["GL303", "GL306"])
    assert [f.rule for f in findings] == ["GL303"]
    assert "Standard per ConfigMap kserve/inferenceservice-config" in findings[0].message


def test_component_annotations_override_the_isvc_autoscaler_class() -> None:
    text = """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llm
  annotations:
    serving.kserve.io/deploymentMode: Standard
    serving.kserve.io/autoscalerClass: external
spec:
  predictor:
    annotations: {serving.kserve.io/autoscalerClass: hpa}
    model:
      modelFormat: {name: huggingface}
      resources: {limits: {nvidia.com/gpu: 1}}
"""
    findings = lint_text(text, select=["GL303", "GL304"])
    assert sorted(f.rule for f in findings) == ["GL303", "GL304"]
    assert "autoscalerClass hpa (annotation)" in findings[0].message


def test_isvc_settings_shared_by_components_are_reported_once() -> None:
    text = """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: chat
  annotations: {autoscaling.knative.dev/metric: cpu}
spec:
  predictor:
    model: {modelFormat: {name: huggingface}}
  transformer:
    containers: [{name: tok, image: tok}]
"""
    findings = lint_text(text, select=["GL203"])
    assert len(findings) == 1
    assert findings[0].headline.startswith("InferenceService chat scales on cpu")
    assert "(Knative mode, predictor and transformer) scales on cpu" in findings[0].detail


MALFORMED = [
    # Shapes a linter meets in half-written or generated manifests.
    "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: []\nspec: 3\n",
    "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: x\n"
    "  annotations: [a, b]\nspec:\n  predictor: [1, 2]\n",
    "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: x\n"
    "  annotations: {serving.kserve.io/deploymentMode: 7, autoscaling.knative.dev/target: x}\n"
    "spec:\n  predictor:\n    annotations: nope\n    scaleMetric: [cpu]\n    autoScaling:\n"
    "      metrics: {type: External}\n      behavior: 1\n    minReplicas: many\n"
    "    model:\n      resources: {limits: {nvidia.com/gpu: [1]}, requests: 5}\n",
    "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: x\n"
    "  annotations: {serving.kserve.io/deploymentMode: Standard}\nspec:\n  predictor:\n"
    "    maxReplicas: null\n    autoScaling:\n      metrics: [null, {type: Resource, "
    "resource: 3}, {type: PodMetric}]\n    containers: [{resources: {limits: {nvidia.com/gpu: "
    "one}, requests: {nvidia.com/gpu: null}}}]\n",
    "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: s\n  annotations:\n"
    "    autoscaling.knative.dev/class: {a: b}\nspec:\n  template:\n    metadata:\n"
    "      annotations: {autoscaling.knative.dev/class: hpa.autoscaling.knative.dev, "
    "autoscaling.knative.dev/metric: 5, autoscaling.knative.dev/target: nan}\n    spec:\n"
    "      containers: [{resources: {limits: {nvidia.com/gpu: -1}}}, 7]\n",
    "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec:\n"
    "  scaleTargetRef: {kind: Deployment, name: x-00001-deployment}\n---\n"
    "apiVersion: serving.knative.dev/v1\nkind: Configuration\nmetadata: {name: x}\nspec:\n"
    "  template: {metadata: {annotations: null}, spec: {containers: []}}\n",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_serving_objects_give_findings_not_tracebacks(text: str) -> None:
    rules = ["GL201", "GL202", "GL203", "GL204", "GL3", "GL501"]
    for finding in lint_text(text, select=rules):
        assert finding.location.line >= 1 and finding.message


# What these rules report on the real-manifest corpus, linted as one input (the KServe
# inferenceservice-config ConfigMap in it sets the cluster default to Serverless = Knative).
CORPUS_FINDINGS = {
    ("GL306", "NVIDIA__nim-deploy/kserve__nim-models__llama-3.1-8b-instruct_1xgpu_1.1.0.yaml", 4),
    ("GL306", "NVIDIA__nim-deploy/kserve__nim-models__llama3-70b-instruct_4xh100_1.0.0.yaml", 4),
    ("GL306", "kserve__kserve/docs__samples__accelerators__tensorflow-gpu.yaml", 5),
    ("GL306", "kserve__kserve/docs__samples__autoscaling__autoscale_gpu.yaml", 5),
    ("GL306", "kserve__kserve/docs__samples__fluid__kserve-isvc.yaml", 3),
    ("GL306", "kserve__kserve/docs__samples__v1beta1__torchserve__v1__bloom__bloom-560m.yaml", 3),
    ("GL306", "kserve__kserve/docs__samples__v1beta1__torchserve__v2__bert__bert_gpu.yaml", 3),
    ("GL304", "kserve__kserve/docs__samples__rollout-strategy__rollout-strategy-example.yaml", 9),
    ("GL304", "kserve__kserve/docs__samples__rollout-strategy__rollout-strategy-example.yaml", 23),
    ("GL304", "kserve__kserve/docs__samples__rollout-strategy__rollout-strategy-example.yaml", 49),
    ("GL304", "kserve__kserve/docs__samples__rollout-strategy__rollout-strategy-example.yaml", 70),
    ("GL305", "kserve__kserve/test__benchmark__sklearn_hpa.yaml", 8),
    ("GL305", "kserve__kserve/test__benchmark__sklearn_hpa.yaml", 9),
    ("GL304", "kserve__kserve/test__benchmark__sklearn_hpa.yaml", 11),
    # RawDeployment, deprecated on the KServe gpulint judges for by default (0.20): info.
    ("GL302", "kserve__kserve/test__benchmark__sklearn_hpa.yaml", 6),
}


def test_corpus_findings_are_the_defended_ones(corpus: Path) -> None:
    rules = ["GL201", "GL202", "GL203", "GL204", "GL301", "GL302", "GL303", "GL304"]
    rules += ["GL305", "GL306", "GL501"]
    findings = lint_paths(corpus, select=rules)
    got = {
        (f.rule, str(Path(f.location.file).resolve().relative_to(corpus)), f.location.line)
        for f in findings
    }
    assert got == CORPUS_FINDINGS


GPU_ISVC = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llm
  namespace: ml
  annotations:
    serving.kserve.io/deploymentMode: Serverless
spec:
  predictor:
    minReplicas: 1
    maxReplicas: 4
    model:
      modelFormat: {name: huggingface}
      resources:
        limits: {nvidia.com/gpu: 1}
"""

ADAPTER_VALUES = """\
---
rules:
  default: false
  custom:
  - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
    resources:
      overrides:
        exported_namespace: {resource: namespace}
        exported_pod: {resource: pod}
    name: {matches: "^DCGM_FI_DEV_GPU_UTIL$", as: gpu_util_percent}
    metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""


@pytest.mark.parametrize(
    ("version", "spelled"),
    # None: not configured, so the newest KServe (gpulint.engine.versions), which has Standard.
    [(None, "Standard"), ((0, 15), "RawDeployment"), ((0, 16), "Standard")],
)
def test_fixes_spell_the_deployment_mode_for_the_configured_kserve(
    version: tuple[int, int] | None, spelled: str
) -> None:
    settings = Settings()
    settings.kserve_version = version
    (gl306,) = lint_text(GPU_ISVC, settings=settings, select=["GL306"])
    assert f"serving.kserve.io/deploymentMode: {spelled}   #" in gl306.fix
    field = GPU_ISVC.replace("  predictor:\n", "  deploymentMode: Serverless\n  predictor:\n")
    (gl301,) = lint_text(field, settings=settings, select=["GL301"])
    assert (
        f"serving.kserve.io/deploymentMode: {'Knative' if spelled == 'Standard' else 'Serverless'}"
        in gl301.fix
    )
    # what the fix writes is never reported by GL302 on that KServe
    written = GPU_ISVC.replace("Serverless", spelled)
    assert lint_text(written, settings=settings, select=["GL302"]) == []


def test_fixes_name_the_gpu_metric_as_the_adapter_of_the_input_serves_it() -> None:
    (gl306,) = lint_text(GPU_ISVC + ADAPTER_VALUES, select=["GL306"])
    assert "autoscaling.knative.dev/metric: gpu_util_percent" in gl306.fix
    raw = GPU_ISVC.replace("Serverless", "RawDeployment").replace("    maxReplicas: 4\n", "")
    raw = raw.replace("    minReplicas: 1\n", "    minReplicas: 1\n    maxReplicas: 4\n")
    (gl303,) = lint_text(raw + ADAPTER_VALUES, select=["GL303"])
    assert "metric: {name: gpu_util_percent}" in gl303.fix
    assert "behavior:" in gl303.fix  # the proposed HPA is not itself a GL102
    (alone,) = lint_text(raw, select=["GL303"])
    assert "metric: {name: DCGM_FI_DEV_GPU_UTIL}   # the name your prometheus-adapter" in alone.fix


def test_kserve_version_in_the_configuration(tmp_path: Path) -> None:
    from gpulint.engine.config import ConfigError, load_settings
    from gpulint.engine.registry import rule_names, rule_option_schemas

    config = tmp_path / ".gpulint.yaml"
    config.write_text('kserve:\n  version: "v0.15.2"\n')
    assert load_settings(str(config), rule_option_schemas(), rule_names()).kserve_version == (0, 15)
    config.write_text("kserve:\n  version: latest\n")
    with pytest.raises(ConfigError) as error:
        load_settings(str(config), rule_option_schemas(), rule_names())
    assert error.value.line == 2
