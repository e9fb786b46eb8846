"""``gpulint migrate keda --prometheus``: the proof against a real Prometheus holding the
recorded day (tests/replay/loads.py). The scenarios' HPAs (tests/replay/fixtures/scenarios)
are migrated; each HPA is replayed through the adapter's query and its ScaledObject through
KEDA's, and every generated query is asked live."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpulint.cli import main
from tests.replay.conftest import Recorded

pytestmark = pytest.mark.slow

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
SERVER = "http://prometheus.monitoring.svc:9090"


def scenarios_repo(path: Path) -> Path:
    shutil.copytree(SCENARIOS, path)
    subprocess.run(["git", "-C", str(path), "init", "-q"], check=True)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "b"],
        check=True,
    )
    return path


def prove(
    recorded: Recorded, repo: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(
        [
            "migrate",
            "keda",
            str(repo),
            "--no-config",
            "--server-address",
            SERVER,
            "--prometheus",
            recorded.url,
            "--end",
            str(recorded.end),
            "--range",
            "24h",
            "--format",
            "json",
            *extra,
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def test_each_scaled_object_replays_within_a_replica_of_its_hpa_and_reads_one_series(
    recorded: Recorded,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = scenarios_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    picture = tmp_path / "proof.svg"
    code, report = prove(recorded, repo, capsys, "--picture", str(picture))
    proofs = {p["hpa"]: p for p in report["proofs"]}
    assert set(proofs) == {"ml/step", "ml/diurnal", "ml/spikes", "ml/ramp"}
    for key, proof in proofs.items():
        assert proof["not_replayed"] is None, key
        assert proof["syncs"] == 5761, key  # 00:00 to 24:00 at 15 s, inclusive
        [check] = proof["checks"]
        # One series, and the sum of the adapter's per-pod series: its scale.
        assert check["problem"] is None, (key, check)
        assert check["series"] == 1 and check["adapter_series"] == 8
        assert check["value"] == pytest.approx(check["adapter_value"])
    # A steady load, a diurnal curve and a ramp: within one replica at every sync.
    for key in ("ml/step", "ml/diurnal", "ml/ramp"):
        assert proofs[key]["agrees"], proofs[key]["differences"][:3]
    # Two-minute bursts: the HPA holds its pods a minute longer after each (its Pods metric
    # counts a starting pod at the target on a scale-down), and the report says so.
    spikes = proofs["ml/spikes"]
    assert not spikes["agrees"]
    times = [d["time"] for d in spikes["differences"]]
    assert times[:4] == [f"{times[0][:14]}32:{s}Z" for s in ("00", "15", "30", "45")]
    assert len(times) <= 4 * 72  # a minute after each of the day's bursts, at most
    assert all(d["hpa"] > d["scaled_object"] for d in spikes["differences"])
    assert "calcPlainMetricReplicas" in spikes["why"][0]
    assert code == 1
    svg = picture.read_text()
    assert svg.count("<svg") == 3 and "HorizontalPodAutoscaler ml/" in svg
    assert "ScaledObject ml/" in svg
    assert git_status(repo) == ""  # a proof without --write writes nothing


def git_status(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.replace("?? proof.svg\n", "")


def test_a_query_that_answers_a_series_per_pod_is_caught_live(
    recorded: Recorded,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = scenarios_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    from gpulint.live.client import Deadline, PrometheusAPI
    from gpulint.migrate.proof import check_query

    api = PrometheusAPI(recorded.url, {}, Deadline(30))
    try:
        adapter = (
            'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",'
            'exported_pod=~"step-[a-z0-9]{1,10}-[a-z0-9]{5}"}) by (exported_pod)'
        )
        per_pod = check_query(api, "gpu_utilization", adapter, adapter, recorded.end)
        summed = check_query(api, "gpu_utilization", f"sum({adapter})", adapter, recorded.end)
        scaled = check_query(api, "gpu_utilization", f"sum({adapter}) / 100", adapter, recorded.end)
    finally:
        api.close()
    assert per_pod.problem is not None and "8 series" in per_pod.problem
    assert summed.problem is None
    assert scaled.problem is not None and "not the scale" in scaled.problem


def _om_value(text: str) -> str:
    """A label value as OpenMetrics writes it."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def test_hostile_names_select_exactly_their_series_in_a_real_prometheus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names that would end a PromQL string or widen a pattern: the generated queries, sent
    to Prometheus, answer the hostile workload's series and not the decoys beside them."""
    import time

    from tests.live.conftest import require_prometheus
    from tests.live.harness import PrometheusServer
    from tests.replay import loads
    from tests.test_migrate import make_repo, plain_app

    require_prometheus()
    namespace, name, zone = 'ns"})or vector(1)#', "llm+a|b(c).*", 'eu"\\\n}'
    start = loads.history_start(time.time())
    end = start + 600
    series = [
        (
            "DCGM_FI_DEV_GPU_UTIL",
            {"exported_namespace": namespace, "exported_pod": f"{name}-5d9f7c6b8-x2x7q"},
            42,
        ),
        # Decoys: what an unescaped pattern or namespace would also select.
        (
            "DCGM_FI_DEV_GPU_UTIL",
            {"exported_namespace": namespace, "exported_pod": "llmaab-5d9f7c6b8-x2x7q"},
            1000,
        ),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            {"exported_namespace": "ns", "exported_pod": f"{name}-5d9f7c6b8-x2x7q"},
            1000,
        ),
        ("vllm:num_requests_waiting", {"namespace": namespace, "zone": zone, "app": "a"}, 3),
        ("vllm:num_requests_waiting", {"namespace": "ns", "zone": zone, "app": "a"}, 100),
    ]
    lines = []
    for metric in dict.fromkeys(m for m, _, _ in series):
        lines.append(f"# TYPE {metric} gauge")
        for t in range(int(start), int(end) + 1, 15):
            for same, labels, value in series:
                if same == metric:
                    text = ",".join(f'{k}="{_om_value(v)}"' for k, v in labels.items())
                    lines.append(f"{metric}{{{text}}} {value} {t}")
    lines.append("# EOF")
    server = PrometheusServer(
        tmp_path / "prometheus", loads.prometheus_config(), backfill="\n".join(lines) + "\n"
    )
    server.start()
    try:
        files = plain_app(
            name=json.dumps(name),
            namespace=json.dumps(namespace),
            zone=json.dumps(zone),
            app_a="a",
            app_b="b",
        )
        repo = make_repo(tmp_path / "repo", files)
        monkeypatch.chdir(repo)
        capsys.readouterr()
        main(
            [
                "migrate",
                "keda",
                str(repo),
                "--prometheus",
                server.url,
                "--end",
                str(end),
                "--range",
                "10m",
                "--format",
                "json",
            ]
        )
        report = json.loads(capsys.readouterr().out)
    finally:
        server.stop()
    [proof] = report["proofs"]
    gpu, queue = proof["checks"]
    assert (gpu["problem"], gpu["series"], gpu["value"], gpu["adapter_series"]) == (None, 1, 42, 1)
    assert (queue["problem"], queue["series"], queue["value"]) == (None, 1, 3)
