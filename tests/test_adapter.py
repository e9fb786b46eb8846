"""The prometheus-adapter model: names exactly as the adapter derives them, its three config
shapes, the chart's default rules, and the helpers the GL4xx rules build on."""

from __future__ import annotations

import re
import textwrap

import pytest

from gpulint.chain.adapter import (
    CUSTOM,
    EXTERNAL,
    AdapterConfig,
    AdapterRule,
    go_expand,
    go_truthy,
    requested_metric_name,
)
from gpulint.chain.scrapelabels import scrapes_in_values
from gpulint.engine.config import Settings
from gpulint.input.document import Document
from gpulint.input.loader import load_file
from gpulint.input.yamlparse import parse_documents
from gpulint.inventory import Inventory
from gpulint.metrics.names import KNOWN_METRICS, Exporter, exporter_counters, is_dcgm_field, lookup
from gpulint.metrics.promql import outermost_aggregations, placed_aggregations, top_level_text
from gpulint.metrics.querytemplate import TemplateError, parse


def inventory_of(text: str, name: str = "input.yaml") -> Inventory:
    inventory = Inventory(Settings())
    loaded = load_file(name, textwrap.dedent(text).lstrip("\n").encode())
    loaded.path = name
    inventory.add_file(loaded)
    return inventory


def config_of(text: str) -> AdapterConfig:
    configs = inventory_of(text).adapter_configs
    assert len(configs) == 1
    return configs[0]


def rule_of(body: str, kind: str = "rules") -> AdapterRule:
    """One rule, written as the body of a list item of the adapter's own config file."""
    item = textwrap.indent(textwrap.dedent(body).strip(), "  ")
    config = config_of(f"{kind}:\n-{item[1:]}\n")
    return next(config.all_rules())


# --- naming ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name_block", "series", "expected"),
    [
        # No name block at all: the API name is the series name, verbatim.
        ("", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL"),
        # `as` empty, no capture group: $0, the whole match (unanchored: a part of the name).
        ('name: {matches: "GPU_UTIL"}', "DCGM_FI_DEV_GPU_UTIL", "GPU_UTIL"),
        # `as` empty, one capture group: $1.
        ('name: {matches: "^DCGM_FI_DEV_(.*)$"}', "DCGM_FI_DEV_GPU_UTIL", "GPU_UTIL"),
        ('name: {matches: "^(.*)_total$", as: ""}', "requests_total", "requests"),
        # `matches` empty means `.*`; a fixed `as` renames the whole family.
        ('name: {matches: "", as: "gpu_utilization"}', "DCGM_FI_DEV_GPU_UTIL", "gpu_utilization"),
        ('name: {matches: "^DCGM_FI_(DEV|PROF)_(.*)$", as: "gpu_${2}"}', "DCGM_FI_PROF_X", "gpu_X"),
        # Go's Expand: `$1x` names the group `1x` (empty), `${1}x` is group 1 then x.
        ('name: {matches: "^(DCGM)_.*$", as: "$1x"}', "DCGM_FI_DEV_GPU_UTIL", ""),
        ('name: {matches: "^(DCGM)_.*$", as: "${1}x"}', "DCGM_FI_DEV_GPU_UTIL", "DCGMx"),
        ('name: {matches: "^(DCGM)_.*$", as: "$$1"}', "DCGM_FI_DEV_GPU_UTIL", "$1"),
        # `matches` is an implicit `is` filter: a series it does not match is dropped.
        ('name: {matches: "^(.*)_total$"}', "DCGM_FI_DEV_GPU_UTIL", None),
    ],
)
def test_name_for_series_follows_the_adapter(
    name_block: str, series: str, expected: str | None
) -> None:
    rule = rule_of(
        f"""
        seriesQuery: '{{__name__=~"^DCGM_.*|requests_total"}}'
        {name_block}
        metricsQuery: 'avg(<<.Series>>{{<<.LabelMatchers>>}}) by (<<.GroupBy>>)'
        """
    )
    assert rule.name_for_series(series) == expected


