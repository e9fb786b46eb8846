"""``gpulint replay``'s command line where it meets the file system: what it cannot write is
an error line and exit code 2, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulint.cli import main
from tests.replay.answers import RangeServer, steady
from tests.replay.test_rules import SCENARIOS


def test_an_output_it_cannot_write_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = RangeServer(steady("50", "8")).start()
    target = tmp_path / "missing" / "replay.json"
    command = ["replay", str(SCENARIOS), "--no-config", "--prometheus", server.url]
    command += ["--range", "10m", "--autoscaler", "ml/step", "-o", str(target)]
    try:
        code = main(command)
    finally:
        server.stop()
    assert code == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == [f"gpulint: error: cannot write {target}: No such file or directory"]


def test_with_nothing_replayed_the_report_still_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An HPA and a ScaledObject on one Deployment (GL103): neither is replayed, nothing is
    asked of Prometheus, and the JSON report lists both with lint's reason; exit code 2."""
    from tests.replay.test_plan import SCALE_TO_ZERO, SECOND_AUTOSCALER

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "objects.yaml").write_text(SCALE_TO_ZERO + SECOND_AUTOSCALER)
    out = tmp_path / "replay.json"
    command = ["replay", str(tmp_path / "in"), "--no-config", "--prometheus"]
    command += ["http://127.0.0.1:9", "--format", "json", "-o", str(out)]
    assert main(command) == 2
    left = json.loads(out.read_text())["not_replayed"]
    assert [(s["kind"], s["name"]) for s in left] == [
        ("HorizontalPodAutoscaler", "web"),
        ("ScaledObject", "web"),
    ]
    assert all("(GL103 duplicate-autoscalers)" in s["reason"] for s in left)
    errors = capsys.readouterr().err.splitlines()
    assert errors[-1] == "gpulint: error: no autoscaler could be replayed"
    assert [e.split(":", 2)[1].strip() for e in errors[:2]] == [
        "HorizontalPodAutoscaler ml/web not replayed",
        "ScaledObject ml/web not replayed",
    ]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--fix"], "--fix goes with --recommend (it writes the recommended settings)"),
        (["--max-nodes", "3"], "--gpus-per-node and --max-nodes go with --node-ready-after"),
        (
            ["--node-ready-after", "5m", "--gpus-per-node", "0"],
            "--gpus-per-node and --max-nodes must be 1 or more",
        ),
        (["--budget", "-1"], "--budget must be a number, 0 or more"),
        (["--gpu-hour-cost", "nan"], "--gpu-hour-cost must be a number, 0 or more"),
    ],
)
def test_options_that_do_not_go_together_are_usage_errors(
    extra: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["replay", str(SCENARIOS), "--no-config", "--prometheus", "http://127.0.0.1:9"]
    assert main([*command, *extra]) == 2
    assert capsys.readouterr().err == f"gpulint: error: {said}\n"
