"""Adopting gpulint in a repository that already has findings: a baseline of them, and
reports narrowed to what a change touched, in real git repositories."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpulint.adoption.baseline import Baseline, fingerprint, load_baseline, node_path
from gpulint.adoption.changed import changed_lines, document_spans
from gpulint.cli import main
from gpulint.core.model import Finding, Location, ObjectRef, Severity

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: main
        image: triton
        resources: {{requests: {{cpu: 500m}}, limits: {{nvidia.com/gpu: 1}}}}
"""

# GL101 (CPU metric on a GPU workload) at spec.metrics[0], GL102 (no behavior) at spec.
CPU_HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: {name}}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}
  maxReplicas: {replicas}
  metrics:
  - type: Resource
    resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 70}}}}
"""


def app(name: str, replicas: int = 3) -> str:
    return DEPLOYMENT.format(name=name) + "---\n" + CPU_HPA.format(name=name, replicas=replicas)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, timeout=60
    )
    return done.stdout


def make_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ci@example.invalid")
    git(repo, "config", "user.name", "ci")
    write(repo, files)
    commit(repo, "initial")
    return repo


def write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def lint_json(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, Any]]:
    monkeypatch.chdir(repo)
    capsys.readouterr()
    code = main(["lint", "--format", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def reported(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted((f["rule"], f["object"]["name"], f["file"]) for f in report["findings"])


# --- baseline ------------------------------------------------------------------------------


def test_baseline_survives_a_rename_and_a_moved_block_and_reports_what_is_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, {"apps/triton.yaml": app("triton")})
    code, report = lint_json(repo, monkeypatch, capsys, "--write-baseline", "baseline.json", ".")
    assert code == 0  # writing a baseline accepts what is there
    assert reported(report) == [
        ("GL101", "triton", "apps/triton.yaml"),
        ("GL102", "triton", "apps/triton.yaml"),
    ]
    commit(repo, "baseline")

    # Renamed, the HPA moved above the Deployment and pushed down by a comment: same findings.
    git(repo, "mv", "apps/triton.yaml", "apps/serving.yaml")
    hpa, deployment = CPU_HPA.format(name="triton", replicas=3), DEPLOYMENT.format(name="triton")
    write(repo, {"apps/serving.yaml": "# serving\n\n" + hpa + "---\n" + deployment})
    code, report = lint_json(repo, monkeypatch, capsys, "--baseline", "baseline.json", ".")
    assert (code, report["findings"]) == (0, [])
    assert report["summary"]["baseline"] == {"baselined": 2, "stale": 0, "notEvaluated": 0}

    # A second app brings two new findings; the run fails on them alone.
    write(repo, {"apps/llm.yaml": app("llm")})
    code, report = lint_json(repo, monkeypatch, capsys, "--baseline", "baseline.json", ".")
    assert code == 1
    assert reported(report) == [
        ("GL101", "llm", "apps/llm.yaml"),
        ("GL102", "llm", "apps/llm.yaml"),
    ]
    assert report["summary"]["baseline"] == {"baselined": 2, "stale": 0, "notEvaluated": 0}

    # Fixing old findings leaves their entries stale, said in the text summary too.
    (repo / "apps/llm.yaml").unlink()
    cpu_only = deployment.replace("nvidia.com/gpu: 1", "cpu: 500m")
    write(repo, {"apps/serving.yaml": hpa + "---\n" + cpu_only})
    code, report = lint_json(repo, monkeypatch, capsys, "--baseline", "baseline.json", ".")
    assert (code, report["findings"]) == (0, [])
    assert report["summary"]["baseline"] == {"baselined": 0, "stale": 2, "notEvaluated": 0}
    capsys.readouterr()
    main(["lint", "--baseline", "baseline.json", "."])
    out = capsys.readouterr().out
    summary = " ".join(out[out.rindex("gpulint: ") :].split())  # wrapped at 80 columns
    assert "0 baselined (2 baseline entries fixed since)" in summary


def test_the_baseline_file_is_never_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Committed at the top level as the README advises, under its default name or any
    other: the run reads the same files, cut into the same units, as without it."""
    repo = make_repo(
        tmp_path,
        {f"apps/{name}/app.yaml": app(name) for name in ("triton", "llm", "bert")},
    )
    _, alone = lint_json(repo, monkeypatch, capsys, ".")
    units = [(u["name"], u["objects"]) for u in alone["summary"]["units"]]
    assert len(units) == 3
    for name in (".gpulint-baseline.json", "ci/known-findings.json"):
        (repo / "ci").mkdir(exist_ok=True)
        code, written = lint_json(repo, monkeypatch, capsys, "--write-baseline", name, ".")
        assert code == 0 and written["summary"]["files"] == alone["summary"]["files"]
        # Rewritten over the old one, and read back: never a file of the run.
        for args in (("--write-baseline", name), ("--baseline", name)):
            _, report = lint_json(repo, monkeypatch, capsys, *args, ".")
            assert report["summary"]["files"] == alone["summary"]["files"], (name, args)
            assert [(u["name"], u["objects"]) for u in report["summary"]["units"]] == units
            assert report["summary"]["skipped"] == []
        assert report["summary"]["baseline"] == {"baselined": 6, "stale": 0, "notEvaluated": 0}


