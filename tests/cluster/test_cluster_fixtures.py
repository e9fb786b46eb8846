"""The cluster rules' fixtures in tests/cluster/fixtures/<RULE>/, run by ``gpulint lint --cluster``.

Each fixture is loaded into the fake API server: its objects, and a ``kubefake:`` document
setting what the metrics APIs serve. ``fail_*`` files declare each finding of their rule with
``# expect: GL901 cluster://<namespace>/<Kind>/<name>`` (objects read from a cluster have no
lines); ``pass_*`` files must produce none of their rule.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gpulint.cli import main
from gpulint.engine.registry import rule_index

from ..kubefake import FakeCluster, KubeFake, load_world
from .conftest import CLUSTER_FIXTURES

_EXPECT = re.compile(r"#\s*expect:\s*(GL9\d\d)\s+(cluster://\S+)")


def _cases(prefix: str) -> list[tuple[str, Path]]:
    return [
        (rule_dir.name, path)
        for rule_dir in sorted(CLUSTER_FIXTURES.iterdir())
        for path in sorted(rule_dir.glob(f"{prefix}*.yaml"))
    ]


def lint_cluster(
    text: str, tmp_path: Path, *args: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, dict[str, Any], str]:
    """Serve ``text`` from a fake API server and run ``gpulint lint --cluster`` on it."""
    fake = KubeFake(FakeCluster()).start()
    try:
        load_world(fake.cluster, text)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr("sys.stdout", out)
        monkeypatch.setattr("sys.stderr", err)
        code = main(["lint", "--cluster", "--kubeconfig", str(kubeconfig), "-f", "json", *args])
    finally:
        fake.stop()
    report = json.loads(out.getvalue()) if out.getvalue().strip() else {}
    return code, report, err.getvalue()


@pytest.mark.parametrize(("rule", "path"), _cases("fail_"), ids=lambda v: str(v)[-50:])
def test_failing_cluster_fixture_reports_exactly_what_it_declares(
    rule: str, path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = path.read_text()
    expected = Counter(_EXPECT.findall(text))
    assert expected, f"{path} declares no '# expect: {rule} cluster://...'"
    code, report, err = lint_cluster(text, tmp_path, "--select", rule, monkeypatch=monkeypatch)
    got = Counter((f["rule"], f["file"]) for f in report["findings"])
    assert got == expected, json.dumps(report["findings"], indent=1) + err
    assert code == 1
    assert all((f["line"], f["column"]) == (1, 1) for f in report["findings"])


@pytest.mark.parametrize(("rule", "path"), _cases("pass_"), ids=lambda v: str(v)[-50:])
def test_passing_cluster_fixture_is_silent(
    rule: str, path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, report, err = lint_cluster(
        path.read_text(), tmp_path, "--select", rule, monkeypatch=monkeypatch
    )
    assert report["findings"] == [], err
    assert code == 0


def test_every_cluster_rule_has_failing_and_passing_fixtures() -> None:
    cluster_rules = [info.id for info in rule_index() if info.requires == "cluster"]
    assert cluster_rules == ["GL901", "GL902", "GL903", "GL904"]
    for rule in cluster_rules:
        failing = [p for r, p in _cases("fail_") if r == rule]
        passing = [p for r, p in _cases("pass_") if r == rule]
        assert len(failing) >= 2 and len(passing) >= 2, rule
