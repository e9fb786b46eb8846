"""Lint units: what each cluster gets, from every shape a repository takes.

The fixture tests/fixtures/units/gitops is a small GitOps repository: a kustomize base with
three overlays (dev on CPU; staging and prod add GPUs through a component; prod also has a
strategic-merge patch file, an inline JSON6902 patch, ``namespace:`` and ``namePrefix:``), a
Knative base and an overlay whose JSON6902 patch puts autoscaling annotations on the
Service's own metadata, a Helm chart, two clusters of plain files each holding its own copy
of one Deployment and HPA (with the adapter installed by a Flux HelmRelease in one and an
Argo CD Application in the other), and an overlay that does not build. Every finding is
checked for its rule, file, line, column and the units it names, rendered by the real
kustomize and helm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.files import build_units, lint_units, plan_units
from gpulint.engine.registry import Selection
from gpulint.engine.result import Result
from gpulint.input.units import RenderOptions

from .conftest import FIXTURES, ROOT, lint_result

GITOPS = FIXTURES / "units" / "gitops"
PREFIX = "tests/fixtures/units/gitops/"


def _rows(result: Result) -> set[tuple[str, str, int, int, tuple[str, ...]]]:
    return {
        (
            f.rule,
            os.path.relpath(f.location.file, GITOPS),
            f.location.line,
            f.location.column,
            tuple(u.removeprefix(PREFIX) for u in f.units),
        )
        for f in result.findings
    }


@pytest.fixture
def tools(kustomize: list[str], helm: list[str]) -> RenderOptions:
    """Render with the tools the test environment has (tests/tools.py finds them)."""
    return RenderOptions(" ".join(kustomize), helm[0])


@pytest.fixture(autouse=True)
def _repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


EXPECTED = {
    # The base's CPU HPA is wrong only where a component adds GPUs: once per overlay (their
    # names differ), at the base's line, naming the overlay.
    ("GL101", "base/vllm/hpa.yaml", 10, 7, ("overlays/prod",)),
    ("GL101", "base/vllm/hpa.yaml", 10, 7, ("overlays/staging",)),
    # prod's inline JSON6902 op sets minReplicas 0: reported at the op's value.
    ("GL108", "overlays/prod/kustomization.yaml", 11, 9, ()),
    # The JSON6902 op adds a Knative autoscaling annotation to the Service's own metadata.
    ("GL202", "overlays/knative-prod/kustomization.yaml", 9, 11, ()),
    ("GL204", "base/knative/service.yaml", 9, 9, ()),
    # The chart, rendered by helm template, reported in its template.
    ("GL101", "charts/triton/templates/hpa.yaml", 13, 7, ()),
    ("GL102", "charts/triton/templates/hpa.yaml", 5, 1, ()),
    # eu's adapter (an Argo CD Application's values string) exposes another name; us's
    # (a Flux HelmRelease's values) serves the HPA. No GL103 across the two clusters.
    ("GL401", "clusters/eu/vllm.yaml", 31, 18, ()),
    # An overlay that names a file that does not exist.
    ("GL704", "broken/kustomization.yaml", 3, 5, ()),
}


@pytest.mark.slow
def test_a_gitops_repository_is_judged_cluster_by_cluster(tools: RenderOptions) -> None:
    result = lint_result(GITOPS, options=tools)
    assert _rows(result) == EXPECTED
    units = {(u.name.removeprefix(PREFIX), u.kind, u.objects) for u in result.units}
    assert units == {
        ("broken", "kustomize", 0),
        ("overlays/dev", "kustomize", 2),
        ("overlays/staging", "kustomize", 2),
        ("overlays/prod", "kustomize", 2),
        ("overlays/knative-prod", "kustomize", 1),
        ("charts/triton", "helm", 2),
        ("clusters/us", "files", 3),
        ("clusters/eu", "files", 3),
    }
    # kustomize's build annotations never reach the rules (or the object count).
    assert all("config.kubernetes.io" not in f.message for f in result.findings)


def test_a_finding_of_a_shared_base_in_every_overlay_is_reported_once(
    tools: RenderOptions, tmp_path: Path
) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "kustomization.yaml").write_text("resources: [hpa.yaml]\n")
    (base / "hpa.yaml").write_text(
        "apiVersion: autoscaling/v2beta2\n"
        "kind: HorizontalPodAutoscaler\n"
        "metadata: {name: web}\n"
        "spec:\n"
        "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
        "  maxReplicas: 3\n"
    )
    for name in ("a", "b"):
        overlay = tmp_path / "overlays" / name
        overlay.mkdir(parents=True)
        (overlay / "kustomization.yaml").write_text("resources: [../../base]\n")
    findings = [f for f in lint_result(tmp_path, options=tools).findings if f.rule == "GL109"]
    (finding,) = findings
    assert finding.location.file.endswith("base/hpa.yaml") and finding.location.line == 1
    assert [Path(u).name for u in finding.units] == ["a", "b"]


@pytest.mark.slow
def test_piped_build_output_is_reported_at_the_same_source_lines(
    tools: RenderOptions, kustomize: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kustomize build DIR | gpulint lint --stdin-filename DIR -` finds what `gpulint lint DIR`
    finds, at the same lines (kustomize writes no origins without buildMetadata; gpulint looks
    the objects up in DIR's resources)."""
    overlay = GITOPS / "overlays" / "prod"
    direct = {
        (f.rule, f.location.file, f.location.line)
        for f in lint_result(overlay, options=tools).findings
    }
    rendered = subprocess.run([*kustomize, str(overlay)], capture_output=True, check=True).stdout
    command = [
        sys.executable,
        "-m",
        "gpulint",
        "lint",
        "-f",
        "json",
        "--stdin-filename",
        str(overlay),
        "-",
    ]
    out = subprocess.run(command, input=rendered, capture_output=True, cwd=ROOT)
    piped = {
        (f["rule"], str(ROOT / f["file"]), f["line"]) for f in json.loads(out.stdout)["findings"]
    }
    assert direct and {(r, os.path.abspath(p), line) for r, p, line in direct} == piped


