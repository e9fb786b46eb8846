"""GL401-GL408: what the fixtures' snapshots do not show (tests/fixtures/GL4*/, whose
snapshots hold each finding's exact wording): queries judged only for GPU workloads, findings
that name the other end, the corrected seed, the reviewed corpus findings, malformed configs,
and the label-matcher severity.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import FIXTURES, lint_paths, lint_text

SERIES_QUERY = "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"
# The seed's Helm values, without its `name` block: DCGM_FI_DEV_GPU_UTIL with exported_* labels.
SEED_VALUES = f"""\
rules:
  default: false
  custom:
  - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{{exported_pod!=""}}'
    resources:
      overrides:
        exported_namespace: {{resource: "namespace"}}
        exported_pod: {{resource: "pod"}}
    metricsQuery: '{SERIES_QUERY}'
"""
NAME_BLOCK = '    name: {matches: "^DCGM_FI_DEV_GPU_UTIL$", as: gpu_utilization}\n'
# The seed's ConfigMap rule: pod/namespace overrides, in the adapter's own file format.
POD_RULE = f"""\
rules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{{namespace!="",pod!=""}}'
  resources:
    overrides:
      namespace: {{resource: namespace}}
      pod: {{resource: pod}}
  metricsQuery: '{SERIES_QUERY}'
"""
# A KEDA ScaledObject whose one prometheus trigger reads QUERY (a block scalar, line 10).
KEDA_TRIGGER = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm, namespace: ml}
spec:
  scaleTargetRef: {name: llm}
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus-operated.monitoring.svc:9090
      query: |
        QUERY
      threshold: "70"
"""
NAMED_VALUES = SEED_VALUES.replace("    metricsQuery", NAME_BLOCK + "    metricsQuery")
SUM_VALUES = SEED_VALUES.replace("avg(", "sum(")
SERVICE_MONITOR = """\
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: dcgm-exporter}
spec:
  selector: {matchLabels: {app: nvidia-dcgm-exporter}}
  endpoints:
  - port: gpu-metrics
"""


def hpa(metric: str, kind: str = "Pods", target: str = "60") -> str:
    field = "pods" if kind == "Pods" else "external"
    return f"""\
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: inference
  namespace: ml
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: inference}}
  maxReplicas: 4
  metrics:
  - type: {kind}
    {field}:
      metric:
        name: {metric}
      target: {{type: AverageValue, averageValue: "{target}"}}
"""


def deployment(resource: str, count: int) -> str:
    return f"""\
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: inference, namespace: ml}}
spec:
  selector: {{matchLabels: {{app: inference}}}}
  template:
    metadata: {{labels: {{app: inference}}}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai
        resources: {{limits: {{{resource}: {count}}}}}
"""


def test_a_constant_trigger_query_is_judged_only_for_a_workload_that_may_use_gpus() -> None:
    constant = KEDA_TRIGGER.replace("QUERY", "vector(1) * 80").replace(
        "name: llm}", "name: inference}"
    )

    def judged(text: str) -> list[str]:
        return [f.message for f in lint_text(text, select=["GL402"]) if f.rule == "GL402"]

    assert judged(constant + deployment("cpu", 4)) == []
    assert len(judged(constant + deployment("nvidia.com/gpu", 1))) == 1
    assert len(judged(constant)) == 1  # the target is not in the input: it may use GPUs


def test_cross_object_findings_name_the_other_end() -> None:
    (finding,) = [
        f for f in lint_text(POD_RULE + SERVICE_MONITOR, select=["GL403"]) if f.rule == "GL403"
    ]
    (scrape,) = finding.related
    assert str(scrape.ref) == "ServiceMonitor dcgm-exporter"
    assert scrape.location is not None and scrape.location.line == 15  # its endpoint
    text = SUM_VALUES + deployment("nvidia.com/gpu", 2) + hpa("DCGM_FI_DEV_GPU_UTIL")
    (summed,) = [f for f in lint_text(text, select=["GL406"]) if f.rule == "GL406"]
    rule, request = summed.related
    assert (rule.role, rule.location.line if rule.location else 0) == ("adapter rule", 9)
    assert (request.role, str(request.ref)) == ("GPU request", "Deployment ml/inference")


def test_the_seed_pipeline_once_corrected_is_clean() -> None:
    # gpu-operator scrapes with the default honorLabels (false); the adapter maps exported_*,
    # renames the series for the HPA and averages; the pods hold one GPU each.
    gpu_operator = """\
dcgmExporter:
  serviceMonitor:
    enabled: true
driver:
  enabled: false
"""
    text = (
        gpu_operator
        + "---\n"
        + NAMED_VALUES
        + deployment("nvidia.com/gpu", 1)
        + hpa("gpu_utilization")
    )
    assert [f for f in lint_text(text) if f.rule.startswith("GL4")] == []


