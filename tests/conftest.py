"""Shared helpers: lint YAML text or fixture paths through the real engine; fixtures for
the real kustomize and Helm (tests/tools.py)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpulint.core.model import Finding
from gpulint.engine.assembly import assemble
from gpulint.engine.assembly import lint_text as engine_lint_text
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection
from gpulint.engine.result import Result
from gpulint.engine.runner import inventory_from_paths, run
from gpulint.input.units import RenderOptions

from . import artifacts
from .tools import helm_command, kustomize_command

# Text output is wrapped at the terminal's width (gpulint.report.wrap): every test, and every
# gpulint a test starts, writes for an 80-column terminal whatever runs the tests.
os.environ["COLUMNS"] = "80"

ROOT = Path(__file__).resolve().parent.parent
# The machine's temporary directory, before each test is given a private one.
SYSTEM_TEMP = tempfile.gettempdir()
FIXTURES = ROOT / "tests" / "fixtures"
# The real-manifest corpus: beside the repository, or where GPULINT_CORPUS says. Tests that
# read it are marked `corpus` and skip (or are not collected) without it; nothing else in the
# tests reads outside the repository.
CORPUS = Path(os.environ.get("GPULINT_CORPUS") or ROOT.parent / "shared" / "corpus").resolve()


def lint_text(
    text: str,
    name: str = "input.yaml",
    settings: Settings | None = None,
    select: list[str] | None = None,
) -> list[Finding]:
    """Lint one YAML text as if it were a file called ``name``."""
    data = textwrap.dedent(text).lstrip("\n").encode()
    return engine_lint_text(data, name, settings, Selection(select or [])).findings


def lint_paths(
    *paths: str | os.PathLike[str],
    settings: Settings | None = None,
    select: list[str] | None = None,
) -> list[Finding]:
    """Lint paths as ``gpulint lint`` does: units planned, rendered and merged."""
    return lint_result(*paths, settings=settings, select=select).findings


def lint_result(
    *paths: str | os.PathLike[str],
    settings: Settings | None = None,
    select: list[str] | None = None,
    options: RenderOptions | None = None,
) -> Result:
    settings = settings or Settings()
    assembly = assemble([str(p) for p in paths], settings, options or RenderOptions())
    return assembly.lint(settings, Selection(select or []))


def lint_one_inventory(
    *paths: str | os.PathLike[str],
    settings: Settings | None = None,
    select: list[str] | None = None,
) -> list[Finding]:
    """Every file in one inventory, as if it were one cluster (no units)."""
    inventory = inventory_from_paths([str(p) for p in paths], settings or Settings())
    return run(inventory, Selection(select or []))


def in_one_thread(test: Callable[..., None]) -> Callable[..., None]:
    """Run ``test`` where gpulint may fork: in a process of one thread (gpulint never forks a
    process running other threads, whose locks would stay held in the child). When tests
    before it left threads running in this process, the test runs again, alone, in a fresh
    pytest process, and passes or fails with it."""

    @functools.wraps(test)
    def run(*args: object, **kwargs: object) -> None:
        if threading.active_count() == 1:
            test(*args, **kwargs)
            return
        if os.environ.get("GPULINT_TEST_FRESH"):
            names = [thread.name for thread in threading.enumerate()]
            pytest.fail(f"a fresh pytest process runs other threads: {names}")
        node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
        done = subprocess.run(
            [sys.executable, "-m", "pytest", node, "-q", "-p", "no:cacheprovider", "-n", "0"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "GPULINT_TEST_FRESH": "1"},
        )
        assert done.returncode == 0 and " passed" in done.stdout, done.stdout + done.stderr

    return run


@pytest.fixture(autouse=True)
def private_temp_directory(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Every test, and every process it starts, makes its temporary files in a directory of
    its own: a test that checks gpulint left nothing behind reads only what this test made,
    whatever else runs on the machine."""
    private = tmp_path_factory.mktemp("tmp", numbered=True)
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    yield private


def rules_of(findings: list[Finding]) -> list[str]:
    return [f.rule for f in findings]


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"the real-manifest corpus ({CORPUS}) is not present")
    return CORPUS


