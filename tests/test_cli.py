"""The command line: exit codes, stdin, formats, selection, configuration errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint.cli import main

from .conftest import FIXTURES, ROOT

GPU_CPU_HPA = (FIXTURES / "GL101" / "fail_cpu_only.yaml").read_text()
CLEAN = (FIXTURES / "GL101" / "pass_gpu_metric.yaml").read_text()


def run_cli(
    *args: str, stdin: str | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_exit_code_1_on_errors_and_0_when_clean(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(GPU_CPU_HPA)
    (tmp_path / "good.yaml").write_text(CLEAN)
    assert main(["lint", str(tmp_path / "bad.yaml")]) == 1
    assert main(["lint", str(tmp_path / "good.yaml")]) == 0


def test_fail_on_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.yaml").write_text(GPU_CPU_HPA)
    assert main(["lint", "--fail-on", "never", str(tmp_path)]) == 0
    assert main(["lint", "--fail-on", "warning", str(tmp_path)]) == 1
    assert main(["lint", "--ignore", "GL101", str(tmp_path)]) == 0
    assert main(["lint", "--select", "GL7", str(tmp_path)]) == 0
    assert main(["lint", "--select", "hpa-cpu-on-gpu-workload", str(tmp_path)]) == 1
    capsys.readouterr()


def test_stdin_and_rendered_helm_output() -> None:
    rendered = "---\n# Source: llm/templates/all.yaml\n" + GPU_CPU_HPA
    result = run_cli("lint", "--format", "json", "-", stdin=rendered)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    (finding,) = [f for f in data["findings"] if f["rule"] == "GL101"]
    assert finding["file"] == "<stdin>"
    assert finding["renderedFrom"] == "llm/templates/all.yaml"
    assert finding["line"] == 37


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run_cli("lint", str(tmp_path / "missing.yaml")).returncode == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli("lint", str(empty))
    assert result.returncode == 2
    assert "no .yaml, .yml or .json files" in result.stderr
    assert run_cli("lint", "--format", "xml", ".").returncode == 2
    assert run_cli("explain", "GL999").returncode == 2


def test_config_error_names_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(CLEAN)
    (tmp_path / ".gpulint.yaml").write_text("rules:\n  GL101:\n    severity: fatal\n")
    result = run_cli("lint", "app.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert ".gpulint.yaml:3:" in result.stderr
    assert "fatal" in result.stderr


def test_config_changes_severity_and_disables(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(GPU_CPU_HPA)
    (tmp_path / ".gpulint.yaml").write_text("rules:\n  GL101: {severity: warning}\n")
    result = run_cli("lint", "--format", "json", "app.yaml", cwd=tmp_path)
    assert result.returncode == 0
    severities = {f["rule"]: f["severity"] for f in json.loads(result.stdout)["findings"]}
    assert severities["GL101"] == "warning"
    (tmp_path / ".gpulint.yaml").write_text("rules:\n  GL101: off\n")
    result = run_cli("lint", "--format", "json", "app.yaml", cwd=tmp_path)
    assert "GL101" not in result.stdout


def test_rules_and_explain() -> None:
    listing = run_cli("rules")
    assert listing.returncode == 0
    assert listing.stdout.startswith("GL101  hpa-cpu-on-gpu-workload")
    explained = run_cli("explain", "GL101")
    assert explained.returncode == 0
    assert "Why is this bad?" in explained.stdout
    assert "Use instead" in explained.stdout
    data = json.loads(run_cli("rules", "--json").stdout)
    assert {"id", "name", "severity", "summary", "options"} <= set(data[0])


def test_output_file_and_sarif(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(GPU_CPU_HPA)
    out = tmp_path / "report.sarif"
    assert main(["lint", "--format", "sarif", "--output", str(out), str(tmp_path)]) == 1
    log = json.loads(out.read_text())
    assert log["version"] == "2.1.0"


def test_lint_path_imports_no_network_or_cluster_libraries(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(GPU_CPU_HPA)
    probe = (
        "import sys, runpy\n"
        f"sys.argv = ['gpulint', 'lint', {str(tmp_path)!r}]\n"
        "try:\n    runpy.run_module('gpulint', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = [m for m in ('kubernetes', 'aiohttp', 'prometheus_api_client', 'requests',"
        " 'jsonschema') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert "HEAVY=\n" in result.stdout, result.stdout + result.stderr
