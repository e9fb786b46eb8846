"""Terminal and CI-log injection: names, values and file names crafted to retitle a terminal
or to start a GitHub Actions workflow command are printed escaped by ``gpulint lint``.

The manifests are real files linted by the real command line; what is checked is the bytes it
writes, line by line, as a terminal or the Actions runner reads them (the runner trims leading
whitespace and runs any line starting ``::``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint.report.escape import escape_controls, safe_line, safe_lines

from .conftest import ROOT

# OSC 0 (set the window title) ended by BEL, a CSI colour, a newline that starts a workflow
# command, the legacy ##[command] form, an 8-bit CSI, a line separator, a right-to-left override.
INJECTED = (
    r"\e]0;pwned\a\e[31m\n::error file=evil.yaml,line=1::injected\r\n##[error]legacy"
    r"\x9b31m\L\u202Eend"
)
RAW = ("\x1b", "\x07", "\x9b", "\u2028", "\u202e", "\r")

MANIFEST = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: "triton{INJECTED}"
  namespace: ml
spec:
  selector:
    matchLabels: {{app: triton}}
  template:
    metadata:
      labels: {{app: triton}}
    spec:
      containers:
      - name: "server{INJECTED}"
        resources:
          limits:
            nvidia.com/gpu: "0.5"
            "nvidia.com/mig-1g.5gb\\n::error file=fix.yaml::from-a-fix": "0.5"
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: "triton{INJECTED}"
  namespace: ml
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: "triton{INJECTED}"}}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {{type: Utilization, averageUtilization: 80}}
"""


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", *args],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        timeout=120,
    )


def _commands(output: str) -> list[str]:
    """The lines a GitHub Actions runner would run as workflow commands."""
    return [
        line.strip()
        for line in re.split(r"\r\n|\r|\n", output)
        if line.strip().startswith(("::", "##"))
    ]


@pytest.fixture
def crafted(tmp_path: Path) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(MANIFEST)
    return path


@pytest.mark.parametrize("color", ["never", "always"])
def test_text_output_shows_control_characters_as_escapes(crafted: Path, color: str) -> None:
    result = _lint(crafted.parent, "--format", "text", f"--color={color}", crafted.name)
    assert result.returncode == 1, result.stderr
    output = result.stdout.decode()
    for raw in RAW[1:]:
        assert raw not in output, repr(raw)
    if color == "never":
        assert "\x1b" not in output
    else:  # gpulint's own colours are still there, and nothing else
        assert set(re.findall(r"\x1b\[[0-9;]*m", output)) <= {
            "\x1b[1m",
            "\x1b[0m",
            "\x1b[2m",
            "\x1b[31m",
            "\x1b[33m",
            "\x1b[36m",
        }
        assert "\x1b]" not in output
    assert _commands(output) == []
    shown = r"triton\x1b]0;pwned\x07\x1b[31m\n::error file=evil.yaml,line=1::injected\r\n"
    assert shown in output
    assert r"##[error]legacy\x9b31m\u2028\u202eend" in output
    # A newline written in a key reaches a fix: the fix line that starts with it is escaped.
    assert r"\x3a:error file=fix.yaml::from-a-fix" in output
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    rules = re.findall(r"manifest\.yaml:\d+:\d+: (GL\d+)", plain)
    assert {"GL101", "GL501"} <= set(rules)


def test_github_output_is_one_command_per_finding(crafted: Path) -> None:
    result = _lint(crafted.parent, "--format", "github", crafted.name)
    assert result.returncode == 1, result.stderr
    output = result.stdout.decode()
    for raw in RAW:
        assert raw not in output, repr(raw)
    lines = output.split("\n")
    assert lines[-1] == ""
    commands = _commands(output)
    assert len(commands) == len(lines) - 1 >= 3
    for command in commands:
        assert re.match(
            r"::(error|warning|notice) file=manifest\.yaml,line=\d+,col=\d+,title=GL", command
        )
        # The message holds the injected text, inert: its newlines are data (%0A).
        _, _, message = command.partition(",title=")
        assert "::error file=evil" not in message.split("::", 1)[0]
    assert r"triton\x1b]0;pwned\x07\x1b[31m\n::error file=evil.yaml" in output
    assert "%0Afix: " in output


def test_github_properties_cannot_be_broken_out_of(tmp_path: Path) -> None:
    # A file name with a comma, colons and a newline: in a property these would end it.
    name = "a,b::c\n::error file=x::y.yaml"
    path = tmp_path / name
    path.write_text(MANIFEST)
    result = _lint(tmp_path, "--format", "github", name)
    output = result.stdout.decode()
    commands = _commands(output)
    assert commands and len(commands) == len(output.split("\n")) - 1
    for command in commands:
        assert command.split(",line=")[0].endswith(
            "file=a%2Cb%3A%3Ac\\n%3A%3Aerror file=x%3A%3Ay.yaml"
        )


def test_a_file_name_that_starts_a_command_is_escaped_in_text(tmp_path: Path) -> None:
    name = "::error file=x::y.yaml"
    (tmp_path / name).write_text(MANIFEST)
    (tmp_path / "##[error]z.yaml").write_text("{{ .Values.broken }}: [\n")
    result = _lint(tmp_path, "--format", "text", ".")
    output = result.stdout.decode()
    assert _commands(output) == []
    # Reported relative to the working directory (no git root here): the name starts the
    # line, and only its first character is escaped.
    assert "\n\\x3a:error file=x::y.yaml:" in output or output.startswith("\\x3a:error file=x")


def test_a_relative_file_name_at_the_start_of_a_line_is_escaped(tmp_path: Path) -> None:
    name = "::error file=x::y.yaml"
    (tmp_path / name).write_text(MANIFEST)
    result = _lint(tmp_path, "--format", "text", name)
    output = result.stdout.decode()
    assert _commands(output) == []
    assert r"\x3a:error file=x::y.yaml:" in output


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_json_reports_escape_every_terminal_control(crafted: Path, fmt: str) -> None:
    result = _lint(crafted.parent, "--format", fmt, crafted.name)
    output = result.stdout.decode()
    for raw in RAW:
        assert raw not in output, repr(raw)
    assert _commands(output) == []
    report = json.loads(output)
    if fmt == "json":
        messages = [f["message"] for f in report["findings"]]
    else:
        messages = [r["message"]["text"] for r in report["runs"][0]["results"]]
    # The same data: the escapes stand for the characters of the manifest.
    injected = "triton\x1b]0;pwned\x07\x1b[31m\n::error file=evil.yaml,line=1::injected\r\n"
    assert any(injected + "##[error]legacy\x9b31m\u2028\u202eend" in m for m in messages)


def test_escape_helpers() -> None:
    assert (
        escape_controls("a\x00\x1b\x7f\x85\u2029\u2067b\t") == r"a\x00\x1b\x7f\x85\u2029\u2067b\t"
    )
    assert escape_controls("café ✓ 日本") == "café ✓ 日本"
    assert safe_line("\t ::set-output") == "\t \\x3a:set-output"
    assert safe_line("##vso[task]") == "\\x23#vso[task]"
    assert safe_line("a ::b") == "a ::b"
    assert safe_lines("one\x85::two\n  ::three") == ["one\\x85::two", "  \\x3a:three"]
