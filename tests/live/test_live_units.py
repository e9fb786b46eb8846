"""The live check's pure parts (no Prometheus needed), and what the offline path imports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
import yaml

from gpulint.chain.adapter import AdapterConfig, AdapterRule
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection
from gpulint.engine.runner import run
from gpulint.input.document import Document
from gpulint.input.loader import load_file
from gpulint.inventory import Inventory
from gpulint.kinds.triggers import PrometheusTrigger
from gpulint.live.adapterquery import (
    mapping_for,
    matches_pattern,
    pod_name_pattern,
    render_query,
    selector_matchers,
)
from gpulint.live.client import Deadline, PrometheusError
from gpulint.live.kedaquery import read_answer, request_for, same_server
from gpulint.live.names import alternatives_for
from gpulint.live.options import (
    OptionError,
    format_duration,
    parse_duration,
    parse_fraction,
    parse_header,
    parse_url,
)
from gpulint.live.series import summarize
from gpulint.live.snapshot import (
    TIMEOUT,
    Answer,
    HpaEvidence,
    LiveSnapshot,
    RuleEvidence,
    SeriesSummary,
    TriggerEvidence,
)
from gpulint.live.workers import run_each
from gpulint.metrics.promql import parse_selector, reads_no_series, selectors_in_query

from .conftest import LIVE_FIXTURES
from .harness import ROOT

NETWORK_MODULES = ("requests", "prometheus_api_client", "aiohttp", "urllib3")


def _imported_after(args: list[str]) -> list[str]:
    code = textwrap.dedent(
        f"""
        import json, os, sys
        from gpulint.cli import main
        main({args!r} + ["-f", "json", "-o", os.devnull])
        loaded = {{m.split(".")[0] for m in sys.modules}}
        print(json.dumps(sorted(loaded & {set(NETWORK_MODULES)!r})))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    names: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return names


@pytest.mark.slow
def test_the_offline_path_imports_no_http_client() -> None:
    fixture = str(LIVE_FIXTURES / "correct" / "stack")
    assert _imported_after(["lint", fixture]) == []
    # ...and the check can fail: with --prometheus the client is imported.
    live = _imported_after(["lint", "--prometheus", "http://127.0.0.1:9", fixture])
    assert {"requests", "prometheus_api_client"} <= set(live)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("24h", 86400), ("1h30m", 5400), ("3d", 259200), ("90", 90), ("500ms", 0.5), ("1w", 604800)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "yesterday", "5x", "1h 30m", "0s", "-1h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(OptionError):
        parse_duration(text)


@pytest.mark.parametrize(("text", "share"), [("90%", 0.9), ("0.5", 0.5), ("0", 0.0), ("100%", 1)])
def test_min_history_shares(text: str, share: float) -> None:
    assert parse_fraction(text) == share


@pytest.mark.parametrize("text", ["", "half", "-10%", "150%", "1.5", "90 %%"])
def test_bad_min_history_shares(text: str) -> None:
    with pytest.raises(OptionError):
        parse_fraction(text)


def test_history_span_counts_the_step_of_the_first_point_and_stops_at_the_window() -> None:
    from gpulint.live.answers import history_span

    assert history_span(float("nan"), 1000.0, 86400.0, 360.0) == 0.0  # no point: the value now only
    assert history_span(1000.0 - 3600, 1000.0, 86400.0, 360.0) == 3960.0
    assert history_span(1000.0 - 86400, 1000.0, 86400.0, 360.0) == 86400.0


def test_durations_read_at_a_glance() -> None:
    assert [format_duration(s) for s in (3, 61, 3600, 93784, 172815, 600)] == [
        "3s",
        "1m1s",
        "1h",
        "1d2h",
        "2d",
        "10m",
    ]


def test_the_look_back_is_said_as_the_user_wrote_it() -> None:
    from gpulint.live.options import LiveOptions, window_text, written_duration

    assert [written_duration(t) for t in (" 24h", "1h30m", "90", "2.5")] == [
        "24h",
        "1h30m",
        "90s",
        "2.5s",
    ]
    assert window_text(86400.0, "24h") == "24h" and window_text(86400.0, "1440m") == "1440m"
    # Not given: the default as documented, else from its seconds.
    assert window_text(86400.0, None) == "24h" and window_text(129600.0, None) == "1d12h"
    assert LiveOptions("http://p:9090", lookback=129600.0, lookback_text="36h").window == "36h"