def test_entries_whose_files_the_run_did_not_read_are_not_fixed_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, {"a/triton.yaml": app("triton"), "b/llm.yaml": app("llm")})
    lint_json(repo, monkeypatch, capsys, "--write-baseline", "baseline.json", "a", "b")
    entries = json.loads((repo / "baseline.json").read_text())["entries"]
    assert sorted(file for e in entries for file in e["files"]) == [
        "a/triton.yaml",
        "a/triton.yaml",
        "b/llm.yaml",
        "b/llm.yaml",
    ]
    # A run over a alone never judged b's findings: not fixed, not evaluated.
    code, report = lint_json(repo, monkeypatch, capsys, "--baseline", "baseline.json", "a")
    assert (code, report["findings"]) == (0, [])
    assert report["summary"]["baseline"] == {"baselined": 2, "stale": 0, "notEvaluated": 2}
    capsys.readouterr()
    main(["lint", "--baseline", "baseline.json", "a"])
    out = capsys.readouterr().out
    summary = " ".join(out[out.rindex("gpulint: ") :].split())
    assert (
        "2 baselined (2 baseline entries not evaluated: none of their files was in this "
        "run's input)" in summary
    )
    # One of a's fixed: fixed since, and b's still not evaluated.
    write(repo, {"a/triton.yaml": app("triton").replace("nvidia.com/gpu: 1", "cpu: 1")})
    _, report = lint_json(repo, monkeypatch, capsys, "--baseline", "baseline.json", "a")
    assert report["summary"]["baseline"] == {"baselined": 0, "stale": 2, "notEvaluated": 2}
    capsys.readouterr()
    main(["lint", "--baseline", "baseline.json", "a"])
    out = capsys.readouterr().out
    summary = " ".join(out[out.rindex("gpulint: ") :].split())
    assert (
        "0 baselined (2 baseline entries fixed since; 2 not evaluated: none of their files "
        "was in this run's input)" in summary
    )
    # A file deleted took its findings with it: fixed since.
    (repo / "b/llm.yaml").unlink()
    _, report = lint_json(repo, monkeypatch, capsys, "--baseline", "baseline.json", "a")
    assert report["summary"]["baseline"] == {"baselined": 0, "stale": 4, "notEvaluated": 0}


