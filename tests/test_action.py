"""The GitHub Action (action.yml) and the README's CI and adoption snippets: what a user
pastes must parse, and the Action's own script must run gpulint as it says."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gpulint.cli import build_parser

from . import artifacts
from .conftest import ROOT
from .schemastore import schema

SHA = re.compile(r"@?[0-9a-f]{40}$")
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def action() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text())
    return data


def adoption_section() -> str:
    """The README's CI section and docs/ci.md: every workflow and hook a user copies."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## In CI")
    return readme[start : readme.index("\n## ", start + 1)] + (ROOT / "docs" / "ci.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)\n```", adoption_section(), re.DOTALL)


def walk(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(walk(value))
    return found


def parse_gpulint(line: str) -> None:
    words = shlex.split(line, comments=True)
    assert words[0] == "gpulint", line
    build_parser().parse_args(words[1:])  # SystemExit on anything the CLI refuses


def test_action_is_a_composite_action_with_documented_inputs() -> None:
    data = action()
    assert data["name"] and data["description"]
    assert data["runs"]["using"] == "composite"
    inputs = data["inputs"]
    assert {"paths", "format", "fail-on", "baseline", "changed-since", "sarif"} <= set(inputs)
    for name, spec in inputs.items():
        assert spec.get("description"), name
        assert isinstance(spec.get("default"), str), name
    for name, spec in data["outputs"].items():
        assert spec.get("description") and spec.get("value"), name
    steps = data["runs"]["steps"]
    ids = {step["id"] for step in steps if "id" in step}
    for step in steps:
        assert ("run" in step) != ("uses" in step), step
        if "run" in step:
            assert step.get("shell") == "bash", step
            # Inputs reach scripts through env only: an expression in a script is injection.
            assert not EXPRESSION.search(step["run"]), step["run"]
    text = (ROOT / "action.yml").read_text()
    for expression in EXPRESSION.findall(text):
        for name in re.findall(r"inputs\.([\w-]+)", expression):
            assert name in inputs, expression
        for name in re.findall(r"steps\.([\w-]+)\.", expression):
            assert name in ids, expression
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("github/codeql-action"))
    assert upload["with"]["category"] == "gpulint"
    assert "always()" in upload["if"]
    # The job fails after the upload, never before it.
    assert steps.index(upload) < next(i for i, s in enumerate(steps) if s.get("id") == "verdict")
    install = next(s for s in steps if s.get("id") == "install")
    assert install["env"]["ACTION_PATH"] == "${{ github.action_path }}"
    assert steps[0]["uses"].startswith("actions/setup-python@")


def run_step(
    step: dict[str, Any], values: dict[str, str], tmp_path: Path, installed: artifacts.Install
) -> tuple[int, str]:
    """Run one ``run:`` step as the runner does (bash -eo pipefail), its env expressions
    replaced by ``values``; gpulint and python as the Action's install step left them."""
    env = {
        key: EXPRESSION.sub(lambda m: values[m.group(1)], str(value))
        for key, value in step.get("env", {}).items()
    }
    output = tmp_path / "output"
    summary = tmp_path / "summary.md"
    env.update(
        installed.environment(),
        RUNNER_TEMP=str(tmp_path),
        GITHUB_OUTPUT=str(output),
        GITHUB_STEP_SUMMARY=str(summary),
    )
    script = tmp_path / "step.sh"
    script.write_text(step["run"])
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


def outputs(tmp_path: Path) -> dict[str, str]:
    lines = (tmp_path / "output").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def inputs_with(**given: str) -> dict[str, str]:
    values = {f"inputs.{name}": spec["default"] for name, spec in action()["inputs"].items()}
    values.update({f"inputs.{name.replace('_', '-')}": value for name, value in given.items()})
    return values


def lint_step() -> dict[str, Any]:
    step: dict[str, Any] = next(s for s in action()["runs"]["steps"] if s.get("id") == "lint")
    return step


@pytest.mark.slow
def test_action_lint_step_reports_the_examples_and_fails_after_writing_everything(
    tmp_path: Path, action_install: artifacts.Install
) -> None:
    code, log = run_step(
        lint_step(),
        inputs_with(paths="examples/seed-ja examples/seed-ko"),
        tmp_path,
        action_install,
    )
    assert code == 0, log  # the verdict comes in its own step, after the upload
    found = outputs(tmp_path)
    assert found["status"] == "1"
    sarif = json.loads(Path(found["sarif"]).read_text())
    assert int(found["findings"]) == len(sarif["runs"][0]["results"]) > 0
    assert "::error file=examples/seed-ja/broken/" in log  # format: github
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## gpulint\n") and "| GL103 duplicate-autoscalers |" in summary
    assert "```mermaid\nflowchart LR" in summary  # the trace, after the findings
    verdict = next(s for s in action()["runs"]["steps"] if s.get("id") == "verdict")
    code, _ = run_step(
        verdict, {"steps.lint.outputs.status": found["status"]}, tmp_path, action_install
    )
    assert code == 1


