"""Fixes as edits: every fixture's fix applied and the result linted again.

For every fixture (failing and passing, of every rule), each finding of any rule whose plan can
be placed, safe or unsafe, is applied alone to a copy of the fixture; then the copy must parse,
keep every comment line, be byte-identical outside the edits, and lint without that finding and
without any finding that was not there before.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpulint.adoption.edits import Edit, apply
from gpulint.cli import main
from gpulint.core.model import Finding
from gpulint.engine.registry import all_rules

from .conftest import lint_result
from .test_reporters import sarif_schema  # noqa: F401 - the fixture, shared
from .test_rule_fixtures import _cases, _needs_tools, _settings

FIXTURES_GL103 = Path(__file__).parent / "fixtures" / "GL103"
FIXABLE = {spec.id: spec for spec in all_rules() if spec.fixes}


def _fix_cases() -> list[tuple[str, Path]]:
    return [(rule, path) for rule, path in _cases("fail_") if rule in FIXABLE]


def _every_fixture() -> list[tuple[str, Path]]:
    return _cases("fail_") + _cases("pass_")


def _key(finding: Finding, root: Path) -> tuple[str, str, str]:
    """A finding's identity that survives an edit elsewhere in its file (not its line)."""
    ref = finding.object
    name = f"{ref.kind}/{ref.namespace}/{ref.name}" if ref else ""
    return (finding.rule, name, str(Path(finding.location.file).resolve().relative_to(root)))


def _copy(path: Path, tmp_path: Path) -> Path:
    target = tmp_path / path.name
    if path.is_dir():
        shutil.copytree(path, target)
    else:
        shutil.copy(path, target)
    return target


def _comment_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.lstrip().startswith("#")]


