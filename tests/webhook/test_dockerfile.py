"""The Dockerfile, checked without Docker (which does not run on these machines).

Statically: two stages on a slim Python, a numeric non-root user, ``gpulint serve`` as the
entry point, no HEALTHCHECK, no bytecode written at run time. Then the runtime stage's
install command is run for real in a fresh virtual environment, from a build context holding
only what the Dockerfile copies, and the installed ``gpulint serve`` answers an
AdmissionReview while running as that user, writing nothing into its installation.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpulint.webhook.options import add_serve_options, options_from_args

from .. import artifacts
from ..conftest import SYSTEM_TEMP, _usable_by_anyone
from . import objects
from .harness import Certificates, Webhook, admission_review

ROOT = artifacts.ROOT


instructions = artifacts.dockerfile_instructions
stages = artifacts.dockerfile_stages


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


def test_the_image_installs_only_the_runtime() -> None:
    commands = artifacts.image_build_steps()
    installs = [c for c in commands if " install " in c]
    assert installs == ['/opt/gpulint/bin/pip install ".[webhook]"']


def test_the_build_context_leaves_out_what_the_image_does_not_need() -> None:
    ignored = artifacts.dockerignore()
    assert {"**/__pycache__", "**/*.pyc"} <= set(ignored)
    files = artifacts.image_context_files()
    assert "gpulint/trace/chain.py" in files and "pyproject.toml" in files
    assert not [f for f in files if f.startswith(("tests/", "bench/", "examples/", "deploy/"))]


@pytest.mark.slow
def test_the_runtime_install_has_no_test_tools(image_install: artifacts.Install) -> None:
    image_venv = image_install.venv
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
    image_install: artifacts.Install,
) -> None:
    image_venv = image_install.venv
    if os.geteuid() != 0:
        pytest.skip("running as another user needs root")
    if not _usable_by_anyone(str(image_venv / "bin" / "python")):
        pytest.skip("no Python interpreter here that another user may run")
    before = {p: p.stat().st_mtime_ns for p in image_venv.rglob("*")}
    # Where the image's user can reach it (the test's own temporary directory is root's alone).
    certs_dir = Path(tempfile.mkdtemp(prefix="gpulint-tls-", dir=SYSTEM_TEMP))
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
