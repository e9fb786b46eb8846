"""The command line: exit codes, stdin, formats, selection, configuration errors."""

from __future__ import annotations

import json
import os
import re
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


@pytest.mark.slow
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
    assert explained.stdout.rstrip().endswith(
        "Documentation: docs/rules.md#gl101 in gpulint's repository"
    )
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
        "import sys\n"
        "from gpulint.cli import main\n"
        f"main(['lint', {str(tmp_path)!r}])\n"
        "heavy = [m for m in ('kubernetes', 'aiohttp', 'prometheus_api_client', 'requests',"
        " 'jsonschema') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert "HEAVY=\n" in result.stdout, result.stdout + result.stderr


# --- runs that check nothing must not pass -----------------------------------------------------


def test_empty_stdin_is_a_usage_error() -> None:
    """`helm template ... | gpulint lint -` must fail when helm printed nothing."""
    for text in ("", "\n", "   \n\n"):
        result = run_cli("lint", "-", stdin=text)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "stdin is empty" in result.stderr


@pytest.mark.parametrize(
    ("option", "value", "suggestion"),
    [
        ("--select", "GL4O1", "GL401"),
        ("--ignore", "GL1O2", "GL102"),
        ("--select", "hpa-cpu-on-gpu", "hpa-cpu-on-gpu-workload"),
        ("--ignore", "GL999", None),
    ],
)
def test_an_unknown_rule_is_a_usage_error_with_the_nearest_rule(
    tmp_path: Path, option: str, value: str, suggestion: str | None
) -> None:
    (tmp_path / "bad.yaml").write_text(GPU_CPU_HPA)
    result = run_cli("lint", option, value, str(tmp_path))
    assert result.returncode == 2 and result.stdout == ""
    assert f"{option} {value}: no such rule" in result.stderr
    if suggestion:
        assert f"did you mean {suggestion}?" in result.stderr
    # Prefixes and names that exist are fine.
    assert run_cli("lint", "--select", "GL1,GL40", str(tmp_path)).returncode == 1


