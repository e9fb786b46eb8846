"""What a run judges: the YAML and JSON of a repository that are not Kubernetes input are
skipped and listed (``gpulint.input.units.scope``); manifests, adapter configs and Helm values
are judged, a broken manifest with GL702 at its line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpulint.cli import main
from gpulint.engine.config import Settings
from gpulint.engine.runner import inventory_from_paths
from gpulint.input.units.scope import not_input_by_name

from .conftest import FIXTURES, lint_result

SCOPE = FIXTURES / "input_scope"

# (rule, file, line, column): the manifests and monitoring configuration, broken ones too.
JUDGED = {
    ("GL101", "deploy/app.yaml", 20, 5),
    ("GL102", "deploy/app.yaml", 18, 3),
    ("GL702", "deploy/broken.yaml", 5, 14),
    ("GL702", "deploy/broken.json", 4, 3),
    # Not a manifest, but not a name any tool is known by: a file that does not parse is
    # judged.
    ("GL702", "deploy/notes.yaml", 3, 9),
    ("GL402", "monitoring/values.yaml", 5, 5),
    ("GL402", "monitoring/adapter-config.yaml", 3, 3),
}
# file -> what the reason names. Without the scope, tsconfig.json, tsconfig.build.json,
# .eslintrc.json, .vscode/settings.json and devcontainer.json (comments) drew GL702, and
# package.json, docker-compose.yaml and config/app-settings.yaml (a key twice) GL701.
SKIPPED = {
    "web/tsconfig.json": "a TypeScript configuration",
    "web/tsconfig.build.json": "a TypeScript configuration",
    "web/package.json": "an npm package manifest",
    "web/package-lock.json": "an npm lockfile",
    "web/.eslintrc.json": "ESLint's configuration",
    "api/composer.json": "a Composer package manifest",
    "api/openapi.yaml": "an OpenAPI description",
    "schemas/request.schema.json": "a JSON Schema",
    ".vscode/settings.json": "an editor's settings (.vscode)",
    ".devcontainer/devcontainer.json": "a dev container configuration",
    "renovate.json": "Renovate's configuration",
    ".github/workflows/ci.yml": "a GitHub Actions workflow",
    ".github/dependabot.yml": "GitHub's configuration (.github)",
    "docker-compose.yaml": "a Docker Compose file",
    "docs/mkdocs.yml": "MkDocs' configuration",
    ".pre-commit-config.yaml": "pre-commit's configuration",
    "codecov.yml": "Codecov's configuration",
    "config/app-settings.yaml": "it holds no object (apiVersion and kind)",
}


def lint(
    cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    monkeypatch.chdir(cwd)
    capsys.readouterr()
    code = main(["lint", "--no-config", *args])
    return code, capsys.readouterr().out


def test_an_application_repository_s_own_yaml_is_skipped_and_its_manifests_judged(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = lint(SCOPE, monkeypatch, capsys, "--format", "json", ".")
    report: dict[str, Any] = json.loads(out)
    assert code == 1
    found = {(f["rule"], f["file"], f["line"], f["column"]) for f in report["findings"]}
    assert found == JUDGED
    skipped = {s["file"]: s["reason"] for s in report["summary"]["skipped"]}
    assert set(skipped) == set(SKIPPED)
    for file, what in SKIPPED.items():
        assert skipped[file].startswith("not Kubernetes input: "), file
        assert what in skipped[file], file
    # Only the judged files count, and they stay one unit.
    assert report["summary"]["files"] == 6
    assert len(report["summary"]["units"]) == 1


def test_a_skipped_file_in_the_text_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = lint(SCOPE, monkeypatch, capsys, ".")
    lines = out.splitlines()
    assert "web/tsconfig.json: skipped: not Kubernetes input: a TypeScript configuration" in lines
    assert lines[-1] == "gpulint: 4 errors, 3 warnings, 0 info in 6 files (2 objects), 18 skipped"


def test_many_files_skipped_for_one_reason_are_one_line_of_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a", "b", "c", "d", "e"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "package.json").write_text(json.dumps({"name": name}))
    shutil.copy(SCOPE / "deploy" / "app.yaml", tmp_path / "app.yaml")
    _, out = lint(tmp_path, monkeypatch, capsys, ".")
    assert (
        "skipped: 5 files: not Kubernetes input: an npm package manifest (a/package.json,\n"
        "    b/package.json, c/package.json and 2 more)\n"
    ) in out
    _, out = lint(tmp_path, monkeypatch, capsys, "--format", "json", ".")
    assert len(json.loads(out)["summary"]["skipped"]) == 5  # the JSON report names each


def test_files_named_on_the_command_line_are_skipped_as_well(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As pre-commit passes staged files: no error for a run that judges none of them.
    code, out = lint(
        SCOPE,
        monkeypatch,
        capsys,
        "--format",
        "json",
        "CITATION.cff",
        "web/package.json",
        "config/app-settings.yaml",
    )
    report = json.loads(out)
    assert (code, report["findings"]) == (0, [])
    skipped = {s["file"]: s["reason"] for s in report["summary"]["skipped"]}
    assert set(skipped) == {"CITATION.cff", "web/package.json", "config/app-settings.yaml"}
    assert "a citation file" in skipped["CITATION.cff"]


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("tsconfig.json", "TypeScript"),
        ("packages/ui/tsconfig.app.json", "TypeScript"),
        ("jsconfig.json", "JavaScript"),
        (".eslintrc.yml", "ESLint"),
        ("docker-compose.prod.yml", "Compose"),
        ("compose.yaml", "Compose"),
        ("pnpm-lock.yaml", "pnpm"),
        (".devcontainer/gpu/devcontainer.json", "dev container"),
        (".vscode/launch.json", "editor"),
        (".github/ISSUE_TEMPLATE/bug.yml", "issue template"),
        (".github/actions/setup/action.yml", "GitHub Action"),
        ("CITATION.cff", "citation"),
        (".gpulint.yaml", "gpulint's own"),
        (".gpulint-baseline.json", "gpulint's own"),
    ],
)
def test_names_and_places_other_tools_read(path: str, what: str) -> None:
    reason = not_input_by_name(path)
    assert reason is not None and what in reason


@pytest.mark.parametrize(
    "path",
    [
        "deploy/hpa.yaml",
        "deploy/service.json",
        "values.yaml",
        "charts/triton/values-prod.yaml",
        "manifest.json",  # a web app manifest, or a Kubernetes one: only its content can say
        "monitoring/prometheus-adapter.yaml",
        ".github/e2e/manifests/hpa.yaml",  # below .github, but not GitHub's
        "kustomization.yaml",
    ],
)
def test_names_that_only_the_content_can_judge(path: str) -> None:
    assert not_input_by_name(path) is None


def test_a_generators_data_is_judged_only_as_far_as_it_can_be_input(tmp_path: Path) -> None:
    """A kustomization gpulint does not build (a remote base) is linted file by file: its
    configMapGenerator's JSON with comments is data, not a broken manifest; a broken adapter
    config the generator reads is still GL702."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "kustomization.yaml").write_text(
        "resources:\n- https://github.com/example/base//deploy\n- app.yaml\n"
        "configMapGenerator:\n"
        "- {name: settings, files: [settings.json]}\n"
        "- {name: adapter, files: [config.yaml]}\n"
    )
    shutil.copy(SCOPE / "deploy" / "app.yaml", app / "app.yaml")
    (app / "settings.json").write_text('{\n  // the web tier\n  "replicas": 2,\n}\n')
    (app / "config.yaml").write_text(
        "rules:\n- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL'\n   metricsQuery: avg(<<.Series>>)\n"
    )
    findings = lint_result(tmp_path, select=["GL7", "GL101"]).findings
    assert {(f.rule, Path(f.location.file).name) for f in findings} == {
        ("GL705", "kustomization.yaml"),
        ("GL101", "app.yaml"),
        ("GL702", "config.yaml"),
    }


