"""The live rules' exact wording, location and fix, case by case, against a real Prometheus.

``<*>`` in an expected text stands for a part that changes from run to run (a port, a time).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpulint.core.model import Finding, Severity

from .conftest import LIVE_FIXTURES, lint_live, server_url, show
from .world import World

pytestmark = [pytest.mark.live, pytest.mark.slow]

_WINDOW = "matches no series in Prometheus (last 10m, the window the adapter discovers series in)"


def like(template: str, text: str) -> bool:
    pattern = ".+?".join(re.escape(part) for part in template.split("<*>"))
    return re.fullmatch(pattern, text, re.DOTALL) is not None


def findings_of(world: World, down_url: str, case: str, rule: str) -> list[Finding]:
    path = LIVE_FIXTURES / case
    url, lookback = server_url(world, down_url, path)
    findings, _ = lint_live([path], url, lookback)
    return sorted((f for f in findings if f.rule == rule), key=Finding.sort_key)


CASES = [
    # (fixture, rule, index, line, message, fix)
    (
        "GL801/fail_exporter_renamed",
        "GL801",
        0,
        4,
        'seriesQuery `container_accelerator_duty_cycle{namespace!="",pod!=""}` of adapter '
        f"rule rules[0] {_WINDOW}: no metric is named container_accelerator_duty_cycle here, "
        "but the same measurement exists as DCGM_FI_DEV_GPU_UTIL from dcgm-exporter (same "
        "scale: percent (0-100)); also present: dcgm_gpu_utilization, nvidia_gpu_duty_cycle, "
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE; the adapter exposes nothing for it",
        'seriesQuery: \'DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}\'',
    ),
    (
        "GL801/fail_disappeared.yaml",
        "GL801",
        0,
        5,
        'seriesQuery `nv_gpu_utilization{namespace!="",pod!=""}` of adapter rule rules[0] '
        f"{_WINDOW}: nv_gpu_utilization was last seen 2d ago (<*> UTC): the exporter that "
        "wrote it stopped, was renamed, or is no longer scraped; the adapter exposes nothing "
        "for it",
        "# find the name your exporter uses, then write it in seriesQuery:\n"
        "curl -s 'http://127.0.0.1:<*>/api/v1/label/__name__/values' | tr ',' '\\n' | grep -i gpu",
    ),
    (
        "GL801/fail_never_seen.yaml",
        "GL801",
        1,
        10,
        'seriesQuery `nv_gpu_utilization{namespace!="",pod!=""}` of adapter rule rules[1] '
        f"{_WINDOW}: nv_gpu_utilization was never seen in the last 1d (--lookback): no target "
        "this Prometheus scrapes exports it; the adapter exposes nothing for it",
        "<*>",
    ),
    (
        "GL801/fail_matcher_excludes.yaml",
        "GL801",
        0,
        9,
        'seriesQuery `DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}` of adapter rule rules.custom[0] '
        f'{_WINDOW}: DCGM_FI_DEV_GPU_UTIL has 6 series, but the matcher `exported_pod!=""` '
        "excludes every one of them (the series carry namespace and pod, no other pod or "
        "namespace label); the adapter exposes nothing for it",
        "seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{pod!=\"\"}'\n# the series carry pod, not "
        "exported_pod: map the labels they carry in resources.overrides (GL802 then checks "
        "what they name)",
    ),
    (
        "GL801/fail_labels_nowhere.yaml",
        "GL801",
        0,
        5,
        'seriesQuery `{kubernetes_namespace!="",kubernetes_pod_name!=""}` of adapter rule '
        f"rules[0] {_WINDOW}: no series in Prometheus carries the labels kubernetes_namespace, "
        "kubernetes_pod_name; the adapter exposes nothing for it",
        "# write the seriesQuery with labels the series carry; list them with\n"
        "curl -s 'http://127.0.0.1:<*>/api/v1/labels'",
    ),
    (
        "GL802/fail_exporter_pod_configmap.yaml",
        "GL802",
        1,
        15,
        "adapter rule rules[0] of ConfigMap prometheus-adapter: resources maps pod to pods, but "
        "on these GPU series pod names the exporter's own pod (nvidia-dcgm-exporter-7xk2p, "
        "nvidia-dcgm-exporter-m4r8t): 6 of the 7 series also carry exported_pod, so "
        "Prometheus scraped the exporter with honor_labels: false and moved the workload's pod "
        "to exported_pod; map exported_pod instead",
        "resources:\n  overrides:\n    exported_pod: {resource: pod}   # instead of pod",
    ),
    (
        "GL802/fail_label_absent.yaml",
        "GL802",
        0,
        7,
        "adapter rule rules[0]: resources maps kubernetes_namespace to namespaces, but none of "
        'the 8 series of `DCGM_FI_DEV_FB_USED{exported_pod!=""}` carries kubernetes_namespace '
        "(they carry exported_namespace, namespace); the namespace is in exported_namespace",
        "resources:\n  overrides:\n    exported_namespace: {resource: namespace}   # instead of "
        "kubernetes_namespace",
    ),
    (
        "GL802/fail_exporter_without_pod_labels.yaml",
        "GL802",
        1,
        6,
        "adapter rule rules[0]: resources maps pod to pods, but on these GPU series pod names "
        "the exporter, not a workload: every GPU on a node carries the same pod, the "
        "exporter's (10.0.3.11:9400: dcgm-exporter-1x-b7x9k); the exporter writes no pod "
        "labels of its own",
        "# the series carry no workload pod: run dcgm-exporter with Kubernetes mapping\n<*>",
    ),
    (
        "GL803/fail_no_group_by.yaml",
        "GL803",
        0,
        8,
        "metricsQuery of adapter rule rules[0] returns 1 of 1 series without the label "
        "exported_pod (with no labels at all) when rendered for namespace ml and pods llm-0, "
        "llm-1, triton-7d9f8b6c5-p9w7z and 1 more: the adapter matches results to pods by "
        "exported_pod (<<.GroupBy>>), so these values belong to no object and the HPA gets 'no "
        "metrics returned from custom metrics API' (rendered: `sum(DCGM_FI_DEV_GPU_UTIL{"
        'exported_namespace="ml",exported_pod=~"llm-0|llm-1|triton-7d9f8b6c5-p9w7z|'
        'triton-7d9f8b6c5-x2k4q"})`)',
        "# keep the group-by label:\n"
        "metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'",
    ),
    (
        "GL803/fail_rate_of_instant_vector.yaml",
        "GL803",
        0,
        8,
        "metricsQuery of adapter rule rules[0] fails in Prometheus when rendered for namespace "
        "ml and pods llm-0, llm-1, triton-7d9f8b6c5-p9w7z and 1 more: invalid parameter "
        '"query": 1:29: parse error: expected type range vector in call to function "rate", '
        "got instant vector (rendered: `sum by (exported_pod) (rate(DCGM_FI_DEV_POWER_USAGE{"
        'exported_namespace="ml",exported_pod=~"llm-0|llm-1|triton-7d9f8b6c5-p9w7z|'
        'triton-7d9f8b6c5-x2k4q"}))`)',
        "# fix the PromQL; a working shape for DCGM_FI_DEV_POWER_USAGE:\n"
        "metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'",
    ),
    (
        "GL803/fail_stale_series.yaml",
        "GL803",
        0,
        9,
        "metricsQuery of adapter rule rules[0] returns nothing when rendered for namespace ml "
        "and pods llm-0, llm-1, triton-7d9f8b6c5-p9w7z and 1 more, although the seriesQuery "
        "finds those series: DCGM_FI_PROF_PIPE_TENSOR_ACTIVE stopped: its last sample is <*>s "
        "ago (<*> UTC), so Prometheus has no current value (the exporter no longer writes it) "
        "(rendered: `avg(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{<*>}) by (exported_pod)`)",
        # the query already has the proposed shape: the fix is about the data, not the query
        "# the query is right; DCGM_FI_PROF_PIPE_TENSOR_ACTIVE stopped being written: check "
        "that the exporter pods run on the GPU nodes and that Prometheus still scrapes them "
        "(its Targets page)",
    ),
    (
        "GL803/fail_hard_coded_metric.yaml",
        "GL803",
        0,
        8,
        "metricsQuery of adapter rule rules[0] returns nothing when rendered for namespace ml "
        "and pods <*>, although the seriesQuery finds those series: it reads "
        "DCGM_FI_DEV_GPU_UTILIZATION, which has no series (the query names another metric "
        "than <<.Series>>) (rendered: <*>)",
        "<*>",
    ),
    (
        "GL804/fail_pod_label_of_exporter",
        "GL804",
        0,
        17,
        "HPA triton asks for gpu_utilization, which adapter rule rules[0] (<*>/adapter.yaml:3) "
        "serves from DCGM_FI_DEV_GPU_UTIL, but the query the adapter sends for namespace ml and "
        "the pods of Deployment ml/triton (triton-7d9f8b6c5-p9w7z, triton-7d9f8b6c5-x2k4q) "
        "returns nothing, so the HPA reports FailedGetPodsMetric and does not scale: the pods "
        "appear in DCGM_FI_DEV_GPU_UTIL under the label exported_pod (namespace in "
        "exported_namespace), while the rule maps pods through pod (rendered: "
        '`avg(DCGM_FI_DEV_GPU_UTIL{namespace="ml",pod=~"triton-7d9f8b6c5-p9w7z|'
        'triton-7d9f8b6c5-x2k4q"}) by (pod)`)',
        "resources:\n  overrides:\n    exported_namespace: {resource: namespace}\n"
        "    exported_pod: {resource: pod}",
    ),
    (
        "GL804/fail_mig_instances",
        "GL804",
        0,
        17,
        "HPA embedder asks for gpu_utilization, which adapter rule rules[0] (<*>) serves from "
        "DCGM_FI_DEV_GPU_UTIL, but the query the adapter sends for namespace search and the "
        "pods of Deployment search/embedder (embedder-6f5b7c8d9-h7k2m, embedder-6f5b7c8d9-q4n8s) "
        "returns nothing, so the HPA reports FailedGetPodsMetric and does not scale: the pods "
        "run on MIG instances (1g.10gb), for which dcgm-exporter does not report "
        "DCGM_FI_DEV_GPU_UTIL; they do report DCGM_FI_PROF_GR_ENGINE_ACTIVE (and <*>) "
        "(rendered: <*>)",
        "# serve the HPA from a metric MIG instances report (a ratio, 0-1):\n"
        "seriesQuery: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_pod!=\"\"}'   # match your pod "
        'label\n# and set the HPA target on that scale, e.g. averageValue: "600m"',
    ),
    (
        "GL804/fail_pods_not_mapped",
        "GL804",
        0,
        17,
        "HPA reranker asks for gpu_utilization, which adapter rule rules[0] (<*>) serves from "
        "DCGM_FI_DEV_GPU_UTIL, but the query the adapter sends for namespace ml and the pods "
        "of Deployment ml/reranker (reranker-<hash>-<id>) returns nothing, so the HPA reports "
        "FailedGetPodsMetric and does not scale: no series carries a pod named "
        "reranker-<hash>-<id> in any pod label: dcgm-exporter maps a GPU to a pod only when "
        "the container has an nvidia.com/gpu (or nvidia.com/mig-*) limit and Kubernetes "
        "mapping is on; pods that see GPUs through NVIDIA_VISIBLE_DEVICES get no pod labels "
        '(rendered: `avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod=~'
        '"reranker-[a-z0-9]{1,10}-[a-z0-9]{5}"}) by (exported_pod)`)',
        "resources:\n  limits:\n    nvidia.com/gpu: 1   # in the GPU container of Deployment "
        "ml/reranker",
    ),
    (
        "GL804/fail_wrong_namespace",
        "GL804",
        0,
        17,
        "HPA triton asks for gpu_utilization, which <*> returns nothing, so the HPA reports "
        "FailedGetPodsMetric and does not scale: pods named triton-<hash>-<id> appear in "
        "namespace ml, not in default (rendered: <*>)",
        "metadata:\n  namespace: ml   # the HPA must live with its pods",
    ),
    (
        "GL805/fail_ratio_against_percent_target",
        "GL805",
        0,
        20,
        "HPA triton targets gpu_busy at 60 (averageValue), but DCGM_FI_PROF_GR_ENGINE_ACTIVE "
        "is a ratio (0-1): observed min 0.31 / median 0.54 / max 0.77 for Deployment ml/triton "
        "over the last 1d; the target is never reached, so the HPA never scales out",
        'averageValue: "600m"   # 60% on the 0-1 scale',
    ),
    (
        "GL805/fail_multi_gpu_sum",
        "GL805",
        0,
        20,
        "HPA llm targets gpu_utilization at 60 (averageValue), but DCGM_FI_DEV_GPU_UTIL is a "
        "percent (0-100) and the values reach 170: the metricsQuery of adapter rule rules[0] "
        "(<*>) sums the GPUs of multi-GPU pods (observed min 70 / median 120 / max 170 for "
        "StatefulSet ml/llm over the last 1d), so a pod's GPUs add up against a per-GPU target "
        "and the HPA scales out too early",
        "metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'   # one value "
        "per pod on the 0-100 scale",
    ),
    (
        "GL805/fail_never_scales_out",
        "GL805",
        0,
        20,
        "HPA whisper targets gpu_utilization at 95 (averageValue), above anything observed "
        "(observed min 45 / median 58 / max 71 for Deployment speech/whisper over the last "
        "1d): the HPA never scales out",
        'averageValue: "64"   # between the median and the peak observed; pick the load you '
        "want to scale at",
    ),
    (
        "GL805/fail_sits_at_max_replicas",
        "GL805",
        0,
        20,
        "HPA llm targets gpu_utilization at 30 (averageValue), below anything observed "
        "(observed min 35 / median 60 / max 85 for StatefulSet ml/llm over the last 1d): the "
        "HPA sits at maxReplicas (4)",
        'averageValue: "72"   # between the median and the peak observed; pick the load you '
        "want to scale at",
    ),
    (
        "GL809/fail_connection_refused.yaml",
        "GL809",
        0,
        3,
        "Prometheus at http://127.0.0.1:<*> could not be used: cannot connect: Connection "
        "refused; the live rules GL801-GL806 and GL810-GL812 were skipped, so the adapter "
        "rules, HPAs and KEDA prometheus triggers were not checked against it",
        "curl -s 'http://127.0.0.1:<*>/api/v1/query?query=up'   # must answer "
        '"status":"success"\n<*>',
    ),
]


@pytest.mark.parametrize(
    ("case", "rule", "index", "line", "message", "fix"), CASES, ids=[c[0] for c in CASES]
)
def test_message_and_fix(
    world: World,
    down_url: str,
    case: str,
    rule: str,
    index: int,
    line: int,
    message: str,
    fix: str,
) -> None:
    found = findings_of(world, down_url, case, rule)
    assert len(found) > index, show(found)
    finding = found[index]
    assert finding.location.line == line, show(found)
    assert like(message, finding.message), finding.message
    assert like(fix, finding.fix), finding.fix


def test_gl801_names_the_hpas_that_ask_for_the_metric(world: World, down_url: str) -> None:
    [finding] = findings_of(world, down_url, "GL801/fail_exporter_renamed", "GL801")
    [link] = finding.related
    assert (str(link.ref), link.role) == (
        "HorizontalPodAutoscaler ml/triton",
        "asks for its metric",
    )
    assert link.location is not None
    assert (Path(link.location.file).name, link.location.line) == ("hpa.yaml", 17)


@pytest.mark.parametrize("case", ["GL804/fail_mig_instances", "GL805/fail_multi_gpu_sum"])
def test_hpa_findings_point_back_at_the_adapter_rule(
    world: World, down_url: str, case: str
) -> None:
    [finding] = findings_of(world, down_url, case, case[:5])
    [link] = finding.related
    assert link.location is not None
    assert (Path(link.location.file).name, link.location.line) == ("adapter.yaml", 11)
    assert link.role == "adapter rule that serves the metric"


def test_disappeared_within_a_longer_look_back_but_not_within_the_default(
    world: World,
) -> None:
    path = LIVE_FIXTURES / "GL801" / "fail_disappeared.yaml"
    short, _ = lint_live([path], world.stack.url, "24h", select=["GL801"])
    long, _ = lint_live([path], world.stack.url, "72h", select=["GL801"])
    assert "was never seen in the last 1d (--lookback)" in short[0].message
    assert "was last seen 2d ago" in long[0].message


def test_gl809_is_an_error_when_prometheus_is_required(down_url: str) -> None:
    path = LIVE_FIXTURES / "GL809" / "fail_connection_refused.yaml"
    warned, _ = lint_live([path], down_url, select=["GL809"])
    failed, snapshot = lint_live([path], down_url, required=True, select=["GL809"])
    assert [f.severity for f in warned] == [Severity.WARNING]
    assert [f.severity for f in failed] == [Severity.ERROR]
    assert failed[0].message.endswith("(--require-prometheus)")
    assert not snapshot.available and snapshot.rules == {}
