"""Every live rule's fixtures in tests/live/fixtures/<RULE>/, run against a real Prometheus.

As with the offline fixtures, ``fail_*`` cases declare their findings with
``# expect: GL801 4:3`` comments and ``pass_*`` cases must produce none of their rule. A
``# live: stack|gmp|down`` comment picks the Prometheus (tests/live/world.py; ``down`` is a
port nothing listens on), ``# lookback: 72h`` the look-back window and ``# min-history: 0``
the share of it a never-reached or always-exceeded verdict needs (90% by default, more than
the seconds of data the world's Prometheus scraped).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from gpulint.engine.registry import all_rules, rule_index
from gpulint.engine.result import Result
from gpulint.report.text import render_text

from ..conftest import ROOT
from ..snapshots import assert_snapshot, snapshot_path, snapshot_text
from .conftest import LIVE_FIXTURES, lint_live, live_findings, min_history, server_url, show
from .world import World

pytestmark = [pytest.mark.live, pytest.mark.slow]

_EXPECT = re.compile(r"#\s*expect:\s*(GL\d{3})\s+(\d+):(\d+)")


def _cases(prefix: str) -> list[tuple[str, Path]]:
    cases = []
    for rule_dir in sorted(LIVE_FIXTURES.iterdir()):
        if not re.fullmatch(r"GL8\d\d", rule_dir.name):
            continue
        for path in sorted(rule_dir.iterdir()):
            if path.name.startswith(prefix):
                cases.append((rule_dir.name, path))
    return cases


def _expectations(path: Path) -> set[tuple[str, str, int, int]]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    found = set()
    for file in files:
        for match in _EXPECT.finditer(file.read_text()):
            found.add((str(file), match.group(1), int(match.group(2)), int(match.group(3))))
    return found


@pytest.mark.parametrize(("rule", "path"), _cases("fail_"), ids=lambda v: str(v)[-50:])
def test_failing_live_fixture_reports_exactly_what_it_declares(
    world: World, down_url: str, rule: str, path: Path, request: pytest.FixtureRequest
) -> None:
    expected = _expectations(path)
    # A finding of the rule that settled an offline finding (gpulint.engine.settled) is
    # reported under the offline rule's ID, and declared so: `# expect: GL402 4:3`.
    ours = {rule, *next(info.settles for info in rule_index() if info.id == rule)}
    assert any(e[1] in ours for e in expected), f"{path} declares no '# expect: {rule} L:C'"
    url, lookback = server_url(world, down_url, path)
    findings, _ = lint_live([path], url, lookback, min_history=min_history(path))
    found = [f for f in findings if f.rule == rule or f.settled_by == rule]
    got = {(f.location.file, f.rule, f.location.line, f.location.column) for f in found}
    assert got == {e for e in expected if e[1] in ours}, show(findings)
    # The text report of the rule's findings, beside the fixture (tests/snapshots.py), with
    # what changes from run to run written as a placeholder.
    out = io.StringIO()
    shown = [f._replace(message=_steady(f.message, url), fix=_steady(f.fix, url)) for f in found]
    render_text(Result(shown, files=1, objects=0), out)
    source = path.relative_to(ROOT).as_posix()
    text = snapshot_text(source, out.getvalue(), UPDATE)
    assert_snapshot(request.config, snapshot_path(path), text, UPDATE)


UPDATE = "pytest tests/live/test_live_fixtures.py --update-snapshots"


def _steady(text: str, url: str) -> str:
    """``text`` without what changes from run to run: the Prometheus's and the exporters'
    ports, the clock (the data is written relative to now), the time since the last scrape,
    the span of history Prometheus holds so far, and where the repository is checked out."""
    text = text.replace(url, "<prometheus>").replace(f"{ROOT}/", "")
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", text)
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "<time> UTC", text)
    # How much history the session's Prometheus holds grows while the tests run.
    text = re.sub(
        r"over (?:less than \S+ of the last (\S+), all that Prometheus holds"
        r"|the \S+ of the last (\S+) that Prometheus holds)",
        lambda m: f"over <span> of the last {m.group(1) or m.group(2)} that Prometheus holds",
        text,
    )
    return re.sub(r"\b(?:\d+m)?\d+s ago\b", "<n>s ago", text)


@pytest.mark.parametrize(("rule", "path"), _cases("pass_"), ids=lambda v: str(v)[-50:])
def test_passing_live_fixture_is_silent(world: World, down_url: str, rule: str, path: Path) -> None:
    url, lookback = server_url(world, down_url, path)
    findings, snapshot = lint_live([path], url, lookback, min_history=min_history(path))
    assert snapshot.available, snapshot.error
    assert [f for f in findings if rule in (f.rule, f.settled_by)] == [], show(findings)


def test_every_live_rule_has_failing_and_passing_fixtures() -> None:
    failing: dict[str, int] = {}
    passing: dict[str, int] = {}
    for rule, _ in _cases("fail_"):
        failing[rule] = failing.get(rule, 0) + 1
    for rule, _ in _cases("pass_"):
        passing[rule] = passing.get(rule, 0) + 1
    live = [spec.id for spec in all_rules() if spec.id.startswith("GL8")]
    assert live == [
        "GL801",
        "GL802",
        "GL803",
        "GL804",
        "GL805",
        "GL806",
        "GL809",
        "GL810",
        "GL811",
        "GL812",
    ]
    missing = [
        f"{rule}: {failing.get(rule, 0)} fail, {passing.get(rule, 0)} pass"
        for rule in live
        if failing.get(rule, 0) < 2 or passing.get(rule, 0) < 2
    ]
    assert not missing, missing


@pytest.mark.parametrize("setup", ["stack", "gmp"])
def test_a_correct_setup_produces_no_live_finding(world: World, setup: str) -> None:
    """Adapter config + HPAs + the exporter as they should be: not one GL8xx finding."""
    case = LIVE_FIXTURES / "correct" / setup
    findings, snapshot = lint_live([case], world.url(setup))
    assert live_findings(findings) == [], show(live_findings(findings))
    # ...and not because nothing was checked: every rule found series and ran its query,
    # every HPA metric got values for its own pods.
    assert snapshot.rules and all(e.series.count for e in snapshot.rules.values())
    assert all(
        e.query is not None and e.query.ran and e.query.samples for e in snapshot.rules.values()
    )
    assert len(snapshot.hpas) == 3
    assert all(e.usable and e.observed for e in snapshot.hpas), [
        (e.hpa.name, e.rendered) for e in snapshot.hpas
    ]