def test_headers_and_urls() -> None:
    assert parse_header("Authorization=Bearer a=b") == ("Authorization", "Bearer a=b")
    assert parse_header("X-Scope-OrgID = team") == ("X-Scope-OrgID", "team")
    with pytest.raises(OptionError):
        parse_header("Authorization: Bearer x")
    assert parse_url("http://mimir:8080/prometheus/") == "http://mimir:8080/prometheus"
    assert parse_url("http://prom:9090/api/v1") == "http://prom:9090"
    with pytest.raises(OptionError):
        parse_url("prom:9090")


@pytest.mark.parametrize(
    ("kind", "name", "pod", "matches"),
    [
        ("Deployment", "triton", "triton-7d9f8b6c5-x2k4q", True),
        ("Deployment", "triton", "triton-server-7d9f8b6c5-x2k4q", False),
        ("Deployment", "triton", "triton-0", False),
        ("StatefulSet", "llm", "llm-12", True),
        ("StatefulSet", "llm", "llm-7d9f8b6c5-x2k4q", False),
        ("LeaderWorkerSet", "vllm", "vllm-0-1", True),
        ("Deployment", "a.b", "axb-7d9f8b6c5-x2k4q", False),
        ("", "svc-predictor", "svc-predictor-6b8d7c9f4-k2j4h", True),
    ],
)
def test_pod_names_follow_their_controller(kind: str, name: str, pod: str, matches: bool) -> None:
    pattern, _ = pod_name_pattern(kind, name)
    assert matches_pattern(pattern, pod) is matches


def test_hpa_selectors_become_matchers_as_in_the_adapter() -> None:
    selector = {
        "matchLabels": {"model": "llama"},
        "matchExpressions": [
            {"key": "gpu", "operator": "In", "values": ["0", "1"]},
            {"key": "zone", "operator": "NotIn", "values": ["a"]},
            {"key": "pod", "operator": "Exists"},
            {"key": "test", "operator": "DoesNotExist"},
        ],
    }
    # A labels.Selector keeps its requirements sorted by key (metrics_query.go reads them so).
    assert selector_matchers(selector) == [
        'gpu=~"0|1"',
        'model="llama"',
        'pod!=""',
        'test=""',
        'zone!~"a"',
    ]


def _rule(data: dict[str, object]) -> AdapterConfig:
    return AdapterConfig(Document({"rules": [data]}, "adapter.yaml"), AdapterConfig.CONFIG)


def test_render_for_pods_in_the_adapter_order() -> None:
    config = _rule(
        {
            "seriesQuery": 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}',
            "resources": {
                "overrides": {
                    "exported_namespace": {"resource": "namespace"},
                    "exported_pod": {"resource": "pod"},
                }
            },
            "metricsQuery": "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
        }
    )
    rule = config.rules[0]
    labels = mapping_for(rule)
    assert (labels.resource, labels.object_label, labels.namespace_label) == (
        "pods",
        "exported_pod",
        "exported_namespace",
    )
    assert (
        render_query(
            rule,
            labels,
            "DCGM_FI_DEV_GPU_UTIL",
            "ml",
            ["a", "b"],
            None,
            {"matchLabels": {"gpu": "0"}},
        )
        == 'avg(DCGM_FI_DEV_GPU_UTIL{gpu="0",exported_namespace="ml",exported_pod=~"a|b"}) '
        "by (exported_pod)"
    )
    assert (
        render_query(rule, labels, "DCGM_FI_DEV_GPU_UTIL", "ml", ["a"])
        == 'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod="a"}) by (exported_pod)'
    )


