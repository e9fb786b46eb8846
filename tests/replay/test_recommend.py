"""``gpulint replay --recommend`` end to end, against the recorded day of tests/replay/loads.py
(the session's real Prometheus): a noisy 0/100 GPU utilization whose replicas a better
setting serves with less time under-provisioned within the same GPU-hours, written into the
file by ``--fix`` as lint's fixes are and linting as clean as before; a flat load that no
setting serves better; and the nodes and prices beside each setting."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpulint.cli import main
from tests.replay.conftest import Recorded

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "recommend"


def replay(recorded: Recorded, path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = path.parent / "replay.json"
    args = ["replay", str(path), "--no-config", "--prometheus", recorded.url]
    args += ["--end", str(recorded.end), "--range", "24h", "--format", "json", "-o", str(out)]
    code = main([*args, *extra])
    data = json.loads(out.read_text())
    return code, {r["autoscaler"]["name"]: r for r in data["replays"]}


def lint_findings(path: Path) -> list[tuple[str, str]]:
    out = path.parent / "lint.json"
    main(["lint", str(path), "--no-config", "--format", "json", "-o", str(out)])
    return sorted((f["rule"], f["message"]) for f in json.loads(out.read_text())["findings"])


@pytest.fixture(scope="module")
def recommended(
    recorded: Recorded, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any], list[tuple[str, str]]]:
    """The fixtures copied, linted, replayed with --recommend --fix."""
    work = tmp_path_factory.mktemp("recommend") / "repo"
    shutil.copytree(FIXTURES, work)
    before = lint_findings(work)
    code, replays = replay(recorded, work, "--recommend", "--fix")
    assert code == 0
    return work, replays, before


def objective(figures: dict[str, Any]) -> tuple[float, float, int]:
    return (figures["time_under_provisioned_s"], figures["scale_up_lag_s"], figures["flaps"])


def test_noisy_utilization_gets_a_better_setting_that_lints_clean(
    recommended: tuple[Path, dict[str, Any], list[tuple[str, str]]], recorded: Recorded
) -> None:
    work, replays, before = recommended
    noisy = replays["noisy"]
    found = noisy["recommendation"]
    assert set(found) == {"patch", "figures", "better", "why"}
    assert found["better"] is True
    assert set(found["figures"]) == set(noisy["figures"])
    configured = noisy["figures"]
    assert configured["flaps"] > 10  # the replicas chase the noise
    # better by the objective: within the GPU-hours the configured setting used
    assert found["figures"]["gpu_hours_used"] <= configured["gpu_hours_used"] + 0.0005
    assert objective(found["figures"]) < objective(configured)
    assert found["why"].startswith("better: ")
    # the patch says where it goes and pastes as YAML, whole numbers as integers
    patch = found["patch"]
    assert "workloads.yaml:" in patch
    pasted = yaml.safe_load(patch)
    for rules in pasted.get("behavior", {}).values():
        assert isinstance(rules["stabilizationWindowSeconds"], int)
        assert all(isinstance(p["periodSeconds"], int) for p in rules["policies"])
    # --fix wrote it: no finding the file did not have before, and replaying the file again
    # replays the recommended setting (the time under-provisioned aside: the search measures
    # it at the configured tolerance, a replay at the file's own)
    assert set(lint_findings(work)) <= set(before)
    _, again = replay(recorded, work)
    replayed = dict(again["noisy"]["figures"], time_under_provisioned_s=None)
    assert replayed == dict(found["figures"], time_under_provisioned_s=None)


def test_flat_load_nothing_is_better(
    recommended: tuple[Path, dict[str, Any], list[tuple[str, str]]],
) -> None:
    work, replays, _ = recommended
    flat = replays["flat"]
    assert flat["recommendation"] == {
        "patch": None,
        "figures": flat["figures"],
        "better": False,
        "why": flat["recommendation"]["why"],
    }
    assert flat["recommendation"]["why"].startswith("nothing beats the configured setting")
    # --fix left its HPA as it was
    original = (FIXTURES / "workloads.yaml").read_text().split("name: noisy")[0]
    assert (work / "workloads.yaml").read_text().startswith(original)


def test_scaled_object_recommendation_within_a_larger_budget(
    recorded: Recorded, tmp_path: Path
) -> None:
    """The spike train under KEDA, always active: within what it uses, nothing serves the
    bursts better (a pod takes longer to start than a burst lasts); with --budget 150, a
    scale-down window that keeps the pods between bursts does, written where KEDA reads it
    (advanced.horizontalPodAutoscalerConfig.behavior, added) and linting as clean."""
    work = tmp_path / "keda"
    work.mkdir()
    original = (FIXTURES.parent / "keda" / "scaledobject.yaml").read_text()
    always = original.replace('activationThreshold: "50"', 'activationThreshold: "5"')
    (work / "scaledobject.yaml").write_text(
        always.replace("minReplicaCount: 0", "minReplicaCount: 1")
    )
    before = lint_findings(work)
    _, within = replay(recorded, work, "--recommend", "--fix")
    assert within["spikes-keda"]["recommendation"]["better"] is False
    assert (work / "scaledobject.yaml").read_text().count("advanced") == 0
    _, larger = replay(recorded, work, "--recommend", "--fix", "--budget", "150")
    found = larger["spikes-keda"]["recommendation"]
    assert found["better"] is True
    assert found["figures"]["gpu_hours_used"] <= 150
    assert objective(found["figures"]) < objective(larger["spikes-keda"]["figures"])
    assert "scaledobject.yaml:5: add under spec\nadvanced:\n" in found["patch"]
    written = yaml.safe_load((work / "scaledobject.yaml").read_text())
    behavior = written["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert (
        behavior
        == yaml.safe_load(found["patch"])["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    )
    assert set(lint_findings(work)) <= set(before)


def test_compare_fix_verdict_nodes_and_cost(recorded: Recorded, tmp_path: Path) -> None:
    """--compare-fix says better or worse per figure and overall; --node-ready-after makes
    a scale-up past the pool's free GPUs wait, and --gpu-hour-cost prices each setting."""
    work = tmp_path / "repo"
    shutil.copytree(FIXTURES, work)
    options = ["--autoscaler", "noisy", "--compare-fix", "--gpu-hour-cost", "2.5"]
    _, plain = replay(recorded, work, *options)
    _, pooled = replay(
        recorded,
        work,
        *options,
        "--node-ready-after",
        "10m",
        "--gpus-per-node",
        "8",
        "--recommend",
    )
    noisy, waited = plain["noisy"], pooled["noisy"]
    verdict = noisy["verdict"]
    assert set(verdict) == {"better", "why", "figures", "behavior"}
    assert verdict["why"].split(":")[0] in ("better", "worse", "no better")
    fixed = noisy["compare_fix"]["figures"]
    for key, judged in verdict["figures"].items():
        was, now = noisy["figures"][key], fixed[key]
        assert judged == ("same" if now == was else "better" if now < was else "worse"), key
    assert "periodSeconds: 60.0" not in verdict["behavior"]
    assert yaml.safe_load(verdict["behavior"])["behavior"]["scaleDown"]["policies"]
    assert noisy["figures"]["time_queued_s"] is None
    assert noisy["figures"]["cost"] == pytest.approx(
        noisy["figures"]["gpu_hours_used"] * 2.5, abs=0.01
    )
    # 8 pods on one 8-GPU node: the first scale-up past eight waits ten minutes for a node
    # (which then stays: the replicas come back within cluster-autoscaler's ten minutes)
    assert 540 <= waited["figures"]["time_queued_s"] <= 600
    assert waited["events"][:2] == noisy["events"][:2]
    assert waited["events"][2]["time"] > noisy["events"][2]["time"]
    # the search replays the same pool: a setting that waits for nodes less often wins
    found = waited["recommendation"]
    assert found["better"] is True
    assert objective(found["figures"]) < objective(waited["figures"])
    assert found["figures"]["time_queued_s"] is not None