@pytest.mark.slow
def test_action_with_a_baseline_reports_nothing_old(
    tmp_path: Path, action_install: artifacts.Install
) -> None:
    baseline = tmp_path / "baseline.json"
    subprocess.run(
        [
            action_install.gpulint,
            "lint",
            "--write-baseline",
            str(baseline),
            "examples/",
        ],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=300,
    )
    values = inputs_with(paths="examples/", baseline=str(baseline), format="text")
    code, log = run_step(lint_step(), values, tmp_path, action_install)
    assert code == 0, log
    found = outputs(tmp_path)
    assert (found["status"], found["findings"]) == ("0", "0")
    assert "baselined" in log and "stale baseline entries" in (tmp_path / "summary.md").read_text()


def test_readme_shell_commands_parse() -> None:
    commands = [
        line.strip()
        for block in blocks("sh")
        for line in block.splitlines()
        if line.strip().startswith(("gpulint ", "pip install "))
    ]
    assert any("--write-baseline" in c for c in commands)
    assert any("--changed-since" in c for c in commands)
    for command in commands:
        if command.startswith("pip install "):
            spec = shlex.split(command)[-1]
            assert spec.startswith("gpulint @ git+") and SHA.search(spec), command
        else:
            parse_gpulint(command)


def test_readme_yaml_snippets_load_and_their_commands_parse() -> None:
    snippets = [yaml.safe_load(block) for block in blocks("yaml")]
    nodes = [node for snippet in snippets for node in walk(snippet)]
    runs = [node["run"] for node in nodes if isinstance(node.get("run"), str)]
    lint_lines = [
        line for run in runs for line in run.splitlines() if line.strip().startswith("gpulint ")
    ]
    assert any("--changed-since" in line for line in lint_lines)
    for line in lint_lines:
        parse_gpulint(line)
    for run in runs:
        if run.startswith("pip install "):
            assert SHA.search(shlex.split(run)[-1]), run
    uses = [node["uses"] for node in nodes if "uses" in node]
    ours = [u for u in uses if u.startswith("OWNER/gpulint")]
    assert ours and all(SHA.search(u) for u in ours)
    pinned = [node["rev"] for node in nodes if "rev" in node]
    assert pinned and all(SHA.fullmatch(str(rev)) for rev in pinned)
    # A pull request's merge base needs both histories.
    changed = [n for n in nodes if isinstance(n.get("with"), dict) and "changed-since" in n["with"]]
    assert changed
    for snippet in snippets:
        steps = [n for n in walk(snippet) if "steps" in n]
        for job in steps:
            if any("changed-since" in str(step) for step in job["steps"]):
                checkout = job["steps"][0]
                assert checkout["uses"].startswith("actions/checkout@")
                assert checkout["with"]["fetch-depth"] == 0
    # Every input the README's Action snippets pass exists.
    for node in changed:
        assert set(node["with"]) <= set(action()["inputs"])


def test_action_validates_against_githubs_action_schema() -> None:
    validator = jsonschema.Draft7Validator(schema("github-action.json"))
    errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(action())]
    assert not errors


def test_readme_workflows_validate_against_githubs_workflow_schema() -> None:
    validator = jsonschema.Draft7Validator(schema("github-workflow.json"))
    workflows = [
        s for s in map(yaml.safe_load, blocks("yaml")) if isinstance(s, dict) and "jobs" in s
    ]
    assert workflows
    for workflow in workflows:
        # YAML 1.1 reads the key `on` as true; GitHub reads it as the string.
        if True in workflow:
            workflow["on"] = workflow.pop(True)
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(workflow)]
        assert not errors, workflow


def test_readme_ci_snippets_start_from_a_baseline() -> None:
    """The Action's first snippet and the pre-commit hook pass the baseline the README says
    to write before the first run: what a repository already has does not fail its first
    job or block its first commit."""
    nodes = [node for block in blocks("yaml") for node in walk(yaml.safe_load(block))]
    ours = [node for node in nodes if str(node.get("uses", "")).startswith("OWNER/gpulint")]
    assert ours[0]["with"]["baseline"] == ".gpulint-baseline.json"
    assert all(set(node.get("with", {})) <= set(action()["inputs"]) for node in ours)
    [hook] = [node for node in nodes if node.get("id") == "gpulint"]
    assert hook["args"] == ["--baseline", ".gpulint-baseline.json"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "gpulint lint --write-baseline .gpulint-baseline.json" in readme