def test_rendered_as_the_adapters_own_tests_expect() -> None:
    """kubernetes-sigs/prometheus-adapter@01919d0:pkg/naming/metrics_query_test.go, taken as
    data: the selector's matchers come first, and .LabelValuesByName holds its labels."""
    custom = _rule(
        {
            "seriesQuery": 'metric{resource!=""}',
            "resources": {"overrides": {"resource": {"resource": "pod"}}},
            "metricsQuery": "<<.LabelMatchers>>",
        }
    ).rules[0]
    labels = mapping_for(custom)
    selector = {"matchLabels": {"metric1": "value1"}}
    # "LabelMatchers with additional metrics filter"
    assert render_query(custom, labels, "metric", None, ["bar"], None, selector) == (
        'metric1="value1",resource="bar"'
    )
    namespaces = {"overrides": {"namespaces": {"resource": "namespace"}}}

    def external(query: str) -> AdapterRule:
        data = {"seriesQuery": 'metric{namespaces!=""}', "resources": namespaces}
        document = Document({"externalRules": [{**data, "metricsQuery": query}]}, "a.yaml")
        (rule,) = AdapterConfig(document, AdapterConfig.CONFIG).all_rules()
        return rule

    matchers = external("<<.LabelMatchers>>")
    # "single LabelMatchers value with namespace"
    assert render_query(
        matchers,
        mapping_for(matchers),
        "metric",
        "default",
        [],
        None,
        {"matchLabels": {"foo": "bar"}},
    ) == ('foo="bar",namespaces="default"')
    by_name = external("<<.LabelValuesByName>>")
    # "single LabelValuesByName with multiple selectors", here without a namespace
    in_both = {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["baz", "bar"]}]}
    assert render_query(by_name, mapping_for(by_name), "metric", None, [], None, in_both) == (
        "map[foo:bar|baz]"
    )


def test_did_you_mean_prefers_dcgm_and_states_the_conversion() -> None:
    present = [
        "nvidia_gpu_duty_cycle",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_GPU_UTIL",
        "up",
    ]
    found = alternatives_for("container_accelerator_duty_cycle", present)
    assert [a.name for a in found] == [
        "DCGM_FI_DEV_GPU_UTIL",
        "nvidia_gpu_duty_cycle",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    ]
    assert found[0].conversion == "same scale: percent (0-100)"
    assert "cannot drive a Pods metric" in found[1].conversion
    assert found[2].conversion.startswith("a ratio (0-1) where the other is a percent")
    lowercase = alternatives_for("dcgm_fi_dev_gpu_util", present)
    assert (lowercase[0].name, lowercase[0].reason) == ("DCGM_FI_DEV_GPU_UTIL", "case")
    assert alternatives_for("vllm:num_requests_waiting", present) == []


def test_summaries_keep_what_the_rules_ask_and_bound_memory() -> None:
    series = [
        {
            "__name__": "DCGM_FI_DEV_GPU_UTIL",
            "Hostname": "node-1",
            "gpu": str(g),
            "UUID": f"GPU-{g}",
            "namespace": "gpu-operator",
            "pod": "nvidia-dcgm-exporter-abcde",
        }
        for g in range(4)
    ]
    summary = summarize(series, matchers=parse_selector('x{exported_pod!=""}').label_matchers())
    assert summary.count == 4 and summary.names["DCGM_FI_DEV_GPU_UTIL"] == 4
    assert summary.node_pods == {"node-1": {"nvidia-dcgm-exporter-abcde"}}
    assert summary.node_gpus == {"node-1": {"GPU-0", "GPU-1", "GPU-2", "GPU-3"}}
    assert summary.rejected == {'exported_pod!=""': 4}
    assert summary.namespaces_of("pod", "namespace") == {
        "gpu-operator": {"nvidia-dcgm-exporter-abcde"}
    }


# --- evidence found again in another inventory (the webhook's case) --------------------------

_CLUSTER_TEXT = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: prometheus-adapter, namespace: monitoring}
data:
  config.yaml: |
    rules:
    - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
      resources:
        overrides:
          exported_namespace: {resource: namespace}
          exported_pod: {resource: pod}
      name: {matches: "^DCGM_FI_DEV_GPU_UTIL$", as: gpu_utilization}
      metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: triton, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: triton}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}
      target: {type: AverageValue, averageValue: "60"}
