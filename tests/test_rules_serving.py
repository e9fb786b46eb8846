"""Knative, KServe and GPU-resource rules (GL201-GL204, GL301-GL306, GL501): exact findings.

Each case lints one manifest with one rule selected and asserts the finding's position,
severity, message and fix word for word, as a user reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from gpulint.core.model import Severity
from gpulint.engine.config import RuleSettings, Settings
from gpulint.engine.registry import all_rules

from .conftest import lint_paths, lint_text


@dataclass(frozen=True)
class Case:
    id: str
    rule: str
    manifest: str
    line: int
    column: int
    severity: Severity
    message: str
    fix: str
    kserve_version: tuple[int, int] | None = None  # kserve.version in .gpulint.yaml


KNATIVE_HPA_ANNOTATIONS = """\
        autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
        autoscaling.knative.dev/metric: gpu_utilization
        autoscaling.knative.dev/target: "60\""""

CASES = [
    Case(
        "GL201 HPA on a revision of a KPA Knative Service",
        "GL201",
        """
        apiVersion: serving.knative.dev/v1
        kind: Service
        metadata: {name: llm, namespace: ml}
        spec:
          template:
            spec:
              containers:
              - image: vllm/vllm-openai:v0.6.0
                resources: {limits: {nvidia.com/gpu: 1}}
        ---
        apiVersion: autoscaling/v2
        kind: HorizontalPodAutoscaler
        metadata: {name: llm, namespace: ml}
        spec:
          scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm-00003-deployment}
          maxReplicas: 4
          metrics:
          - type: Pods
            pods:
              metric: {name: gpu_utilization}
              target: {type: AverageValue, averageValue: "60"}
        """,
        15,
        3,
        Severity.ERROR,
        "HorizontalPodAutoscaler llm scales Deployment llm-00003-deployment, which Knative's KPA "
        "scales too. The Deployment is a revision of Knative Service llm, whose revisions are "
        "scaled by the KPA (the default class): the KPA patches the Deployment's spec.replicas "
        "itself every 2 seconds from concurrency, the HPA sets it from its own metric every 15 "
        "seconds, so the replica count flaps between the two and GPU pods, each loading its "
        "model, are started and killed over and over.",
        "# delete HorizontalPodAutoscaler llm; Knative then creates and owns one HPA per "
        "revision\nspec:\n  template:\n    metadata:\n      annotations:\n"
        + KNATIVE_HPA_ANNOTATIONS,
    ),
    Case(
        "GL202 autoscaling annotation on the Service metadata",
        "GL202",
        """
        apiVersion: serving.knative.dev/v1
        kind: Service
        metadata:
          name: llm
          annotations:
            autoscaling.knative.dev/max-scale: "4"
        spec:
          template:
            spec:
              containers:
              - image: vllm/vllm-openai:v0.6.0
        """,
        6,
        5,
        Severity.ERROR,
        "Knative Service llm has autoscaling.knative.dev/max-scale in its own "
        "metadata.annotations. The Knative webhook rejects it there (autoscaling annotations "
        'must be put under "spec.template.metadata.annotations" to work), because the '
        "autoscaler reads only the revision template's annotations.",
        "spec:\n  template:\n    metadata:\n      annotations:\n        autoscaling.knative.dev/"
        'max-scale: "4"\n# and delete autoscaling.knative.dev/max-scale from metadata.annotations',
    ),
    Case(
        "GL203 ratio target truncated to 0 under the HPA class",
        "GL203",
        """
        apiVersion: serving.knative.dev/v1
        kind: Service
        metadata: {name: ratio}
        spec:
          template:
            metadata:
              annotations:
                autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
                autoscaling.knative.dev/metric: DCGM_FI_PROF_GR_ENGINE_ACTIVE
                autoscaling.knative.dev/target: "0.6"
            spec:
              containers:
              - image: vllm/vllm-openai:v0.6.0
        """,
        10,
        9,
        Severity.ERROR,
        "Knative Service ratio: autoscaling.knative.dev/target is cut to 0. It targets 0.6 of the "
        "custom metric DCGM_FI_PROF_GR_ENGINE_ACTIVE with the Knative HPA class, which uses "
        "int64(target) as the Pods averageValue: the target becomes 0, an invalid HPA target "
        "(averageValue must be positive), so the revision never scales on it.",
        'autoscaling.knative.dev/target: "60"   # with a prometheus-adapter rule that exposes '
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE multiplied by 100 (metricsQuery: 100 * ...) under a new "
        "name",
    ),
    Case(
        "GL203 fractional target above 1 is truncated silently (warning)",
        "GL203",
        """
        apiVersion: serving.knative.dev/v1
        kind: Service
        metadata: {name: queue}
        spec:
          template:
            metadata:
              annotations:
                autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
                autoscaling.knative.dev/metric: vllm_num_requests_waiting
                autoscaling.knative.dev/target: "2.5"
            spec:
              containers:
              - image: vllm/vllm-openai:v0.6.0
        """,
        10,
        9,
        Severity.WARNING,
        "Knative Service queue: autoscaling.knative.dev/target is cut to 2. It targets 2.5 of the "
        "custom metric vllm_num_requests_waiting with the Knative HPA class, which uses "
        "int64(target) as the Pods averageValue: the target becomes 2: the revision scales at 2, "
        "not 2.5, without a warning.",
        'autoscaling.knative.dev/target: "3"   # a whole number',
    ),
    Case(
        "GL203 custom metric with the KPA on a Knative-mode InferenceService",
        "GL203",
        """
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata:
          name: chat
          annotations:
            autoscaling.knative.dev/metric: gpu_utilization
        spec:
          predictor:
            model:
              modelFormat: {name: huggingface}
              resources: {limits: {nvidia.com/gpu: 1}}
        """,
        6,
        5,
        Severity.ERROR,
        "InferenceService chat scales on gpu_utilization, which the KPA cannot scale on. The "
        "InferenceService (Knative mode, predictor) scales on gpu_utilization (annotation "
        "autoscaling.knative.dev/metric) with the KPA (KServe's default class), which only scales "
        "on concurrency or rps: KServe accepts the InferenceService, but Knative rejects the "
        "Knative Service KServe creates from it, so the InferenceService never becomes ready.",
        "metadata:\n  annotations:\n    autoscaling.knative.dev/class: "
        "hpa.autoscaling.knative.dev   # needs Knative's HPA extension\n"
        "    autoscaling.knative.dev/metric: gpu_utilization\n"
        '    autoscaling.knative.dev/target: "70"',
    ),
    Case(
        "GL204 GPU Knative Service on the KPA",
        "GL204",
        """
        apiVersion: serving.knative.dev/v1
        kind: Service
        metadata: {name: llm}
        spec:
          template:
            metadata:
              annotations:
                autoscaling.knative.dev/target: "10"
                autoscaling.knative.dev/min-scale: "1"
            spec:
              containers:
              - image: vllm/vllm-openai:v0.6.0
                resources: {limits: {nvidia.com/gpu: 1}}
        """,
        7,
        7,
        Severity.WARNING,
        "Knative Service llm asks for GPUs (nvidia.com/gpu, 1 per pod), but its revisions are "
        "scaled on requests, not GPU load. The KPA (the default class) scales them on "
        "concurrency (target 10 requests in flight per pod): it adds GPU pods when requests per "
        "pod pass the target, never on GPU load.",
        "spec:\n  template:\n    metadata:\n      annotations:\n"
        "        autoscaling.knative.dev/class: hpa.autoscaling.knative.dev   # needs Knative's "
        "serving-hpa extension\n"
        "        autoscaling.knative.dev/metric: DCGM_FI_DEV_GPU_UTIL   # the name your "
        "prometheus-adapter exposes\n"
        '        autoscaling.knative.dev/target: "70"\n'
        '        autoscaling.knative.dev/min-scale: "1"   # the HPA class does not scale to zero\n'
        "# or: a KServe InferenceService in Standard mode with your own GPU HPA",
    ),
    Case(
        "GL301 deploymentMode as a predictor field",
        "GL301",
        """
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata: {name: triton}
        spec:
          predictor:
            deploymentMode: RawDeployment
            triton: {storageUri: gs://models/triton}
        """,
        6,
        5,
        Severity.ERROR,
        "InferenceService triton sets spec.predictor.deploymentMode, which KServe never reads. "
        "The mode comes only from the serving.kserve.io/deploymentMode annotation in "
        "metadata.annotations (the CRD has deploymentMode only in status); it runs in Knative "
        "mode (no serving.kserve.io/deploymentMode annotation: the cluster default applies, "
        "Knative on a default install).",
        "metadata:\n  annotations:\n    serving.kserve.io/deploymentMode: RawDeployment   # "
        "the name every KServe release accepts; set kserve.version for 0.16's names\n"
        "# and delete spec.predictor.deploymentMode",
    ),
    Case(
        "GL302 lower-case mode falls back to the default",
        "GL302",
        """
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata:
          name: triton
          annotations: {serving.kserve.io/deploymentMode: standard}
        spec:
          predictor: {triton: {storageUri: gs://models/triton}}
        """,
        5,
        17,
        Severity.ERROR,
        "InferenceService triton sets serving.kserve.io/deploymentMode to 'standard', which "
        "KServe does not know. Values are case-sensitive (Standard, RawDeployment, Knative, "
        "Serverless, ModelMesh); KServe ignores it without a warning and the cluster default "
        "applies, Knative on a default install, so it runs in Knative mode. Did you mean "
        "Standard (RawDeployment: the name every KServe release accepts; set kserve.version for "
        "0.16's names)?",
        "serving.kserve.io/deploymentMode: RawDeployment   # the name every KServe release "
        "accepts; set kserve.version for 0.16's names",
    ),
    Case(
        "GL302 deprecated alias at info level",
        "GL302",
        """
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata:
          name: sklearn
          annotations: {serving.kserve.io/deploymentMode: RawDeployment}
        spec:
          predictor: {sklearn: {storageUri: gs://models/sklearn}}
        """,
        5,
        17,
        Severity.INFO,
        "InferenceService sklearn uses the deprecated deployment mode RawDeployment. KServe 0.16 "
        "and later rewrite it to Standard, the name to write on KServe 0.17 (kserve.version).",
        "serving.kserve.io/deploymentMode: Standard",
        kserve_version=(0, 17),
    ),
    Case(
        "GL303 KServe's default CPU HPA on a GPU predictor",
        "GL303",
        """
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata:
          name: llm
          namespace: ml
          annotations: {serving.kserve.io/deploymentMode: Standard}
        spec:
          predictor:
            minReplicas: 2
            maxReplicas: 6
            model:
              modelFormat: {name: huggingface}
              resources: {limits: {nvidia.com/gpu: 1}}
        """,
        8,
        3,
        Severity.ERROR,
        "KServe scales the GPU predictor of InferenceService llm on CPU 80% utilization. It runs "
        "in Standard mode (annotation serving.kserve.io/deploymentMode: Standard) with "
        "autoscalerClass hpa (the default), so KServe creates HPA llm-predictor for its "
        "predictor, which asks for GPUs (nvidia.com/gpu, 1 per pod); CPU and memory do not "
        "follow GPU load, so it will not scale out when the GPU saturates.",
        "metadata:\n  annotations:\n    serving.kserve.io/autoscalerClass: external   # KServe "
        "deletes its HPA and leaves scaling to you\n---\napiVersion: autoscaling/v2\n"
        "kind: HorizontalPodAutoscaler\nmetadata:\n  name: llm-predictor-gpu   # not "
        "llm-predictor: KServe would rewrite an HPA of that name\n  namespace: ml\nspec:\n"
        "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm-predictor}\n"
        "  minReplicas: 2\n  maxReplicas: 6\n  metrics:\n  - type: Pods\n    pods:\n"
        "      metric: {name: DCGM_FI_DEV_GPU_UTIL}   # the name your prometheus-adapter "
        "serves it under\n"
        '      target: {type: AverageValue, averageValue: "70"}\n'
        "  behavior:\n    scaleUp:\n      stabilizationWindowSeconds: 0\n      policies:\n"
        "      - type: Pods\n        value: 2            # GPU pods added at most per period\n"
        "        periodSeconds: 60\n    scaleDown:\n      stabilizationWindowSeconds: 300\n"
        "      policies:\n      - type: Pods\n"
        "        value: 1            # GPU pods removed at most per period\n"
        "        periodSeconds: 120",
    ),
    Case(
        "GL304 no maxReplicas in Standard mode",
        "GL304",
        """
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata:
          name: llm
          annotations: {serving.kserve.io/deploymentMode: Standard}
        spec:
          predictor:
            model: {modelFormat: {name: huggingface}}
        """,
        7,
        3,
        Severity.WARNING,
        "The predictor of InferenceService llm has no maxReplicas, so KServe's HPA llm-predictor "
        "never scales it. In Standard mode (annotation serving.kserve.io/deploymentMode: "
        "Standard) with autoscalerClass hpa (the default), KServe creates that HPA with "
        "maxReplicas = minReplicas = 1.",
        "spec:\n  predictor:\n    minReplicas: 1\n    maxReplicas: 4   # the most the HPA may run"
        "\n# or, to keep a fixed count of 1 without an HPA: serving.kserve.io/autoscalerClass: "
        "none in metadata.annotations",
    ),
    Case(
        "GL305 behavior under the hpa class",
        "GL305",
        """
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata:
          name: llm
          annotations: {serving.kserve.io/deploymentMode: Standard}
        spec:
          predictor:
            maxReplicas: 4
            autoScaling:
              behavior:
                scaleDown: {stabilizationWindowSeconds: 600}
              metrics:
              - type: Resource
                resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
            model: {modelFormat: {name: huggingface}}
        """,
        10,
        7,
        Severity.WARNING,
        "The predictor of InferenceService llm sets autoScaling.behavior, which KServe's HPA "
        "ignores. KServe's HPA reconciler ignores it with autoscalerClass hpa: the HPA always "
        "gets an empty behavior (the API-server defaults); only autoscalerClass keda copies it.",
        "serving.kserve.io/autoscalerClass: keda   # in metadata.annotations: KEDA reads these",
    ),
    Case(
        "GL305 External metric rejected under an explicit hpa class",
        "GL305",
        """
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata:
          name: llm
          annotations:
            serving.kserve.io/deploymentMode: Standard
            serving.kserve.io/autoscalerClass: hpa
        spec:
          predictor:
            maxReplicas: 4
            autoScaling:
              metrics:
              - type: External
                external:
                  metric: {backend: prometheus, query: sum(vllm:num_requests_waiting)}
                  target: {type: Value, value: "10"}
            model: {modelFormat: {name: huggingface}}
        """,
        13,
        9,
        Severity.WARNING,
        "The predictor of InferenceService llm lists an External metric, which autoscalerClass "
        "hpa does not take. With autoscalerClass hpa, KServe's webhook rejects the "
        'InferenceService ("invalid HPA metric source type with value [External],valid metric '
        'source types are Resource"); External metrics in autoScaling.metrics are read only with '
        "autoscalerClass keda.",
        "serving.kserve.io/autoscalerClass: keda   # in metadata.annotations: KEDA reads these",
    ),
    Case(
        "GL306 GPU InferenceService without a mode annotation, scaled to zero",
        "GL306",
        """
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata:
          name: llm
        spec:
          predictor:
            minReplicas: 0
            model:
              modelFormat: {name: huggingface}
              resources: {limits: {nvidia.com/gpu: 2}}
        """,
        3,
        1,
        Severity.WARNING,
        "InferenceService llm asks for GPUs in its predictor, but runs in Knative mode, which "
        "does not scale on GPU load. The predictor asks for nvidia.com/gpu, 2 per pod and runs "
        "in Knative mode (no serving.kserve.io/deploymentMode annotation: the cluster default "
        "applies, Knative on a default install): Knative's KPA (KServe's default class) scales "
        "it on concurrency (Knative's default target, 100 requests in flight per pod), never on "
        "GPU load; minReplicas 0 also scales it to zero when idle, so the next request waits for "
        "a GPU pod to start and load its model.",
        "metadata:\n  annotations:\n    serving.kserve.io/deploymentMode: RawDeployment   # "
        "the name every KServe release accepts; set kserve.version for 0.16's names; recreate "
        "the InferenceService: the mode cannot change on update\n"
        "    serving.kserve.io/autoscalerClass: external   # then add your "
        "own HPA on a GPU metric\n# or stay in Knative mode and scale on a GPU metric:\n"
        "#   autoscaling.knative.dev/class: hpa.autoscaling.knative.dev\n"
        "#   autoscaling.knative.dev/metric: DCGM_FI_DEV_GPU_UTIL\n"
        '#   autoscaling.knative.dev/target: "70"',
    ),
    Case(
        "GL501 GPU request without a limit",
        "GL501",
        """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: tgi, namespace: llm}
        spec:
          template:
            spec:
              containers:
              - name: tgi
                image: tgi
                resources:
                  requests: {nvidia.com/gpu: 2}
        """,
        11,
        22,
        Severity.ERROR,
        "Deployment llm/tgi: container tgi requests nvidia.com/gpu without a limit. The API "
        'server rejects a request of nvidia.com/gpu: 2 without a limit ("Limit must be set for '
        'non overcommitable resources"); GPUs go in limits and the request defaults to the limit.',
        "resources:\n  limits:\n    nvidia.com/gpu: 2\n# and delete nvidia.com/gpu from "
        "resources.requests",
    ),
    Case(
        "GL501 request differs from the limit",
        "GL501",
        """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: tgi}
        spec:
          template:
            spec:
              containers:
              - name: tgi
                image: tgi
                resources:
                  requests: {nvidia.com/gpu: 1}
                  limits: {nvidia.com/gpu: 2}
        """,
        11,
        22,
        Severity.ERROR,
        "Deployment tgi: container tgi requests a different nvidia.com/gpu count than its limit. "
        'It requests nvidia.com/gpu: 1 but limits it to 2: the API server rejects it ("must be '
        'equal to nvidia.com/gpu limit of 2"); GPUs cannot be overcommitted, so the request must '
        "equal the limit.",
        "resources:\n  limits:\n    nvidia.com/gpu: 2\n# and delete nvidia.com/gpu from "
        "resources.requests (it defaults to the limit)",
    ),
    Case(
        "GL501 zero GPUs is a warning",
        "GL501",
        """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: tgi}
        spec:
          template:
            spec:
              containers:
              - name: sidecar
                image: sidecar
                resources:
                  limits: {nvidia.com/gpu: 0}
        """,
        11,
        20,
        Severity.WARNING,
        "Deployment tgi: container sidecar: limits nvidia.com/gpu is zero. Its value 0 reserves "
        "no GPU, yet the container is still declared as a GPU consumer, and without a "
        "device-plugin allocation an image that sets NVIDIA_VISIBLE_DEVICES=all sees every GPU of "
        "the node.",
        "delete nvidia.com/gpu from resources.limits if the container needs no GPU (and set the "
        "env NVIDIA_VISIBLE_DEVICES=void for CUDA images), or ask for at least 1",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_finding_wording_and_position(case: Case) -> None:
    settings = Settings()
    settings.kserve_version = case.kserve_version
    findings = [
        f
        for f in lint_text(case.manifest, settings=settings, select=[case.rule])
        if f.rule == case.rule
    ]
    assert len(findings) == 1, [f.message for f in findings]
    finding = findings[0]
    assert (finding.location.line, finding.location.column) == (case.line, case.column)
    assert finding.severity == case.severity
    assert finding.message == case.message
    assert finding.fix == case.fix


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
    assert [f for f in lint_text(ALIAS) if f.rule == "GL302"] == []  # release unknown


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
    [(None, "RawDeployment"), ((0, 15), "RawDeployment"), ((0, 16), "Standard")],
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
