"""What users install, made the way they make it, so that tests run the product and not the
working tree.

* ``tracked_copy``: the repository's tracked files, as a fresh clone has them (untracked and
  ignored files never reach an artifact).
* ``build_distributions``: the sdist, then the wheel built from that sdist, with ``python -m
  build``, as a release is made.
* ``fresh_venv`` / ``installed``: an empty virtual environment and what one ``pip install``
  puts in it. Commands then run from a directory outside the repository, so nothing can be
  imported from the source tree.
* The image's build stage (``image_build_steps``, ``image_context_files``), replayed without
  Docker, which does not run on these machines.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
# The directories that install as gpulint, gpulint.rules and gpulint.webhook (setup.py).
PACKAGE_ROOTS = {"gpulint": "gpulint", "rules": "gpulint/rules", "webhook": "gpulint/webhook"}
QUIET_PIP = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def tracked_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    # A file deleted in the working tree but not yet in the index is not in a clone either.
    return sorted(name for name in listed.split("\0") if name and (ROOT / name).is_file())


def tracked_copy(target: Path) -> Path:
    for name in tracked_files():
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, destination)
    return target


@dataclass(frozen=True)
class Distributions:
    sdist: Path
    wheel: Path

    def wheel_names(self) -> set[str]:
        with zipfile.ZipFile(self.wheel) as archive:
            return set(archive.namelist())

    def sdist_names(self) -> set[str]:
        with tarfile.open(self.sdist) as archive:
            top = archive.getnames()[0].split("/")[0]
            return {n.removeprefix(f"{top}/") for n in archive.getnames() if "/" in n}


def build_distributions(workdir: Path) -> Distributions:
    """sdist and wheel of a tracked copy; the wheel is built from the unpacked sdist (what
    ``python -m build`` does without --sdist/--wheel), so a file missing from the sdist
    is missing from the wheel too."""
    source = tracked_copy(workdir / "source")
    out = workdir / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **QUIET_PIP},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Distributions(sdist, wheel)


def fresh_venv(path: Path, python: str = sys.executable) -> Path:
    done = subprocess.run(
        [python, "-m", "venv", str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return path


def pip_install(venv: Path, *requirements: str, cwd: Path | None = None) -> None:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *requirements],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
        env={**os.environ, **QUIET_PIP},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]


def clean_environment(venv: Path, home: Path) -> dict[str, str]:
    """A user's shell with only ``venv`` activated: no PYTHONPATH, no project virtualenv; the
    machine's tools (kubectl for kustomize, helm where it is installed) stay reachable."""
    tools = [str(venv / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]
    for name in ("helm", "kubectl", "kustomize", "prometheus", "promtool"):
        found = shutil.which(name) or shutil.which(name, path=str(ROOT / ".venv" / "bin"))
        if found and str(Path(found).parent) not in tools:
            # The project's .venv/bin also holds a python and a gpulint: reach the tool
            # through a directory of its own instead.
            own = home / "tools"
            own.mkdir(parents=True, exist_ok=True)
            link = own / name
            if not link.exists():
                link.symlink_to(found)
            if str(own) not in tools:
                tools.append(str(own))
    keep = {k: v for k, v in os.environ.items() if k in {"LANG", "LC_ALL", "TMPDIR"}}
    return {**keep, "PATH": os.pathsep.join(tools), "HOME": str(home), "NO_COLOR": "1"}


# --- the Dockerfile --------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    found: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, rest = line.partition(" ")
        found.append((keyword.upper(), rest.strip()))
    assert not pending
    return found


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    split: list[list[tuple[str, str]]] = []
    for keyword, rest in dockerfile_instructions():
        if keyword == "FROM":
            split.append([])
        split[-1].append((keyword, rest))
    return split


def image_build_steps() -> list[str]:
    """The build stage's RUN, one command per ``&&``."""
    (run,) = [rest for k, rest in dockerfile_stages()[0] if k == "RUN"]
    return [part.strip() for part in run.split("&&")]


def dockerignore() -> list[str]:
    return [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def image_context_files() -> list[str]:
    """What the build stage copies: tracked files under its COPY sources, less what
    .dockerignore leaves out of the build context."""
    ignored = dockerignore()
    sources = [
        source.rstrip("/")
        for keyword, rest in dockerfile_stages()[0]
        if keyword == "COPY"
        for source in rest.split()[:-1]
    ]
    return [
        name
        for name in tracked_files()
        if any(name == s or name.startswith(f"{s}/") for s in sources)
        and not any(fnmatch.fnmatch(name, pattern) for pattern in ignored)
    ]


def replay_image_build(scratch: Path, python: str) -> Path:
    """The build stage's RUN in ``scratch``, from a context of the copied files; returns the
    virtualenv that the image's last stage copies (/opt/gpulint, moved under ``scratch``)."""
    context = scratch / "src"
    for relative in image_context_files():
        target = context / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, target)
    venv = scratch / "opt-gpulint"
    script = " && ".join(image_build_steps()).replace("/opt/gpulint", str(venv))
    script = script.replace("python -m venv", f"{shlex.quote(python)} -m venv")
    done = subprocess.run(
        ["sh", "-c", script],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **QUIET_PIP},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv


def wheel_path_of(tree_path: str) -> str | None:
    """Where a file of the tree lands in the wheel (setup.py's package roots), or None for a
    file outside them."""
    top, _, rest = tree_path.partition("/")
    root = PACKAGE_ROOTS.get(top)
    return f"{root}/{rest}" if root and rest else None


@dataclass(frozen=True)
class Install:
    """gpulint as one artifact installed it: ``venv`` holds it, ``home`` is a directory
    outside the repository to run it from."""

    name: str
    venv: Path
    home: Path

    @property
    def gpulint(self) -> str:
        return str(self.venv / "bin" / "gpulint")

    def environment(self) -> dict[str, str]:
        return clean_environment(self.venv, self.home)

    def run(
        self, *args: str, cwd: Path | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.gpulint, *args],
            cwd=cwd or self.home,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def action() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text())
    return data


def action_step(step_id: str) -> dict[str, Any]:
    step: dict[str, Any] = next(s for s in action()["runs"]["steps"] if s.get("id") == step_id)
    return step
