"""The hook definition works with the real pre-commit tool, from a throwaway repository."""

from __future__ import annotations

import os
import re
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


OTHER_APP = BROKEN_HPA.replace("triton", "bert")


@pytest.fixture(scope="module")
def this_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A repository holding one commit of this checkout's files as they are now (edits not
    committed yet included), and that commit's SHA: what a README reader pins with ``rev:``.
    Its own git directory, so this checkout's repository is left as it is."""
    source = tmp_path_factory.mktemp("gpulint-source")
    git_dir = str(source / ".git")
    subprocess.run(["git", "init", "-q", "--bare", git_dir], check=True, capture_output=True)

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", f"--git-dir={git_dir}", f"--work-tree={ROOT}", *args],
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout.strip()

    git("config", "core.bare", "false")
    git("add", "-A")
    git("-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-q", "-m", "tree")
    return source, git("rev-parse", "HEAD")


def _readme_config(source: Path, sha: str, enable: str | None = None) -> str:
    """The README's pre-commit snippet, pointed at ``source`` and ``sha``; ``enable``
    uncomments that hook's line."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### pre-commit") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    snippet = section[start : section.index("\n```", start)]
    repo = re.search(r"repo: (\S+)", snippet)
    rev = re.search(r"rev: (\S+)", snippet)
    assert repo and rev and re.fullmatch(r"[0-9a-f]{40}", rev.group(1)), snippet
    snippet = snippet.replace(repo.group(1), str(source)).replace(rev.group(1), sha)
    if enable is not None:
        snippet, count = re.subn(rf"# (- id: {enable})\s", r"\1 ", snippet)
        assert count == 1, snippet
    return snippet


def _run(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_pre_commit(), "run", *args],
        cwd=repo,
        env={**os.environ, "PRE_COMMIT_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _gpulint(repo: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "gpulint", *args], cwd=repo, check=True, capture_output=True
    )


def test_readme_snippet_pinned_to_a_commit_blocks_new_findings_over_its_baseline(
    tmp_path: Path, pre_commit_home: Path, this_tree: tuple[Path, str]
) -> None:
    """As the README has it: the baseline written and committed with the configuration; the
    finding the repository had does not block, a new one does."""
    source, sha = this_tree
    repo = _repo(tmp_path, {"app.yaml": BROKEN_HPA})
    (repo / ".pre-commit-config.yaml").write_text(_readme_config(source, sha))
    _gpulint(repo, "lint", "--write-baseline", ".gpulint-baseline.json", ".")
    _git(repo, "add", ".")
    result = _run(repo, pre_commit_home, "--all-files")
    assert result.returncode == 0, result.stdout + result.stderr
    (repo / "bert.yaml").write_text(OTHER_APP)
    _git(repo, "add", ".")
    result = _run(repo, pre_commit_home, "--all-files")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "bert.yaml:" in output and "GL101" in output and "app.yaml:" not in output


def test_committing_the_hook_configuration_is_not_blocked_by_the_repository(
    tmp_path: Path, pre_commit_home: Path, this_tree: tuple[Path, str]
) -> None:
    """The repository has an error and no baseline yet: adding .pre-commit-config.yaml does
    not run the lint (gpulint never reads that file), a manifest does."""
    source, sha = this_tree
    repo = _repo(tmp_path, {"app.yaml": BROKEN_HPA})
    _git(repo, "commit", "-q", "-m", "app")
    (repo / ".pre-commit-config.yaml").write_text(_readme_config(source, sha))
    _git(repo, "add", ".")
    result = _run(repo, pre_commit_home, "--files", ".pre-commit-config.yaml")
    assert result.returncode == 0 and "Skipped" in result.stdout, result.stdout + result.stderr
    result = _run(repo, pre_commit_home, "--files", "app.yaml")
    assert result.returncode != 0, result.stdout + result.stderr


KNATIVE = ROOT / "tests" / "fixtures" / "units" / "tutorial-mistakes" / "knative" / "whisper"


@pytest.mark.parametrize("hook", ["gpulint-changed", "gpulint-changed-files"])
def test_changed_hooks_judge_what_a_commit_brings(
    tmp_path: Path, pre_commit_home: Path, this_tree: tuple[Path, str], hook: str
) -> None:
    """An image bump of a Knative Service on the KPA with an HPA of the user's on its
    revision: the findings were there before the commit, which is not blocked (the admission
    webhook warns on such an UPDATE, and refuses none); an annotation the commit misplaces
    is its own finding, and blocks it."""
    source, sha = this_tree
    service = (KNATIVE / "service.yaml").read_text()
    repo = _repo(
        tmp_path, {"service.yaml": service, "hpa.yaml": (KNATIVE / "hpa.yaml").read_text()}
    )
    (repo / ".pre-commit-config.yaml").write_text(_readme_config(source, sha, enable=hook))
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "whisper")
    (repo / "service.yaml").write_text(service.replace("1.4.0", "1.5.0"))
    _git(repo, "add", ".")
    result = _run(repo, pre_commit_home, hook, "--files", "service.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    misplaced = service.replace(
        "  name: whisper\n",
        '  name: whisper\n  annotations:\n    autoscaling.knative.dev/max-scale: "4"\n',
    )
    (repo / "service.yaml").write_text(misplaced)
    _git(repo, "add", ".")
    result = _run(repo, pre_commit_home, hook, "--files", "service.yaml")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "GL202" in output and "GL201" not in output and "GL204" not in output


def test_changed_files_hook_says_what_a_lone_file_could_not_be_checked_against(
    tmp_path: Path, pre_commit_home: Path, this_tree: tuple[Path, str]
) -> None:
    """gpulint-changed-files lints the staged HPA alone: its Deployment is in another file,
    so the GPU checks cannot run. The hook passes, and says so, which pre-commit shows only
    for a hook marked verbose."""
    source, sha = this_tree
    deployment, hpa = BROKEN_HPA.split("---\n")
    repo = _repo(tmp_path, {"deployment.yaml": deployment, "hpa.yaml": hpa})
    (repo / ".pre-commit-config.yaml").write_text(
        _readme_config(source, sha, enable="gpulint-changed-files")
    )
    _git(repo, "add", ".")
    result = _run(repo, pre_commit_home, "gpulint-changed-files", "--files", "hpa.yaml")
    output = " ".join(result.stdout.split())
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "hpa.yaml:5:3: not checked (GL101, GL103, GL501): the pods it scales: Deployment "
        "triton is not in the input; lint the workload's manifest with it"
    ) in output, result.stdout


def test_changed_hook_reports_staged_files_judged_with_the_repository(
    tmp_path: Path, pre_commit_home: Path, this_tree: tuple[Path, str]
) -> None:
    source, sha = this_tree
    deployment, hpa = BROKEN_HPA.split("---\n")
    repo = _repo(tmp_path, {"deployment.yaml": deployment, "hpa.yaml": hpa, "bert.yaml": OTHER_APP})
    (repo / ".pre-commit-config.yaml").write_text(
        _readme_config(source, sha, enable="gpulint-changed")
    )
    _git(repo, "add", ".")
    # The HPA alone says nothing about GPUs: its Deployment is in a file not being committed.
    result = _run(repo, pre_commit_home, "gpulint-changed", "--files", "hpa.yaml")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "hpa.yaml:" in output and "GL101" in output
    assert "bert.yaml" not in output
    result = _run(repo, pre_commit_home, "gpulint-changed", "--files", "README.md")
    assert "Skipped" in result.stdout or result.returncode == 0, result.stdout
