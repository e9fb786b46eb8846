"""GL401-GL408 on the main cases, with the exact wording users read (pint-style tables).

Each input is one YAML stream (Helm values or an adapter config file, then the objects it
serves); the table holds the one finding the rule must produce: line, column, message, fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import lint_paths, lint_text

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
RULE_HEAD = "rules:\n- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=\"\"}'\n"
RULE_QUERY = f"  metricsQuery: '{SERIES_QUERY}'\n"
EXTERNAL_RULE = """\
externalRules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!=""}'
  resources:
    overrides:
      exported_namespace: {resource: namespace}
  metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>})'
"""
EXTERNAL_SERVICE_RULE = """\
externalRules:
- seriesQuery: 'queue_depth{service!=""}'
  resources:
    overrides:
      service: {resource: service}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
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
LEGACY_RULE = POD_RULE.replace("DCGM_FI_DEV_GPU_UTIL{namespace", "nvidia_gpu_duty_cycle{namespace")
CONTRADICTING_RULE = POD_RULE.replace('namespace!="",pod!=""', 'exported_pod!=""').replace(
    "      namespace:", "      exported_namespace:"
)
BYTES_VALUES = SEED_VALUES.replace("GPU_UTIL", "FB_USED").replace(
    "    metricsQuery", '    name: {matches: ".*", as: gpu_memory_bytes}\n    metricsQuery'
)
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


