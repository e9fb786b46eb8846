"""The hook definition works with the real pre-commit tool, from a throwaway repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.slow

BROKEN_HPA = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: triton}
spec:
  selector: {matchLabels: {app: triton}}
  template:
    metadata: {labels: {app: triton}}
    spec:
      containers:
      - {name: triton, image: triton, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata: {name: triton}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: triton}
  maxReplicas: 3
  targetCPUUtilizationPercentage: 70
"""


def _pre_commit() -> list[str]:
    executable = shutil.which("pre-commit", path=os.path.dirname(sys.executable))
    if executable is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    return [executable]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "manifests"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "ci@example.invalid")
    _git(repo, "config", "user.name", "ci")
    for name, text in files.items():
        (repo / name).write_text(text)
    _git(repo, "add", ".")
    return repo


def _try_repo(repo: Path, hook: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    return subprocess.run(
        [*_pre_commit(), "try-repo", str(ROOT), hook, "--all-files", "--verbose"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # One hook environment for the module: building it is the slow part.
    return tmp_path_factory.mktemp("pre-commit-home")


def test_hook_fails_on_a_cpu_hpa_for_a_gpu_deployment(
    tmp_path: Path, pre_commit_home: Path
) -> None:
    repo = _repo(tmp_path, {"app.yaml": BROKEN_HPA, "README.md": "not yaml\n"})
    result = _try_repo(repo, "gpulint", pre_commit_home)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "GL101" in output
    assert "app.yaml:" in output


def test_hook_passes_a_clean_repository(tmp_path: Path, pre_commit_home: Path) -> None:
    clean = BROKEN_HPA.replace("nvidia.com/gpu: 1", "cpu: 500m")
    repo = _repo(tmp_path, {"app.yaml": clean})
    result = _try_repo(repo, "gpulint", pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr


def test_changed_files_hook_sees_only_staged_files(tmp_path: Path, pre_commit_home: Path) -> None:
    repo = _repo(tmp_path, {"app.yaml": BROKEN_HPA})
    result = _try_repo(repo, "gpulint-changed-files", pre_commit_home)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "GL101" in result.stdout + result.stderr