def test_a_version_1_baseline_is_still_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Written before entries named their files: read as before, an entry that matches
    nothing counted stale whatever the run read."""
    repo = make_repo(tmp_path, {"a/triton.yaml": app("triton"), "b/llm.yaml": app("llm")})
    lint_json(repo, monkeypatch, capsys, "--write-baseline", "baseline.json", ".")
    data = json.loads((repo / "baseline.json").read_text())
    data["version"] = 1
    for entry in data["entries"]:
        del entry["files"]
    (repo / "baseline.json").write_text(json.dumps(data))
    code, report = lint_json(repo, monkeypatch, capsys, "--baseline", "baseline.json", "a")
    assert (code, report["summary"]["baseline"]) == (
        0,
        {"baselined": 2, "stale": 2, "notEvaluated": 0},
    )


def test_baseline_file_is_sorted_versioned_and_counts_identical_findings(tmp_path: Path) -> None:
    ref = ObjectRef("autoscaling/v2", "HorizontalPodAutoscaler", "ml", "triton")

    def at(line: int, rule: str = "GL101", api: str = "autoscaling/v2") -> Finding:
        return Finding(
            rule,
            "name",
            Severity.ERROR,
            f"message at {line}",
            Location("a.yaml", line, 1),
            object=ref._replace(api_version=api),
            path=("spec", "metrics", 0, "resource", "name"),
        )

    path = tmp_path / "baseline.json"
    Baseline.of([at(30), at(9, "GL102"), at(10)]).write(str(path))
    data = json.loads(path.read_text())
    assert data["version"] == 2
    assert [(e["rule"], e["count"], e["path"]) for e in data["entries"]] == [
        ("GL101", 2, "spec.metrics[0].resource.name"),
        ("GL102", 1, "spec.metrics[0].resource.name"),
    ]
    baseline = load_baseline(str(path))
    # Lines, messages and the API version do not matter; a third identical one is new.
    comparison = baseline.split([at(1), at(2, api="autoscaling/v2beta2"), at(3), at(4, "GL102")])
    assert (len(comparison.new), comparison.baselined, comparison.stale) == (1, 3, 0)
    assert comparison.new[0].location.line == 3
    # Rewriting the same findings gives the same bytes.
    again = tmp_path / "again.json"
    Baseline.of([at(10), at(9, "GL102"), at(30)]).write(str(again))
    assert again.read_bytes() == path.read_bytes()


def test_findings_about_no_object_fall_back_to_file_rule_and_message() -> None:
    def syntax(file: str, message: str) -> Finding:
        return Finding("GL702", "yaml-syntax", Severity.ERROR, message, Location(file, 4, 2))

    one = fingerprint(syntax("a.yaml", "bad indentation"))
    assert one == fingerprint(
        syntax("a.yaml", "bad indentation")._replace(location=Location("a.yaml", 9, 1))
    )
    assert one != fingerprint(syntax("b.yaml", "bad indentation"))
    assert one != fingerprint(syntax("a.yaml", "unclosed quote"))
    assert node_path(("spec", "metrics", 0, "resource")) == "spec.metrics[0].resource"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{\n  "version": 1,\n  oops\n}\n', "baseline.json:3:3: not valid JSON"),
        ('{"version": 1, "entries": []}', "not a gpulint baseline"),
        ('{"tool": "gpulint", "version": 7, "entries": []}', "version 7 is not supported"),
        ('{"tool": "gpulint", "version": true, "entries": []}', "version True is not"),
        (
            '{"tool": "gpulint", "version": 2, "entries": [{"rule": "GL101", "count": 1, '
            '"kind": "HPA", "namespace": null, "name": "a", "units": [], "path": "spec", '
            '"files": "a.yaml"}]}',
            "entries[0]: files must be a list of strings",
        ),
        ('{"tool": "gpulint", "version": 1, "entries": [{"rule": "GL101"}]}', "entries[0]: count"),
        (
            '{"tool": "gpulint", "version": 1, "entries": [{"rule": "GL101", "count": 1, '
            '"kind": "HPA", "namespace": null, "name": "a", "units": [], "paht": "spec"}]}',
            "entries[0]: unknown key 'paht'",
        ),
    ],
)
def test_a_malformed_baseline_is_a_usage_error_saying_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    (tmp_path / "app.yaml").write_text(app("triton"))
    (tmp_path / "baseline.json").write_text(text)
    code = main(["lint", "--baseline", str(tmp_path / "baseline.json"), str(tmp_path)])
    assert code == 2
    assert expected in capsys.readouterr().err


def test_a_missing_baseline_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "app.yaml").write_text(app("triton"))
    assert main(["lint", "--baseline", str(tmp_path / "nope.json"), str(tmp_path)]) == 2
    assert "cannot read baseline" in capsys.readouterr().err


# --- changed since a ref -------------------------------------------------------------------


def test_changed_since_reports_changed_objects_with_the_whole_repository_as_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(
        tmp_path,
        {
            "old/triton.yaml": app("triton"),
            "old/llm.yaml": app("llm"),
            "split/deployment.yaml": DEPLOYMENT.format(name="vllm"),
            "split/hpa.yaml": CPU_HPA.format(name="vllm", replicas=3),
        },
    )
    git(repo, "checkout", "-q", "-b", "feature")
    # Committed on the branch: llm's HPA edited; triton's file renamed without an edit.
    write(repo, {"old/llm.yaml": app("llm", replicas=5)})
    git(repo, "mv", "old/triton.yaml", "old/renamed.yaml")
    commit(repo, "feature work")
    # Meanwhile main edits triton: that is main's change, not the branch's.
    git(repo, "checkout", "-q", "main")
    write(repo, {"old/triton.yaml": app("triton", replicas=7)})
    commit(repo, "main moves on")
    git(repo, "checkout", "-q", "feature")
    # Not committed yet: the vllm Deployment, whose HPA sits in another file; a new file.
    vllm = DEPLOYMENT.format(name="vllm").replace("image: triton", "image: vllm")
    write(repo, {"split/deployment.yaml": vllm, "new/bert.yaml": app("bert")})

    code, report = lint_json(repo, monkeypatch, capsys, "--changed-since", "main", ".")
    assert code == 1
    names = {f["object"]["name"] for f in report["findings"]}
    # vllm: its HPA's file is untouched, but the Deployment the findings name changed.
    assert names == {"llm", "vllm", "bert"}
    assert any("outside the changes since main" in note for note in report["summary"]["notes"])

    # Nothing changed since the branch itself: nothing reported, the exit code follows.
    commit(repo, "more")
    code, report = lint_json(repo, monkeypatch, capsys, "--changed-since", "HEAD", ".")
    assert (code, report["findings"]) == (0, [])


def test_changed_since_and_baseline_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, {"a.yaml": app("triton")})
    lint_json(repo, monkeypatch, capsys, "--write-baseline", "baseline.json", ".")
    commit(repo, "baseline")
    write(repo, {"a.yaml": app("triton", replicas=4), "b.yaml": app("llm")})
    code, report = lint_json(
        repo, monkeypatch, capsys, "--changed-since", "HEAD", "--baseline", "baseline.json", "."
    )
    # triton's HPA changed, but its findings are baselined; llm's are new and changed.
    assert code == 1
    assert {f["object"]["name"] for f in report["findings"]} == {"llm"}
    assert report["summary"]["baseline"] == {"baselined": 2, "stale": 0, "notEvaluated": 0}


def test_changed_since_outside_git_or_with_an_unknown_ref_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.yaml").write_text(app("triton"))
    monkeypatch.chdir(plain)
    assert main(["lint", "--changed-since", "main", "."]) == 2
    assert "is not in a git repository" in capsys.readouterr().err
    repo = make_repo(tmp_path, {"a.yaml": app("triton")})
    monkeypatch.chdir(repo)
    assert main(["lint", "--changed-since", "origin/nope", "."]) == 2
    assert "no commit 'origin/nope'" in capsys.readouterr().err


def test_report_only_reports_the_given_files_judged_with_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(
        tmp_path,
        {
            "triton.yaml": app("triton"),
            "deployment.yaml": DEPLOYMENT.format(name="vllm"),
            "hpa.yaml": CPU_HPA.format(name="vllm", replicas=3),
        },
    )
    # The HPA alone would find nothing: its GPU Deployment is in another file.
    code, report = lint_json(repo, monkeypatch, capsys, "--report-only", "hpa.yaml")
    assert code == 1
    assert {(f["object"]["name"], f["file"]) for f in report["findings"]} == {("vllm", "hpa.yaml")}
    code, report = lint_json(repo, monkeypatch, capsys, "--report-only", "deployment.yaml")
    assert {f["object"]["name"] for f in report["findings"]} == {"vllm"}  # related object


def test_diff_lines_and_document_spans(tmp_path: Path) -> None:
    diff = (
        "diff --git a/x.yaml b/y.yaml\n"
        "similarity index 90%\nrename from x.yaml\nrename to y.yaml\n"
        "--- a/x.yaml\n+++ b/y.yaml\n"
        "@@ -3 +3,2 @@\n-a\n+b\n+c\n"
        "@@ -9,2 +10,0 @@\n-d\n-e\n"
        "diff --git a/gone.yaml b/gone.yaml\n--- a/gone.yaml\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    )
    lines = changed_lines(diff, str(tmp_path))
    assert lines == {str((tmp_path / "y.yaml").resolve()): {3, 4, 10, 11}}
    path = tmp_path / "multi.yaml"
    path.write_text("a: 1\n---\nb: 2\nc: 3\n--- # next\nd: 4\n")
    assert document_spans(str(path)) == [(1, 1), (2, 4), (5, 6)]


def test_changed_since_counts_an_overlay_edit_for_the_objects_it_renders(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kustomize: list[str],
) -> None:
    repo = make_repo(
        tmp_path,
        {
            "base/app.yaml": app("triton"),
            "base/kustomization.yaml": "resources: [app.yaml]\n",
            "overlays/prod/kustomization.yaml": "resources: [../../base]\nnamespace: prod\n",
            "overlays/dev/kustomization.yaml": "resources: [../../base]\nnamespace: dev\n",
        },
    )
    render = ["--kustomize", " ".join(kustomize)]
    code, report = lint_json(repo, monkeypatch, capsys, *render, "--changed-since", "HEAD", ".")
    assert (code, report["findings"]) == (0, [])
    write(repo, {"overlays/prod/kustomization.yaml": "resources: [../../base]\nnamespace: p\n"})
    code, report = lint_json(repo, monkeypatch, capsys, *render, "--changed-since", "HEAD", ".")
    assert code == 1
    # Reported at the base's lines, for the overlay whose kustomization changed.
    assert {(f["rule"], f["object"]["namespace"]) for f in report["findings"]} == {
        ("GL101", "p"),
        ("GL102", "p"),
    }


HPA_PATCH = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: llm}}
spec:
  maxReplicas: {replicas}
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {{name: llm}}
spec:
  selector: {{app: llm}}
  ports: [{{port: {port}}}]
"""


