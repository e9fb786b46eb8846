"""A rule that fails on one object costs that rule on that object, never the report."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpulint.engine import registry as engine
from gpulint.engine.registry import load_rule, rule_by_id
from gpulint.report.text import render_text

from .conftest import lint_result, lint_text
from .snapshots import assert_snapshot, snapshot_text

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"  # GL799.snap: no fixture makes it
UPDATE = "pytest tests/test_internal_error.py --update-snapshots"

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer}
spec:
  template:
    spec:
      containers:
        - name: a
          resources:
            requests: {nvidia.com/gpu: "0.5"}
            limits: {nvidia.com/gpu: "0.5"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: other}
spec:
  template:
    spec:
      containers:
        - name: b
          resources:
            requests: {nvidia.com/gpu: "0.5"}
            limits: {nvidia.com/gpu: "0.5"}
"""


@pytest.fixture
def broken_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """GL501 raises on the Deployment named trainer, and only there."""
    spec = load_rule(next(i for i in engine.rule_index() if i.id == "GL501"))
    original = spec.check

    def check(item: Any, inventory: Any, ctx: Any) -> Iterator[Any]:
        if item.manifest.name == "trainer":
            raise RecursionError("maximum recursion depth exceeded")
        yield from original(item, inventory, ctx)

    monkeypatch.setitem(engine._loaded, "GL501", spec._replace(check=check))


def _raise_line() -> int:
    """The line of ``broken_rule``'s raise, which GL799's message names as where it failed."""
    lines = Path(__file__).read_text().splitlines()
    (index,) = [i for i, line in enumerate(lines) if line.strip().startswith("raise Recursion")]
    return index + 1


def test_a_failing_rule_is_gl799_on_that_object_and_nothing_else_is_lost(
    broken_rule: None,
) -> None:
    findings = lint_text(DEPLOYMENT)
    by_rule = {(f.rule, f.location.line) for f in findings}
    # GL501 still judged the second Deployment; the first gets GL799 at its first line.
    assert ("GL501", 21) in by_rule or any(
        f.rule == "GL501" and f.location.line > 12 for f in findings
    )
    (internal,) = [f for f in findings if f.rule == "GL799"]
    assert internal.location.line == 1
    assert "GL501" in internal.message and "RecursionError" in internal.message
    assert internal.object is not None and internal.object.name == "trainer"


def test_gl799_is_documented_like_every_rule() -> None:
    spec = rule_by_id("GL799")
    assert spec is not None and spec.name == "internal-error"
    assert spec.doc.section("Why is this bad?")


def test_gl799_report_matches_its_snapshot(
    broken_rule: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """The whole text report of that run, as ``gpulint lint deploy.yaml`` prints it."""
    (tmp_path / "deploy.yaml").write_text(DEPLOYMENT)
    monkeypatch.chdir(tmp_path)  # the report names deploy.yaml, not where the test ran
    result = lint_result("deploy.yaml")
    (internal,) = [f for f in result.findings if f.rule == "GL799"]
    # Where the rule raised: the file's name (never its directory) and the raise's line, so
    # the report is the same on every machine.
    assert f"exceeded at test_internal_error.py:{_raise_line()};" in internal.message
    out = io.StringIO()
    render_text(result, out)
    source = "tests/test_internal_error.py (GL501 raising on Deployment trainer)"
    text = snapshot_text(source, out.getvalue(), UPDATE)
    assert_snapshot(request.config, SNAPSHOTS / "GL799.snap", text, UPDATE)