"""


def _inventory(text: str, name: str = "cluster.yaml") -> Inventory:
    inventory = Inventory(Settings())
    inventory.add_file(load_file(name, text.encode()))
    return inventory


def _collected() -> LiveSnapshot:
    """Evidence about the objects of one inventory, as the collector files it."""
    inventory = _inventory(_CLUSTER_TEXT)
    (rule,) = inventory.adapter_rules()
    (hpa,) = inventory.hpas
    snapshot = LiveSnapshot("http://prometheus:9090")
    snapshot.rules[rule] = RuleEvidence(rule, SeriesSummary(count=6))
    metric = hpa.metrics[0]
    snapshot.hpas.append(
        HpaEvidence(hpa, metric, rule, "DCGM_FI_DEV_GPU_UTIL", "Deployment ml/triton")
    )
    return snapshot


def test_evidence_is_found_again_by_stable_keys_and_rebound() -> None:
    snapshot = _collected()
    again = _inventory(_CLUSTER_TEXT)
    (rule,) = again.adapter_rules()
    (hpa,) = again.hpas
    evidence = snapshot.for_rule(rule)
    assert evidence is not None and evidence.series.count == 6
    (rebound,) = snapshot.for_hpa(hpa, again)
    assert rebound.hpa is hpa and rebound.metric is hpa.metrics[0] and rebound.rule is rule
    # Without the inventory the HPA belongs to, only the collected objects are known.
    assert snapshot.for_hpa(hpa) == []


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "metric: {name: gpu_utilization}",
            'metric: {name: gpu_utilization, selector: {matchLabels: {gpu: "0"}}}',
        ),
        ("name: triton}", "name: triton-v2}"),
        ("metric: {name: gpu_utilization}", "metric: {name: gpu_util}"),
    ],
    ids=["metric-selector", "scale-target", "metric-name"],
)
def test_hpa_evidence_needs_the_same_metric_and_target(before: str, after: str) -> None:
    snapshot = _collected()
    assert before in _CLUSTER_TEXT
    changed = _inventory(_CLUSTER_TEXT.replace(before, after))
    (hpa,) = changed.hpas
    assert snapshot.for_hpa(hpa, changed) == []


def test_an_edited_or_moved_rule_gets_no_evidence() -> None:
    snapshot = _collected()
    edited = _inventory(_CLUSTER_TEXT.replace("avg(<<.Series>>", "max(<<.Series>>"))
    (rule,) = edited.adapter_rules()
    (hpa,) = edited.hpas
    assert snapshot.for_rule(rule) is None
    assert snapshot.for_hpa(hpa, edited) == []  # the rule that served it changed
    elsewhere = _inventory(_CLUSTER_TEXT, "other-cluster.yaml")
    (rule,) = elsewhere.adapter_rules()
    (hpa,) = elsewhere.hpas
    assert snapshot.for_rule(rule) is None and snapshot.for_hpa(hpa, elsewhere) == []


# --- KEDA prometheus triggers ---------------------------------------------------------------

KEDA_TRIGGERS = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm, namespace: ml}
spec:
  scaleTargetRef: {name: llm}
  triggers:
  - type: cpu
    metadata: {value: "70"}
  - type: prometheus
    metricType: Value
    metadata:
      serverAddress: http://prometheus-operated.monitoring.svc:9090/
      query: avg(DCGM_FI_DEV_GPU_UTIL)
      threshold: 70
      activationThreshold: "1e1"
      ignoreNullValues: "F"
      timeout: 1m30s
      customHeaders: "X-Scope-OrgID=team-a, X-Other = b"
      queryParameters: dedup=true
  - type: prometheus
    metadata:
      query: up
      threshold: "600m"
      ignoreNullValues: "no"
      timeout: "2500"
      customHeaders: "a=b=c"
"""


def _triggers() -> list[PrometheusTrigger]:
    inventory = Inventory(Settings())
    loaded = load_file("keda.yaml", KEDA_TRIGGERS.encode())
    inventory.add_file(loaded)
    (scaled_object,) = inventory.scaled_objects
    return scaled_object.prometheus_triggers


def test_trigger_metadata_reads_as_keda_parses_it() -> None:
    good, refused = _triggers()
    assert (good.index, refused.index) == (1, 2)  # the trigger's place among all of them
    assert good.threshold == 70.0 and good.activation_threshold == 10.0
    assert good.ignore_null_values is False and good.metric_type == "Value"
    assert good.timeout == 90.0
    assert good.custom_headers == [("X-Scope-OrgID", "team-a"), ("X-Other", "b")]
    assert good.query_parameters == [("dedup", "true")]
    assert request_for(good).params == [("dedup", "true")]
    # KEDA refuses these: a Kubernetes quantity is no float, "no" is no Go boolean, a
    # header with two "=".
    assert refused.threshold is None and refused.ignore_null_values is None
    assert refused.custom_headers is None
    assert refused.timeout == 2.5  # milliseconds
    assert refused.server_address is None and refused.metric_type == "AverageValue"