def overlays(staging: str = "", prod: str = "") -> dict[str, str]:
    """apps/llm: a base (the GPU Deployment and its CPU HPA, a Service) under a staging
    overlay that patches the HPA and the Service, and a prod overlay."""
    return {
        "apps/llm/base/app.yaml": app("llm"),
        "apps/llm/base/service.yaml": SERVICE.format(port=80),
        "apps/llm/base/kustomization.yaml": "resources: [app.yaml, service.yaml]\n",
        "apps/llm/overlays/staging/kustomization.yaml": (
            f"resources: [../../base]\n{staging}"
            "patches: [{path: hpa-patch.yaml}, {path: service-patch.yaml}]\n"
        ),
        "apps/llm/overlays/staging/hpa-patch.yaml": HPA_PATCH.format(replicas=4),
        "apps/llm/overlays/staging/service-patch.yaml": SERVICE.format(port=8080),
        "apps/llm/overlays/prod/kustomization.yaml": f"resources: [../../base]\n{prod}",
    }


def changed_findings(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tool: list[str],
    edits: dict[str, str],
    *args: str,
) -> set[tuple[str, str | None, tuple[str, ...]]]:
    """(rule, namespace, units) of what --changed-since HEAD reports after ``edits``; the
    edits are undone after."""
    before = {name: (repo / name).read_text() for name in edits}
    write(repo, edits)
    try:
        code, report = lint_json(repo, monkeypatch, capsys, *tool, "--changed-since", "HEAD", *args)
    finally:
        write(repo, before)
    assert code in (0, 1)
    return {
        (f["rule"], f["object"]["namespace"], tuple(f.get("units", ()))) for f in report["findings"]
    }