def test_corpus_findings_are_the_ones_we_defend(corpus: Path) -> None:
    """On the real-world corpus the adapter rules report exactly these (each reviewed)."""
    findings = [f for f in lint_paths(corpus) if f.rule.startswith("GL4")]
    got = sorted(
        (Path(f.location.file).name, f.rule, f.location.line, f.location.column) for f in findings
    )
    assert got == [
        # kandakji/sample-aws-eks-auto-mode: a KEDA query on vllm:gpu_cache_usage_perc, which
        # vLLM 0.12 removed (vllm-project/vllm#29330)
        ("examples__gpu__prometheus-scaledObject.yaml", "GL410", 18, 9),
        # production-stack: no <<.LabelMatchers>> in either rule; by (namespace, model)
        ("observability__prom-adapter.yaml", "GL404", 20, 5),
        ("observability__prom-adapter.yaml", "GL404", 31, 5),
        ("observability__prom-adapter.yaml", "GL404", 31, 5),
    ]


MALFORMED = """\
rules:
- seriesQuery: ['a']
  name: "x"
  resources: [1, 2]
  metricsQuery: {a: 1}
- seriesQuery: 'x{'
  resources:
    overrides:
      1: {resource: pod}
      pod: null
    template: 7
    namespaced: "x"
  seriesFilters: {is: a}
  name: {matches: "(", as: 5}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>'
- 5
externalRules:
- seriesQuery: 'b'
  metricsQuery: '<<if .Series>>x'
resourceRules: [1]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: x}
spec:
  scaleTargetRef: {kind: 5, name: x}
  metrics:
  - type: Pods
    pods: {metric: {name: 5}, target: {averageValue: [1]}}
  - type: Object
    object: {metric: {name: foo}, describedObject: {kind: 7}}
  - type: Pods
    pods: {metric: {name: DCGM_FI_DEV_GPU_UTIL}, target: {averageValue: "abc"}}
"""


def test_malformed_configs_are_findings_not_tracebacks() -> None:
    findings = [f for f in lint_text(MALFORMED) if f.rule.startswith("GL4")]
    by_rule = {f.rule for f in findings}
    assert {"GL404", "GL405"} <= by_rule
    # The config's own findings sit in the config, at the keys where the mistakes are.
    config_lines = {f.location.line for f in findings if f.rule != "GL401"}
    assert config_lines <= set(range(1, 21)) and {2, 6, 16, 19, 20} <= config_lines


NAMESPACE_RULE = """\
rules:
  default: false
  custom:
  - seriesQuery: '{__name__=~"^vllm:num_requests_waiting$"}'
    resources:
      overrides:
        namespace: {resource: namespace}
    name:
      as: vllm_num_requests_waiting
    metricsQuery: QUERY
"""


@pytest.mark.parametrize(
    ("query", "severities"),
    [
        # The result keeps `namespace`: values arrive, computed over the whole cluster.
        ("sum by(namespace) (vllm:num_requests_waiting)", ["warning"]),
        ("vllm:num_requests_waiting", ["warning"]),
        # The result loses it: nothing matches; both findings are errors.
        ("sum(vllm:num_requests_waiting)", ["error", "error"]),
        ("sum by(model) (vllm:num_requests_waiting)", ["error", "error"]),
    ],
)
def test_missing_label_matchers_is_an_error_only_where_the_label_is_lost(
    query: str, severities: list[str]
) -> None:
    findings = [f for f in lint_text(NAMESPACE_RULE.replace("QUERY", query)) if f.rule == "GL404"]
    assert sorted(f.severity.name.lower() for f in findings) == severities
    (matchers,) = [f for f in findings if "never uses <<.LabelMatchers>>" in f.message]
    kept = severities == ["warning"]
    assert ("so HPAs get values" in matchers.message) is kept


def test_gl401_judges_a_knative_metric_on_the_service_not_on_the_hpa_knative_made() -> None:
    """In a cluster both the Knative Service on the HPA class and the HPA Knative made for its
    revision are read: the metric is reported once, on the Service, where it is written."""
    fixture = FIXTURES / "GL401" / "fail_knative_hpa_class_metric.yaml"
    made = """\
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: llm-00001
  namespace: ml
  ownerReferences:
  - {apiVersion: autoscaling.internal.knative.dev/v1alpha1, kind: PodAutoscaler, name: llm-00001}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm-00001-deployment}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "70"}
"""
    findings = lint_text(fixture.read_text() + made, select=["GL401"])
    assert [(f.rule, f.object.kind if f.object else None) for f in findings] == [
        ("GL401", "Service")
    ]
