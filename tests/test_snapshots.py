"""The whole text report of every failing fixture, compared with its snapshot
(tests/snapshots.py): a change to any message, fix, note or their wrapping shows as a diff.
Every rule has one: the rules no fixture makes fail have a snapshot named after them, written
by the test that makes their finding.

Update after a deliberate change with ``pytest tests/test_snapshots.py --update-snapshots``
and review the written ``.snap`` files in the diff like any other change.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from gpulint.cli import main
from gpulint.engine.registry import all_rules
from gpulint.report.text import render_text

from .cluster.conftest import CLUSTER_FIXTURES
from .cluster.test_cluster_fixtures import _cases as _cluster_cases
from .conftest import FIXTURES, ROOT, lint_result
from .kubefake import FakeCluster, KubeFake, load_world
from .live.conftest import LIVE_FIXTURES
from .replay.test_rules import SNAPSHOTS as REPLAY_SNAPSHOTS
from .snapshots import UPDATE, assert_snapshot, snapshot_path, snapshot_text
from .test_internal_error import SNAPSHOTS as INTERNAL_ERROR_SNAPSHOTS
from .test_rule_fixtures import _cases, _needs_tools, _settings

# Snapshots named <rule>.snap, each written by the test that makes its rule's finding without
# a fixture: GL799 (tests/test_internal_error.py makes a rule fail on purpose) and the replay
# rules GL951-GL954 (tests/replay/test_rules.py replays hand-made histories).
NAMED_SNAPSHOTS = (INTERNAL_ERROR_SNAPSHOTS, REPLAY_SNAPSHOTS)


def report_of(path: Path) -> str:
    """``gpulint lint <fixture>`` as text, run from the repository's root."""
    out = io.StringIO()
    result = lint_result(path.relative_to(ROOT), settings=_settings(path))
    # The one part of a report that changes from run to run.
    result.units = [unit._replace(render_seconds=0.0) for unit in result.units]
    result.lint_seconds = 0.0
    result.render_wall = None
    render_text(result, out)
    return out.getvalue()


@pytest.mark.parametrize(("rule", "path"), _cases("fail_"), ids=lambda v: str(v)[-60:])
def test_failing_fixture_report_matches_its_snapshot(
    rule: str, path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_tools(path)
    monkeypatch.chdir(ROOT)
    source = path.relative_to(ROOT).as_posix()
    assert_snapshot(request.config, snapshot_path(path), snapshot_text(source, report_of(path)))


def cluster_report_of(path: Path, rule: str, tmp_path: Path) -> str:
    """``gpulint lint --cluster --select <rule>`` as text, on the fixture's objects served by
    the fake API server; its address, which changes from run to run, as ``<api-server>``."""
    fake = KubeFake(FakeCluster()).start()
    try:
        load_world(fake.cluster, path.read_text())
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main(["lint", "--cluster", "--kubeconfig", str(kubeconfig), "--select", rule])
    finally:
        fake.stop()
    return out.getvalue().replace(fake.url, "<api-server>")


@pytest.mark.parametrize(("rule", "path"), _cluster_cases("fail_"), ids=lambda v: str(v)[-50:])
def test_failing_cluster_fixture_report_matches_its_snapshot(
    rule: str, path: Path, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    source = path.relative_to(ROOT).as_posix()
    report = cluster_report_of(path, rule, tmp_path)
    assert_snapshot(request.config, snapshot_path(path), snapshot_text(source, report))


def _snapshots() -> list[Path]:
    return sorted(
        [*FIXTURES.glob("GL*/snapshots/*.snap"), *CLUSTER_FIXTURES.glob("GL*/snapshots/*.snap")]
    )


def _live_snapshots() -> list[Path]:
    """Written by tests/live/test_live_fixtures.py, which runs a real Prometheus."""
    return sorted(LIVE_FIXTURES.glob("GL*/snapshots/*.snap"))


def test_every_snapshot_belongs_to_a_failing_fixture(request: pytest.FixtureRequest) -> None:
    wanted = {snapshot_path(path) for _, path in [*_cases("fail_"), *_cluster_cases("fail_")]}
    stale = [path for path in _snapshots() if path not in wanted]
    if request.config.getoption("update_snapshots"):
        for path in stale:
            path.unlink()
        return
    assert not stale, f"snapshots without a fixture (run `{UPDATE}` to remove them): {stale}"


def _named_snapshots() -> list[Path]:
    return sorted(path for folder in NAMED_SNAPSHOTS for path in folder.glob("*.snap"))


def _snapshotted_rules() -> set[str]:
    """The rules with a snapshot: a fixture's is in <rule>/snapshots/, a named one is
    <rule>.snap."""
    fixtures = {path.parent.parent.name for path in [*_snapshots(), *_live_snapshots()]}
    return fixtures | {path.stem for path in _named_snapshots()}


def rules_without_snapshot(snapshotted: set[str]) -> list[str]:
    return [spec.id for spec in all_rules() if spec.id not in snapshotted]


def test_every_rule_has_a_snapshot() -> None:
    snapshotted = _snapshotted_rules()
    assert snapshotted, "no snapshot found under tests/fixtures/*/snapshots"
    missing = rules_without_snapshot(snapshotted)
    assert not missing, f"rules without a snapshot of their text report: {missing}"


@pytest.mark.parametrize("rule", ["GL101", "GL799", "GL953"])
def test_a_rule_without_a_snapshot_is_missing(rule: str) -> None:
    # A fixture's snapshot, GL799's and a replay rule's: none is exempt.
    assert rules_without_snapshot(_snapshotted_rules() - {rule}) == [rule]


def test_every_named_snapshot_names_a_rule() -> None:
    rules = {spec.id for spec in all_rules()}
    strays = [path for path in _named_snapshots() if path.stem not in rules]
    assert not strays, f"snapshots named after no rule: {strays}"


def test_a_changed_report_fails_with_a_diff_and_the_update_command(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    snap = tmp_path / "snapshots" / "fail_x.snap"
    if request.config.getoption("update_snapshots"):
        pytest.skip("compares, which --update-snapshots does not")
    with pytest.raises(pytest.fail.Exception, match=re.escape(UPDATE)):
        assert_snapshot(request.config, snap, snapshot_text("x.yaml", "a\n"))
    assert not snap.exists()  # a missing snapshot is never written without the flag
    snap.parent.mkdir()
    snap.write_text(snapshot_text("x.yaml", "a\n"))
    assert_snapshot(request.config, snap, snapshot_text("x.yaml", "a\n"))
    with pytest.raises(pytest.fail.Exception, match=r"(?s)-a\n\+b"):
        assert_snapshot(request.config, snap, snapshot_text("x.yaml", "b\n"))
