"""Findings of one cause are reported together (gpulint.engine.causes): the text report shows
the others under the one they follow from, concise marks them, JSON and SARIF keep each whole
and name it.

tests/fixtures/units/tutorial-mistakes is a repository with the mistakes a newcomer makes;
its reports in the text and concise formats are kept as snapshots beside it.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from gpulint.cli import main
from gpulint.engine.causes import roots
from gpulint.engine.result import Result
from gpulint.report.concise import render_concise
from gpulint.report.sarif import sarif_log
from gpulint.report.text import render_text

from .conftest import FIXTURES, ROOT, lint_result
from .snapshots import assert_snapshot, snapshot_text
from .test_rule_fixtures import _needs_tools

TUTORIAL = FIXTURES / "units" / "tutorial-mistakes"
UPDATE = "pytest tests/test_causes.py --update-snapshots"


@pytest.fixture
def tutorial(monkeypatch: pytest.MonkeyPatch) -> Result:
    """The tutorial repository linted from its root, as its owner runs gpulint."""
    _needs_tools(TUTORIAL / "apps" / "llm" / "overlays" / "prod")
    monkeypatch.chdir(TUTORIAL)
    result = lint_result(".")
    result.units = [unit._replace(render_seconds=0.0) for unit in result.units]
    result.lint_seconds = 0.0
    result.render_wall = None
    return result


def test_each_finding_of_one_cause_names_the_one_it_follows_from(tutorial: Result) -> None:
    findings = tutorial.findings
    tops = roots(findings)
    under: dict[int, list[int]] = {}
    for index, top in enumerate(tops):
        if top is not None:
            under.setdefault(top, []).append(index)

    def rules_under(cause: int) -> list[str]:
        return sorted(findings[i].rule for i in under.get(cause, []))

    def where(index: int) -> str:
        return findings[index].location.file

    # One fix for GL201, GL105 and GL204 on the Knative Service and its revision's HPA; GL102's
    # behavior is for the HPA that fix deletes.
    gl201 = next(i for i, f in enumerate(findings) if f.rule == "GL201")
    assert rules_under(gl201) == ["GL102", "GL105", "GL204"]
    assert all("knative/whisper/" in where(i) for i in under[gl201])
    # In each overlay: the ScaledObject's GL103 prints its fix on the HPA's, whose fix deletes
    # the HPA the overlay's GL401 is about.
    for overlay in ("llm-prod/llm", "llm-staging/llm"):
        gl103 = next(
            i
            for i, f in enumerate(findings)
            if f.rule == "GL103" and where(i).endswith("hpa.yaml") and overlay in f.headline
        )
        assert rules_under(gl103) == ["GL103", "GL401"]
        assert all(overlay in findings[i].message for i in under[gl103])
    # The ScaledObject's GL102 at one line of the base, with one fix in both overlays.
    behavior = [
        i for i, f in enumerate(findings) if f.rule == "GL102" and "scaledobject" in where(i)
    ]
    assert tops[behavior[1]] == behavior[0] and tops[behavior[0]] is None
    # Each follower names the top of its chain: nothing follows from a follower.
    assert all(tops[top] is None for top in tops if top is not None)
    assert sum(top is not None for top in tops) == 8 and len(findings) == 17


def test_a_finding_whose_cause_is_not_reported_stands_alone(tutorial: Result) -> None:
    """A baseline or --changed-since can leave the cause out: what followed from it is then
    reported on its own."""
    kept = [f for f in tutorial.findings if f.rule != "GL201"]
    tops = roots(kept)
    knative = [i for i, f in enumerate(kept) if "knative/" in f.location.file]
    assert knative and all(tops[i] is None for i in knative)


def test_the_text_report_lists_followers_under_their_cause(
    tutorial: Result, request: pytest.FixtureRequest
) -> None:
    out = io.StringIO()
    render_text(tutorial, out)
    text = out.getvalue()
    assert text.count("    follows from it: ") == 8
    assert "8 of them following from another" in " ".join(text.split())
    snapshot = TUTORIAL / "snapshots" / "text.snap"
    source = TUTORIAL.relative_to(ROOT).as_posix()
    assert_snapshot(request.config, snapshot, snapshot_text(source, text, UPDATE), UPDATE)


def test_the_concise_report_is_one_line_per_finding(
    tutorial: Result, request: pytest.FixtureRequest
) -> None:
    out = io.StringIO()
    render_concise(tutorial, out)
    lines = out.getvalue().splitlines()
    findings = [
        line for line in lines if any(f" [{s}] " in line for s in ("error", "warning", "info"))
    ]
    assert len(findings) == len(tutorial.findings) == 17
    assert sum(line.endswith(")") and "follows from GL" in line for line in findings) == 8
    # Findings of both overlays at one line of their base read alike: each line names its
    # overlay, so that no two lines are the same.
    assert len(set(findings)) == 17
    assert (
        "apps/llm/base/hpa.yaml:23:9: GL401 [error] HPA llm reads Pods metric "
        "vllm_requests_waiting, which no adapter rule exposes. (in apps/llm/overlays/staging; "
        "follows from GL103 at apps/llm/base/hpa.yaml:6:3)"
    ) in findings
    # What the lines leave out, and where it is.
    assert lines[-3] == "note: `--format text` shows why each finding matters and its fix"
    snapshot = TUTORIAL / "snapshots" / "concise.snap"
    source = TUTORIAL.relative_to(ROOT).as_posix()
    text = "\n".join(lines) + "\n"
    assert_snapshot(request.config, snapshot, snapshot_text(source, text, UPDATE), UPDATE)


def test_json_and_sarif_keep_every_finding_and_name_its_cause(tutorial: Result) -> None:
    main_json = json.loads(_json(tutorial))
    findings = main_json["findings"]
    assert len(findings) == 17
    following = [f for f in findings if "followsFrom" in f]
    assert len(following) == 8
    for finding in following:
        cause = findings[finding["followsFrom"]["finding"]]
        assert "followsFrom" not in cause
        assert (cause["rule"], cause["file"], cause["line"], cause["column"]) == tuple(
            finding["followsFrom"][key] for key in ("rule", "file", "line", "column")
        )
    results = sarif_log(tutorial)["runs"][0]["results"]
    assert len(results) == 17
    marked = [r for r in results if "followsFrom" in r["properties"]]
    assert len(marked) == 8
    for result in marked:
        cause = results[result["properties"]["followsFrom"]["result"]]
        assert cause["ruleId"] == result["properties"]["followsFrom"]["ruleId"]
        first = result["relatedLocations"][0]
        assert first["message"]["text"].startswith(cause["ruleId"] + ": ")


def _json(result: Result) -> str:
    from gpulint.report.json import render_json

    out = io.StringIO()
    render_json(result, out)
    return out.getvalue()


def test_an_object_of_the_same_name_elsewhere_does_not_follow_from_a_deleting_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """GL201's fix deletes HPA speech/whisper-gpu of one application; an HPA of that name in
    another, read by another unit, has its own GL102."""
    repo = tmp_path / "repo"
    shutil.copytree(TUTORIAL / "knative", repo / "knative")
    other = repo / "elsewhere" / "hpa.yaml"
    other.parent.mkdir()
    deployment = (TUTORIAL / "apps" / "triton" / "deployment.yaml").read_text()
    hpa = (TUTORIAL / "knative" / "whisper" / "hpa.yaml").read_text()
    other.write_text(
        deployment.replace("vision", "speech").replace("triton", "whisper-00001-deployment")
        + "---\n"
        + hpa
    )
    monkeypatch.chdir(repo)
    assert main(["lint", "--format", "json", "--select", "GL102,GL201", "."]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    behavior = {f["file"]: f for f in findings if f["rule"] == "GL102"}
    assert set(behavior) == {"elsewhere/hpa.yaml", "knative/whisper/hpa.yaml"}
    assert "followsFrom" not in behavior["elsewhere/hpa.yaml"]
    assert behavior["knative/whisper/hpa.yaml"]["followsFrom"]["rule"] == "GL201"


def test_findings_about_no_object_in_different_files_are_different_causes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two files that do not parse have one wording of a fix, "fix the syntax at this line":
    each is its own fix, at its own line, and neither follows from the other."""
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n")
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-config", "--format", "json", "."]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["rule"], f["file"]) for f in findings] == [("GL702", "a.yaml"), ("GL702", "b.yaml")]
    assert findings[0]["fix"] == findings[1]["fix"]
    assert "printed there" not in findings[1]["fix"]
    assert not any("followsFrom" in f for f in findings)
