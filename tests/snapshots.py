"""Snapshots: the whole text report of a fixture, kept beside it and compared, as ruff keeps
``snapshots/*.snap`` beside its fixtures.

A snapshot is ``<fixture dir>/snapshots/<fixture name>.snap``: a header naming its source,
then the report exactly as ``gpulint lint`` prints it at 80 columns (headline, message, fix,
notes, summary), with render and lint times of 0.0 s. A test compares the report with its
snapshot; ``pytest ... --update-snapshots`` writes every snapshot that differs or is missing
instead. Without the flag a missing snapshot fails, so CI never writes one silently.

A rule that no fixture makes fail has ``snapshots/<rule>.snap`` beside the test that makes
its finding: GL799 beside tests/test_internal_error.py, and the replay rules, in
``gpulint replay``'s own text report, beside tests/replay/test_rules.py.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

UPDATE = "pytest tests/test_snapshots.py --update-snapshots"


def snapshot_path(fixture: Path) -> Path:
    name = fixture.name.removesuffix(".yaml").removesuffix(".yml")
    return fixture.parent / "snapshots" / f"{name}.snap"


def snapshot_text(source: str, report: str, update: str = UPDATE) -> str:
    return f"---\nsource: {source}\nupdate: {update}\n---\n{report}"


def assert_snapshot(config: pytest.Config, path: Path, text: str, update: str = UPDATE) -> None:
    """``text`` is what ``path`` holds, or is written there under ``--update-snapshots``;
    ``update`` is the command a failure names."""
    old = path.read_text() if path.is_file() else None
    if old == text:
        return
    if config.getoption("update_snapshots"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        return
    if old is None:
        pytest.fail(f"no snapshot {path}: run `{update}` and review what it writes")
    diff = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            text.splitlines(keepends=True),
            f"{path} (snapshot)",
            "report now",
        )
    )
    pytest.fail(f"the report differs from {path}; if the change is meant, run `{update}`\n{diff}")