def _rebuilt(text: str, edits: list[Edit]) -> str:
    """``text`` with the edits made, computed apart from ``apply``: every byte outside the
    edited spans is taken from the original."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        line, column = position
        return min(starts[min(line, len(starts)) - 1] + column - 1, len(text))

    pieces, cursor = [], 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        start, end = offset(edit.start), offset(edit.end)
        assert cursor <= start <= end, f"overlapping or reversed edits: {edits}"
        pieces += [text[cursor:start], edit.text]
        cursor = end
    return "".join([*pieces, text[cursor:]])


@pytest.mark.parametrize(("rule", "path"), _every_fixture(), ids=lambda v: str(v)[-60:])
def test_each_fix_removes_its_finding_and_adds_none(rule: str, path: Path, tmp_path: Path) -> None:
    """Every offered fix of every fixture, whichever rule offers it and whether safe or unsafe."""
    _needs_tools(path)
    copy = _copy(path, tmp_path)
    root = tmp_path.resolve()
    settings = _settings(copy)
    result = lint_result(copy, settings=settings)
    before = {_key(f, root) for f in result.findings}
    fixable = [f for f in result.findings if result.edits_of(f)]
    for finding in fixable:
        assert finding.plan is not None
        assert finding.plan.applicability in FIXABLE[finding.rule].fixes
        edits = result.edits_of(finding)
        assert edits
        originals = {e.file: Path(e.file).read_text() for e in edits}
        try:
            for file, text in originals.items():
                mine = [e for e in edits if e.file == file]
                fixed = apply(text.splitlines(keepends=True), mine)
                Path(file).write_text(fixed)
                list(yaml.safe_load_all(fixed))  # still YAML
                kept = _comment_lines(text)
                assert set(kept) <= set(_comment_lines(fixed)), f"{file}: a comment was lost"
                assert fixed == _rebuilt(text, mine), file
            after = lint_result(copy, settings=settings).findings
            keys = {_key(f, root) for f in after}
            assert _key(finding, root) not in keys or _count(after, finding, root) < _count(
                result.findings, finding, root
            ), f"{finding.rule} still there after its fix: {finding.message}"
            new = keys - before
            assert not new, f"the fix of {finding.rule} produced {new}"
        finally:
            for file, text in originals.items():
                Path(file).write_text(text)


def _count(findings: list[Finding], finding: Finding, root: Path) -> int:
    return sum(1 for f in findings if _key(f, root) == _key(finding, root))


def test_every_declared_fix_kind_is_exercised_by_a_fixture() -> None:
    seen: dict[str, set[str]] = {rule: set() for rule in FIXABLE}
    for rule, path in _fix_cases():
        if path.is_dir() and any(
            p.name in ("Chart.yaml", "kustomization.yaml") for p in path.rglob("*")
        ):
            continue
        result = lint_result(path, settings=_settings(path))
        for finding in result.findings:
            if finding.rule == rule and finding.plan and result.edits_of(finding):
                seen[rule].add(finding.plan.applicability)
    missing = {rule: set(FIXABLE[rule].fixes) - kinds for rule, kinds in seen.items()}
    assert not {r: k for r, k in missing.items() if k}, missing


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


HPA = """\
# the autoscaler of the vLLM server
apiVersion: autoscaling/v2beta2   # written years ago
kind: HorizontalPodAutoscaler
metadata:
  name: vllm
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target:
        type: Value          # the field below says AverageValue
        averageValue: "70"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.6.3
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_diff_shows_the_fixes_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(HPA)
    done = _cli("lint", "--no-config", "--diff", "app.yaml", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("--- a/app.yaml\n+++ b/app.yaml\n")
    assert "-apiVersion: autoscaling/v2beta2   # written years ago" in done.stdout
    assert "+apiVersion: autoscaling/v2   # written years ago" in done.stdout
    assert "+        type: AverageValue          # the field below says AverageValue" in done.stdout
    assert "+  behavior:" in done.stdout
    assert (tmp_path / "app.yaml").read_text() == HPA


def test_diff_with_nothing_to_change_says_so(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    done = _cli("lint", "--no-config", "--diff", "app.yaml", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == (
        "gpulint: --diff: nothing to change: no safe fix applies (--unsafe-fixes adds the others)\n"
    )
    done = _cli("lint", "--no-config", "--diff", "--unsafe-fixes", "app.yaml", cwd=tmp_path)
    assert done.stderr == "gpulint: --diff: nothing to change: no fix applies\n"


def test_fix_applies_safe_fixes_and_reports_what_is_left(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(HPA)
    done = _cli("lint", "--no-config", "--fix", "--format", "json", "app.yaml", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert {f["rule"] for f in report["findings"]} <= {"GL703"}, report["findings"]
    assert done.returncode == 0
    assert any(
        note.startswith("fixed: 3 fixes applied to 1 file") for note in report["summary"]["notes"]
    )
    text = (tmp_path / "app.yaml").read_text()
    assert text.startswith(
        "# the autoscaler of the vLLM server\napiVersion: autoscaling/v2   # written"
    )
    assert "type: AverageValue          # the field below says AverageValue" in text
    assert "behavior:" in text
    again = _cli("lint", "--no-config", "--diff", "app.yaml", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == ""


@pytest.mark.slow
def test_unsafe_fixes_only_when_asked(tmp_path: Path) -> None:
    text = HPA.replace('averageValue: "70"', 'averageValue: "700m"').replace(
        "type: Value          # the field below says AverageValue", "type: AverageValue"
    )
    (tmp_path / "app.yaml").write_text(text)
    safe = _cli("lint", "--no-config", "--diff", "--select", "GL107", "app.yaml", cwd=tmp_path)
    assert safe.returncode == 0 and safe.stdout == "", safe.stdout
    listed = _cli("lint", "--no-config", "--select", "GL107", "app.yaml", cwd=tmp_path)
    assert "1 more with `--fix --unsafe-fixes`" in listed.stdout
    # With fixes of both kinds, one note says what each option fixes.
    both = " ".join(_cli("lint", "--no-config", "app.yaml", cwd=tmp_path).stdout.split())
    assert both.count("note: fixable:") == 1, both
    assert (
        "note: fixable: 2 findings have fixes that `gpulint lint --fix` applies, 1 more with "
        "`--fix --unsafe-fixes` (they change what the cluster does: review them); `--diff` "
        "shows them first"
    ) in both
    unsafe = _cli(
        "lint",
        "--no-config",
        "--diff",
        "--unsafe-fixes",
        "--select",
        "GL107",
        "app.yaml",
        cwd=tmp_path,
    )
    assert unsafe.returncode == 1
    assert '+        averageValue: "70"' in unsafe.stdout


def test_fix_refuses_stdin_and_cluster(tmp_path: Path) -> None:
    done = _cli("lint", "--fix", "-", cwd=tmp_path)
    assert done.returncode == 2 and "stdin has none" in done.stderr
    both = _cli("lint", "--fix", "--diff", ".", cwd=tmp_path)
    assert both.returncode == 2


def test_fix_never_writes_through_a_symlink_or_outside_the_input(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(HPA)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "link.yaml").symlink_to(outside)
    done = _cli("lint", "--no-config", "--fix", ".", cwd=repo)
    assert outside.read_text() == HPA
    assert "not fixed" in done.stderr or "symbolic link" in done.stdout + done.stderr


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_fix_keeps_the_files_line_endings(tmp_path: Path, ending: str) -> None:
    """Every line a fix writes ends as the file's lines do, the last one included: a file of
    bare carriage returns gets no LF, a Windows file no bare LF."""
    path = tmp_path / "app.yaml"
    path.write_bytes(HPA.replace("\n", ending).encode())
    _cli("lint", "--no-config", "--fix", "app.yaml", cwd=tmp_path)
    data = path.read_bytes().decode()
    assert "autoscaling/v2 " in data and "behavior:" in data
    assert data.endswith(ending)
    # Every line break of the file is the file's own.
    assert set(re.findall(r"\r\n|\r|\n", data)) == {ending}
    hpa = next(d for d in yaml.safe_load_all(data) if d and d["kind"].endswith("Autoscaler"))
    assert hpa["spec"]["behavior"]["scaleDown"]["policies"]


@pytest.mark.slow
def test_json_and_sarif_carry_the_edits(tmp_path: Path, sarif_schema: dict[str, object]) -> None:  # noqa: F811
    (tmp_path / "app.yaml").write_text(HPA)
    report = json.loads(_cli("lint", "--no-config", "-f", "json", "app.yaml", cwd=tmp_path).stdout)
    gl109 = next(f for f in report["findings"] if f["rule"] == "GL109")
    assert gl109["fixApplicability"] == "safe"
    assert gl109["edits"] == [
        {
            "file": "app.yaml",
            "start": {"line": 2, "column": 13},
            "end": {"line": 2, "column": 32},
            "text": "autoscaling/v2",
        }
    ]
    log = json.loads(_cli("lint", "--no-config", "-f", "sarif", "app.yaml", cwd=tmp_path).stdout)
    jsonschema.Draft7Validator(sarif_schema).validate(log)
    results = log["runs"][0]["results"]
    fixed = next(r for r in results if r["ruleId"] == "GL109")
    (change,) = fixed["fixes"][0]["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "app.yaml"
    assert change["replacements"] == [
        {
            "deletedRegion": {"startLine": 2, "startColumn": 13, "endLine": 2, "endColumn": 32},
            "insertedContent": {"text": "autoscaling/v2"},
        }
    ]


@pytest.mark.slow
def test_sarif_fixes_of_every_fixture_validate(sarif_schema: dict[str, object]) -> None:  # noqa: F811
    from gpulint.report.sarif import sarif_log

    with_fixes = 0
    for _rule, path in _fix_cases():
        if path.is_dir():
            continue
        log = sarif_log(lint_result(path, settings=_settings(path)))
        jsonschema.Draft7Validator(sarif_schema).validate(log)
        results = log["runs"][0]["results"]  # type: ignore[index]
        with_fixes += any("fixes" in result for result in results)
    # Fails rather than passes when no fixture (or no fix in one) was checked at all.
    assert with_fixes >= len(FIXABLE), f"only {with_fixes} fixtures had SARIF fixes to validate"


def test_rules_json_says_which_rules_are_fixable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--json"]) == 0
    listed = {entry["id"]: entry for entry in json.loads(capsys.readouterr().out)}
    assert listed["GL109"]["fixable"] is True and listed["GL109"]["fixKinds"] == ["safe"]
    assert listed["GL101"]["fixable"] is False
    assert all(set(e["fixKinds"]) <= {"safe", "unsafe"} for e in listed.values())


def _scalars(text: str) -> set[str]:
    """The scalar values an edit writes (its keys and values), as text."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return {text.strip()} if text.strip() else set()
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                found.add(str(key))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, bool):
            found.add("true" if node else "false")  # as YAML writes it, not Python
        elif node is not None:
            found.add(str(node))

    walk(loaded)
    return found


@pytest.mark.parametrize(("rule", "path"), _fix_cases(), ids=lambda v: str(v)[-60:])
def test_the_written_fix_says_what_the_edits_do(rule: str, path: Path) -> None:
    """The fix shown in the report and the edits --fix makes agree: every key and value an
    edit writes appears in the finding's written fix."""
    _needs_tools(path)
    result = lint_result(path, settings=_settings(path))
    for finding in result.findings:
        edits = result.edits_of(finding) if finding.rule == rule else None
        for edit in edits or ():
            missing = {s for s in _scalars(edit.text) if s not in finding.fix}
            assert not missing, f"{finding.rule}: {missing} written but not in: {finding.fix}"


@pytest.mark.slow
def test_the_diff_applies_with_git_and_is_what_fix_writes(tmp_path: Path) -> None:
    for name in ("shown", "fixed"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "app.yaml").write_text(HPA)
    shown = tmp_path / "shown"
    subprocess.run(["git", "init", "-q"], cwd=shown, check=True)
    diff = _cli("lint", "--no-config", "--diff", ".", cwd=shown).stdout
    assert diff.startswith("--- a/app.yaml\n")
    subprocess.run(["git", "apply", "-"], cwd=shown, input=diff, text=True, check=True)
    _cli("lint", "--no-config", "--fix", ".", cwd=tmp_path / "fixed")
    assert (shown / "app.yaml").read_text() == (tmp_path / "fixed" / "app.yaml").read_text()


def _allowed_pods(rules: dict[str, object], replicas: int, seconds: int) -> int:
    """Pods a direction's rules let the HPA add (or remove) in ``seconds`` from ``replicas``,
    by Kubernetes' reading: each policy's limit per period, the largest (Max) or smallest (Min)
    of them."""
    limits = []
    for policy in rules["policies"]:  # type: ignore[attr-defined]
        periods = max(1, seconds // policy["periodSeconds"])
        step = policy["value"] if policy["type"] == "Pods" else replicas * policy["value"] // 100
        limits.append(step * periods)
    return min(limits) if rules.get("selectPolicy") == "Min" else max(limits)


def test_the_merged_hpa_is_as_cautious_as_each_of_the_merged(tmp_path: Path) -> None:
    """GL103's merge keeps, per direction, the longest window and a rate no faster than any
    merged HPA's: 2 pods per 60 s stays 2 per 60 s next to an HPA on Kubernetes' defaults."""
    path = _copy(FIXTURES_GL103 / "fail_two_hpas_each_with_behavior.yaml", tmp_path)
    result = lint_result(path)
    finding = next(f for f in result.findings if f.rule == "GL103")
    edits = result.edits_of(finding)
    assert edits
    path.write_text(apply(path.read_text().splitlines(keepends=True), edits))
    (hpa,) = [d for d in yaml.safe_load_all(path.read_text()) if d["kind"].endswith("Autoscaler")]
    up, down = hpa["spec"]["behavior"]["scaleUp"], hpa["spec"]["behavior"]["scaleDown"]
    assert up["stabilizationWindowSeconds"] == 15
    assert down["stabilizationWindowSeconds"] == 600
    for replicas in (1, 4, 10):
        assert _allowed_pods(up, replicas, 60) == 2
        assert _allowed_pods(down, replicas, 120) == 1


TWO_FILES = {
    "gpu.yaml": """\
# the GPU autoscaler
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: vllm-gpu}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "70"}   # per GPU
""",
    "queue.yaml": """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: vllm-queue}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: "vllm:num_requests_waiting"}
      target: {type: AverageValue, averageValue: "5"}
""",
    # The workload both scale: GL103 judges only workloads in the input.
    "vllm.yaml": """apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers: [{name: vllm, image: vllm/vllm-openai, resources: {limits: {nvidia.com/gpu: 1}}}]
""",
}


@pytest.mark.slow
def test_a_file_whose_every_document_is_merged_away_is_deleted(tmp_path: Path) -> None:
    """GL103 merges two HPAs kept in two files: the emptied file is removed by --fix and shown
    as deleted by --diff (a patch git applies), not left as an empty file."""
    for tree in ("shown", "fixed"):
        (tmp_path / tree).mkdir()
        for name, text in TWO_FILES.items():
            (tmp_path / tree / name).write_text(text)
    shown = tmp_path / "shown"
    subprocess.run(["git", "init", "-q"], cwd=shown, check=True)
    args = ("lint", "--no-config", "--select", "GL103", "--unsafe-fixes")
    diff = _cli(*args, "--diff", ".", cwd=shown).stdout
    assert "--- a/queue.yaml\n+++ /dev/null\n" in diff, diff
    subprocess.run(["git", "apply", "-"], cwd=shown, input=diff, text=True, check=True)
    done = _cli(*args, "--fix", ".", cwd=tmp_path / "fixed")
    assert "deleted queue.yaml" in done.stdout, done.stdout
    fixed = tmp_path / "fixed"
    assert sorted(p.name for p in fixed.iterdir()) == ["gpu.yaml", "vllm.yaml"]
    assert not (shown / "queue.yaml").exists()
    assert (shown / "gpu.yaml").read_text() == (fixed / "gpu.yaml").read_text()
    assert "vllm:num_requests_waiting" in (fixed / "gpu.yaml").read_text()
    assert (fixed / "gpu.yaml").read_text().startswith("# the GPU autoscaler\n")
    # the kept HPA's own metrics stay as written; the other's follow them
    assert 'averageValue: "70"}   # per GPU\n  - type: Pods\n' in (fixed / "gpu.yaml").read_text()


def test_no_fix_is_planned_for_an_object_another_fix_deletes() -> None:
    """GL102's behavior block for an HPA that GL201 and GL105 say to delete is left out: not
    printed, not among --fix's edits; its message says which fix deletes the HPA."""
    from gpulint.adoption.edits import plan_edits

    path = Path(__file__).parent / "fixtures" / "GL102" / "fail_hpa_another_fix_deletes.yaml"
    result = lint_result(path)
    (behavior,) = [f for f in result.findings if f.rule == "GL102"]
    assert behavior.plan is None and result.edits_of(behavior) is None
    assert behavior.fix.startswith("the fix of GL204 on Knative Service ml/llm, printed there")
    assert behavior.message.endswith(
        "Its own fix is left out: the fix of GL204 on Knative Service ml/llm deletes it."
    )
    applied = plan_edits(result.findings, result.sources, unsafe_too=True)
    assert behavior not in applied.fixed


def test_one_fix_per_cause_is_printed_once() -> None:
    """The members of a GL103 group share one fix: the first prints it, the other points at
    it and carries no edits of its own (--fix applies the group's once)."""
    path = FIXTURES_GL103 / "fail_two_hpas.yaml"
    result = lint_result(path)
    first, second = [f for f in result.findings if f.rule == "GL103"]
    assert first.fix.startswith("# keep HorizontalPodAutoscaler")
    assert second.fix.startswith(f"the fix of GL103 on {first.object}, printed there (")
    assert second.plan is None and first.plan is not None


def test_fixes_that_delete_are_weighed_first_and_a_cycle_keeps_one() -> None:
    """Two fixes each deleting what the other changes: the first that deletes stands, the
    other gives way; a fix that only changes a deleted object gives way too."""
    from gpulint.core.model import Location, ObjectRef, Severity
    from gpulint.engine.fixes import settle

    hpa = ObjectRef("autoscaling/v2", "HorizontalPodAutoscaler", "ml", "a")
    scaled = ObjectRef("keda.sh/v1alpha1", "ScaledObject", "ml", "a")

    def finding(rule: str, line: int, fix: str, **what: tuple[ObjectRef, ...]) -> Finding:
        location = Location("x.yaml", line, 1)
        return Finding(rule, rule, Severity.ERROR, "M.", location, fix, hpa, **what)

    tune = finding("GL102", 1, "behavior: {}", writes=(hpa,))
    merge = finding("GL103", 2, "merge", deletes=(hpa,), writes=(scaled,))
    drop = finding("GL201", 3, "drop", deletes=(scaled,), writes=(hpa,))
    settled = settle([tune, merge, drop])
    assert settled[1] == merge  # deletes, and came first
    assert settled[0].fix.startswith("the fix of GL103 on ") and settled[0].plan is None
    assert "the fix of GL103 on HorizontalPodAutoscaler ml/a deletes it." in settled[0].message
    assert settled[2].fix.startswith("the fix of GL103 on ") and settled[2].plan is None
    # It writes the HPA the merge deletes (and deletes the ScaledObject the merge changes).
    assert settled[2].message.endswith("deletes it.")
    only_deletes = finding("GL201", 3, "drop", deletes=(scaled,))
    (kept, gave_way) = settle([merge, only_deletes])
    assert kept == merge and "changes ScaledObject ml/a." in gave_way.message
    alone = [finding("GL102", 1, "behavior: {}", writes=(hpa,))]
    assert settle(alone) == alone
