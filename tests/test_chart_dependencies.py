"""Charts as Helm would install them, rendered offline by the real helm: file:// dependencies
vendored into a private copy, absent remote ones left out (a note names the enabled ones),
library charts not rendered, and values a chart `required`s stood in; nothing written to the
repository, nothing left in the temporary directory."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from gpulint.engine.config import Settings
from gpulint.input.units import RenderOptions

from .conftest import FIXTURES, lint_result

GPU_CPU_HPA = (FIXTURES / "GL101" / "fail_cpu_only.yaml").read_text()


@pytest.fixture
def tools(
    kustomize: list[str], helm: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> RenderOptions:
    monkeypatch.chdir(tmp_path)
    # gpulint's temporary directories in one of this test's own, so that what is left in it
    # is gpulint's (other processes on the machine use the shared one).
    private = tmp_path.parent / f"{tmp_path.name}-tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    return RenderOptions(" ".join(kustomize), helm[0])


def chart(directory: Path, name: str, extra: str = "", template: str = GPU_CPU_HPA) -> Path:
    (directory / "templates").mkdir(parents=True)
    (directory / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n{extra}")
    (directory / "values.yaml").write_text("{}\n")
    (directory / "templates" / "app.yaml").write_text(template)
    return directory


def tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def rows(result: object, root: Path) -> set[tuple[str, str, int]]:
    return {
        (f.rule, os.path.relpath(f.location.file, root), f.location.line)
        for f in result.findings  # type: ignore[attr-defined]
    }


def clean_temp(before: set[str]) -> bool:
    left = set(os.listdir(tempfile.gettempdir())) - before
    return not left


def test_an_umbrella_chart_renders_its_file_dependencies(
    tools: RenderOptions, tmp_path: Path
) -> None:
    chart(tmp_path / "subcharts" / "inference", "inference")
    chart(
        tmp_path / "umbrella",
        "umbrella",
        "dependencies:\n"
        "- name: inference\n  version: 0.1.0\n  repository: file://../subcharts/inference\n",
        template="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
    )
    (tmp_path / "umbrella" / "Chart.lock").write_text("dependencies: []\ndigest: x\n")
    before, temporary = tree(tmp_path), set(os.listdir(tempfile.gettempdir()))
    result = lint_result(tmp_path / "umbrella", options=tools)
    # The subchart's finding is at its own template's line.
    assert ("GL101", "subcharts/inference/templates/app.yaml", 35) in rows(result, tmp_path)
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    assert tree(tmp_path) == before and clean_temp(temporary)


def test_a_disabled_remote_dependency_is_left_out_silently(
    tools: RenderOptions, tmp_path: Path
) -> None:
    home = chart(
        tmp_path / "server",
        "server",
        "dependencies:\n- name: redis\n  version: 1.0.0\n"
        "  repository: https://charts.example.com\n  condition: redis.enabled\n",
    )
    (home / "values.yaml").write_text("redis:\n  enabled: false\n")
    result = lint_result(home, options=tools)
    assert ("GL101", "server/templates/app.yaml", 35) in rows(result, tmp_path)
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    assert not [n for n in result.notes if "redis" in n]


def test_an_enabled_remote_dependency_is_left_out_with_a_note(
    tools: RenderOptions, tmp_path: Path
) -> None:
    home = chart(
        tmp_path / "server",
        "server",
        "dependencies:\n- name: redis\n  version: 1.0.0\n"
        "  repository: oci://registry.example.com/charts\n  condition: redis.enabled\n"
        "- name: metrics\n  version: 1.0.0\n  repository: https://charts.example.com\n",
    )
    (home / "values.yaml").write_text("redis:\n  enabled: true\n")
    before, temporary = tree(tmp_path), set(os.listdir(tempfile.gettempdir()))
    result = lint_result(home, options=tools)
    assert ("GL101", "server/templates/app.yaml", 35) in rows(result, tmp_path)
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    (note,) = [n for n in result.notes if "without its remote dependencies" in n]
    assert "redis (oci://registry.example.com/charts)" in note
    assert "metrics (https://charts.example.com)" in note
    assert tree(tmp_path) == before and clean_temp(temporary)


def test_a_library_chart_draws_no_render_failure(tools: RenderOptions, tmp_path: Path) -> None:
    home = chart(
        tmp_path / "common",
        "common",
        "type: library\n",
        template="",
    )
    (home / "templates" / "app.yaml").unlink()
    (home / "templates" / "_helpers.tpl").write_text('{{- define "common.name" -}}x{{- end -}}\n')
    result = lint_result(home, options=tools)
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    (note,) = [n for n in result.notes if "library chart" in n]
    assert "cannot be installed" in note


REQUIRED = GPU_CPU_HPA.replace(
    "image: nvcr.io/nvidia/tritonserver:24.01-py3",
    'image: {{ required "set image.repository to your registry" .Values.image.repository }}'
    ':{{ .Values.image.tag | required "set image.tag" }}',
)


def test_a_required_value_is_stood_in_and_said(tools: RenderOptions, tmp_path: Path) -> None:
    home = chart(tmp_path / "server", "server", template=REQUIRED)
    temporary = set(os.listdir(tempfile.gettempdir()))
    result = lint_result(home, options=tools)
    assert ("GL101", "server/templates/app.yaml", 35) in rows(result, tmp_path)
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    (note,) = [n for n in result.notes if "stand-ins for values" in n]
    assert "image.repository" in note and "image.tag" in note
    assert clean_temp(temporary)


@pytest.mark.parametrize(
    ("image", "values", "path"),
    [
        (
            '{{ required "set it" (index .Values "model-server" "image") }}',
            "{}",
            "model-server.image",
        ),
        (
            '{{ required "set it" (index .Values "model-server" "image") }}',
            "model-server: {}",
            "model-server.image",
        ),
        (
            '{{ index .Values "model-server" "image" | required "set it" }}',
            "{}",
            "model-server.image",
        ),
        (
            '{{ required "set it" (index .Values.engine "model-image") }}',
            "engine: {}",
            "engine.model-image",
        ),
    ],
)
def test_a_required_index_value_is_stood_in_and_said(
    tools: RenderOptions, tmp_path: Path, image: str, values: str, path: str
) -> None:
    """``index .Values "a" "b"`` (keys that are not Go identifiers) is stood in like
    ``.Values.a.b``, whether Helm fails in ``required`` or, with a parent missing, in
    ``index``."""
    template = GPU_CPU_HPA.replace(
        "image: nvcr.io/nvidia/tritonserver:24.01-py3", f"image: {image}"
    )
    home = chart(tmp_path / "server", "server", template=template)
    (home / "values.yaml").write_text(values + "\n")
    result = lint_result(home, options=tools)
    assert ("GL101", "server/templates/app.yaml", 35) in rows(result, tmp_path)
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    (note,) = [n for n in result.notes if "stand-ins for values" in n]
    assert f"({path})" in note


def test_a_template_error_is_still_a_render_failure(tools: RenderOptions, tmp_path: Path) -> None:
    home = chart(tmp_path / "server", "server", template='{{ fail "this chart is broken" }}\n')
    result = lint_result(home, options=tools)
    (failed,) = [f for f in result.findings if f.rule == "GL704"]
    assert "this chart is broken" in failed.message
    assert not [n for n in result.notes if "stand-ins" in n]


def test_nested_file_dependencies_and_aliases_follow_their_values(
    tools: RenderOptions, tmp_path: Path
) -> None:
    """A file:// dependency of a file:// dependency is vendored too; a dependency turned off
    through its alias's condition is not rendered."""
    chart(tmp_path / "charts-src" / "engine", "engine")
    chart(
        tmp_path / "charts-src" / "inference",
        "inference",
        "dependencies:\n- name: engine\n  version: 0.1.0\n  repository: file://../engine\n",
        template="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: inference}\n",
    )
    home = chart(
        tmp_path / "umbrella",
        "umbrella",
        "dependencies:\n"
        "- name: inference\n  version: 0.1.0\n  repository: file://../charts-src/inference\n"
        "- name: inference\n  alias: canary\n  version: 0.1.0\n"
        "  repository: file://../charts-src/inference\n  condition: canary.enabled\n",
        template="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
    )
    (home / "values.yaml").write_text("canary:\n  enabled: false\n")
    result = lint_result(home, options=tools)
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    gpu = [f for f in result.findings if f.rule == "GL101"]
    assert len(gpu) == 1  # the engine once: the canary alias is off
    assert gpu[0].location.file.endswith("charts-src/engine/templates/app.yaml")


