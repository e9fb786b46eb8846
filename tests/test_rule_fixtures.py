"""Every rule ships failing and passing fixtures in tests/fixtures/<RULE>/.

* ``fail_*.yaml`` (or ``fail_*/`` directories for cross-file cases) declare what they must
  produce with ``# expect: GL101 12:5`` comment lines: the set of findings of that rule, with
  line and column, must be exactly those;
* ``pass_*.yaml`` / ``pass_*/`` must produce no finding of that rule (near misses live here).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpulint.engine.config import Settings, load_settings
from gpulint.engine.registry import all_rules, rule_names, rule_option_schemas

from .conftest import FIXTURES, lint_paths
from .tools import helm_command, kustomize_command

_EXPECT = re.compile(r"#\s*expect:\s*(GL\d{3})\s+(\d+):(\d+)")


def _cases(prefix: str) -> list[tuple[str, Path]]:
    cases = []
    for rule_dir in sorted(FIXTURES.iterdir()):
        if not rule_dir.is_dir() or not re.fullmatch(r"GL\d{3}", rule_dir.name):
            continue
        for path in sorted(rule_dir.iterdir()):
            if path.name.startswith(prefix):
                cases.append((rule_dir.name, path))
    return cases


def _expectations(path: Path) -> set[tuple[str, str, int, int]]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    expected = set()
    for file in files:
        for match in _EXPECT.finditer(file.read_text()):
            expected.add((str(file), match.group(1), int(match.group(2)), int(match.group(3))))
    return expected


def _settings(path: Path) -> Settings | None:
    """A fixture directory may carry its own ``.gpulint.yaml`` (``kserve.version`` ...)."""
    config = path / ".gpulint.yaml"
    if not path.is_dir() or not config.is_file():
        return None
    return load_settings(str(config), rule_option_schemas(), rule_names())


def _needs_tools(path: Path) -> None:
    """A fixture with a kustomization or chart is rendered by the real tool: skipped without
    it, failed without it under CI=true (tests/tools.py)."""
    if not path.is_dir():
        return
    names = {p.name for p in path.rglob("*")}
    if names & {"kustomization.yaml", "kustomization.yml", "Kustomization"}:
        kustomize_command()
    if "Chart.yaml" in names:
        helm_command()


@pytest.mark.parametrize(("rule", "path"), _cases("fail_"), ids=lambda v: str(v)[-60:])
def test_failing_fixture_reports_exactly_what_it_declares(rule: str, path: Path) -> None:
    _needs_tools(path)
    expected = _expectations(path)
    assert any(e[1] == rule for e in expected), f"{path} declares no '# expect: {rule} L:C'"
    findings = lint_paths(path, settings=_settings(path))
    declared_rules = {e[1] for e in expected}
    got = {
        (f.location.file, f.rule, f.location.line, f.location.column)
        for f in findings
        if f.rule in declared_rules
    }
    assert got == expected, "\n".join(f"{f.location}: {f.rule} {f.message}" for f in findings)


@pytest.mark.parametrize(("rule", "path"), _cases("pass_"), ids=lambda v: str(v)[-60:])
def test_passing_fixture_is_silent(rule: str, path: Path) -> None:
    _needs_tools(path)
    findings = [f for f in lint_paths(path, settings=_settings(path)) if f.rule == rule]
    assert findings == [], "\n".join(f"{f.location}: {f.rule} {f.message}" for f in findings)


def test_every_rule_has_failing_and_passing_fixtures() -> None:
    fail = {rule for rule, _ in _cases("fail_")}
    passing: dict[str, int] = {}
    failing: dict[str, int] = {}
    for rule, _ in _cases("pass_"):
        passing[rule] = passing.get(rule, 0) + 1
    for rule, _ in _cases("fail_"):
        failing[rule] = failing.get(rule, 0) + 1
    missing = []
    for spec in all_rules():
        if spec.id == "GL703":
            continue  # unused suppressions are tested in test_suppression.py
        if spec.id == "GL799":
            continue  # no input should make a rule fail: tests/test_internal_error.py
        if spec.id.startswith("GL8"):
            continue  # live rules: tests/live/fixtures, run against Prometheus (test_live_fixtures)
        if spec.id in ("GL901", "GL902", "GL903", "GL904"):
            continue  # cluster rules: tests/cluster/fixtures, run against the fake API server
        if spec.id.startswith("GL95"):
            continue  # replay rules: tests/replay, replayed against a recorded Prometheus
        if failing.get(spec.id, 0) < 2 or passing.get(spec.id, 0) < 2:
            missing.append(
                f"{spec.id}: {failing.get(spec.id, 0)} fail, {passing.get(spec.id, 0)} pass"
            )
    assert not missing, "rules need at least 2 failing and 2 passing fixtures:\n" + "\n".join(
        missing
    )
    assert fail  # the fixture tree was found at all
