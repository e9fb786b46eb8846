"""A rule that fails on one object costs that rule on that object, never the report."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpulint.engine import registry as engine
from gpulint.engine.registry import load_rule, rule_by_id

from .conftest import lint_text

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