def test_a_run_over_paths_without_units_skips_the_same_files() -> None:
    inventory = inventory_from_paths([str(SCOPE)], Settings())
    skipped = {Path(path).relative_to(SCOPE).as_posix() for path, _ in inventory.skipped}
    assert skipped == set(SKIPPED)
    assert {Path(p.file).name for p in inventory.problems} == {
        "broken.yaml",
        "broken.json",
        "notes.yaml",
    }


def test_the_default_pre_commit_hook_skips_only_files_gpulint_never_reads() -> None:
    """The hook's exclude (.pre-commit-hooks.yaml) keeps a commit of another tool's files
    (.pre-commit-config.yaml itself) from running the whole-repository lint: each path it
    excludes is one the scope refuses by name, and a manifest where those tools keep theirs,
    or gpulint's own files (which change what it reports), still run it."""
    import re

    import yaml

    from gpulint.input.units.scope import OWN_FILE

    from .conftest import ROOT

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    exclude = re.compile(next(h for h in hooks if h["id"] == "gpulint")["exclude"])
    excluded = [
        ".pre-commit-config.yaml",
        ".pre-commit-config.yml",
        "tools/.pre-commit-config.yaml",
        ".pre-commit-hooks.yaml",
        ".github/workflows/ci.yml",
        ".github/ISSUE_TEMPLATE/bug.yaml",
        ".github/dependabot.yml",
    ]
    for path in excluded:
        assert exclude.search(path), path
        why = not_input_by_name(path)
        assert why is not None and why != OWN_FILE, path
    for path in (
        "deploy/hpa.yaml",
        ".github/e2e/manifests/hpa.yaml",
        ".github/workflows/manifests/hpa.yaml",
        ".gpulint.yaml",
        ".gpulint-baseline.json",
        "charts/app/values.yaml",
    ):
        assert not exclude.search(path), path