@pytest.mark.slow
def test_piped_output_with_origin_annotations_needs_no_name(
    kustomize: list[str], tmp_path: Path
) -> None:
    overlay = tmp_path / "app"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources: [hpa.yaml]\nbuildMetadata: [originAnnotations]\n"
    )
    (overlay / "hpa.yaml").write_text(
        "# an old API version\n"
        "apiVersion: autoscaling/v2beta2\n"
        "kind: HorizontalPodAutoscaler\n"
        "metadata: {name: web}\n"
        "spec:\n"
        "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
        "  maxReplicas: 3\n"
    )
    rendered = subprocess.run([*kustomize, "app"], capture_output=True, check=True, cwd=tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "-f", "json", "-"],
        input=rendered.stdout,
        capture_output=True,
        cwd=tmp_path,
    )
    findings = json.loads(out.stdout)["findings"]
    assert [(f["rule"], f["file"], f["line"]) for f in findings] == [("GL109", "app/hpa.yaml", 2)]


@pytest.mark.slow
def test_piped_helm_output_is_reported_in_the_chart(helm: list[str]) -> None:
    rendered = subprocess.run(
        [*helm, "template", str(GITOPS / "charts" / "triton")], capture_output=True, check=True
    ).stdout
    out = subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "-f", "json", "-"],
        input=rendered,
        capture_output=True,
        cwd=GITOPS / "charts",
    )
    rows = {
        (f["rule"], f["file"], f["line"], f.get("renderedFrom"))
        for f in json.loads(out.stdout)["findings"]
    }
    assert rows == {
        # Spelled from the working directory (charts/), as every report spells files.
        ("GL101", "triton/templates/hpa.yaml", 13, "triton/templates/hpa.yaml"),
        ("GL102", "triton/templates/hpa.yaml", 5, "triton/templates/hpa.yaml"),
    }


def test_clusters_do_not_leak_into_each_other() -> None:
    """Each cluster's copy of Deployment vllm-llama and its HPA: two units, no GL103 pair."""
    result = lint_result(GITOPS / "clusters")
    assert {Path(u.name).name for u in result.units} == {"us", "eu"}
    assert [f.rule for f in result.findings] == ["GL401"]