def test_changed_since_a_patch_in_one_overlay_reports_the_base_object_it_patches(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kustomize: list[str],
) -> None:
    """The base HPA renders into both overlays alike: its findings are one, naming both,
    and a change to the patch of it in one overlay is a change to them."""
    repo = make_repo(tmp_path, overlays())
    tool = ["--kustomize", " ".join(kustomize)]
    both = ("apps/llm/overlays/prod", "apps/llm/overlays/staging")
    edit = {"apps/llm/overlays/staging/hpa-patch.yaml": HPA_PATCH.format(replicas=5)}
    assert changed_findings(repo, monkeypatch, capsys, tool, edit) == {
        ("GL101", None, both),
        ("GL102", None, both),
    }
    # A patch of the Service produced nothing of the HPA.
    edit = {"apps/llm/overlays/staging/service-patch.yaml": SERVICE.format(port=9090)}
    assert changed_findings(repo, monkeypatch, capsys, tool, edit) == set()


@pytest.mark.slow
def test_changed_since_counts_only_the_files_that_produced_an_objects_findings(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kustomize: list[str],
) -> None:
    """Each overlay its own namespace: each has its own findings, and a change counts for
    the objects it builds, not for every object under the overlay."""
    staging, prod = "namespace: staging\n", "namespace: prod\n"
    repo = make_repo(tmp_path, overlays(staging, prod))
    tool = ["--kustomize", " ".join(kustomize)]
    rules = ("GL101", "GL102")
    cases: list[tuple[dict[str, str], set[str]]] = [
        # The patch of the HPA: staging's HPA.
        ({"apps/llm/overlays/staging/hpa-patch.yaml": HPA_PATCH.format(replicas=5)}, {"staging"}),
        # The overlay's kustomization: every object it builds.
        (
            {
                "apps/llm/overlays/staging/kustomization.yaml": overlays(staging)[
                    "apps/llm/overlays/staging/kustomization.yaml"
                ].replace("namespace: staging", "namespace: staging\nnameSuffix: -s")
            },
            {"staging"},
        ),
        # The base's kustomization and the base's document of the HPA: both overlays.
        (
            {"apps/llm/base/kustomization.yaml": "resources: [service.yaml, app.yaml]\n"},
            {"staging", "prod"},
        ),
        ({"apps/llm/base/app.yaml": app("llm", replicas=6)}, {"staging", "prod"}),
        # What produced nothing of the HPA or the Deployment it names: nothing.
        ({"apps/llm/overlays/staging/service-patch.yaml": SERVICE.format(port=9090)}, set()),
        ({"apps/llm/base/service.yaml": SERVICE.format(port=81)}, set()),
    ]
    for edit, namespaces in cases:
        found = changed_findings(repo, monkeypatch, capsys, tool, edit)
        # The base is read by both overlays: each finding names the one it is found in.
        expected = {(rule, ns, (f"apps/llm/overlays/{ns}",)) for rule in rules for ns in namespaces}
        assert found == expected, edit