def test_two_capture_groups_without_as_name_nothing() -> None:
    rule = rule_of(
        """
        seriesQuery: 'DCGM_FI_DEV_GPU_UTIL'
        name: {matches: "^(DCGM)_(.*)$"}
        """
    )
    assert rule.name_as is None
    assert rule.exposed_names() == []


def test_series_filters_drop_series() -> None:
    rule = rule_of(
        """
        seriesQuery: '{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED"}'
        seriesFilters:
        - isNot: "_FB_"
        """
    )
    assert rule.exposed_names() == ["DCGM_FI_DEV_GPU_UTIL"]


def test_go_expand_reads_named_groups() -> None:
    match = re.search(r"^(?P<family>[A-Z]+)_(.*)$", "DCGM_FI")
    assert match is not None
    assert go_expand("$family-${2}-$3", match) == "DCGM-FI-"


# --- could_expose ----------------------------------------------------------------------------


def test_could_expose_is_case_sensitive() -> None:
    # Fix: it used to match case-insensitively, which hid a Pods metric typed in the wrong case
    # and an External rule that exposes capitals (the HPA asks in lowercase, the adapter
    # compares exactly).
    rule = rule_of("seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=\"\"}'")
    assert rule.could_expose("DCGM_FI_DEV_GPU_UTIL")
    assert not rule.could_expose("dcgm_fi_dev_gpu_util")


def test_could_expose_rebuilds_the_series_of_a_pattern() -> None:
    rule = rule_of(
        """
        seriesQuery: '{__name__=~"^vllm:.*",namespace!=""}'
        name: {matches: "^vllm:(.*)_total$", as: "vllm_${1}"}
        """
    )
    assert rule.exposed_names() is None
    assert rule.could_expose("vllm_requests") is True  # gpulint cannot tell: yes
    counter = rule_of(
        """
        seriesQuery: '{__name__=~"^vllm:.*",namespace!=""}'
        name: {matches: "^(.*)_total$"}
        """
    )
    assert counter.could_expose("vllm:requests")
    assert counter.series_for("vllm:requests") == ["vllm:requests_total"]
    # tgi_requests would come from tgi_requests_total, which the seriesQuery never returns.
    assert not counter.could_expose("tgi_requests")
    assert counter.series_for("tgi_requests") == []


def test_could_expose_refuses_names_no_series_can_have() -> None:
    # Fix: the chart's default rules "could" expose gpu-utilization through the candidate
    # series container_gpu-utilization_seconds_total, which Prometheus cannot store.
    config = config_of("rules:\n  default: true\n")
    rules = [r for r in config.rules if r.generated]
    assert len(rules) == 6
    assert any(r.could_expose("gpu_utilization") for r in rules)
    assert not any(r.could_expose("gpu-utilization") for r in rules)
    assert all(r.series_for("gpu-utilization") in ([], None) for r in rules)


def test_requested_metric_name_lowercases_external_only() -> None:
    assert requested_metric_name("DCGM_FI_DEV_GPU_UTIL", EXTERNAL) == "dcgm_fi_dev_gpu_util"
    assert requested_metric_name("DCGM_FI_DEV_GPU_UTIL", CUSTOM) == "DCGM_FI_DEV_GPU_UTIL"


def test_rules_exposing_asks_for_external_names_in_lowercase() -> None:
    inventory = inventory_of(
        """
        externalRules:
        - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL'
          name: {as: "dcgm_fi_dev_gpu_util"}
        - seriesQuery: 'DCGM_FI_DEV_FB_USED'
        """
    )
    assert [r.index for r in inventory.rules_exposing("DCGM_FI_DEV_GPU_UTIL", EXTERNAL)] == [0]
    assert inventory.rules_exposing("DCGM_FI_DEV_FB_USED", EXTERNAL) == []


# --- the chart's default rules and the three shapes -------------------------------------------


@pytest.mark.parametrize(
    ("rules_block", "generated", "complete"),
    [
        ("custom: []", 6, True),  # rules.default is true in the chart's values
        ("default: true", 6, True),
        ("default: false", 0, True),
        # Fix: `default:` (null) deletes the chart's value in Helm's merge; the template's
        # `if` then sees nil. It used to count as enabled.
        ("default:", 0, True),
        ('default: ""', 0, True),
        ("existing: my-rules", 0, False),
        ("existing:", 6, True),
    ],
)
def test_chart_default_rules(rules_block: str, generated: int, complete: bool) -> None:
    config = config_of(f"rules:\n  {rules_block}\n")
    assert config.form == AdapterConfig.HELM_VALUES
    assert sum(r.generated for r in config.rules) == generated
    assert config.complete is complete


