"""The product as users install it: the sdist and the wheel (``pip install gpulint``, ``pip
install "gpulint @ git+…"``), the image (the Dockerfile's build replayed) and the GitHub
Action (action.yml's install step as written). Each runs from a directory outside the
repository with nothing of the source tree importable, and every command is tried from it.
The live and webhook parts are in tests/live/test_installed_live.py and
tests/webhook/test_dockerfile.py."""

from __future__ import annotations

import email.parser
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import gpulint
from gpulint.engine.registry import all_rules

from . import artifacts
from .conftest import ROOT
from .webhook import objects
from .webhook.harness import Certificates, admission_review, running

pytestmark = pytest.mark.slow

INSTALLS = ["wheel_install", "image_install", "action_install"]
SEEDS = ["seed-ja", "seed-ko"]


def install_of(request: pytest.FixtureRequest, name: str) -> artifacts.Install:
    found: artifacts.Install = request.getfixturevalue(name)
    return found


@pytest.fixture(params=INSTALLS)
def install(request: pytest.FixtureRequest) -> artifacts.Install:
    return install_of(request, request.param)


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    """A copy of examples/, the way a user's repository holds manifests."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "examples", copy / "examples")
    return copy


# --- the artifacts themselves ----------------------------------------------------------------


def test_the_wheel_holds_every_file_of_the_packages_and_nothing_else(
    distributions: artifacts.Distributions,
) -> None:
    tree = {
        shipped
        for name in artifacts.tracked_files()
        if (shipped := artifacts.wheel_path_of(name)) is not None
    }
    assert "gpulint/trace/chain.py" in tree and "gpulint/data/dcgm-fields.csv" in tree
    in_wheel = {
        name
        for name in distributions.wheel_names()
        if not name.split("/")[0].endswith(".dist-info")
    }
    assert sorted(tree - in_wheel) == [], "missing from the wheel"
    assert sorted(in_wheel - tree) == [], "in the wheel but not in the tree"


def test_the_sdist_builds_the_same_wheel(distributions: artifacts.Distributions) -> None:
    names = distributions.sdist_names()
    assert {"pyproject.toml", "setup.py", "README.md", "PKG-INFO"} <= names
    for name in artifacts.tracked_files():
        if artifacts.wheel_path_of(name) is not None:
            assert name in names, name


def test_metadata_passes_twine_check_and_carries_the_one_version(
    distributions: artifacts.Distributions,
) -> None:
    files = [str(distributions.sdist), str(distributions.wheel)]
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with zipfile.ZipFile(distributions.wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        fields = email.parser.Parser().parsestr(archive.read(metadata).decode())
    assert fields["Name"] == "gpulint"
    assert fields["Version"] == gpulint.__version__
    assert distributions.wheel.name.startswith(f"gpulint-{gpulint.__version__}-")
    assert fields["Requires-Python"] == ">=3.11"
    assert {"live", "webhook", "cluster"} <= set(fields.get_all("Provides-Extra") or [])


# --- every command, from each install --------------------------------------------------------


def test_it_runs_the_installed_copy_not_the_tree(install: artifacts.Install) -> None:
    probe = subprocess.run(
        [str(install.venv / "bin" / "python"), "-c", "import gpulint; print(gpulint.__file__)"],
        cwd=install.home,
        env=install.environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
    where = Path(probe.stdout.strip()).resolve()
    assert where.is_relative_to(install.venv.resolve()), where
    version = install.run("--version")
    assert version.stdout.strip() == f"gpulint {gpulint.__version__}"


def test_every_module_of_the_tree_is_installed(install: artifacts.Install) -> None:
    site = next((install.venv / "lib").glob("python3*/site-packages"))
    missing = [
        shipped
        for name in artifacts.tracked_files()
        if (shipped := artifacts.wheel_path_of(name)) is not None and not (site / shipped).is_file()
    ]
    assert missing == []


def test_every_module_imports_with_every_extra(wheel_install: artifacts.Install) -> None:
    program = (
        "import pkgutil, gpulint\n"
        "found = pkgutil.walk_packages(gpulint.__path__, 'gpulint.')\n"
        # gpulint.__main__ is `python -m gpulint`: importing it runs the command line.
        "names = [m.name for m in found if not m.name.endswith('.__main__')]\n"
        "for name in names: __import__(name)\n"
        "print(len(names))\n"
    )
    done = subprocess.run(
        [str(wheel_install.venv / "bin" / "python"), "-c", program],
        cwd=wheel_install.home,
        env=wheel_install.environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 100


@pytest.mark.parametrize("form", ["text", "json", "sarif", "github", "markdown"])
def test_lint_in_every_format(install: artifacts.Install, examples: Path, form: str) -> None:
    done = install.run("lint", "--format", form, "examples/", cwd=examples)
    assert done.returncode == 1, done.stderr  # the broken seeds have errors
    out = done.stdout
    if form == "json":
        report = json.loads(out)
        assert report["gpulintVersion"] == gpulint.__version__
        assert {f["rule"] for f in report["findings"]} >= {"GL103", "GL603", "GL604"}
    elif form == "sarif":
        run = json.loads(out)["runs"][0]
        assert run["tool"]["driver"]["version"] == gpulint.__version__
        assert run["results"]
    elif form == "github":
        assert re.search(r"^::error file=examples/seed-ja/broken/", out, re.MULTILINE)
    elif form == "markdown":
        assert out.startswith("## gpulint\n")
    else:
        assert "GL103 [error]" in out


@pytest.mark.parametrize("form", ["text", "json", "mermaid"])
def test_trace_in_every_format(install: artifacts.Install, examples: Path, form: str) -> None:
    paths = [f"examples/{seed}" for seed in SEEDS]
    done = install.run("trace", "--format", form, *paths, cwd=examples)
    assert done.returncode == 1, done.stderr  # the broken seeds' chains break
    if form == "json":
        traces = json.loads(done.stdout)["traces"]
        assert any(link["status"] == "broken" for t in traces for link in t["links"])
    elif form == "mermaid":
        assert "```mermaid\nflowchart LR" in done.stdout
    else:
        assert "BROKEN" in done.stdout


def test_rules_and_explain(install: artifacts.Install) -> None:
    listed = install.run("rules", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [s.id for s in all_rules()]
    explained = install.run("explain", "GL101")
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.startswith("GL101 ")


def test_fix_on_a_copy(install: artifacts.Install, examples: Path) -> None:
    before = install.run("lint", "--format", "json", "examples/", cwd=examples)
    fixed = install.run("lint", "--fix", "--unsafe-fixes", "examples/", cwd=examples)
    after = install.run("lint", "--format", "json", "examples/", cwd=examples)
    assert "fixed" in fixed.stderr + fixed.stdout
    count = len(json.loads(before.stdout)["findings"])
    assert 0 < len(json.loads(after.stdout)["findings"]) < count
    changed = subprocess.run(
        ["diff", "-r", "-q", str(ROOT / "examples"), str(examples / "examples")],
        capture_output=True,
        text=True,
    )
    assert changed.returncode == 1 and "differ" in changed.stdout


def test_serve_answers_an_admission_review_over_tls(
    wheel_install: artifacts.Install, tmp_path: Path
) -> None:
    certificates = Certificates(tmp_path)
    with running(
        certificates,
        tmp_path / "serve.log",
        ["--no-cluster"],
        program=[wheel_install.gpulint],
        env=wheel_install.environment(),
    ) as hook:
        denied = hook.review(admission_review(objects.isvc_with_mode_field()))
        assert denied["allowed"] is False
