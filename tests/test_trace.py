"""``gpulint trace`` offline: the links of each chain, the JSON contract, Mermaid, exit codes.

The seeds' broken and fixed configurations (examples/seed-ko) are traced through the real
command; smaller inputs show each kind of autoscaler (HPA, KEDA, Knative) and each status.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

import gpulint
from gpulint.cli import main
from gpulint.core.model import ObjectRef
from gpulint.trace.links import STAGES, Link, Trace
from gpulint.trace.render import render_mermaid, render_text

from .conftest import ROOT

SEED = ROOT / "examples" / "seed-ko"

GPU_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: llm}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.6.3
        resources:
          limits: {nvidia.com/gpu: 1}
"""


def trace(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["trace", *args])
    return code, capsys.readouterr().out


def trace_json(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code, out = trace("-f", "json", *args, capsys=capsys)
    return code, json.loads(out)


def statuses(data: dict[str, object], index: int = 0) -> dict[str, tuple[str, list[str]]]:
    traced = data["traces"][index]  # type: ignore[index]
    return {link["stage"]: (link["status"], link["findings"]) for link in traced["links"]}


def test_the_seed_broken_chain_breaks_at_the_exporter_placement_and_the_prometheus_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, data = trace_json(str(SEED / "broken"), capsys=capsys)
    assert code == 1  # GL603 is an error
    links = statuses(data)
    assert list(links) == list(STAGES)
    assert links["workload"] == ("ok", [])
    assert links["exporter"] == ("broken", ["GL604"])
    assert links["service"] == ("ok", [])
    assert links["scrape"] == ("ok", [])
    assert links["prometheus"] == ("broken", ["GL603"])
    assert links["adapter-rule"] == ("broken", ["GL406"])
    assert links["metrics-api"] == ("unknown", [])
    assert links["autoscaler"] == ("ok", [])


def test_the_seed_fixed_chain_is_whole_offline(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = trace_json(str(SEED / "fixed"), capsys=capsys)
    assert code == 0
    links = statuses(data)
    assert {stage for stage, (status, _) in links.items() if status != "ok"} == {"metrics-api"}
    prometheus = data["traces"][0]["links"][4]  # type: ignore[index]
    assert "llm-prometheus-prometheus" in prometheus["detail"]
    assert prometheus["file"].endswith("seed-ko/fixed/prometheus-adapter.yaml")
    assert prometheus["line"] == 3


def test_the_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    _, data = trace_json(str(SEED / "broken"), capsys=capsys)
    assert set(data) == {"version", "gpulintVersion", "traces"} and data["version"] == 1
    assert data["gpulintVersion"] == gpulint.__version__
    (traced,) = data["traces"]  # type: ignore[misc]
    assert set(traced) == {"autoscaler", "metric", "unit", "links"}
    assert traced["autoscaler"] == {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "namespace": "llm",
        "name": "hpa-llm-server",
        "file": "examples/seed-ko/broken/hpa.yaml",
        "line": 17,
    }
    assert traced["metric"] == "gpu_utilization"
    for link in traced["links"]:
        assert set(link) == {"stage", "object", "file", "line", "status", "findings", "detail"}
        assert link["status"] in ("ok", "broken", "unknown")
    exporter = traced["links"][1]
    assert exporter["object"] == {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "namespace": None,
        "name": "nvidia-dcgm-exporter",
    }
    assert (exporter["file"], exporter["line"]) == ("examples/seed-ko/broken/gpu-operator.yaml", 16)


def test_exit_codes_follow_fail_on(capsys: pytest.CaptureFixture[str]) -> None:
    assert trace(str(SEED / "broken"), "--fail-on", "never", capsys=capsys)[0] == 0
    assert trace(str(SEED / "fixed"), "--fail-on", "warning", capsys=capsys)[0] == 0
    # The fixed chain has no warning either; the broken one fails at every level.
    broken = trace(str(SEED / "broken"), "--fail-on", "warning", capsys=capsys)
    assert broken[0] == 1


def test_an_output_it_cannot_write_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "trace.json"
    assert main(["trace", "--no-config", "-o", str(target), str(SEED / "broken")]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == [f"gpulint: error: cannot write {target}: No such file or directory"]


def test_text_marks_the_first_break_without_colour(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = trace(str(SEED / "broken"), "--color", "never", capsys=capsys)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("HorizontalPodAutoscaler llm/hpa-llm-server, metric gpu_utilization")
    # A link's text wraps onto lines under it: each link as one line of words.
    links: list[str] = []
    for line in lines:
        if line.startswith(("├─", "└─")):
            links.append(line)
        elif links and line.startswith(("│ ", "   ")):
            links[-1] += " " + line.lstrip("│ ")
    marked = [" ".join(link.split()) for link in links if "<- first break" in link]
    assert len(marked) == 1 and " exporter " in marked[0] and "[GL604]" in marked[0]
    assert "\x1b" not in out
    assert lines[-1] == "gpulint trace: 1 chain, 1 broken"


def test_mermaid_one_flowchart_per_trace_with_broken_links_styled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = trace(str(SEED / "broken"), "-f", "mermaid", capsys=capsys)
    assert code == 1
    assert out.count("```mermaid\nflowchart LR\n") == 1
    nodes = re.findall(r'^  n(\d)\["([^"]*)"\]:::(\w+)$', out, re.MULTILINE)
    assert [n[2] for n in nodes] == [
        "ok",
        "broken",
        "ok",
        "ok",
        "broken",
        "broken",
        "unknown",
        "ok",
    ]
    assert "GL603" in nodes[4][1]
    assert [f"n{i - 1} --> n{i}" for i in range(1, 8)] == re.findall(r"n\d --> n\d", out)
    assert "classDef broken" in out


def test_mermaid_labels_cannot_end_their_node() -> None:
    hostile = ObjectRef("v1", "Service", "ns", 'x"]; click n0 "javascript:alert(1)" <b>\x1b')
    link = Link("service", hostile, None, "broken", ("GL602",), "d", None, str(hostile))
    traced = Trace(hostile, link.location or _location(), 'm"]', (link,), "")
    out = io.StringIO()
    render_mermaid([traced], out)
    label = out.getvalue().split('n0["', 1)[1].split('"]:::', 1)[0]
    assert '"' not in label and "<b>" not in label and "\x1b" not in label
    assert "#quot;" in label and "#lt;b#gt;" in label


def _location():  # type: ignore[no-untyped-def]
    from gpulint.core.model import Location

    return Location("f.yaml", 1, 1)


def test_no_autoscaler_is_said(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(GPU_DEPLOYMENT)
    code, out = trace(str(tmp_path), capsys=capsys)
    assert code == 0
    assert out == "gpulint trace: no autoscaler metric to trace in the input\n"
    empty = io.StringIO()
    render_text([], empty)
    assert empty.getvalue() == out


def test_autoscaler_selects_one_and_an_unknown_one_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, data = trace_json(
        str(SEED / "broken"), "--autoscaler", "llm/hpa-llm-server", capsys=capsys
    )
    assert len(data["traces"]) == 1  # type: ignore[arg-type]
    code, _ = trace(str(SEED / "broken"), "--autoscaler", "hpa-llm-server", capsys=capsys)
    assert code == 1
    assert main(["trace", str(SEED / "broken"), "--autoscaler", "other/hpa-llm-server"]) == 2
    assert "no such autoscaler metric" in capsys.readouterr().err


def test_a_keda_trigger_goes_straight_to_prometheus(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "app.yaml").write_text(
        GPU_DEPLOYMENT
        + """\
---
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata: {name: k8s, namespace: monitoring}
spec:
  serviceMonitorSelector: {}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm, namespace: llm}
spec:
  scaleTargetRef: {name: llm}
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus.monitoring.svc:9090
      query: avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="llm"})
      threshold: "60"
"""
    )
    code, data = trace_json(str(tmp_path), capsys=capsys)
    assert code == 1
    (traced,) = data["traces"]  # type: ignore[misc]
    assert traced["autoscaler"]["kind"] == "ScaledObject"
    assert traced["metric"] == "s0-prometheus"
    stages = [link["stage"] for link in traced["links"]]
    assert "adapter-rule" not in stages
    links = statuses(data)
    assert links["workload"][0] == "ok"
    assert links["exporter"] == ("unknown", [])  # a DCGM series, and no exporter in the input
    assert links["prometheus"] == ("broken", ["GL603"])


def test_a_knative_revision_on_the_hpa_class_reads_the_adapter(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "ksvc.yaml").write_text(
        """\
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: whisper, namespace: speech}
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
        autoscaling.knative.dev/metric: gpu_utilization
        autoscaling.knative.dev/target: "60"
    spec:
      containers:
      - image: whisper:1
        resources:
          limits: {nvidia.com/gpu: 1}
---
apiVersion: v1
kind: Service
metadata: {name: whisper, namespace: speech}
spec:
  type: ExternalName
  externalName: kourier-internal.kourier-system.svc.cluster.local
"""
    )
    code, data = trace_json(str(tmp_path), capsys=capsys)
    (traced,) = data["traces"]  # type: ignore[misc]
    assert traced["autoscaler"]["apiVersion"] == "serving.knative.dev/v1"
    assert traced["metric"] == "gpu_utilization"
    links = statuses(data)
    assert links["workload"][0] == "ok"
    assert links["adapter-rule"] == ("unknown", [])  # no adapter config in the input
    assert code == 0


def test_text_lines_wrap_at_the_width_under_their_link(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["trace", str(ROOT / "examples")])
    lines = capsys.readouterr().out.splitlines()
    # 80 columns (tests/conftest.py); only a word longer than a line (a URL) goes beyond.
    assert [line for line in lines if len(line) > 80 and " " in line[24:].strip()] == []
    assert "│                       (examples/live/broken/workloads.yaml:1)" in lines


def test_a_broken_link_says_what_lint_says_of_it(capsys: pytest.CaptureFixture[str]) -> None:
    """A link's text never contradicts the finding that breaks it: seed-ko's exporter does
    follow every GPU node, and its link says why it is broken all the same (GL604); seed-ja's
    HPA names the predictor's old name, which no Deployment answers to in Knative mode
    (GL106), so no InferenceService is said to make it."""
    _, ko = trace_json(str(SEED / "broken"), capsys=capsys)
    exporter = ko["traces"][0]["links"][1]  # type: ignore[index]
    assert exporter["status"] == "broken" and exporter["findings"] == ["GL604"]
    assert "follows every GPU node" in exporter["detail"]
    assert "dcgm.nodeSelector, which places nothing" in exporter["detail"]
    _, ja = trace_json(str(ROOT / "examples" / "seed-ja" / "broken"), capsys=capsys)
    for traced in ja["traces"]:  # type: ignore[attr-defined]
        workload = traced["links"][0]
        assert workload["status"] == "broken" and "GL106" in workload["findings"]
        assert "made by" not in workload["detail"]
        assert "the name KServe 0.10 gave the predictor" in workload["detail"]


def test_mermaid_headings_name_the_unit_when_there_are_several(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = trace("-f", "mermaid", "--fail-on", "never", str(SEED), capsys=capsys)
    assert code == 0
    headings = [line for line in out.splitlines() if line.startswith("**")]
    assert len(headings) == 2 and len(set(headings)) == 2
    assert "in unit " in headings[0] and headings[0].rstrip("*").endswith("(broken at exporter)")
    _, one = trace("-f", "mermaid", "--fail-on", "never", str(SEED / "fixed"), capsys=capsys)
    assert "in unit" not in one
