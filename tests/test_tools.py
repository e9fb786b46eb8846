"""tests/tools.py: the real kustomize and Helm are found where .ci/run puts them, run, and a
missing one skips a test outside CI but fails it under CI=true."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from . import tools

KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: prod-
resources: [deployment.yaml]
patches:
  - target: {kind: Deployment, name: web}
    patch: |-
      - op: replace
        path: /spec/replicas
        value: 3
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: web:1}]
"""


def executable(path: Path, script: str = "exit 0") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def no_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No kustomize, kubectl or helm on PATH, an interpreter whose bin directory (the
    returned one, empty) has none either, and not under CI."""
    empty = tmp_path / "path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    bin_directory = tmp_path / "venv" / "bin"
    bin_directory.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bin_directory / "python"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.delenv("CI", raising=False)
    tools._runs.cache_clear()
    yield bin_directory
    tools._runs.cache_clear()


def test_a_tool_beside_the_interpreter_is_found_when_path_lacks_it(no_tools: Path) -> None:
    assert tools.find_tool("helm") is None
    (no_tools / "helm").write_text("not executable")
    assert tools.find_tool("helm") is None
    helm = executable(no_tools / "helm")
    assert tools.find_tool("helm") == str(helm)
    assert tools.helm_command() == [str(helm)]


def test_path_comes_first_and_kustomize_before_kubectl(
    no_tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable(no_tools / "kubectl")
    assert tools.kustomize_command() == [str(no_tools / "kubectl"), "kustomize"]
    on_path = executable(tmp_path / "path" / "kubectl")
    assert tools.kustomize_command() == [str(on_path), "kustomize"]
    kustomize = executable(no_tools / "kustomize")
    assert tools.kustomize_command() == [str(kustomize), "build"]


def test_a_binary_that_does_not_run_is_not_used(no_tools: Path) -> None:
    executable(no_tools / "kustomize", "echo 'cannot execute binary file' >&2; exit 126")
    kubectl = executable(no_tools / "kubectl")
    assert tools.kustomize_command() == [str(kubectl), "kustomize"]
    executable(no_tools / "helm", "exit 1")
    with pytest.raises(pytest.skip.Exception, match="helm version --short exited 1"):
        tools.helm_command()


@pytest.mark.parametrize("ci", ["", "false", "true", "1"])
def test_a_missing_tool_skips_outside_ci_and_fails_under_it(
    no_tools: Path, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci in ("true", "1") else pytest.skip.Exception
    for command in (tools.kustomize_command, tools.helm_command):
        with pytest.raises(outcome) as raised:
            command()
        assert "is not available (not found)" in str(raised.value)
        if outcome is pytest.skip.Exception:
            assert ".ci/run installs it" in str(raised.value)


def test_kustomize_builds_with_its_transformers_and_patches(
    kustomize: list[str], tmp_path: Path
) -> None:
    (tmp_path / "kustomization.yaml").write_text(KUSTOMIZATION)
    (tmp_path / "deployment.yaml").write_text(DEPLOYMENT)
    (rendered,) = yaml.safe_load_all(tools.kustomize_build(tmp_path))
    assert rendered["metadata"]["name"] == "prod-web"
    assert rendered["spec"]["replicas"] == 3
    result = subprocess.run([*kustomize, str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0 and "prod-web" in result.stdout


def test_a_kustomization_that_does_not_build_fails_with_kustomizes_message(
    kustomize: list[str], tmp_path: Path
) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    with pytest.raises(pytest.fail.Exception, match=r"missing\.yaml"):
        tools.kustomize_build(tmp_path)


def test_helm_renders_a_chart_with_values(
    helm: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        monkeypatch.setenv(variable, str(tmp_path / variable.lower()))
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: web\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("replicas: 1\n")
    (chart / "templates" / "deployment.yaml").write_text(
        DEPLOYMENT.replace("name: web,", "name: {{ .Release.Name }}-web,").replace(
            "replicas: 1", "replicas: {{ .Values.replicas }}"
        )
    )
    result = subprocess.run(
        [*helm, "template", "llm", str(chart), "--set", "replicas=4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    (rendered,) = yaml.safe_load_all(result.stdout)
    assert rendered["metadata"]["name"] == "llm-web"
    assert rendered["spec"]["replicas"] == 4
    assert "# Source: web/templates/deployment.yaml" in result.stdout
