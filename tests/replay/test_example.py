"""The README's replay picture is what gpulint draws today for the seed's HPA on the day in
examples/replay/load.csv (after a change to the replay, run examples/replay/picture.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "replay" / "picture.py"


def test_committed_picture_is_current() -> None:
    spec = importlib.util.spec_from_file_location("replay_picture", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    drawn = module.draw()
    committed = (ROOT / "examples" / "replay" / "triton-gpu.svg").read_text()
    assert drawn == committed, "run `python examples/replay/picture.py` and commit the picture"
    assert 'data-series="simulated"' in drawn and 'data-series="fixed"' in drawn


def test_readme_shows_the_picture() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "](examples/replay/triton-gpu.svg)" in readme
