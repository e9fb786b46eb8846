"""``gpulint replay`` end to end: a real Prometheus with a recorded day (tests/replay/loads.py),
the scenarios' manifests (a GPU Deployment, the adapter rule, an HPA with default behavior),
and the expected scale events and figures worked out by hand below.

Common to every scenario: 8 pods were observed (kube-state-metrics), each new pod is ready
180 s after it is created (readinessProbe initialDelaySeconds 170 + periodSeconds 10), the
controller syncs every 15 s, and a day from 00:00 to 24:00 inclusive is 5,761 syncs. Without
behavior the HPA scales down to the highest recommendation of the last 300 s (the window
includes its edge) and up by at most max(2 x current, 4) per sync; a pod that is not ready
counts as 0 on a scale-up. The controller's first recommendation is the 8 replicas it first
sees (recordInitialRecommendation), so no scale-down goes below 8 before 00:05:15.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpulint.cli import main
from tests.replay.conftest import Recorded
from tests.replay.loads import DAY

pytestmark = pytest.mark.slow

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
SYNC = 15.0


def gpu_hours(pod_syncs: float) -> Any:
    """GPU-hours of so many pod-syncs (1 GPU a pod), as the report rounds them (3 places)."""
    return pytest.approx(pod_syncs * SYNC / 3600.0, abs=0.0006)


def replay_args(recorded: Recorded) -> list[str]:
    """`gpulint replay` of the scenarios over the recorded day, as JSON."""
    return [
        "replay",
        str(SCENARIOS),
        "--no-config",
        "--prometheus",
        recorded.url,
        "--end",
        str(recorded.end),
        "--range",
        "24h",
        "--format",
        "json",
    ]


def run_replay(recorded: Recorded, tmp_path: Path, *extra: str) -> tuple[int, Any]:
    out = tmp_path / "replay.json"
    code = main([*replay_args(recorded), "-o", str(out), *extra])
    return code, json.loads(out.read_text())


@pytest.fixture(scope="module")
def report(recorded: Recorded, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Any]:
    return run_replay(recorded, tmp_path_factory.mktemp("replay"), "--compare-fix")


def replay_of(report: tuple[int, Any], name: str) -> dict[str, Any]:
    found = [r for r in report[1]["replays"] if r["autoscaler"]["name"] == name]
    assert len(found) == 1
    return found[0]


def events(replay: dict[str, Any], start: float) -> list[tuple[float, int, int]]:
    from datetime import datetime

    return [
        (
            datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp() - start,
            e["from"],
            e["to"],
        )
        for e in replay["events"]
    ]


def test_json_contract(report: tuple[int, Any], recorded: Recorded) -> None:
    code, data = report
    assert set(data) == {"version", "range", "replays", "not_replayed"}
    assert data["not_replayed"] == []
    assert data["version"] == 1
    assert data["range"]["step_s"] == 15.0
    assert data["range"]["start"].endswith("T00:00:00Z")
    replay = data["replays"][0]
    assert set(replay) == {
        "autoscaler",
        "target",
        "metrics",
        "series",
        "events",
        "figures",
        "findings",
        "compare_fix",
        "verdict",
        "recommendation",
    }
    assert replay["recommendation"] is None  # not asked for
    assert set(replay["verdict"]) == {"better", "why", "figures", "behavior"}
    assert set(replay["autoscaler"]) == {"kind", "namespace", "name"}
    assert set(replay["target"]) == {"kind", "name"}
    assert set(replay["metrics"][0]) == {"name", "type", "target", "query"}
    assert len(replay["series"]) == 5761
    assert set(replay["series"][0]) == {"time", "value", "observed_replicas", "simulated_replicas"}
    assert set(replay["events"][0]) == {"time", "from", "to", "reason"}
    assert set(replay["figures"]) == {
        "scale_events",
        "flaps",
        "time_at_max_s",
        "time_at_min_s",
        "time_under_provisioned_s",
        "time_over_provisioned_s",
        "scale_up_lag_s",
        "gpu_hours_used",
        "gpu_hours_needed",
        "time_queued_s",
        "cost",
    }
    assert set(replay["compare_fix"]) == set(replay)
    # the query is the adapter's, rendered for the HPA's pods
    assert replay_of(report, "step")["metrics"][0] == {
        "name": "gpu_utilization",
        "type": "Pods",
        "target": 60.0,
        "query": 'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",'
        'exported_pod=~"step-[a-z0-9]{1,10}-[a-z0-9]{5}"}) by (exported_pod)',
    }
    # GL952 (an error) on the step load: exit code 1 at --fail-on error
    assert code == 1


def test_step_load(report: tuple[int, Any], recorded: Recorded) -> None:
    # 2 pods' worth for 12 h, then 5 (per pod: 15%, then 37.5%, on 8 pods); maxReplicas 4.
    replay = replay_of(report, "step")
    assert events(replay, recorded.start) == [
        (0, 8, 4),  # 8 observed is above maxReplicas 4: the first sync sets 4
        # 4 pods at 30% against 60: ratio 0.5, ceil(0.5 x 4) = 2, once the first
        # recommendation (8, at 00:00) has left the window
        (315, 4, 2),
        # 2 pods would be at 150%, capped at 100: ratio 1.67, ceil(3.33) = 4 = maxReplicas;
        # once ready (12:03) 4 pods at 75%: ratio 1.25 asks for 5, maxReplicas holds 4
        (DAY / 2, 2, 4),
    ]
    figures = replay["figures"]
    assert figures["scale_events"] == 3
    assert figures["flaps"] == 0
    # 00:00..00:05:00 (21 syncs) and 12:00..24:00
    assert figures["time_at_max_s"] == 21 * SYNC + (DAY / 2) + SYNC
    assert figures["time_at_min_s"] == 0
    # the 12:00 sync (2 ready, none starting) and 12:03..24:00 at the maximum
    assert figures["time_under_provisioned_s"] == 15 + (DAY / 2 - 180 + SYNC)
    assert figures["time_over_provisioned_s"] == 15  # 00:00: 8 ready for 2 pods' worth
    assert figures["scale_up_lag_s"] == 180  # 12:00 to 12:03, 4 (= max) ready
    # 4 for 21 syncs (00:00..00:05:00), 2 for 2,859 syncs, 4 for 2,881 syncs (12:00..24:00)
    assert figures["gpu_hours_used"] == gpu_hours(4 * 21 + 2 * 2859 + 4 * 2881)
    assert figures["gpu_hours_needed"] == gpu_hours(2 * 2880 + 4 * 2881)
    assert [f["rule"] for f in replay["findings"]] == ["GL952"]
    assert "maxReplicas 4" in replay["findings"][0]["message"]


def test_diurnal_curve(report: tuple[int, Any], recorded: Recorded) -> None:
    # 1 pod's worth at night, up one an hour from 06:00 to 6 at 10:00, down one an hour from
    # 15:00 to 1 at 20:00 (loads.DIURNAL_HOURS).
    replay = replay_of(report, "diurnal")
    up = [(h * 3600.0, h - 5, h - 4) for h in range(6, 11)]  # each step up at once
    # each step down 300 s later: the highest recommendation of the last 5 minutes holds
    down = [(h * 3600.0 + 300, n + 1, n) for h, n in ((15, 5), (16, 4), (17, 3), (18, 2), (20, 1))]
    # the first recommendation (8) holds the replicas until it leaves the window, 00:05:15
    assert events(replay, recorded.start) == [(315, 8, 1), *up, *down]
    figures = replay["figures"]
    assert figures["scale_events"] == 11
    assert figures["flaps"] == 0
    assert figures["time_at_min_s"] == 1419 * SYNC + 941 * SYNC  # 00:05:15-06:00, 20:05-24:00
    assert figures["time_at_max_s"] == 21 * SYNC  # 8 replicas, 00:00..00:05:00
    assert figures["time_under_provisioned_s"] == 5 * SYNC  # the sync of each step up
    assert figures["time_over_provisioned_s"] == 21 * SYNC  # 8 ready for 1 pod's worth
    assert figures["scale_up_lag_s"] == 180
    # replicas x syncs: 8x21, 1x1419, 2x240, 3x240, 4x240, 5x240, 6x1220 (10:00-15:05),
    # 5x240, 4x240, 3x240, 2x480 (18:05-20:05), 1x941
    used = 8 * 21 + 1419 + 480 + 720 + 960 + 1200 + 6 * 1220 + 1200 + 960 + 720 + 2 * 480 + 941
    assert figures["gpu_hours_used"] == gpu_hours(used)
    # the hourly loads sum to 70, 240 syncs an hour, and the 24:00 sync at 1
    assert figures["gpu_hours_needed"] == gpu_hours(70 * 240 + 1)
    assert replay["findings"] == []


def test_spike_train(report: tuple[int, Any], recorded: Recorded) -> None:
    # 1 pod's worth (target 20), with 2-minute bursts of 6 every 20 minutes from 00:25:
    # 71 bursts, the last at 23:45.
    replay = replay_of(report, "spikes")
    expected = [(315.0, 8, 1)]  # the first recommendation (8) leaves the window
    for k in range(71):
        s = 1500.0 + 1200 * k
        expected += [
            (s, 1, 4),  # 1 pod at 100% (capped): ratio 5, limited to max(2 x 1, 4) = 4
            (s + 15, 4, 5),  # 3 starting count 0: ratio 1.25, ceil(1.25 x 4) = 5
            (s + 480, 5, 1),  # the last recommendation of 5 (s+165) leaves the 300 s window
        ]
    assert events(replay, recorded.start) == expected
    figures = replay["figures"]
    assert figures["scale_events"] == 214
    assert figures["flaps"] == 71  # each scale-down 465 s after the scale-up before it
    assert figures["time_at_min_s"] == (79 + 48 * 70 + 29) * SYNC
    assert figures["time_under_provisioned_s"] == 71 * SYNC
    # 00:00..00:05:00, 8 ready; then s+180..s+465: load 1, 4+ ready
    assert figures["time_over_provisioned_s"] == (21 + 71 * 20) * SYNC
    assert figures["scale_up_lag_s"] == 120  # the burst is over before a pod is ready
    # 8 x 21 syncs, 1 x 79, then per burst 4 + 5 x 31 + 1 x 48, the last one 4 + 5 x 31 + 1 x 29
    assert figures["gpu_hours_used"] == gpu_hours(8 * 21 + 79 + 70 * 207 + 188)
    assert figures["gpu_hours_needed"] == gpu_hours(71 * 8 * 6 + (5761 - 71 * 8))
    assert [f["rule"] for f in replay["findings"]] == ["GL951"]


def test_compare_fix_flaps_less_on_the_spike_train(
    report: tuple[int, Any], recorded: Recorded
) -> None:
    # gpulint's behavior (GL102's fix: up 2 pods per 60 s; down 1 pod per 120 s) with a
    # scale-down window that bridges the lulls the replay saw: scale-ups 1,185 s apart with
    # a scale-down between them, rounded up to 1,200 s. The first recommendation (8, at
    # 00:00) holds the 8 pods for that window; the one reversal is the first burst meeting
    # the way down, and from then on the window bridges every lull.
    replay = replay_of(report, "spikes")
    fixed = replay["compare_fix"]
    assert fixed["figures"]["flaps"] == 1 < replay["figures"]["flaps"]
    downs = [(1200.0 + 120 * i, 8 - i, 7 - i) for i in range(3)]  # one pod per 120 s
    assert events(fixed, recorded.start) == [
        *downs,
        (1500, 5, 6),  # the burst on 5 ready pods: 24% against 20, ceil(1.2 x 5) = 6
    ]
    assert fixed["findings"] == []


def test_slow_ramp(report: tuple[int, Any], recorded: Recorded) -> None:
    # From 1 pod's worth up by one every 4 hours: with n ready pods the ratio leaves the
    # tolerance once the load passes 1.1 x n, at 14,400 x (1.1n - 1) + 7.5 s, and the next
    # sync adds one pod.
    replay = replay_of(report, "ramp")
    assert events(replay, recorded.start) == [
        # the first recommendation (8) holds until 00:05:15, when 8 pods share 1.02 pods'
        # worth: ceil(1.02) = 2, the step the ramp takes at 00:24:15 from 1 pod
        (315, 8, 2),
        (17295, 2, 3),
        (33135, 3, 4),
        (48975, 4, 5),
        (64815, 5, 6),
        (80655, 6, 7),
    ]
    figures = replay["figures"]
    assert figures["flaps"] == 0
    assert figures["time_at_min_s"] == 0
    assert figures["time_under_provisioned_s"] == 5 * SYNC
    assert figures["time_over_provisioned_s"] == 22 * SYNC  # 00:00..00:05:15, 8 ready
    assert figures["scale_up_lag_s"] == 180
    # 8 x 21 syncs, 2 x 1,132 (00:05:15..04:48:00), then 1,056 syncs each at 3..6, 384 at 7
    assert figures["gpu_hours_used"] == gpu_hours(8 * 21 + 2 * 1132 + 18 * 1056 + 7 * 384)
    # ceil(load): 1 at 00:00, then 960 syncs each at 2..7
    assert figures["gpu_hours_needed"] == gpu_hours(1 + 27 * 960)
    assert replay["findings"] == []


def test_text_report_and_fail_on(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [
        "replay",
        str(SCENARIOS),
        "--no-config",
        "--prometheus",
        recorded.url,
        "--end",
        str(recorded.end),
        "--autoscaler",
        "ml/spikes",
    ]
    # GL951 is a warning: the default --fail-on error passes, --fail-on warning fails
    assert main(base) == 0
    text = capsys.readouterr().out
    assert "HorizontalPodAutoscaler ml/spikes -> Deployment spikes" in text
    assert "readinessProbe of container server" in text
    assert "flaps (reversed within 10 min)" in text and " 71" in text
    assert "GL951 warning" in text
    assert main([*base, "--fail-on", "warning"]) == 1
    assert main([*base, "--fail-on", "never"]) == 0


def test_unknown_autoscaler_and_unreachable_prometheus(
    recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["replay", str(SCENARIOS), "--no-config", "--end", str(recorded.end)]
    assert main([*args, "--prometheus", recorded.url, "--autoscaler", "ml/nope"]) == 2
    assert "--autoscaler ml/nope: no such HPA or ScaledObject" in capsys.readouterr().err
    assert main([*args, "--prometheus", "http://127.0.0.1:9", "--prometheus-timeout", "3"]) == 2
    assert "Prometheus at http://127.0.0.1:9" in capsys.readouterr().err


def test_keda_scaled_object(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The spike train's GPU utilization summed over its 8 pods: 20 between bursts, 120 in
    # them. threshold 20 (AverageValue), activationThreshold 50: active only in bursts.
    # The target is not in the input: its pods are ready after the stated 120 s, and
    # without kube-state-metrics for it the replay starts at minReplicaCount 0.
    keda = SCENARIOS.parent / "keda"
    code, data = run_replay_at(recorded, tmp_path, keda)
    assert "not replayed" not in capsys.readouterr().err
    replay = data["replays"][0]
    assert replay["autoscaler"] == {
        "kind": "ScaledObject",
        "namespace": "ml",
        "name": "spikes-keda",
    }
    assert replay["metrics"][0]["name"] == "s0-prometheus"
    expected: list[tuple[float, int, int]] = []
    for k in range(71):
        s = 1500.0 + 1200 * k
        expected += [
            (s, 0, 1),  # KEDA's poll (every 30 s) sees 120 > 50: activation to 1
            (s + 15, 1, 4),  # the HPA: 120 / 20 = 6 pods, at most max(2 x 1, 4) = 4
            (s + 30, 4, 6),
            # inactive from s+120; the last active poll at s+90, cooldown 300 s: the poll at
            # s+420 is the first after s+390 (the HPA's own window would hold 6 until s+420
            # too: its last recommendation of 6 at s+105)
            (s + 420, 6, 0),
        ]
    assert events(replay, recorded.start) == expected
    assert replay["figures"]["flaps"] == 71
    assert replay["figures"]["time_at_min_s"] == (100 + 52 * 70 + 33) * SYNC
    assert code == 0  # GL951 is a warning


def run_replay_at(recorded: Recorded, tmp_path: Path, path: Path) -> tuple[int, Any]:
    out = tmp_path / "keda.json"
    code = main(
        [
            "replay",
            str(path),
            "--no-config",
            "--prometheus",
            recorded.url,
            "--end",
            str(recorded.end),
            "--format",
            "json",
            "-o",
            str(out),
        ]
    )
    return code, json.loads(out.read_text())


def test_cluster_mode_reads_the_autoscalers_from_the_cluster(
    recorded: Recorded, tmp_path: Path
) -> None:
    # The scenarios' objects served by the fake API server; --cluster reads them from there.
    from tests.kubefake import FakeCluster, KubeFake, load_world

    fake = KubeFake(FakeCluster()).start()
    try:
        text = "\n".join(p.read_text() for p in sorted(SCENARIOS.glob("*.yaml")))
        load_world(fake.cluster, text)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        out = tmp_path / "cluster.json"
        code = main(
            [
                "replay",
                "--cluster",
                "--kubeconfig",
                str(kubeconfig),
                "--prometheus",
                recorded.url,
                "--end",
                str(recorded.end),
                "--autoscaler",
                "ml/step",
                "--format",
                "json",
                "-o",
                str(out),
                "--no-config",
            ]
        )
    finally:
        fake.stop()
    assert code == 1  # GL952, as from the files
    replay = json.loads(out.read_text())["replays"][0]
    assert events(replay, recorded.start) == [(0, 8, 4), (315, 4, 2), (DAY / 2, 2, 4)]


def test_replay_judges_each_application_with_its_repository_platform(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The applications in apps/, the adapter in monitoring/, no GitOps objects: replay
    takes the adapter rule lint takes, however the repository is named, and says why it
    cannot replay the autoscaler whose metric no rule serves, as lint reports GL401."""
    import shutil

    documents = (SCENARIOS / "workloads.yaml").read_text().split("---\n")
    step = [d for d in documents if "name: step," in d]
    assert len(step) == 2  # the Deployment and its HPA
    unserved = (
        step[1]
        .replace("name: step,", "name: queue,")
        .replace("{name: gpu_utilization}", "{name: gpu_utilisation}")
    )
    (tmp_path / "apps" / "step").mkdir(parents=True)
    (tmp_path / "apps" / "step" / "step.yaml").write_text("---\n".join(step))
    (tmp_path / "apps" / "queue").mkdir()
    (tmp_path / "apps" / "queue" / "queue.yaml").write_text(step[0] + "---\n" + unserved)
    (tmp_path / "monitoring").mkdir()
    shutil.copy(SCENARIOS / "prometheus-adapter.yaml", tmp_path / "monitoring")
    monkeypatch.chdir(tmp_path)
    for paths in (["."], ["apps/", "monitoring/"]):
        lint = tmp_path / "lint.json"
        main(["lint", "--no-config", "--format", "json", "-o", str(lint), *paths])
        found = json.loads(lint.read_text())["findings"]
        assert [(f["rule"], f["file"]) for f in found if f["rule"] == "GL401"] == [
            ("GL401", "apps/queue/queue.yaml")
        ]
        out = tmp_path / "replay.json"
        args = [a for a in replay_args(recorded) if a != str(SCENARIOS)]
        code = main([*args, "-o", str(out), *paths])
        replays = json.loads(out.read_text())["replays"]
        assert code in (0, 1)
        assert [r["autoscaler"]["name"] for r in replays] == ["step"], paths
        (replayed,) = replays
        assert 'DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml"' in replayed["metrics"][0]["query"]
