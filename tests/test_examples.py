"""The traces committed beside the examples are what ``gpulint trace`` prints for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulint.cli import main

from .conftest import ROOT

SEEDS = sorted(p.name for p in (ROOT / "examples").iterdir() if (p / "TRACE.md").is_file())


@pytest.mark.parametrize("seed", SEEDS)
def test_committed_trace_is_current(
    seed: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    path = Path("examples") / seed
    assert main(["trace", "--format", "mermaid", "--fail-on", "never", str(path)]) == 0
    printed = capsys.readouterr().out
    committed = (ROOT / path / "TRACE.md").read_text()
    assert committed.endswith(printed), f"regenerate {path}/TRACE.md (see its first lines)"
    assert "```mermaid\nflowchart LR" in printed


def test_the_broken_seeds_have_a_broken_chain_and_the_fixed_ones_none(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for seed in SEEDS:
        for state, broken in (("broken", True), ("fixed", False)):
            directory = ROOT / "examples" / seed / state
            code = main(["trace", "--format", "json", "--no-config", str(directory)])
            assert (code == 1) is broken, (seed, state)
    capsys.readouterr()