CASES = [
    pytest.param(
        "GL401",
        SEED_VALUES + hpa("gpu_utilization"),
        (23, 9),
        (
            "HPA inference reads Pods metric gpu_utilization, which no adapter rule exposes. No "
            "prometheus-adapter custom rule in the input exposes gpu_utilization; rule "
            "rules.custom[0] in Helm values input.yaml has no `name` block, so it exposes its "
            'series under their own name: DCGM_FI_DEV_GPU_UTIL. The HPA reports "the server could '
            'not find the metric gpu_utilization for pods" and does not scale on it.'
        ),
        (
            "# in rule rules.custom[0] in Helm values input.yaml:\n"
            "name:\n"
            '  matches: "^DCGM_FI_DEV_GPU_UTIL$"\n'
            '  as: "gpu_utilization"\n'
            "# or in the HPA:\n"
            "metric:\n"
            "  name: DCGM_FI_DEV_GPU_UTIL"
        ),
        id="GL401-unnamed",
    ),
    pytest.param(
        "GL401",
        NAMED_VALUES + hpa("gpu_utilisation"),
        (24, 9),
        (
            "HPA inference reads Pods metric gpu_utilisation, which no adapter rule exposes. No "
            "prometheus-adapter custom rule in the input exposes gpu_utilisation. The HPA reports "
            '"the server could not find the metric gpu_utilisation for pods" and does not scale '
            "on it. Did you mean gpu_utilization, which rule rules.custom[0] in Helm values "
            "input.yaml exposes?"
        ),
        ("metric:\n  name: gpu_utilization"),
        id="GL401-typo",
    ),
    pytest.param(
        "GL401",
        EXTERNAL_RULE + hpa("DCGM_FI_DEV_GPU_UTIL", "External"),
        (20, 9),
        (
            "HPA inference reads External metric DCGM_FI_DEV_GPU_UTIL, which no adapter rule "
            "exposes. The HPA asks for DCGM_FI_DEV_GPU_UTIL as dcgm_fi_dev_gpu_util (its client "
            "lowercases External names), but no prometheus-adapter external rule in the input "
            "exposes dcgm_fi_dev_gpu_util; external rule externalRules[0] in config file "
            "input.yaml exposes DCGM_FI_DEV_GPU_UTIL, and prometheus-adapter compares External "
            "names exactly: an External name with capitals can never be read by an HPA. The HPA "
            'reports "unable to get external metric ...dcgm_fi_dev_gpu_util" and does not scale '
            "on it."
        ),
        (
            "# in external rule externalRules[0] in config file input.yaml:\n"
            "name:\n"
            '  matches: "^DCGM_FI_DEV_GPU_UTIL$"\n'
            '  as: "dcgm_fi_dev_gpu_util"'
        ),
        id="GL401-external-capitals",
    ),
    pytest.param(
        "GL401",
        SEED_VALUES + hpa("DCGM_FI_DEV_GPU_UTIL", "External"),
        (23, 9),
        (
            "HPA inference reads External metric DCGM_FI_DEV_GPU_UTIL, but its rule is on the "
            "custom metrics API. Rule rules.custom[0] in Helm values input.yaml exposes it on the "
            "custom metrics API (custom.metrics.k8s.io), not on the external one; the HPA never "
            "finds it there."
        ),
        (
            "move the rule to externalRules (rules.external in chart values), or read it as "
            "a Pods metric:\n"
            "- type: Pods\n"
            "  pods:\n"
            "    metric:\n"
            "      name: DCGM_FI_DEV_GPU_UTIL\n"
            "    target:\n"
            "      type: AverageValue\n"
            '      averageValue: "<per-pod value>"'
        ),
        id="GL401-wrong-api",
    ),
    pytest.param(
        "GL402",
        LEGACY_RULE,
        (2, 3),
        (
            "rule rules[0] in config file input.yaml: seriesQuery reads "
            "nvidia_gpu_duty_cycle, which comes from the retired "
            "nvidia_gpu_prometheus_exporter. Its series carry no pod or namespace label "
            "(only uuid and name): the rule cannot attach them to pods, and clusters that "
            "run dcgm-exporter have no such series. Use DCGM_FI_DEV_GPU_UTIL (same scale "
            "(percent); note this exporter has no pod labels)."
        ),
        'seriesQuery: \'DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}\'',
        id="GL402-legacy",
    ),
    pytest.param(
        "GL402",
        SEED_VALUES.replace("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTILIZATION"),
        (4, 5),
        (
            "rule rules.custom[0] in Helm values input.yaml: seriesQuery reads "
            "DCGM_FI_DEV_GPU_UTILIZATION, which is no DCGM or dcgm-exporter field. No "
            "exporter emits it, so the rule exposes nothing. Did you mean "
            "DCGM_FI_DEV_GPU_UTIL, GPU utilization (%)?"
        ),
        "seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=\"\"}'",
        id="GL402-typo",
    ),
    pytest.param(
        "GL402",
        KEDA_TRIGGER.replace("QUERY", 'sum(DCGM_FI_DEV_FB_USE{exported_namespace="ml"})'),
        (11, 9),
        (
            "A KEDA trigger reads DCGM_FI_DEV_FB_USE, which no exporter emits. In prometheus "
            "trigger 0 of ScaledObject ml/llm, the query reads DCGM_FI_DEV_FB_USE, which is no "
            "DCGM or dcgm-exporter field, so no exporter emits it and the query finds nothing, "
            "which KEDA reads as 0 (ignoreNullValues defaults to true): the trigger never "
            "activates or scales out. Did you mean DCGM_FI_DEV_FB_USED, framebuffer memory used "
            "(MiB)?"
        ),
        "query: 'sum(DCGM_FI_DEV_FB_USED{exported_namespace=\"ml\"})'",
        id="GL402-keda-typo",
    ),
    pytest.param(
        "GL402",
        KEDA_TRIGGER.replace("QUERY", 'container_accelerator_duty_cycle{namespace="ml"}'),
        (11, 9),
        (
            "A KEDA trigger reads the legacy GPU series container_accelerator_duty_cycle. In "
            "prometheus trigger 0 of ScaledObject ml/llm, container_accelerator_duty_cycle is a "
            "cAdvisor accelerator metric. The kubelet stopped serving them in Kubernetes 1.28 "
            "(feature gate DisableAcceleratorUsageMetrics): newer clusters have no such series. "
            "Use DCGM_FI_DEV_GPU_UTIL (same scale (percent); kubelet stopped exporting it (gate "
            "removed in 1.28))."
        ),
        "query: 'DCGM_FI_DEV_GPU_UTIL{namespace=\"ml\"}'",
        id="GL402-keda-legacy",
    ),
    pytest.param(
        "GL402",
        KEDA_TRIGGER.replace("QUERY", "vector(1) * 80"),
        (11, 9),
        (
            "A KEDA trigger's query reads no series. In prometheus trigger 0 of ScaledObject "
            "ml/llm, the query `vector(1) * 80` reads no series, so it returns the same value "
            "whatever the GPUs do and the trigger never follows the load"
        ),
        'query: \'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod=~"llm-.*"})\''
        "   # a GPU series of its pods",
        id="GL402-keda-constant",
    ),
    pytest.param(
        "GL403",
        POD_RULE + SERVICE_MONITOR,
        (6, 7),
        (
            "Rule rules[0] in config file input.yaml maps `pod` and `namespace`, which name the "
            "dcgm-exporter pod. It maps `pod` and `namespace` for the dcgm-exporter series "
            "DCGM_FI_DEV_GPU_UTIL, but ServiceMonitor dcgm-exporter scrapes dcgm-exporter with no "
            "honorLabels (false by default): Prometheus keeps the workload's pod and namespace in "
            "exported_pod and exported_namespace and sets `pod` and `namespace` to the "
            "dcgm-exporter pod, so GPU values attach to the exporter and the HPA gets no metrics "
            "for its own pods."
        ),
        (
            "seriesQuery: "
            '\'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}\'\nresources:\n  '
            "overrides:\n    exported_pod: {resource: pod}   # instead of pod\n    "
            "exported_namespace: {resource: namespace}   # instead of namespace\n# or set "
            "honorLabels: true on the dcgm-exporter scrape and keep pod/namespace"
        ),
        id="GL403-default-honor",
    ),
    pytest.param(
        "GL403",
        CONTRADICTING_RULE,
        (6, 7),
        (
            "Rule rules[0] in config file input.yaml maps the exporter's `pod` label to pods. Its "
            "seriesQuery keeps only series with `exported_pod`, which exist only when Prometheus "
            "renamed the exporter's own `pod` label (honorLabels: false); on those series `pod` "
            "is the scraped exporter's pod, yet the overrides map `pod` to pods, so values attach "
            "to the exporter, not to the workload."
        ),
        ("resources:\n  overrides:\n    exported_pod: {resource: pod}   # instead of pod"),
        id="GL403-contradiction",
    ),
    pytest.param(
        "GL403",
        SEED_VALUES + SERVICE_MONITOR + "    honorLabels: true\n",
        (8, 9),
        (
            "Rule rules.custom[0] in Helm values input.yaml maps `exported_pod` and "
            "`exported_namespace`, which the dcgm-exporter series lack. It maps `exported_pod` "
            "and `exported_namespace` for the dcgm-exporter series DCGM_FI_DEV_GPU_UTIL, but "
            "ServiceMonitor dcgm-exporter scrapes dcgm-exporter with honorLabels: true, so the "
            "series carry `pod` and `namespace` and no exported_* label: the adapter never "
            "discovers the metric."
        ),
        (
            "seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{pod!=\"\"}'\nresources:\n  overrides:\n    pod: "
            "{resource: pod}   # instead of exported_pod\n    namespace: {resource: namespace}   "
            "# instead of exported_namespace"
        ),
        id="GL403-honor-true",
    ),
    pytest.param(
        "GL404",
        SEED_VALUES.replace(SERIES_QUERY, "avg(DCGM_FI_DEV_GPU_UTIL) by (exported_pod)"),
        (9, 5),
        (
            "rule rules.custom[0] in Helm values input.yaml: metricsQuery never uses "
            "<<.LabelMatchers>>. Its results keep the labels the adapter matches objects by, "
            "so HPAs get values, but every request makes Prometheus compute the metric for the "
            "whole cluster, the HPA's metric selector is ignored, and same-named objects in "
            "other namespaces can overwrite each other"
        ),
        "metricsQuery: 'avg(DCGM_FI_DEV_GPU_UTIL{<<.LabelMatchers>>}) by (exported_pod)'",
        id="GL404-no-matchers",
    ),
    pytest.param(
        "GL404",
        SEED_VALUES.replace(" by (<<.GroupBy>>)", ""),
        (9, 5),
        (
            "rule rules.custom[0] in Helm values input.yaml: metricsQuery's avg(...) has no "
            "`by` clause, so its result keeps no label. The adapter cannot match it to "
            'any object: the HPA gets "no metrics returned from custom metrics API"'
        ),
        "metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'",
        id="GL404-no-by",
    ),
    pytest.param(
        "GL404",
        SEED_VALUES.replace("<<.Series>>", "<<.Series>"),
        (9, 5),
        (
            "rule rules.custom[0] in Helm values input.yaml: metricsQuery is not a valid "
            "template. At character 16 (\"<<.LabelMatchers>>}) by (<<.Gr\"): '<<' inside "
            "another action (missing '>>'?). Go's text/template refuses it and the "
            'adapter exits at start-up ("unable to parse metrics query template")'
        ),
        "metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'",
        id="GL404-template",
    ),
    pytest.param(
        "GL404",
        EXTERNAL_SERVICE_RULE,
        (3, 3),
        (
            "external rule externalRules[0] in config file input.yaml: is namespaced, but no "
            "label maps to namespaces. The adapter adds the HPA's namespace to "
            "<<.LabelMatchers>> (resources.namespaced is not false), so every request fails "
            '("unable to fetch metrics")'
        ),
        (
            "resources:\n"
            "  overrides:\n"
            "    namespace: {resource: namespace}\n"
            "# or, for a metric that belongs to no namespace:\n"
            "# resources:\n"
            "#   namespaced: false"
        ),
        id="GL404-external-ns",
    ),
    pytest.param(
        "GL405",
        RULE_HEAD + "  namespaced: false\n" + RULE_QUERY,
        (3, 3),
        (
            "config file input.yaml: `namespaced` belongs in resources, not in a rule. The "
            "adapter reads its config with yaml.UnmarshalStrict and exits at start-up: "
            '"unable to load metrics discovery config".'
        ),
        ("resources:\n  namespaced: false"),
        id="GL405-namespaced",
    ),
    pytest.param(
        "GL405",
        RULE_HEAD + "  seriesFilters:\n  - is: ^DCGM_\n    isNot: _TOTAL$\n" + RULE_QUERY,
        (4, 5),
        (
            "config file input.yaml: seriesFilters[0] has both `is` and `isNot`. The adapter "
            'refuses it ("cannot have both an `is` ("^DCGM_") and `isNot` ("_TOTAL$") expression '
            'in a single filter"). The adapter exits at start-up while building its rules: '
            '"unable to construct custom metrics provider".'
        ),
        ('- is: "^DCGM_"\n- isNot: "_TOTAL$"'),
        id="GL405-filters",
    ),
    pytest.param(
        "GL405",
        RULE_HEAD + "  resources:\n    overrides:\n      exported_pod: pod\n" + RULE_QUERY,
        (5, 7),
        (
            "config file input.yaml: the override for label `exported_pod` must be a mapping "
            "{group, resource}, not !!str `pod`. The adapter reads its config with "
            'yaml.UnmarshalStrict and exits at start-up: "unable to load metrics discovery '
            'config" (cannot unmarshal !!str `pod` into config.GroupResource).'
        ),
        "exported_pod: {resource: pod}",
        id="GL405-override",
    ),
    pytest.param(
        "GL406",
        SUM_VALUES + deployment("nvidia.com/gpu", 2) + hpa("DCGM_FI_DEV_GPU_UTIL"),
        (33, 5),
        (
            "HPA inference compares a per-pod sum over 2 GPUs with a one-GPU target. The metric "
            "DCGM_FI_DEV_GPU_UTIL is summed per pod by rule rules.custom[0] in Helm values "
            "input.yaml, one series per GPU on a 0-100 scale, and the pods of Deployment "
            "ml/inference hold 2 GPUs, so the sum reaches the target 60 when each GPU is at 30%: "
            "the HPA scales out at 1/2 of the load it was meant for."
        ),
        (
            "# in rule rules.custom[0] in Helm values input.yaml:\n"
            "metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'\n"
            '# or keep the sum and scale the target: averageValue: "120"  (60 x 2 GPUs)'
        ),
        id="GL406-sum",
    ),
    pytest.param(
        "GL407",
        BYTES_VALUES,
        (9, 27),
        (
            "Rule rules.custom[0] in Helm values input.yaml exposes DCGM_FI_DEV_FB_USED as "
            "gpu_memory_bytes, a name that promises bytes. The series, DCGM_FI_DEV_FB_USED "
            "(framebuffer memory used (MiB)), counts MiB (1 MiB = 1048576 bytes), so HPA "
            "targets written for the name are off by that factor."
        ),
        (
            "metricsQuery: '(avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)) * "
            "1048576'\n"
            "# or expose it as gpu_memory_mib"
        ),
        id="GL407-bytes",
    ),
    pytest.param(
        "GL408",
        SEED_VALUES + deployment("nvidia.com/mig-1g.10gb", 1) + hpa("DCGM_FI_DEV_GPU_UTIL"),
        (33, 5),
        (
            "HPA inference scales Deployment ml/inference, whose pods run on MIG slices, on "
            "DCGM_FI_DEV_GPU_UTIL. It is served by rule rules.custom[0] in Helm values "
            "input.yaml. DCGM does not report DCGM_FI_DEV_GPU_UTIL for MIG instances "
            "(nvidia.com/mig-1g.10gb): the series is missing or 0, so the HPA never sees the "
            "slices get busy. DCGM_FI_PROF_GR_ENGINE_ACTIVE is reported per MIG instance, as a "
            "ratio (0-1)."
        ),
        (
            "# in rule rules.custom[0] in Helm values input.yaml:\n"
            "seriesQuery: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_pod!=\"\"}'\n"
            "# and in the HPA:\n"
            "metric:\n"
            "  name: DCGM_FI_PROF_GR_ENGINE_ACTIVE\n"
            "target:\n"
            "  type: AverageValue\n"
            '  averageValue: "0.6"   # a ratio (0-1), not a percent'
        ),
        id="GL408-mig",
    ),
]


@pytest.mark.parametrize(("rule", "text", "position", "message", "fix"), CASES)
def test_main_cases(
    rule: str, text: str, position: tuple[int, int], message: str, fix: str
) -> None:
    findings = [f for f in lint_text(text, select=[rule]) if f.rule == rule]
    assert len(findings) == 1, [f.message for f in findings]
    (finding,) = findings
    assert (finding.location.line, finding.location.column) == position
    assert finding.message == message
    assert finding.fix == fix


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