def test_trigger_values_are_trimmed_and_refused_as_keda_refuses_them() -> None:
    text = KEDA_TRIGGERS.replace('threshold: "600m"', 'threshold: " 0.6 "')
    text = text.replace('timeout: "2500"', 'timeout: "2,5s"').replace("query: up", "query: ' up '")
    text = text.replace('activationThreshold: "1e1"', 'activationThreshold: "+10"')
    inventory = _inventory(text, "keda.yaml")
    (scaled_object,) = inventory.scaled_objects
    good, other = scaled_object.prometheus_triggers
    assert other.threshold == 0.6 and other.query == "up"  # KEDA trims every value
    assert not other.timeout_readable and other.timeout == 3.0
    assert good.timeout_readable
    # A JSON number has no "+" (KEDA reads floats with json.Unmarshal).
    assert good.activation_threshold is None


def test_the_server_address_is_compared_by_place_not_by_spelling() -> None:
    assert same_server("http://prometheus:9090", "http://Prometheus:9090/")
    assert same_server("https://mimir.example/prometheus", "https://mimir.example:443/prometheus")
    assert same_server("http://localhost:9090", "http://localhost:9090/api/v1")
    assert not same_server("http://localhost:9090", "http://prometheus-operated:9090")
    assert not same_server("http://localhost:9090", "http://localhost:9090/select/0/prometheus")
    assert not same_server("http://localhost:9090", None)


def _vector(*values: str, metric: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "resultType": "vector",
        "result": [
            {"metric": metric or {"i": str(i)}, "value": [1.0, v]} for i, v in enumerate(values)
        ],
    }


@pytest.mark.parametrize(
    ("data", "answer", "with_ignore", "without_ignore"),
    [
        # kedacore/keda pkg/scalers/prometheus_scaler_test.go testPromQueryResult, case by case
        ({"resultType": "vector", "result": []}, Answer.EMPTY, 0.0, None),
        ({"resultType": "vector", "result": [{"value": []}]}, Answer.NO_VALUE, 0.0, None),
        (_vector("2"), Answer.VALUE, 2.0, 2.0),
        ({"resultType": "vector", "result": [{"value": ["1"]}]}, Answer.UNDECODABLE, None, None),
        (_vector("1", "2"), Answer.MULTIPLE, None, None),
        (_vector("+Inf"), Answer.NOT_FINITE, 0.0, None),
        (_vector("-Inf"), Answer.NOT_FINITE, 0.0, None),
        (_vector("NaN"), Answer.NOT_FINITE, 0.0, None),
        # what Prometheus sends for other queries
        ({"resultType": "scalar", "result": [1.0, "3"]}, Answer.UNDECODABLE, None, None),
        ({"resultType": "string", "result": [1.0, "x"]}, Answer.UNDECODABLE, None, None),
        (
            {"resultType": "matrix", "result": [{"metric": {}, "values": [[1.0, "3"]]}]},
            Answer.NO_VALUE,
            0.0,
            None,
        ),
        # and what a hostile server may
        ({"resultType": "vector", "result": 42}, Answer.UNDECODABLE, None, None),
        ({"resultType": "vector", "result": [{"value": [1, 3]}]}, Answer.UNDECODABLE, None, None),
        (_vector("1_000"), Answer.UNDECODABLE, None, None),
    ],
)
def test_answers_read_as_keda_reads_them(
    data: dict[str, object], answer: Answer, with_ignore: float | None, without_ignore: float | None
) -> None:
    reading = read_answer(data)
    assert reading.answer is answer
    assert reading.keda_value(True) == with_ignore
    assert reading.keda_value(False) == without_ignore


def test_many_series_are_counted_and_told_apart_in_bounded_memory() -> None:
    result = [
        {"metric": {"exported_pod": f"llm-{i}", "gpu": "0", "job": "dcgm"}, "value": [1.0, "5"]}
        for i in range(100_000)
    ]
    reading = read_answer({"resultType": "vector", "result": result})
    assert reading.answer is Answer.MULTIPLE and reading.count == 100_000
    assert len(reading.shown) == 3 and reading.varying == ("exported_pod",)


def test_queries_that_read_no_series_and_the_selectors_of_a_query() -> None:
    assert reads_no_series("vector(1) * 80") and reads_no_series("time() % 3600")
    for query in ("up", '{__name__=~"DCGM_.*"}', "sum by (pod) (vector(1))", "Inf", "<<.Series>>"):
        assert not reads_no_series(query), query
    (selector,) = selectors_in_query(
        'avg(DCGM_FI_DEV_GPU_UTIL{namespace="ml",pod=~"a}b"}) by (pod)'
    )
    assert selector.metric == "DCGM_FI_DEV_GPU_UTIL"
    assert [str(m) for m in selector.label_matchers()] == ['namespace="ml"', 'pod=~"a}b"']
    assert selectors_in_query("avg(<<.Series>>{<<.LabelMatchers>>})") == []


