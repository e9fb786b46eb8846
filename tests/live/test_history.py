"""Never-reached verdicts against a real Prometheus whose history is backfilled with promtool:
a day of history gives the verdict and names the span, a few hours give an info finding that
says what is missing (GL812; GL805 shares the wording, gpulint/live/words.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpulint.core.model import Finding, Severity
from gpulint.live.options import parse_duration

from .conftest import LIVE_FIXTURES, lint_live, require_prometheus
from .harness import PrometheusServer, openmetrics_history

pytestmark = [pytest.mark.live, pytest.mark.slow]

HOUR = 3600.0
# Idle load: 65 on every GPU all along, below a threshold of 70 (a day of it is a verdict).
IDLE = 65.0


def _scaled_object(namespace: str) -> str:
    return f"""\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{name: triton, namespace: {namespace}}}
spec:
  scaleTargetRef: {{name: triton}}
  minReplicaCount: 1
  maxReplicaCount: 4
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus-operated.monitoring.svc:9090
      query: avg(DCGM_FI_DEV_GPU_UTIL{{exported_namespace="{namespace}"}})
      threshold: "70"
"""


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A Prometheus holding a day of DCGM_FI_DEV_GPU_UTIL for namespace ``day`` and the last
    three hours for namespace ``fresh`` (a workload deployed this morning), up to a minute
    ago: the value now is the last one, within Prometheus's 5-minute staleness window."""
    require_prometheus()
    now = time.time()
    end = now - 60

    def series(namespace: str) -> tuple[str, str, dict[str, str], float]:
        labels = {
            "job": "gpu-metrics",
            "instance": "10.0.1.20:9400",
            "gpu": "0",
            "exported_namespace": namespace,
            "exported_pod": "triton-7d9f8b6c5-x2k4q",
        }
        return ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", labels, IDLE)

    # What GL805's fixture HPA (Deployment speech/whisper) reads, as a Prometheus keeping the
    # exporter's labels names the workload's pod (tests/live/world.py, ``gmp``).
    whisper = (
        "DCGM_FI_DEV_GPU_UTIL",
        "GPU utilization (in %).",
        {
            "job": "dcgm-exporter",
            "instance": "10.0.2.10:9400",
            "gpu": "0",
            "namespace": "speech",
            "pod": "whisper-6b8f9c7d4-k2m9x",
        },
        IDLE,
    )
    text = openmetrics_history([series("day"), whisper], end - 24 * HOUR - 600, end, 60.0)
    fresh = openmetrics_history([series("fresh")], end - 3 * HOUR, end, 60.0)
    # One OpenMetrics text: the ``fresh`` samples follow ``day``'s under the same family.
    body = fresh.split("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n", 1)[1]
    backfill = text.replace("# EOF\n", body)
    workdir = tmp_path_factory.mktemp("history")
    config = json.dumps({"global": {"scrape_interval": "15s"}, "scrape_configs": []})
    server = PrometheusServer(workdir, config, backfill=backfill).start()
    try:
        yield server
    finally:
        server.stop()


def _gl812(
    tmp_path: Path, server: PrometheusServer, namespace: str, share: str = "90%"
) -> tuple[Finding, str]:
    """The one GL812 finding on the namespace's ScaledObject, and its words unwrapped."""
    manifest = tmp_path / f"{namespace}.yaml"
    manifest.write_text(_scaled_object(namespace))
    findings, snapshot = lint_live([manifest], server.url, min_history=share)
    assert snapshot.available, snapshot.error
    found = [f for f in findings if f.rule == "GL812"]
    assert len(found) == 1, findings
    return found[0], " ".join(found[0].message.split())


def test_a_day_of_history_gives_the_verdict_over_the_whole_window(
    history: PrometheusServer, tmp_path: Path
) -> None:
    finding, words = _gl812(tmp_path, history, "day")
    assert finding.severity is Severity.WARNING
    assert "threshold 70 is above every value the query returned" in words
    assert "observed min 65 / median 65 / max 65 over the last 24h)" in words
    assert "never scales out" in words


def test_hours_of_history_give_no_verdict_and_say_what_is_missing(
    history: PrometheusServer, tmp_path: Path
) -> None:
    finding, words = _gl812(tmp_path, history, "fresh")
    assert finding.severity is Severity.INFO
    assert "never scales out" not in words
    assert "of the last 24h that Prometheus holds" in words
    span = words.split("over the ", 1)[1].split(" of the last 24h", 1)[0]
    # Three hours and a minute, read in 6-minute steps: the span is within a step of it.
    assert abs(parse_duration(span) - (3 * HOUR + 60)) <= 360, words
    assert "too little history to judge: such a verdict needs 21h36m of the last 24h" in words
    assert "--min-history 90%" in words
    assert "run again once Prometheus holds 21h36m" in finding.fix


def test_a_lower_min_history_judges_the_span_held_and_names_it(
    history: PrometheusServer, tmp_path: Path
) -> None:
    finding, words = _gl812(tmp_path, history, "fresh", share="10%")
    assert finding.severity is Severity.WARNING
    assert "never scales out" in words
    assert "of the last 24h that Prometheus holds)" in words


def test_a_day_of_history_gives_gl805_its_verdict_over_the_whole_window(
    history: PrometheusServer,
) -> None:
    """The HPA of GL805's short-history fixture, against a day of its pods' values."""
    findings, snapshot = lint_live([LIVE_FIXTURES / "GL805" / "fail_short_history"], history.url)
    assert snapshot.available, snapshot.error
    (finding,) = [f for f in findings if f.rule == "GL805"]
    words = " ".join(finding.message.split())
    assert finding.severity is Severity.WARNING, words
    assert (
        "above anything observed (observed min 65 / median 65 / max 65 for Deployment "
        "speech/whisper over the last 24h): the HPA never scales out" in words
    )
