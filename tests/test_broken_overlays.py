"""An overlay that does not build does not hide its base: the bases that build alone are
judged as units of their own at their real lines (a note on the overlay's GL704 says so); a
base that does not build is the one GL704, naming the overlays; a kustomization.yaml's own
YAML errors are reported. Built by the real kustomize."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpulint.input.units import RenderOptions

from .conftest import FIXTURES, lint_result

GPU_CPU_HPA = (FIXTURES / "GL101" / "fail_cpu_only.yaml").read_text()


@pytest.fixture
def tools(
    kustomize: list[str], helm: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> RenderOptions:
    monkeypatch.chdir(tmp_path)
    return RenderOptions(" ".join(kustomize), helm[0])


def layout(tmp_path: Path, overlays: dict[str, str], base: str = "resources: [app.yaml]\n") -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "kustomization.yaml").write_text(base)
    (tmp_path / "base" / "app.yaml").write_text(GPU_CPU_HPA)
    for name, text in overlays.items():
        (tmp_path / "overlays" / name).mkdir(parents=True)
        (tmp_path / "overlays" / name / "kustomization.yaml").write_text(text)


def rows(result: object, root: Path) -> set[tuple[str, str, int]]:
    return {
        (f.rule, os.path.relpath(f.location.file, root), f.location.line)
        for f in result.findings  # type: ignore[attr-defined]
    }


@pytest.mark.parametrize(
    "overlay",
    [
        # A missing addon directory.
        "resources: [../../base, ../../addons/monitoring]\n",
        # A merge into a ConfigMap the base does not have: a real kustomize error.
        "resources: [../../base]\nconfigMapGenerator:\n- name: model\n  behavior: merge\n"
        "  literals: [size=70b]\n",
    ],
)
def test_the_base_of_a_broken_overlay_is_judged(
    tools: RenderOptions, tmp_path: Path, overlay: str
) -> None:
    layout(tmp_path, {"prod": overlay})
    result = lint_result(tmp_path / "overlays", options=tools)
    found = rows(result, tmp_path)
    assert ("GL101", "base/app.yaml", 35) in found  # at the base's line
    (failed,) = [f for f in result.findings if f.rule == "GL704"]
    assert failed.location.file.endswith("overlays/prod/kustomization.yaml")
    assert failed.location.note and "base" in failed.location.note
    assert "judged as a unit of its own" in failed.location.note
    assert "base" in [u.name for u in result.units]


def test_a_base_judged_through_an_overlay_that_builds_is_not_judged_twice(
    tools: RenderOptions, tmp_path: Path
) -> None:
    layout(
        tmp_path,
        {"prod": "resources: [../../base, ../../gone]\n", "dev": "resources: [../../base]\n"},
    )
    result = lint_result(tmp_path / "overlays", options=tools)
    assert "base" not in [u.name for u in result.units]
    (gpu,) = [f for f in result.findings if f.rule == "GL101"]
    assert gpu.location.file.endswith("base/app.yaml")


def test_a_base_that_fails_is_one_finding_naming_its_overlays(
    tools: RenderOptions, tmp_path: Path
) -> None:
    layout(
        tmp_path,
        {"prod": "resources: [../../base]\n", "dev": "resources: [../../base]\n"},
        base="resources: [app.yaml]\npatches:\n- patch: |\n    apiVersion: apps/v1\n"
        "    kind: Deployment\n    metadata: {name: missing}\n",
    )
    result = lint_result(tmp_path / "overlays", options=tools)
    (failed,) = [f for f in result.findings if f.rule == "GL704"]
    assert failed.location.file.endswith("base/kustomization.yaml")
    assert "Kustomization base does not build" in failed.message
    assert sorted(u.rsplit("/", 1)[-1] for u in failed.units) == ["dev", "prod"]


def test_a_duplicate_key_in_a_kustomization_is_reported(
    tools: RenderOptions, tmp_path: Path
) -> None:
    layout(tmp_path, {"prod": "namespace: ml\nresources: [../../base]\nnamespace: serving\n"})
    result = lint_result(tmp_path / "overlays", options=tools)
    assert ("GL701", "overlays/prod/kustomization.yaml", 3) in rows(result, tmp_path)


def test_a_syntax_error_in_a_kustomization_is_reported(
    tools: RenderOptions, tmp_path: Path
) -> None:
    layout(tmp_path, {"prod": "resources: [../../base]\nnamespace: [ml\n"})
    result = lint_result(tmp_path / "overlays", options=tools)
    assert [f for f in result.findings if f.rule == "GL702"]
    assert all(
        f.location.file.endswith("overlays/prod/kustomization.yaml")
        for f in result.findings
        if f.rule == "GL702"
    )


def test_a_component_that_fails_alone_is_not_taken_for_the_cause(
    tools: RenderOptions, tmp_path: Path
) -> None:
    """A component patches what it is included with; alone it fails, and the overlay's own
    failure (a missing addon) stays where it is, the base judged."""
    layout(
        tmp_path,
        {
            "prod": "resources: [../../base, ../../addons/gone]\n"
            "components: [../../components/gpu]\n"
        },
    )
    component = tmp_path / "components" / "gpu"
    component.mkdir(parents=True)
    (component / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n"
        "- patch: |\n    apiVersion: apps/v1\n    kind: Deployment\n"
        "    metadata: {name: triton}\n    spec: {replicas: 2}\n"
    )
    result = lint_result(tmp_path / "overlays", options=tools)
    (failed,) = [f for f in result.findings if f.rule == "GL704"]
    assert failed.location.file.endswith("overlays/prod/kustomization.yaml")
    assert ("GL101", "base/app.yaml", 35) in rows(result, tmp_path)


def test_an_overlay_keeps_its_own_cause_beside_its_base_s(
    tools: RenderOptions, tmp_path: Path
) -> None:
    layout(
        tmp_path,
        {"prod": "resources: [../../base, gone.yaml]\n"},
        base="resources: [app.yaml, missing.yaml]\n",
    )
    result = lint_result(tmp_path / "overlays", options=tools)
    failed = sorted(
        (os.path.relpath(f.location.file, tmp_path), f.message)
        for f in result.findings
        if f.rule == "GL704"
    )
    assert [file for file, _ in failed] == [
        "base/kustomization.yaml",
        "overlays/prod/kustomization.yaml",
    ]
    assert "Kustomize refuses to build base" in failed[0][1]
    assert "gone.yaml" in failed[1][1]


def test_kubectl_s_error_is_its_text_without_klog_s_quoting_or_brackets() -> None:
    """kubectl logs the error as a Go string literal, or, when it spans lines, between
    ``err=<`` and `` >`` (k8s.io/klog/v2): the message is the error's text, ending as the
    error ends, not in an escaped quote (``value\\.``) or the closing bracket (`` >.``)."""
    from gpulint.input.units.tools import _trim

    quoted = (
        'E1207 20:52:48.795649   12847 run.go:72] "command failed" err="accumulating '
        'resources: required value \\"missing value\\"\\n\\tfrom \\\\tmp\\\\x\\u00e9\\""'
    )
    assert _trim(quoted) == 'accumulating resources: required value "missing value" from \\tmp\\xé"'
    bracketed = (
        'E1207 20:53:03.007366   13303 run.go:72] "command failed" err=<\n'
        "\tError: execution error at (c/templates/cm.yaml:4:11): missing value\n\t\n"
        "\tUse --debug flag to render out invalid YAML\n >\n"
    )
    assert _trim(bracketed) == (
        "Error: execution error at (c/templates/cm.yaml:4:11): missing value Use --debug flag "
        "to render out invalid YAML"
    )


def test_a_chart_a_kustomization_inflates_that_fails_ends_its_message_with_helm_s_words(
    tools: RenderOptions, tmp_path: Path
) -> None:
    chart = tmp_path / "app" / "charts" / "c"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("replicas: 1\n")
    (chart / "templates" / "cm.yaml").write_text(
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ required "missing value" '
        ".Values.name }}\n"
    )
    (tmp_path / "app" / "kustomization.yaml").write_text(
        "helmCharts:\n- name: c\n  releaseName: r\n"
    )
    result = lint_result(tmp_path / "app", options=tools)
    failures = [f for f in result.findings if f.rule == "GL704"]
    built = [f for f in failures if "does not build" in f.message]
    assert len(built) == 1, failures
    failed = built[0]
    assert "): missing value" in failed.message, failed.message
    assert not failed.message.endswith((" >.", "\\."))
    assert "\\n" not in failed.message and '\\"' not in failed.message