def test_run_each_keeps_every_outcome_within_the_deadline() -> None:
    def fails() -> int:
        raise ValueError("broken")

    def hangs() -> int:
        time.sleep(5)
        return 2

    started = time.monotonic()
    outcomes = run_each([lambda: 1, fails, hangs], 3, Deadline(0.5))
    assert time.monotonic() - started < 2
    assert outcomes[0].value == 1 and outcomes[0].error is None
    assert isinstance(outcomes[1].error, ValueError)
    late = outcomes[2].error
    assert isinstance(late, PrometheusError) and late.reason == TIMEOUT


IDLE_TRIGGER = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm, namespace: ml}
spec:
  scaleTargetRef: {name: llm}
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus-operated.monitoring.svc:9090
      query: avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml"})
      threshold: "40"
      activationThreshold: "95"
"""


@pytest.mark.parametrize(
    ("observed", "expected"),
    [
        # Busy GPUs below activationThreshold: never active, kept at zero.
        ([12.0, 55.0, 80.0], ["GL812"]),
        # A query that returned 0 throughout saw no load: nothing to say of its thresholds.
        ([0.0, 0.0, 0.0], []),
    ],
)
def test_activation_is_judged_only_against_values_that_saw_load(
    observed: list[float], expected: list[str]
) -> None:
    inventory = _inventory(IDLE_TRIGGER, "keda.yaml")
    (scaled_object,) = inventory.scaled_objects
    (trigger,) = scaled_object.prometheus_triggers
    snapshot = LiveSnapshot("http://prometheus:9090")
    evidence = TriggerEvidence(trigger, snapshot.url, trigger.timeout)
    evidence.reading = read_answer(_vector(str(observed[-1])))
    evidence.observed = observed
    snapshot.triggers[trigger] = evidence
    inventory.live = snapshot
    found = [f for f in run(inventory, Selection(["GL812"])) if f.rule == "GL812"]
    assert [f.rule for f in found] == expected, [f.message for f in found]
    if found:
        assert "activationThreshold 95 is at or above every value" in found[0].message


def test_an_empty_answer_says_where_the_workload_stays_when_its_minimum_is_templated() -> None:
    text = IDLE_TRIGGER.replace(
        "  scaleTargetRef: {name: llm}\n",
        '  scaleTargetRef: {name: llm}\n  minReplicaCount: "{{ .Values.min }}"\n',
    )
    inventory = _inventory(text, "keda.yaml")
    (scaled_object,) = inventory.scaled_objects
    (trigger,) = scaled_object.prometheus_triggers
    snapshot = LiveSnapshot("http://prometheus:9090")
    evidence = TriggerEvidence(trigger, snapshot.url, trigger.timeout)
    evidence.reading = read_answer({"resultType": "vector", "result": []})
    snapshot.triggers[trigger] = evidence
    inventory.live = snapshot
    (found,) = [f for f in run(inventory, Selection(["GL811"])) if f.rule == "GL811"]
    assert "so Deployment llm stays at its minReplicaCount, whatever its load" in found.message


def test_a_suggested_query_stays_valid_yaml_whatever_its_quotes() -> None:
    query = """max by (pod) (DCGM_FI_DEV_GPU_UTIL{exported_pod=~'llm-\\\\d+',namespace="ml"})"""
    text = IDLE_TRIGGER.replace(
        'query: avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml"})', f"query: >-\n        {query}"
    )
    inventory = _inventory(text, "keda.yaml")
    (scaled_object,) = inventory.scaled_objects
    (trigger,) = scaled_object.prometheus_triggers
    assert trigger.query == query
    snapshot = LiveSnapshot("http://prometheus:9090")
    evidence = TriggerEvidence(trigger, snapshot.url, trigger.timeout)
    evidence.reading = read_answer(_vector("40", "60"))
    snapshot.triggers[trigger] = evidence
    inventory.live = snapshot
    (found,) = [f for f in run(inventory, Selection(["GL810"])) if f.rule == "GL810"]
    suggested = found.fix.split("   #")[0]
    assert yaml.safe_load(suggested) == {"query": f"avg({query})"}