def test_generated_rules_are_located_at_rules_default() -> None:
    config = config_of("prometheus:\n  url: http://p\nrules:\n  custom: []\n  default: true\n")
    rule = config.rules[3]
    assert rule.generated
    assert rule.path_for("metricsQuery") == ("rules", "default")
    assert (rule.location().line, rule.location().column) == (5, 3)
    assert "default rules" in rule.describe()


def test_helm_values_rules_custom_and_external() -> None:
    config = config_of(
        """
        rules:
          default: false
          custom:
          - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL'
          external:
          - seriesQuery: 'queue_depth'
        """
    )
    assert [r.path for r in config.rules] == [("rules", "custom", 0)]
    assert [r.kind for r in config.all_rules()] == [CUSTOM, EXTERNAL]
    assert config.rules[0].describe() == "rule rules.custom[0] in Helm values input.yaml"


def test_helm_values_nested_under_a_parent_chart_key() -> None:
    inventory = inventory_of(
        """
        prometheus-adapter:
          rules:
            default: false
            custom:
            - seriesQuery: 'nv_inference_queue_duration_us{namespace="default",pod!=""}'
        """
    )
    (config,) = inventory.adapter_configs
    assert config.base == ("prometheus-adapter",)
    assert config.rules[0].describe() == "rule rules.custom[0] in Helm values input.yaml"


def test_raw_config_file() -> None:
    config = config_of(
        """
        rules:
        - seriesQuery: 'a{pod!=""}'
        externalRules:
        - seriesQuery: 'b{namespace!=""}'
        """
    )
    assert config.form == AdapterConfig.CONFIG
    assert [r.describe() for r in config.all_rules()] == [
        "rule rules[0] in config file input.yaml",
        "external rule externalRules[0] in config file input.yaml",
    ]


def test_configmap_rules_are_located_in_the_real_file() -> None:
    inventory = inventory_of(
        """
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: adapter-config
        data:
          config.yaml: |
            rules:
            - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'
              resources:
                overrides:
                  exported_pod: {resource: pod}
        """
    )
    (config,) = inventory.adapter_configs
    assert config.form == AdapterConfig.CONFIGMAP
    rule = config.rules[0]
    assert config.ref is not None and str(config.ref) == "ConfigMap adapter-config"
    location = rule.location("resources", "overrides", "exported_pod")
    assert (location.file, location.line, location.column) == ("input.yaml", 11, 11)
    assert rule.resources.label_for("pods") == "exported_pod"
    assert rule.describe() == "rule rules[0] in ConfigMap adapter-config"


def test_resource_mapping_template_and_overrides() -> None:
    rule = rule_of(
        """
        seriesQuery: 'x{namespace!=""}'
        resources:
          template: "kube_<<.Group>>_<<.Resource>>"
          overrides:
            exported_pod: {resource: pods}
        """
    )
    resources = rule.resources
    assert resources.label_for("pod") == "exported_pod"
    assert resources.label_for("namespaces") == "kube__namespace"
    assert resources.labels_for("pods") == ["exported_pod", "kube__pod"]


def test_go_truthy() -> None:
    assert [go_truthy(v) for v in (None, False, 0, "", [], {})] == [False] * 6
    assert [go_truthy(v) for v in (True, 1, "false", [0], {"a": 1})] == [True] * 5


# --- what the rules build on -----------------------------------------------------------------


def test_dcgm_exporter_chart_values_no_longer_crash() -> None:
    # Fix: scrapes_in_values read an unbound variable for dcgm-exporter chart values.
    (document,) = [
        Document(d.value, "values.yaml")
        for d in parse_documents(
            "image:\n  repository: nvcr.io/nvidia/k8s/dcgm-exporter\n"
            "serviceMonitor:\n  enabled: true\n  honorLabels: false\n"
        )
    ]
    (scrape,) = scrapes_in_values(document)
    assert (scrape.honor_labels, scrape.explicit, scrape.pod_label) == (False, True, "exported_pod")
    assert scrape.path == ("serviceMonitor", "honorLabels")


