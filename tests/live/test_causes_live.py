"""One missing ``honorLabels``, seen by a real Prometheus: the adapter rule that maps the
exporter's ``pod`` (GL403), each of its overrides on series that name the exporter (GL802) and
the HPA it serves without data (GL804) are one error with the others under it, and the live
check says what it checked, with the look-back as it was written."""

from __future__ import annotations

import io

import pytest

from gpulint.engine.causes import roots
from gpulint.engine.result import Result
from gpulint.report.text import render_text

from ..conftest import ROOT
from ..snapshots import assert_snapshot, snapshot_text
from .conftest import LIVE_FIXTURES, lint_live, show
from .test_live_fixtures import _steady
from .world import World

pytestmark = [pytest.mark.live, pytest.mark.slow]

CASE = LIVE_FIXTURES / "causes" / "honor_labels_missing"
UPDATE = "pytest tests/live/test_causes_live.py --update-snapshots"


def test_one_missing_honor_labels_is_one_error_with_its_consequences_under_it(
    world: World, request: pytest.FixtureRequest
) -> None:
    findings, _ = lint_live([CASE], world.stack.url)
    assert sorted(f.rule for f in findings) == ["GL403", "GL802", "GL802", "GL804"], show(findings)
    tops = roots(findings)
    cause = next(i for i, f in enumerate(findings) if f.rule == "GL403")
    assert [tops[i] for i, f in enumerate(findings) if f.rule != "GL403"] == [cause] * 3
    shown = [
        f._replace(message=_steady(f.message, world.stack.url), fix=_steady(f.fix, world.stack.url))
        for f in findings
    ]
    out = io.StringIO()
    render_text(Result(shown, files=3, objects=2), out)
    text = out.getvalue()
    # One full entry, three lines under it, each the headline of its finding.
    assert text.count(" [error]") == 4 and text.count("follows from it: ") == 3
    snapshot = CASE.parent / "snapshots" / f"{CASE.name}.snap"
    source = CASE.relative_to(ROOT).as_posix()
    assert_snapshot(request.config, snapshot, snapshot_text(source, text, UPDATE), UPDATE)


def test_the_live_check_says_once_what_it_checked_with_the_look_back_as_written(
    world: World,
) -> None:
    """The tutorial repository's six units each read the platform's two adapter rules: one
    note counts each rule, HPA metric and trigger once, and says the window as --lookback was
    given (36h, not 1d12h)."""
    from .test_cli_live import gpulint

    tutorial = ROOT / "tests" / "fixtures" / "units" / "tutorial-mistakes"
    result = gpulint(
        "lint",
        "--prometheus",
        world.stack.url,
        "--lookback",
        "36h",
        "--format",
        "text",
        str(tutorial),
    )
    words = " ".join(result.stdout.split())
    assert words.count("note: live check:") == 1, result.stdout
    assert (
        "note: live check: 2 adapter rules, 1 HPA metric they serve and 2 KEDA prometheus "
        f"triggers checked against {world.stack.url} in 6 units (look-back 36h)"
    ) in words, result.stdout
    assert "1d12h" not in words and "never seen in the last 36h" in words