def test_the_kustomizations_that_build_an_object(tmp_path: Path) -> None:
    """Those that read its file, every one above them and the components they include; not
    a sibling base; all of them for a file none reads."""
    from gpulint.input.units.kustomize import Kustomization
    from gpulint.input.units.kustomize_origins import Lineage

    write(
        tmp_path,
        {
            "base/kustomization.yaml": "resources: [app.yaml]\n",
            "base/app.yaml": app("llm"),
            "other/kustomization.yaml": "resources: [svc.yaml]\n",
            "other/svc.yaml": SERVICE.format(port=80),
            "gpu/kustomization.yaml": (
                "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
            ),
            "overlay/kustomization.yaml": (
                "resources: [../base, ../other]\ncomponents: [../gpu]\n"
            ),
        },
    )
    bounds = (str(tmp_path),)
    chain = [Kustomization(str(tmp_path / d), bounds) for d in ("overlay", "base", "other", "gpu")]
    lineage = Lineage(chain)

    def names(file: str | None) -> set[str]:
        found = lineage.building(file)
        return {Path(source.file).parent.name for source in found if source.line == 0}

    assert names(str(tmp_path / "base/app.yaml")) == {"base", "overlay", "gpu"}
    assert names(str(tmp_path / "other/svc.yaml")) == {"other", "overlay", "gpu"}
    assert names(None) == {"base", "other", "overlay", "gpu"}
    # Every file the same kustomizations build shares one tuple.
    assert lineage.building(str(tmp_path / "base/app.yaml")) is lineage.building(
        str(tmp_path / "base/./app.yaml")
    )


CHART = {
    "Chart.yaml": "apiVersion: v2\nname: llm\nversion: 0.1.0\n",
    "values.yaml": "maxReplicas: 4\nport: 80\n",
    "templates/_helpers.tpl": '{{- define "llm.name" -}}llm{{- end -}}\n',
    "templates/deployment.yaml": (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n"
        '  name: {{ include "llm.name" . }}\n'
        + "spec:\n"
        + DEPLOYMENT.format(name="llm").split("spec:\n", 1)[1]
    ),
    "templates/hpa.yaml": CPU_HPA.format(name="llm", replicas="{{ .Values.maxReplicas }}"),
    "templates/service.yaml": SERVICE.format(port="{{ .Values.port }}"),
}


@pytest.mark.slow
def test_changed_since_a_chart_counts_its_values_helpers_and_the_objects_template(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    helm: list[str],
) -> None:
    files = {f"charts/llm/{name}": text for name, text in CHART.items()}
    files["env/prod.yaml"] = "maxReplicas: 8\n"
    repo = make_repo(tmp_path, files)
    tool = ["--helm", " ".join(helm), "--helm-values", "env/prod.yaml"]
    rules = {("GL101", None, ()), ("GL102", None, ())}
    cases: list[tuple[dict[str, str], set[tuple[str, str | None, tuple[str, ...]]]]] = [
        ({"charts/llm/values.yaml": "maxReplicas: 5\nport: 80\n"}, rules),
        ({"env/prod.yaml": "maxReplicas: 9\n"}, rules),  # the values it was rendered with
        ({"charts/llm/templates/_helpers.tpl": '{{- define "llm.name" -}}llm{{- end }}\n'}, rules),
        ({"charts/llm/templates/hpa.yaml": CPU_HPA.format(name="llm", replicas=3)}, rules),
        # Another template: it rendered neither the HPA nor the Deployment.
        ({"charts/llm/templates/service.yaml": SERVICE.format(port=81)}, set()),
    ]
    for edit, expected in cases:
        assert changed_findings(repo, monkeypatch, capsys, tool, edit, "charts") == expected, edit


def test_report_only_counts_a_patch_of_the_object(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kustomize: list[str],
) -> None:
    """pre-commit's --report-only asks the same: a staged patch of the HPA reports the base
    HPA's findings; a staged patch of another object reports nothing."""
    repo = make_repo(tmp_path, overlays())
    tool = ["--kustomize", " ".join(kustomize)]
    patch = "apps/llm/overlays/staging/hpa-patch.yaml"
    code, report = lint_json(repo, monkeypatch, capsys, *tool, "--report-only", ".", patch)
    assert code == 1
    assert {f["rule"] for f in report["findings"]} == {"GL101", "GL102"}
    other = "apps/llm/overlays/staging/service-patch.yaml"
    code, report = lint_json(repo, monkeypatch, capsys, *tool, "--report-only", ".", other)
    assert (code, report["findings"]) == (0, [])


def _readme_adoption_commands() -> list[list[str]]:
    """The commands of docs/ci.md's "In one pull request" block, as argument lists."""
    import re
    import shlex

    text = (Path(__file__).parent.parent / "docs" / "ci.md").read_text()
    section = text[text.index("In one pull request:") :]
    block = re.search(r"```sh\n(.*?)\n```", section, re.DOTALL)
    assert block is not None
    return [shlex.split(line, comments=True)[1:] for line in block.group(1).splitlines()]


