"""The live check's pure parts (no Prometheus needed), and what the offline path imports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from gpulint.adapter import AdapterConfig
from gpulint.config import Settings
from gpulint.document import Document
from gpulint.inventory import Inventory
from gpulint.live.adapterquery import (
    mapping_for,
    matches_pattern,
    pod_name_pattern,
    render_query,
    selector_matchers,
)
from gpulint.live.names import alternatives_for
from gpulint.live.options import (
    OptionError,
    format_duration,
    parse_duration,
    parse_header,
    parse_url,
)
from gpulint.live.series import summarize
from gpulint.live.snapshot import HpaEvidence, LiveSnapshot, RuleEvidence, SeriesSummary
from gpulint.loader import load_file
from gpulint.promql import parse_selector

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


def test_durations_read_at_a_glance() -> None:
    assert [format_duration(s) for s in (3, 61, 3600, 93784, 172815, 600)] == [
        "3s",
        "1m1s",
        "1h",
        "1d2h",
        "2d",
        "10m",
    ]


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
    assert selector_matchers(selector) == [
        'model="llama"',
        'gpu=~"0|1"',
        'zone!~"a"',
        'pod!=""',
        'test=""',
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
        == 'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod=~"a|b",gpu="0"}) '
        "by (exported_pod)"
    )
    assert (
        render_query(rule, labels, "DCGM_FI_DEV_GPU_UTIL", "ml", ["a"])
        == 'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod="a"}) by (exported_pod)'
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