def test_lookup_prefers_the_exact_name() -> None:
    # Fix: DCGM_FI_PROF_GR_ENGINE_ACTIVE resolved to the 1.x compatibility entry
    # dcgm_fi_prof_gr_engine_active, which made a current name look legacy.
    metric = lookup("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert metric is not None and metric.exporter is Exporter.DCGM
    legacy = lookup("dcgm_gpu_utilization")
    assert legacy is not None and legacy.dcgm_equivalent == "DCGM_FI_DEV_GPU_UTIL"
    gke = lookup("prometheus.googleapis.com|dcgm_fi_dev_gpu_util|gauge")
    assert gke is not None and gke.name == "DCGM_FI_DEV_GPU_UTIL"


def test_dcgm_field_names() -> None:
    assert is_dcgm_field("DCGM_FI_DEV_GPU_UTIL")
    assert is_dcgm_field("DCGM_FI_DEV_PCIE_TX_THROUGHPUT")  # real, not in default-counters
    assert is_dcgm_field("DCGM_EXP_XID_ERRORS_COUNT")
    assert not is_dcgm_field("DCGM_FI_DEV_GPU_UTILIZATION")
    assert not is_dcgm_field("dcgm_fi_dev_gpu_util")


def test_the_shipped_counters_list_and_the_metric_table_agree() -> None:
    counters = exporter_counters()
    assert [c.field for c in counters][:2] == ["DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK"]
    assert all(is_dcgm_field(c.field) and c.type in ("gauge", "counter") for c in counters)
    by_default = {c.field for c in counters if "default-counters" in c.enabled_in}
    profiling = {c.field for c in counters if "dcp-metrics-included" in c.enabled_in}
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in by_default and "DCGM_FI_DEV_GPU_UTIL" in profiling
    dcgm = [m for m in KNOWN_METRICS.values() if m.exporter is Exporter.DCGM]
    assert {m.name for m in dcgm if m.enabled_by_default} == by_default


def test_aggregations_with_their_place() -> None:
    query = (
        'histogram_quantile(0.99, sum(rate(x{a="("}[5m])) by (le, <<.GroupBy>>))'
        " / count(y) by (pod)"
    )
    placed = placed_aggregations(query)
    assert [(p.aggregation.operator, p.depth) for p in placed] == [("sum", 1), ("count", 0)]
    outer = outermost_aggregations(query)
    assert [p.aggregation.labels for p in outer] == [("le", "<<.GroupBy>>"), ("pod",)]
    assert top_level_text(query).split() == ["histogram_quantile", "/", "count", "by"]
    nested = outermost_aggregations("sum(avg(x) by (pod, gpu)) by (<<.GroupBy>>)")
    assert [p.aggregation.operator for p in nested] == ["sum"]


def test_template_errors_say_when_go_would_notice() -> None:
    with pytest.raises(TemplateError) as parse_time:
        parse("sum(<<.Series>{<<.LabelMatchers>>})")
    assert not parse_time.value.at_execution
    with pytest.raises(TemplateError) as run_time:
        parse("sum(<<.Series>>{<<.LabelMatchersByName>>})")
    assert run_time.value.at_execution
    assert run_time.value.offset == 16


def test_recorded_series() -> None:
    inventory = inventory_of(
        """
        apiVersion: monitoring.coreos.com/v1
        kind: PrometheusRule
        metadata: {name: dcgm}
        spec:
          groups:
          - name: dcgm.rules
            rules:
            - record: dcgm_fi_dev_gpu_util_relabelled
              expr: DCGM_FI_DEV_GPU_UTIL
            - alert: GpuHot
              expr: DCGM_FI_DEV_GPU_TEMP > 90
        """
    )
    recorded = inventory.recorded_series()
    assert list(recorded) == ["dcgm_fi_dev_gpu_util_relabelled"]
    manifest, path = recorded["dcgm_fi_dev_gpu_util_relabelled"]
    assert manifest.name == "dcgm" and path[-1] == "record"