def test_the_readmes_adoption_in_one_pull_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fixes applied, what is left baselined, and from then on only new problems reported."""
    old = app("llama").replace("apiVersion: autoscaling/v2\n", "apiVersion: autoscaling/v2beta2\n")
    repo = make_repo(tmp_path, {"deploy/llama.yaml": old})
    monkeypatch.chdir(repo)
    codes = []
    for args in _readme_adoption_commands():
        codes.append(main(["lint", "--no-config", *args[1:]] if args[0] == "lint" else args))
    capsys.readouterr()
    assert codes[0] == 1  # --diff: there was something to fix
    text = (repo / "deploy/llama.yaml").read_text()
    assert "autoscaling/v2\n" in text and "behavior:" in text  # GL109, GL102 fixed
    assert main(["lint", "--no-config", "--format", "json", "."]) == 1
    left = {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert left == {"GL101"}  # scaling a GPU workload on CPU needs a person's judgment
    assert main(["lint", "--no-config", "--baseline", ".gpulint-baseline.json", "."]) == 0
    capsys.readouterr()
    (repo / "deploy/mistral.yaml").write_text(app("mistral"))
    assert (
        main(
            ["lint", "--no-config", "--format", "json", "--baseline", ".gpulint-baseline.json", "."]
        )
        == 1
    )
    new = json.loads(capsys.readouterr().out)["findings"]
    assert {f["object"]["name"] for f in new} == {"mistral"}


# File names git writes quoted in a diff header (a tab, a newline, a quote, a backslash), with
# a tab after them (a space), or with bytes beyond ASCII; one that looks like an option.
HOSTILE_NAMES = [
    "tab\tü.yaml",
    "€.yaml",
    "new\nline.yaml",
    'quote".yaml',
    "back\\slash.yaml",
    "-leading-dash.yaml",
    "--output=x.yaml",
    "with space.yaml",
    "::error file=x::y.yaml",
]


def two_apps(first: str, second: str, replicas: int = 3) -> str:
    return app(first) + "---\n" + app(second, replicas)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_changed_since_reads_every_file_name_git_can_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """Added, edited (one object of two), renamed with an edit, and not yet committed: each
    file's findings are reported, exactly the changed objects' ones, whatever its name."""
    repo = make_repo(
        tmp_path,
        {"kept.yaml": app("kept"), f"d/{name}": two_apps("a", "b"), "moved.yaml": app("m")},
    )
    git(repo, "checkout", "-q", "-b", "pr")
    write(repo, {f"added/{name}": app("added"), f"d/{name}": two_apps("a", "b", replicas=5)})
    git(repo, "mv", "--", "moved.yaml", f"r{name}")
    write(repo, {f"r{name}": app("m", replicas=6)})
    commit(repo, "pr")
    write(repo, {f"untracked/{name}": app("untracked")})

    code, report = lint_json(repo, monkeypatch, capsys, "--changed-since", "main", ".")
    assert code == 1
    shown = {(f["object"]["name"], f["file"]) for f in report["findings"]}
    assert shown == {
        ("added", f"added/{name}"),
        ("b", f"d/{name}"),  # the edited HPA's document; "a" in the same file is untouched
        ("m", f"r{name}"),
        ("untracked", f"untracked/{name}"),
    }
    assert len(report["findings"]) == 8  # GL101 and GL102 for each
    # kept.yaml and app "a": 4 findings left out, said in a note.
    assert any(n.startswith("4 findings outside the changes") for n in report["summary"]["notes"])


def test_changed_since_reads_names_that_collide_with_a_headers_tab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """git ends the header of ``a b.yaml`` with a tab: that is not the file ``a b.yaml<TAB>``
    (linted when named, though a directory walk passes it by for its suffix)."""
    repo = make_repo(tmp_path, {"a b.yaml": two_apps("x", "y"), "a b.yaml\t": two_apps("p", "q")})
    write(repo, {"a b.yaml": two_apps("x", "y", replicas=4)})
    write(repo, {"a b.yaml\t": app("p", replicas=4) + "---\n" + app("q")})
    code, report = lint_json(
        repo, monkeypatch, capsys, "--changed-since", "HEAD", "a b.yaml", "a b.yaml\t"
    )
    assert code == 1
    assert {f["object"]["name"] for f in report["findings"]} == {"y", "p"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tab\tü.yaml", "€.yaml"])
def test_changed_since_under_the_c_locale(tmp_path: Path, name: str) -> None:
    """A CI runner's locale may be C (ASCII): git's output is read as bytes, named as the
    file system names files."""
    import os
    import sys

    repo = make_repo(tmp_path, {"base.yaml": "a: 1\n"})
    git(repo, "checkout", "-q", "-b", "pr")
    write(repo, {name: app("x")})
    commit(repo, "pr")
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    env["PYTHONPATH"] = str(Path(__file__).parent.parent)
    done = subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "--format", "json", "--changed-since", "main"],
        cwd=repo,
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert {f["rule"] for f in report["findings"]} == {"GL101", "GL102"}
    assert os.fsencode(name) == report["findings"][0]["file"].encode("utf-8", "surrogateescape")


# --- --new-since: what a change brings --------------------------------------------------------

_KNATIVE = (
    Path(__file__).parent / "fixtures" / "units" / "tutorial-mistakes" / "knative" / "whisper"
)
# An annotation of the revision's autoscaler on the Service's own metadata: GL202, new.
_MISPLACED = """\
metadata:
  name: whisper
  annotations:
    autoscaling.knative.dev/max-scale: "4"