@pytest.mark.slow
def test_an_unknown_rule_in_the_config_is_an_error_at_its_key(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(GPU_CPU_HPA)
    (tmp_path / ".gpulint.yaml").write_text("rules:\n  GL102: off\n  GL1O1: off\n")
    result = run_cli("lint", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert ".gpulint.yaml:3:3: rules: no rule 'GL1O1'; did you mean GL101?" in result.stderr
    # Rule names work in the configuration as on the command line.
    (tmp_path / ".gpulint.yaml").write_text("rules:\n  hpa-cpu-on-gpu-workload: off\n")
    result = run_cli("lint", ".", cwd=tmp_path)
    assert result.returncode == 0 and "GL101" not in result.stdout
    assert "config .gpulint.yaml" in result.stdout
    assert run_cli("lint", "--no-config", ".", cwd=tmp_path).returncode == 1


def test_every_configuration_error_is_reported_in_one_run(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(GPU_CPU_HPA)
    (tmp_path / ".gpulint.yaml").write_text(
        "rules:\n"
        "  GL1O2: off\n"
        "  GL101: {severity: loud}\n"
        "units: [/abs]\n"
        "gpu-resources: 3\n"
        "exclude: []\n"
        "exclude: [x]\n"
    )
    result = run_cli("lint", ".", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert all(line.startswith("gpulint: configuration error: ") for line in lines), lines
    found = [re.search(r"\.gpulint\.yaml:(\d+:\d+): (.*)", line) for line in lines]
    assert [m.group(1) for m in found if m] == ["2:3", "3:11", "4:9", "5:1", "7:1"], lines
    said = [m.group(2) for m in found if m]
    assert said[0] == "rules: no rule 'GL1O2'; did you mean GL102?"
    assert said[4] == "key 'exclude' is written twice"


@pytest.mark.slow
def test_missing_extras_name_the_extra_instead_of_a_traceback(tmp_path: Path) -> None:
    """Without the optional dependencies, each front door says what to install (exit 2)."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    # A module finder that hides the optional dependencies, as a plain install has them.
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('aiohttp', 'kubernetes', 'prometheus_api_client',"
        " 'prometheus_client', 'requests'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Hide())\n"
    )
    (tmp_path / "bad.yaml").write_text(GPU_CPU_HPA)
    env = {"PYTHONPATH": str(blocker)}
    cases = [
        (["serve", "--tls-cert", "x", "--tls-key", "y"], "webhook", "aiohttp kubernetes"),
        (
            ["lint", "--prometheus", "http://127.0.0.1:9", str(tmp_path)],
            "live",
            "prometheus-api-client requests",
        ),
        (["lint", "--cluster"], "cluster", "kubernetes"),
    ]
    for args, extra, packages in cases:
        result = run_cli(*args, env=env)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        # What a user can run: the packages from PyPI, or gpulint again from where it came
        # from (it is on no package index, so ``pip install 'gpulint[live]'`` would fail).
        assert f"pip install {packages}" in result.stderr
        assert f'pip install "gpulint[{extra}] @ git+...' in result.stderr
    # Linting files needs none of them.
    assert run_cli("lint", str(tmp_path), env=env).returncode == 1


@pytest.mark.slow
def test_reported_paths_are_relative_to_the_working_directory(tmp_path: Path) -> None:
    """Reports spell files from the working directory; SARIF alone from the repository root."""
    repository = tmp_path / "repo"
    (repository / ".git").mkdir(parents=True)
    (repository / "deploy").mkdir()
    (repository / "deploy" / "bad.yaml").write_text(GPU_CPU_HPA)
    for cwd, expected in ((repository, "deploy/bad.yaml"), (repository / "deploy", "bad.yaml")):
        result = run_cli("lint", "-f", "json", ".", cwd=cwd)
        files = {f["file"] for f in json.loads(result.stdout)["findings"]}
        assert files == {expected}
    sarif = json.loads(run_cli("lint", "-f", "sarif", ".", cwd=repository / "deploy").stdout)
    run = sarif["runs"][0]
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "deploy/bad.yaml", "uriBaseId": "%SRCROOT%"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repository.as_uri() + "/"


def test_stdin_filename_names_piped_input(tmp_path: Path) -> None:
    result = run_cli(
        "lint", "-f", "sarif", "--stdin-filename", "deploy/app.yaml", "-", stdin=GPU_CPU_HPA
    )
    run = json.loads(result.stdout)["runs"][0]
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "deploy/app.yaml", "uriBaseId": "%SRCROOT%"}


def test_error_messages_on_stderr_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    """A path (or a configuration value) holding terminal escapes or a CI workflow command
    is shown escaped on stderr, never acted on."""
    from gpulint.cli import main

    assert main(["lint", "/nonexistent\x1b]0;title\x07\n::error file=x::owned.yaml"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "\\x1b]0;title\\x07" in err
    assert not any(line.startswith("::") for line in err.splitlines())


@pytest.mark.slow
def test_explain_of_a_misspelt_rule_suggests_the_nearest() -> None:
    by_name = run_cli("explain", "hpa-missing-behaviour")
    assert by_name.returncode == 2
    assert "did you mean hpa-missing-behavior?" in by_name.stderr
    by_id = run_cli("explain", "GL1O2")
    assert "did you mean GL102?" in by_id.stderr
    nothing = run_cli("explain", "zzzzzzzz")
    assert nothing.returncode == 2 and "did you mean" not in nothing.stderr


def test_write_baseline_says_what_it_wrote_and_where(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(GPU_CPU_HPA)
    done = run_cli("lint", "--write-baseline", "baseline.json", "bad.yaml", cwd=tmp_path)
    # What it wrote, and nothing of the report it recorded.
    assert done.stdout == (
        "gpulint: baseline of 2 findings (1 error, 1 warning) written to baseline.json\n"
    )
    assert done.returncode == 0 and (tmp_path / "baseline.json").is_file()
    # A report asked for by name is still written beside it.
    asked = run_cli(
        "lint", "--write-baseline", "again.json", "--format", "text", "bad.yaml", cwd=tmp_path
    )
    assert "GL101 [error]" in asked.stdout
    assert "note: baseline of 2 findings (1 error, 1 warning) written to again.json" in (
        asked.stdout
    )


def test_explain_wraps_its_prose_at_the_width_and_keeps_its_code() -> None:
    from gpulint.engine.docs import rule_text
    from gpulint.engine.registry import rule_by_id

    explained = run_cli("explain", "GL406")  # COLUMNS=80 (tests/conftest.py)
    spec = rule_by_id("GL406")
    assert spec is not None
    written = rule_text(spec)
    blocks = re.findall(r"```yaml\n(.*?)```", written, re.DOTALL)
    code = {"    " + line for block in blocks for line in block.splitlines() if line}
    for line in explained.stdout.splitlines():
        assert line in code or len(line) <= 80 or " " not in line.strip(), line
    # For a terminal: each code block as written, indented, without its fences; inline code
    # marked once (the docstrings' reStructuredText ``x`` as `x`); the words all there.
    for block in blocks:
        indented = "".join(f"    {line}\n" if line else "\n" for line in block.splitlines())
        assert indented in explained.stdout
    assert "``" not in explained.stdout and "```" not in explained.stdout
    prose = re.sub(r"^```.*$", "", written, flags=re.MULTILINE).replace("``", "`")
    assert explained.stdout.split() == prose.split()


def _on_a_terminal(*args: str, cwd: Path) -> str:
    """What ``gpulint`` prints with its standard output on a terminal (a pseudo-terminal)."""
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gpulint", *args],
            stdout=follower,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, "NO_COLOR": "1"},
            timeout=120,
            check=False,
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other side is closed: all was read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == 1, done.stderr
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_a_terminal_gets_one_line_per_finding_and_a_pipe_the_whole_report(
    tmp_path: Path,
) -> None:
    (tmp_path / "bad.yaml").write_text(GPU_CPU_HPA)
    shown = _on_a_terminal("lint", "bad.yaml", cwd=tmp_path)
    findings = [line for line in shown.splitlines() if " GL1" in line]
    assert sorted(line.split(": ", 1)[1].split(" ", 2)[:2] for line in findings) == [
        ["GL101", "[error]"],
        ["GL102", "[warning]"],
    ]
    assert "fix:" not in shown and shown.rstrip().splitlines()[-1].startswith("gpulint: 1 error")
    piped = run_cli("lint", "bad.yaml", cwd=tmp_path)
    assert "    fix: " in piped.stdout  # the text report, each finding with its fix
    asked = _on_a_terminal("lint", "--format", "text", "bad.yaml", cwd=tmp_path)
    assert "    fix: " in asked


@pytest.mark.parametrize("command", ["lint", "context"])
def test_an_output_it_cannot_write_is_a_usage_error(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "report.txt"
    seed = ROOT / "examples" / "seed-ko" / "broken"
    assert main([command, "--no-config", "-o", str(target), str(seed)]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors[-1] == f"gpulint: error: cannot write {target}: No such file or directory"