def test_a_file_dependency_outside_the_repository_is_never_read(
    tools: RenderOptions, tmp_path: Path
) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    chart(outside / "secret", "secret")
    (outside / "secret" / "templates" / "app.yaml").write_text("password: hunter2-outside\n")
    home = chart(
        tmp_path / "server",
        "server",
        f"dependencies:\n- name: secret\n  version: 0.1.0\n  repository: file://{outside}/secret\n",
    )
    result = lint_result(home, options=tools)
    (unavailable,) = [f for f in result.findings if f.rule == "GL705"]
    assert "outside the repository" in unavailable.message
    assert "hunter2" not in repr(result.findings)


def test_a_dependency_named_like_a_path_is_refused(tools: RenderOptions, tmp_path: Path) -> None:
    chart(tmp_path / "evil", "../../escape")
    home = chart(
        tmp_path / "server",
        "server",
        "dependencies:\n- name: evil\n  version: 0.1.0\n  repository: file://../evil\n",
    )
    result = lint_result(home, options=tools)
    (unavailable,) = [f for f in result.findings if f.rule == "GL705"]
    assert "chart name" in unavailable.message
    assert not (tmp_path / "escape").exists()


def test_a_chart_yaml_linked_out_of_the_chart_is_not_read(
    tools: RenderOptions, tmp_path: Path
) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-library"
    outside.mkdir()
    (outside / "Chart.yaml").write_text("apiVersion: v2\nname: x\nversion: 1.0.0\ntype: library\n")
    home = chart(tmp_path / "server", "server")
    (home / "Chart.yaml").unlink()
    (home / "Chart.yaml").symlink_to(outside / "Chart.yaml")
    result = lint_result(home, options=tools)
    assert not [n for n in result.notes if "library chart" in n]
    assert [f for f in result.findings if f.rule == "GL705"]