def test_declared_units_group_kustomizations_and_files(tmp_path: Path) -> None:
    """``units:`` makes each cluster directory one unit, whatever it holds."""
    for cluster in ("one", "two"):
        directory = tmp_path / "clusters" / cluster
        directory.mkdir(parents=True)
        (directory / "hpa.yaml").write_text(
            "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\n"
            f"metadata: {{name: web-{cluster}}}\n"
            "spec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
            "  minReplicas: 1\n  maxReplicas: 3\n"
        )
        (directory / "deployment.yaml").write_text(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
            "spec: {template: {spec: {containers: [{name: web, image: web}]}}}\n"
        )
    config = tmp_path / ".gpulint.yaml"
    config.write_text('units: ["clusters/*"]\n')
    settings = Settings(units=["clusters/*"], source=str(config))
    result = lint_result(tmp_path, settings=settings)
    assert sorted(Path(u.name).name for u in result.units) == ["one", "two"]
    # Two HPAs on one Deployment, but in two clusters: no GL103.
    assert "GL103" not in {f.rule for f in result.findings}
    # The whole tree declared one unit: one cluster gets both, one conflict.
    whole = Settings(units=["."], source=str(config))
    merged = lint_result(tmp_path, settings=whole)
    assert len(merged.units) == 1
    assert {f.rule for f in merged.findings} >= {"GL103"}


def test_examples_give_the_same_findings_together_and_one_by_one() -> None:
    together = {(f.rule, f.location) for f in lint_result(ROOT / "examples").findings}
    apart: set[tuple[str, object]] = set()
    for directory in sorted((ROOT / "examples").glob("*/*")):
        if directory.is_dir():
            apart |= {(f.rule, f.location) for f in lint_result(directory).findings}
    assert together == apart


def test_a_helm_chart_without_helm_is_linted_file_by_file(tmp_path: Path) -> None:
    """GL705, and the values are still read (the templates skipped as before)."""
    options = RenderOptions(helm=str(tmp_path / "no-such-helm"))
    result = lint_result(GITOPS / "charts" / "triton", options=options)
    assert [f.rule for f in result.findings] == ["GL705"]
    (finding,) = result.findings
    assert finding.location.file.endswith("charts/triton/Chart.yaml")


def test_a_kustomization_without_kustomize_is_linted_file_by_file(tmp_path: Path) -> None:
    options = RenderOptions(kustomize=str(tmp_path / "no-such-kustomize"))
    result = lint_result(GITOPS / "overlays" / "staging", options=options)
    rules = [f.rule for f in result.findings]
    assert rules.count("GL705") == 1
    (finding,) = [f for f in result.findings if f.rule == "GL705"]
    assert "not built" in finding.message or "cannot run" in finding.message


def test_render_time_and_units_are_in_the_json_report(tools: RenderOptions) -> None:
    from gpulint.report.json import result_to_dict

    data = result_to_dict(lint_result(GITOPS / "overlays", options=tools))
    summary = data["summary"]
    assert summary["renderSeconds"] > 0
    names = {u["name"].removeprefix(PREFIX): u for u in summary["units"]}
    assert names["overlays/prod"]["renderedBy"][0].endswith("overlays/prod")
    assert names["overlays/prod"]["kind"] == "kustomize"
    prod = [f for f in data["findings"] if f["rule"] == "GL108"]
    assert prod[0]["renderedFrom"].endswith("overlays/prod")


@pytest.mark.slow
def test_the_user_tree_is_never_written(tools: RenderOptions) -> None:
    before = {p: p.stat().st_mtime_ns for p in GITOPS.rglob("*")}
    lint_result(GITOPS, options=tools)
    after = {p: p.stat().st_mtime_ns for p in GITOPS.rglob("*")}
    assert before == after


def _units(paths: list[str], settings: Settings | None = None) -> list[str]:
    return [p.kind for p in plan_units(paths, settings or Settings())]


def test_bases_and_components_are_not_units_of_their_own() -> None:
    kinds = {p.name.removeprefix(PREFIX): p.kind for p in plan_units([str(GITOPS)], Settings())}
    assert "base/vllm" not in kinds and "components/gpu" not in kinds
    assert kinds["overlays/prod"] == "kustomize"


def test_a_lone_base_is_a_unit(tools: RenderOptions) -> None:
    result = lint_result(GITOPS / "base" / "vllm", options=tools)
    assert [u.kind for u in result.units] == ["kustomize"]
    assert result.findings == []  # on CPU, the CPU HPA is right


def test_unit_findings_carry_no_unit_names_when_one_unit_reads_the_file(
    tools: RenderOptions,
) -> None:
    result = lint_result(GITOPS / "overlays" / "prod", options=tools)
    assert all(f.units == () for f in result.findings)


def _lint(paths: list[str], settings: Settings, options: RenderOptions) -> list[Finding]:
    return lint_units(
        build_units(plan_units(paths, settings), options), settings, Selection()
    ).findings
