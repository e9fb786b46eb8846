"""The README's install commands, run as written in a fresh copy of the repository: the
quick start's main job, the wheel built from a checkout, and the pinned ``git+`` install
(with the placeholder host and SHA pointed at a local clone)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from . import artifacts
from .conftest import ROOT

pytestmark = pytest.mark.slow

PLACEHOLDER_URL = "https://github.com/OWNER/gpulint"
PLACEHOLDER_SHA = re.compile(r"@[0-9a-f]{40}\b")


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def sh_blocks(title: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", section(title), re.DOTALL)


def run_as_written(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**artifacts.clean_environment(cwd / ".no-venv", cwd), **artifacts.QUIET_PIP}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def installed_not_editable(checkout: Path) -> None:
    site = next((checkout / ".venv" / "lib").glob("python3*/site-packages"))
    assert (site / "gpulint" / "trace" / "chain.py").is_file()
    assert not list(site.glob("__editable__*"))


def test_the_quick_start_main_job_lints_the_examples(tmp_path: Path) -> None:
    (command, _tests) = sh_blocks("Quick start")
    checkout = artifacts.tracked_copy(tmp_path / "gpulint")
    done = run_as_written(command, checkout)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]  # the broken seeds
    assert "GL103 [error]" in done.stdout and "units:" in done.stdout
    installed_not_editable(checkout)


def test_the_wheel_install_runs_trace(tmp_path: Path) -> None:
    (_git, wheel) = sh_blocks("Install")
    checkout = artifacts.tracked_copy(tmp_path / "gpulint")
    done = run_as_written(wheel, checkout)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]  # a broken chain
    assert "BROKEN" in done.stdout
    assert list((checkout / "dist").glob("gpulint-*.tar.gz"))
    installed_not_editable(checkout)


def test_the_pinned_git_install_from_a_clone(tmp_path: Path) -> None:
    (git, _wheel) = sh_blocks("Install")
    assert PLACEHOLDER_URL in git and PLACEHOLDER_SHA.search(git)
    clone = artifacts.tracked_copy(tmp_path / "clone")
    quiet = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    for step in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "c"],
    ):
        subprocess.run(step, cwd=clone, check=True, env={**os.environ, **quiet})
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.strip()
    # A direct reference's file URL needs a host: pip's requirement parser refuses file:///.
    command = PLACEHOLDER_SHA.sub(
        f"@{sha}", git.replace(PLACEHOLDER_URL, f"file://localhost{clone}")
    )
    user = tmp_path / "user"
    user.mkdir()
    venv = artifacts.fresh_venv(user / "venv")
    words = shlex.split(command)
    assert words[:2] == ["pip", "install"]
    done = run_as_written(shlex.join([str(venv / "bin" / "pip"), *words[1:]]), user)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    install = artifacts.Install("git", venv, user)
    extra = subprocess.run(  # the live extra came with it
        [str(venv / "bin" / "python"), "-c", "import prometheus_api_client"],
        cwd=user,
        capture_output=True,
        text=True,
    )
    assert extra.returncode == 0, extra.stderr
    traced = install.run("trace", str(ROOT / "examples" / "seed-ko" / "broken"))
    assert traced.returncode == 1 and "BROKEN" in traced.stdout, traced.stderr


def test_the_by_hand_workflow_runs_from_the_wheel(
    wheel_install: artifacts.Install, tmp_path: Path
) -> None:
    """docs/ci.md's workflow without the Action: each ``run:`` after the install, as the
    runner runs it, in a checkout of this repository (whose deploy/ lints clean)."""
    workflows = [
        yaml.safe_load(block)
        for block in re.findall(
            r"```yaml\n(.*?)\n```", (ROOT / "docs" / "ci.md").read_text(), re.DOTALL
        )
    ]
    (by_hand,) = [
        w
        for w in workflows
        if isinstance(w, dict)
        and "jobs" in w
        and any("run" in s for j in w["jobs"].values() for s in j["steps"])
    ]
    runs = [s["run"] for job in by_hand["jobs"].values() for s in job["steps"] if "run" in s]
    assert runs[0].startswith("pip install ")  # what test_the_pinned_git_install_from_a_clone runs
    checkout = artifacts.tracked_copy(tmp_path / "repo")
    summary = tmp_path / "summary.md"
    env = {**wheel_install.environment(), "GITHUB_STEP_SUMMARY": str(summary)}
    for command in runs[1:]:
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    assert (checkout / "gpulint.sarif").is_file()
    # deploy/ holds no autoscaler: the summary says there was nothing to trace.
    assert "gpulint trace: no autoscaler metric to trace" in summary.read_text()