"""


def test_new_since_leaves_out_what_the_files_already_had_and_reports_what_they_bring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An image bump of a Knative Service whose revision an HPA of the user's scales: the
    findings (GL201 on the HPA, GL204 on the Service) were there at HEAD, and the bump does
    not answer for them, as the admission webhook does not refuse such an UPDATE. A change
    that brings a finding is reported whatever else was there."""
    service = (_KNATIVE / "service.yaml").read_text()
    repo = make_repo(
        tmp_path, {"service.yaml": service, "hpa.yaml": (_KNATIVE / "hpa.yaml").read_text()}
    )
    write(repo, {"service.yaml": service.replace("1.4.0", "1.5.0")})
    git(repo, "add", "-A")
    code, report = lint_json(repo, monkeypatch, capsys, "--report-only", "service.yaml")
    assert code == 1 and {f["rule"] for f in report["findings"]} == {
        "GL102",
        "GL105",
        "GL201",
        "GL204",
    }
    code, report = lint_json(
        repo, monkeypatch, capsys, "--report-only", "--new-since", "HEAD", "service.yaml"
    )
    assert (code, report["findings"]) == (0, [])
    (note,) = [n for n in report["summary"]["notes"] if "already had" in n]
    head = git(repo, "rev-parse", "HEAD").strip()
    assert note.startswith(f"4 findings the input already had at HEAD ({head[:12]}) not")
    # The staged file alone (gpulint-changed-files): its GL204 was there too.
    code, report = lint_json(repo, monkeypatch, capsys, "--new-since", "HEAD", "service.yaml")
    assert (code, report["findings"]) == (0, [])

    # Moved down by a comment and given a misplaced annotation: only the new one counts.
    write(
        repo,
        {
            "service.yaml": "# whisper\n"
            + service.replace("metadata:\n  name: whisper\n", _MISPLACED)
        },
    )
    code, report = lint_json(
        repo, monkeypatch, capsys, "--report-only", "--new-since", "HEAD", "service.yaml"
    )
    assert code == 1 and reported(report) == [("GL202", "whisper", "service.yaml")]


def test_new_since_head_before_the_first_commit_reports_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write(repo, {"apps/triton.yaml": app("triton")})
    git(repo, "add", "-A")
    code, report = lint_json(repo, monkeypatch, capsys, "--new-since", "HEAD", "apps/triton.yaml")
    assert code == 1 and sorted(f["rule"] for f in report["findings"]) == ["GL101", "GL102"]


def test_new_since_a_file_new_at_the_change_had_no_findings_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, {"apps/bert.yaml": app("bert")})
    write(repo, {"apps/triton.yaml": app("triton")})
    git(repo, "add", "-A")
    code, report = lint_json(
        repo, monkeypatch, capsys, "--report-only", "--new-since", "HEAD", "apps/triton.yaml"
    )
    assert code == 1 and {name for _, name, _ in reported(report)} == {"triton"}


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--new-since", "no-such-branch", "."], "--new-since no-such-branch: no commit"),
        (["--new-since", "HEAD", "--prometheus", "http://127.0.0.1:9", "."], "drop --prometheus"),
        (["--new-since", "HEAD", "-"], "not a cluster or stdin"),
    ],
)
def test_new_since_that_cannot_be_judged_is_a_usage_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    options: list[str],
    said: str,
) -> None:
    repo = make_repo(tmp_path, {"apps/triton.yaml": app("triton")})
    monkeypatch.chdir(repo)
    assert main(["lint", *options]) == 2
    assert said in capsys.readouterr().err


def test_new_since_a_revision_git_does_not_know_is_an_error_even_with_nothing_to_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, {"README.md": "nothing to lint\n", "a.yaml": "kind: x\n"})
    monkeypatch.chdir(repo)
    assert main(["lint", "--new-since", "HEAD~5", "."]) == 2
    assert "--new-since HEAD~5: no commit 'HEAD~5'" in capsys.readouterr().err