# What a whole run builds or starts once (session fixtures): the tests that take one run on
# one pytest-xdist worker, so that two workers do not each build the wheel or start the
# Prometheus of the recorded day.
SHARED_ONCE = {
    "distributions": "artifacts",
    "wheel_install": "artifacts",
    "image_install": "artifacts",
    "action_install": "artifacts",
    "world": "live-prometheus",
    "recorded": "replay-prometheus",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes the corpus is a corpus test (`pytest -m corpus` runs them alone).
    Under pytest-xdist (``--dist loadgroup``, pyproject.toml) a module's tests stay on one
    worker, as its module fixtures (a webhook, a fake API server) start once; tests that take
    a run-wide fixture share its worker whatever their module."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "corpus" in names:
            item.add_marker(pytest.mark.corpus)
        group = next((SHARED_ONCE[n] for n in names if n in SHARED_ONCE), None)
        item.add_marker(pytest.mark.xdist_group(group or item.nodeid.split("::", 1)[0]))


@pytest.fixture
def kustomize() -> list[str]:
    """The argv prefix of a kustomize build (tests/tools.py ``kustomize_command``): skips the
    test without kustomize, or fails it under CI=true."""
    return kustomize_command()


@pytest.fixture
def helm() -> list[str]:
    """The argv prefix of Helm (tests/tools.py ``helm_command``): skips the test without
    Helm, or fails it under CI=true."""
    return helm_command()


# --- what users install (tests/artifacts.py) -------------------------------------------------


def _usable_by_anyone(path: str) -> bool:
    real = Path(os.path.realpath(path))
    if not real.is_file() or not real.stat().st_mode & 0o001:
        return False
    return all(parent.stat().st_mode & 0o001 for parent in real.parents)


def image_interpreter() -> str:
    """A Python 3.11+ the image's non-root user could run (a pyenv build under /root cannot
    be), as /usr/local/bin/python3.11 is in the image; this one when there is none."""
    for candidate in (sys.executable, "/usr/local/bin/python3.11", "/usr/bin/python3.11"):
        if _usable_by_anyone(candidate):
            return candidate
    return sys.executable


@pytest.fixture(scope="session")
def distributions(tmp_path_factory: pytest.TempPathFactory) -> artifacts.Distributions:
    """The sdist and the wheel of the tracked tree, built once per run."""
    return artifacts.build_distributions(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="session")
def wheel_install(
    distributions: artifacts.Distributions, tmp_path_factory: pytest.TempPathFactory
) -> artifacts.Install:
    """The wheel with the extras a user of every command installs, in an empty venv."""
    place = tmp_path_factory.mktemp("wheel-install")
    venv = artifacts.fresh_venv(place / "venv")
    artifacts.pip_install(venv, f"{distributions.wheel}[webhook,live]")
    return artifacts.Install("wheel", venv, place)


@pytest.fixture(scope="session")
def image_install() -> Iterator[artifacts.Install]:
    """The Dockerfile's build stage replayed; readable and runnable by the image's user."""
    # In the machine's temporary directory, not the test's private one: the image's user (not
    # this one) must reach it, and pytest's own directories are this user's alone.
    scratch = Path(tempfile.mkdtemp(prefix="gpulint-image-", dir=SYSTEM_TEMP))
    os.chmod(scratch, 0o755)
    try:
        venv = artifacts.replay_image_build(scratch, image_interpreter())
        home = scratch / "home"
        home.mkdir()
        for path in [scratch, *scratch.rglob("*")]:
            if path.is_dir():
                os.chmod(path, 0o755)
        yield artifacts.Install("image", venv, home)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="session")
def action_install(tmp_path_factory: pytest.TempPathFactory) -> artifacts.Install:
    """action.yml's install step as written, with ``python`` a fresh one (setup-python's) and
    ACTION_PATH a checkout of the action (the tracked files)."""
    place = tmp_path_factory.mktemp("action-install")
    venv = artifacts.fresh_venv(place / "python")
    checkout = artifacts.tracked_copy(place / "action")
    step = artifacts.action_step("install")
    env = {
        **artifacts.clean_environment(venv, place),
        **artifacts.QUIET_PIP,
        "ACTION_PATH": str(checkout),
    }
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=place,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return artifacts.Install("action", venv, place)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        help="write the text report of every failing fixture to its snapshot (tests/snapshots.py)",
    )