def test_every_recorded_load_gets_a_recommendation_that_holds(
    recorded: Recorded, tmp_path: Path
) -> None:
    """The step, the daily curve, the spike train and the ramp (HPAs), and the spike train
    under KEDA from zero: each gets a recommendation; one called better beats the configured
    setting by the objective within its GPU-hours, one not better changes nothing, and what
    --fix writes lints as clean as before."""
    work = tmp_path / "repo"
    shutil.copytree(FIXTURES.parent / "scenarios", work)
    shutil.copy(FIXTURES.parent / "keda" / "scaledobject.yaml", work / "scaledobject.yaml")
    before = lint_findings(work)
    original = {p.name: p.read_text() for p in work.glob("*.yaml")}
    code, replays = replay(recorded, work, "--recommend", "--fix")
    assert code in (0, 1)
    assert set(replays) == {"step", "diurnal", "spikes", "ramp", "spikes-keda"}
    better = set()
    for name, replayed in replays.items():
        found, configured = replayed["recommendation"], replayed["figures"]
        if found["better"]:
            better.add(name)
            assert found["patch"], name
            assert found["figures"]["gpu_hours_used"] <= configured["gpu_hours_used"] + 0.0005
            assert objective(found["figures"]) < objective(configured), name
            assert found["why"].startswith("better: "), name
        else:
            assert found["patch"] is None, name
            assert found["why"].startswith("nothing beats the configured setting"), name
    # KEDA woke the workload from zero on the recorded day
    keda = replays["spikes-keda"]
    assert any(e["from"] == 0 and e["to"] > 0 for e in keda["events"])
    changed = {name for name, text in original.items() if (work / name).read_text() != text}
    assert bool(changed) == bool(better)
    assert set(lint_findings(work)) <= set(before)


@pytest.mark.parametrize(
    ("written", "up", "down"),
    [
        (None, "Max", "Max"),  # the defaults, which a paused direction's replay disabled
        ({"scaleDown": {"selectPolicy": "Min"}}, "Max", "Min"),
        ({"scaleDown": {"selectPolicy": "Disabled"}}, "Max", "Disabled"),  # the file's own
    ],
)
def test_a_paused_direction_is_not_written_disabled(
    written: dict[str, Any] | None, up: str, down: str
) -> None:
    """KEDA's paused-scale-in/out set a direction's selectPolicy to Disabled while the
    annotation stands; the replay models it so, and a recommended behavior keeps the file's
    own selectPolicy instead of making the pause permanent."""
    from gpulint.replay.behavior import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, Behavior
    from gpulint.replay.search import _as_written

    paused = Behavior(DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN._replace(select="Disabled"))
    kept = _as_written(paused, written)
    assert (kept.up.select, kept.down.select) == (up, down)
    assert kept.down._replace(select="x") == DEFAULT_SCALE_DOWN._replace(select="x")
