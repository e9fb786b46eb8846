"""The Dockerfile, checked without Docker (which does not run on these machines).

Statically: two stages on a slim Python, a numeric non-root user, ``gpulint serve`` as the
entry point, no HEALTHCHECK, no bytecode written at run time. Then the runtime stage's
install command is run for real in a fresh virtual environment, from a build context holding
only what the Dockerfile copies, and the installed ``gpulint serve`` answers an
AdmissionReview while running as that user, writing nothing into its installation.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpulint.webhook.options import add_serve_options, options_from_args

from . import objects
from .harness import Certificates, Webhook, admission_review

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
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


def stages() -> list[list[tuple[str, str]]]:
    split: list[list[tuple[str, str]]] = []
    for keyword, rest in instructions():
        if keyword == "FROM":
            split.append([])
        split[-1].append((keyword, rest))
    return split


def final(keyword: str) -> list[str]:
    return [rest for k, rest in stages()[-1] if k == keyword]


def deployment() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        (ROOT / "deploy" / "base" / "deployment.yaml").read_text()
    )
    return data


def test_multi_stage_on_a_slim_python() -> None:
    bases = [rest.split()[0] for rest in (s[0][1] for s in stages())]
    assert len(bases) >= 2
    assert all(b.startswith("python:3.11-slim") for b in bases), bases
    assert "AS" in stages()[0][0][1].upper().split()
    copied = [rest for k, rest in stages()[-1] if k == "COPY"]
    assert copied == ["--from=build /opt/gpulint /opt/gpulint"]


def test_runs_as_the_numeric_non_root_user_the_deployment_sets() -> None:
    (user,) = final("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) != 0 and int(gid) != 0
    pod = deployment()["spec"]["template"]["spec"]["securityContext"]
    assert (int(uid), int(gid)) == (pod["runAsUser"], pod["runAsGroup"])


def test_gpulint_serve_is_the_entry_point_and_no_healthcheck() -> None:
    assert not [k for k, _ in instructions() if k == "HEALTHCHECK"]
    (entrypoint,) = final("ENTRYPOINT")
    assert json.loads(entrypoint) == ["gpulint", "serve"]
    (cmd,) = final("CMD")
    parser = argparse.ArgumentParser()
    add_serve_options(parser)
    defaults = options_from_args(parser.parse_args(json.loads(cmd)))
    (container,) = deployment()["spec"]["template"]["spec"]["containers"]
    deployed = options_from_args(parser.parse_args(container["args"]))
    assert (defaults.tls_cert, defaults.tls_key) == (deployed.tls_cert, deployed.tls_key)
    (exposed,) = final("EXPOSE")
    assert int(exposed) == deployed.port


def test_nothing_is_written_at_run_time() -> None:
    environment = " ".join(final("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in environment
    assert "PATH=/opt/gpulint/bin:$PATH" in environment
    assert not final("VOLUME") and not final("RUN")


def _build_install_command() -> list[str]:
    (run,) = [rest for k, rest in stages()[0] if k == "RUN"]
    return [part.strip() for part in run.split("&&")]


def test_the_image_installs_only_the_runtime() -> None:
    commands = _build_install_command()
    installs = [c for c in commands if " install " in c]
    assert installs == ['/opt/gpulint/bin/pip install ".[webhook]"']


def _context_files() -> list[str]:
    """What the build stage copies, less what .dockerignore leaves out of the context."""
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert {"**/__pycache__", "**/*.pyc"} <= set(ignored)
    sources = [
        source for keyword, rest in stages()[0] if keyword == "COPY" for source in rest.split()[:-1]
    ]
    assert not [s for s in sources if any(fnmatch.fnmatch(s.rstrip("/"), p) for p in ignored)]
    files: list[str] = []
    for source in sources:
        path = ROOT / source
        for candidate in [path] if path.is_file() else sorted(path.rglob("*")):
            compiled = "__pycache__" in candidate.parts or candidate.suffix == ".pyc"
            if candidate.is_file() and not compiled:
                files.append(candidate.relative_to(ROOT).as_posix())
    return files


def _usable_by_anyone(path: str) -> bool:
    real = Path(os.path.realpath(path))
    if not real.is_file() or not real.stat().st_mode & 0o001:
        return False
    return all(parent.stat().st_mode & 0o001 for parent in real.parents)


def _interpreter() -> str:
    """A Python 3.11+ the image's user could run (a pyenv build under /root cannot be), as
    /usr/local/bin/python3.11 is in the image; this one when there is none."""
    for candidate in (sys.executable, "/usr/local/bin/python3.11", "/usr/bin/python3.11"):
        if _usable_by_anyone(candidate):
            return candidate
    return sys.executable


@pytest.fixture(scope="module")
def image_venv() -> Iterator[Path]:
    """The build stage's RUN, in a fresh virtualenv, from a context of the copied files."""
    scratch = Path(tempfile.mkdtemp(prefix="gpulint-image-"))
    os.chmod(scratch, 0o755)
    context = scratch / "src"
    for relative in _context_files():
        target = context / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, target)
    venv = scratch / "opt-gpulint"
    script = " && ".join(_build_install_command()).replace("/opt/gpulint", str(venv))
    script = script.replace("python -m venv", f"{shlex.quote(_interpreter())} -m venv")
    result = subprocess.run(
        ["sh", "-c", script],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for path in [scratch, *scratch.rglob("*")]:
        if path.is_dir():
            os.chmod(path, 0o755)
    try:
        yield venv
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.slow
def test_the_runtime_install_has_no_test_tools(image_venv: Path) -> None:
    listing = subprocess.run(
        [str(image_venv / "bin" / "python"), "-m", "pip", "--version"],
        capture_output=True,
        text=True,
    )
    assert listing.returncode != 0, "pip should have been removed from the image"
    site = next((image_venv / "lib").glob("python3*/site-packages"))
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert {"gpulint", "aiohttp", "kubernetes", "prometheus_client"} <= installed
    assert not installed & {"pytest", "trustme", "hypothesis", "ruff", "mypy", "pre_commit"}


@pytest.mark.slow
def test_the_installed_server_answers_as_a_non_root_user_without_writing(
    image_venv: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("running as another user needs root")
    if not _usable_by_anyone(str(image_venv / "bin" / "python")):
        pytest.skip("no Python interpreter here that another user may run")
    before = {p: p.stat().st_mtime_ns for p in image_venv.rglob("*")}
    certs_dir = Path(tempfile.mkdtemp(prefix="gpulint-tls-"))
    os.chmod(certs_dir, 0o755)
    try:
        certificates = Certificates(certs_dir)
        for path in certs_dir.iterdir():
            os.chmod(path, 0o644)
        security = deployment()["spec"]["template"]["spec"]["securityContext"]
        assert security["runAsUser"] == security["runAsGroup"]
        env = {
            "PATH": f"{image_venv / 'bin'}:/usr/bin:/bin",
            "PYTHONDONTWRITEBYTECODE": "1",
            "HOME": "/nonexistent",
        }
        hook = Webhook(
            certificates,
            certs_dir / "serve.log",
            ["--no-cluster"],
            env=env,
            program=[str(image_venv / "bin" / "gpulint")],
            user=security["runAsUser"],
        )
        try:
            response = hook.review(admission_review(objects.isvc_with_mode_field()))
            assert response["allowed"] is False
        finally:
            assert hook.stop() == 0
    finally:
        shutil.rmtree(certs_dir, ignore_errors=True)
    after = {p: p.stat().st_mtime_ns for p in image_venv.rglob("*")}
    assert after == before, sorted(str(p) for p in set(after) ^ set(before))[:10]