SECRET_IMAGE = GPU_CPU_HPA.replace(
    "image: nvcr.io/nvidia/tritonserver:24.01-py3", "image: nvcr.io/nim:{{ .Values.secrets.tag }}"
)


def units_of(result: object) -> list[str]:
    return sorted(u.name for u in result.units)  # type: ignore[attr-defined]


def test_a_chart_that_needs_its_sample_values_is_rendered_with_them(
    tools: RenderOptions, tmp_path: Path
) -> None:
    """values.yaml alone is a nil pointer on .Values.secrets: the chart is rendered with the
    sample its authors keep beside Chart.yaml (a sample before an environment), the findings
    at the template's lines, and a note names the file."""
    home = chart(tmp_path / "server", "server", template=SECRET_IMAGE)
    (home / "values-prod.yaml").write_text("secrets: []\n")  # breaks it: tried second
    (home / "values_sample.yaml").write_text("secrets:\n  tag: '1.0'\n")
    result = lint_result(home, options=tools)
    found = rows(result, tmp_path)
    assert {("GL101", "server/templates/app.yaml", 35)} | {
        ("GL102", "server/templates/app.yaml", 27)
    } <= found
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    (note,) = [n for n in result.notes if "values.yaml alone" in n]
    assert "nil pointer" in note and "rendered with values_sample.yaml" in note
    assert "--debug" not in note


def test_a_chart_no_values_file_renders_is_still_a_render_failure(
    tools: RenderOptions, tmp_path: Path
) -> None:
    home = chart(tmp_path / "server", "server", template=SECRET_IMAGE)
    (home / "values-prod.yaml").write_text("secrets: []\n")
    result = lint_result(home, options=tools)
    (failed,) = [f for f in result.findings if f.rule == "GL704"]
    assert "nil pointer" in failed.message
    assert not [n for n in result.notes if "values.yaml alone" in n]


def test_chart_testing_values_are_one_unit_each(tools: RenderOptions, tmp_path: Path) -> None:
    """As `ct lint`: one render per ci/*-values.yaml, each a unit named after its file, and
    none with values.yaml alone (a file not named *-values.yaml is not one of them)."""
    home = chart(tmp_path / "server", "server", template=SECRET_IMAGE)
    (home / "ci").mkdir()
    (home / "ci" / "gpu-values.yaml").write_text("secrets: {tag: gpu}\n")
    (home / "ci" / "h200-values.yaml").write_text("secrets: {tag: h200}\n")
    (home / "ci" / "notes.yaml").write_text("secrets: []\n")
    result = lint_result(home, options=tools)
    assert units_of(result) == ["server (ci/gpu-values.yaml)", "server (ci/h200-values.yaml)"]
    (finding,) = [f for f in result.findings if f.rule == "GL102"]
    assert finding.location.line == 27 and finding.location.file.endswith("templates/app.yaml")
    assert sorted(finding.units) == units_of(result)
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]


@pytest.mark.parametrize(
    ("files", "shown", "rule"),
    [
        (["values-prod.yaml"], "values-prod.yaml", None),
        (
            ["values-prod.yaml", "../shared/gpu.yaml"],
            "values-prod.yaml, charts/shared/gpu.yaml",
            None,
        ),
        (["values-gone.yaml"], "values-gone.yaml", "GL705"),
    ],
)
def test_the_configuration_names_a_charts_values(
    tools: RenderOptions, tmp_path: Path, files: list[str], shown: str, rule: str | None
) -> None:
    """chart-values: in .gpulint.yaml renders the chart with those files, in order (a file
    outside the chart, inside the repository, too), over chart-testing's; a file that is not
    there is GL705."""
    home = chart(tmp_path / "charts" / "server", "server", template=SECRET_IMAGE)
    (home / "ci").mkdir()
    (home / "ci" / "gpu-values.yaml").write_text("secrets: []\n")  # would fail
    (home / "values-prod.yaml").write_text("secrets: {tag: prod}\n")
    (tmp_path / "charts" / "shared").mkdir()
    (tmp_path / "charts" / "shared" / "gpu.yaml").write_text("secrets: {tag: gpu}\n")
    settings = Settings(source=str(tmp_path / ".gpulint.yaml"))
    settings.chart_values = {"charts/*": files}
    result = lint_result(home, options=tools, settings=settings)
    assert units_of(result) == [f"charts/server ({shown})"]
    if rule is None:
        assert ("GL102", "charts/server/templates/app.yaml", 27) in rows(result, tmp_path)
        assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    else:
        (unavailable,) = [f for f in result.findings if f.rule == rule]
        assert "values-gone.yaml" in unavailable.message and ".gpulint.yaml" in unavailable.message
