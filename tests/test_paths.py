"""One path rule: every path gpulint prints opens from the directory it ran in.

A small git repository (the examples and the kustomize/Helm GitOps fixture under ``ex/``) is
linted from its top level, from the subdirectory ``ex/`` and from a directory outside it. In
every format, in ``--diff`` headers, in ``--fix`` notes and in the baseline note, each path
must name an existing file from that working directory, and name the same files the run from
the top level names. SARIF alone is spelled from the repository root (with ``uriBaseId``), and
a baseline written from the top level must match from anywhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpulint.core import paths

from .conftest import FIXTURES, ROOT

pytestmark = pytest.mark.slow

_TEXT_LOCATION = re.compile(r"^(\S+):(\d+):(\d+): (GL\d+) ", re.MULTILINE)
_GITHUB_FILE = re.compile(r"^::\w+ file=([^,]+),line=(\d+),col=(\d+),title=(GL\d+)", re.MULTILINE)
_MARKDOWN_ROW = re.compile(r"^\| (\S+):(\d+):(\d+) \| (GL\d+) ", re.MULTILINE)
_DIFF_HEADER = re.compile(r"^(?:---|\+\+\+) [ab]/(.+)$", re.MULTILINE)


def _git(directory: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=directory,
        check=True,
        capture_output=True,
    )


def _repository(parent: Path) -> Path:
    """A git repository holding the examples and the GitOps fixture under ``ex/``."""
    repository = parent / "repo"
    (repository / "ex").mkdir(parents=True)
    for name in ("seed-ja", "seed-ko"):
        shutil.copytree(ROOT / "examples" / name, repository / "ex" / name)
    shutil.copytree(FIXTURES / "units" / "gitops", repository / "ex" / "gitops")
    _git(repository, "init", "-q", "-b", "master")
    _git(repository, "add", "-A")
    _git(repository, "commit", "-q", "-m", "start")
    return repository


class Place:
    """A working directory and how the ``ex/`` tree is named from it."""

    def __init__(self, cwd: Path, target: str) -> None:
        self.cwd = cwd
        self.target = target


def _places(repository: Path) -> dict[str, Place]:
    outside = repository.parent / "elsewhere"
    outside.mkdir(exist_ok=True)
    return {
        "top level": Place(repository, "ex"),
        "subdirectory": Place(repository / "ex", "."),
        "outside": Place(outside, os.path.relpath(repository / "ex", outside)),
    }


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _repository(tmp_path_factory.mktemp("paths"))


@pytest.fixture(scope="module")
def tools() -> list[str]:
    from .tools import helm_command, kustomize_command

    return ["--kustomize", " ".join(kustomize_command()), "--helm", helm_command()[0]]


def _run(place: Place, tools: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", *tools, *args],
        cwd=place.cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "80"},
        timeout=600,
    )


def _opened(place: Place, path: str) -> Path:
    """The file ``path`` names from the place's working directory; it must exist."""
    assert not os.path.isabs(path), path
    opened = (place.cwd / path).resolve()
    assert opened.exists(), f"{path} does not open from {place.cwd}"
    return opened


Located = set[tuple[Path, int, int, str]]


def _located(place: Place, rows: list[tuple[str, ...]]) -> Located:
    return {(_opened(place, f), int(line), int(col), rule) for f, line, col, rule in rows}


def _json_locations(place: Place, report: dict[str, Any]) -> Located:
    found: Located = set()
    for finding in report["findings"]:
        found.add(
            (_opened(place, finding["file"]), finding["line"], finding["column"], finding["rule"])
        )
        for related in finding["related"]:
            if related.get("file"):
                _opened(place, related["file"])
    for unit in report["summary"]["units"]:
        assert _opened(place, unit["root"]).is_dir()
        assert _opened(place, unit["name"]).is_dir()
    return found


def _sarif_locations(repository: Path, report: dict[str, Any]) -> Located:
    run = report["runs"][0]
    root = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert root == repository.resolve().as_uri() + "/"
    found: Located = set()
    for result in run["results"]:
        physical = result["locations"][0]["physicalLocation"]
        artifact = physical["artifactLocation"]
        assert artifact["uriBaseId"] == "%SRCROOT%"
        assert artifact["uri"].startswith("ex/"), artifact  # from the repository root
        file = (repository / artifact["uri"]).resolve()
        assert file.is_file()
        region = physical["region"]
        found.add((file, region["startLine"], region["startColumn"], result["ruleId"]))
    return found


@pytest.mark.parametrize("fmt", ["text", "json", "github", "markdown", "sarif"])
def test_every_format_names_files_that_open_from_the_working_directory(
    repository: Path, tools: list[str], fmt: str
) -> None:
    seen: dict[str, Located] = {}
    for name, place in _places(repository).items():
        done = _run(place, tools, "--format", fmt, place.target)
        assert done.returncode == 1, (name, done.stderr)
        if fmt == "text":
            found = _located(place, _TEXT_LOCATION.findall(done.stdout))
        elif fmt == "github":
            found = _located(place, _GITHUB_FILE.findall(done.stdout))
        elif fmt == "markdown":
            # As Markdown shows it: a backslash before ASCII punctuation is an escape.
            shown = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", done.stdout)
            found = _located(place, _MARKDOWN_ROW.findall(shown))
        elif fmt == "json":
            found = _json_locations(place, json.loads(done.stdout))
        else:
            found = _sarif_locations(repository, json.loads(done.stdout))
        assert found, (name, done.stdout)
        seen[name] = found
    # The same findings at the same files, wherever gpulint ran.
    assert seen["subdirectory"] == seen["top level"] == seen["outside"]


def test_diff_headers_open_and_apply_from_the_working_directory(
    repository: Path, tools: list[str]
) -> None:
    """Inside the working directory, the patch names files from it. Outside it, git and
    patch refuse every name from there (``../``, absolute), so the patch names them from the
    directory that holds them, and says so on stderr with the commands that apply it."""
    patched: dict[str, set[Path]] = {}
    for name, place in _places(repository).items():
        done = _run(place, tools, "--diff", "--unsafe-fixes", place.target)
        assert done.returncode == 1, (name, done.stderr)
        headers = _DIFF_HEADER.findall(done.stdout)
        assert headers, (name, done.stdout)
        assert not any(h.startswith(("../", "/")) for h in headers), (name, headers)
        applies_in = place.cwd
        if name == "outside":
            base = re.search(r"names them from (\S+): apply it there", done.stderr)
            assert base is not None, done.stderr
            assert f"`git -C {base.group(1)} apply`" in done.stderr
            applies_in = (place.cwd / base.group(1)).resolve()
            assert applies_in == (repository / "ex").resolve()
        else:
            assert "names them from" not in done.stderr
        patched[name] = {_opened(Place(applies_in, "."), header) for header in headers}
        # git apply reads a plain unified diff's names from where it runs.
        check = subprocess.run(
            ["git", "apply", "--check", "-"],
            input=done.stdout,
            cwd=applies_in,
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, (name, check.stderr)
    assert patched["subdirectory"] == patched["top level"] == patched["outside"]


def test_fix_notes_name_files_that_open_from_the_working_directory(
    tmp_path: Path, tools: list[str]
) -> None:
    for name in ("subdirectory", "outside"):
        repository = _repository(tmp_path / name.replace(" ", "-"))
        place = _places(repository)[name]
        done = _run(place, tools, "--fix", "--format", "json", place.target)
        assert done.returncode in (0, 1), (name, done.stderr)
        notes = json.loads(done.stdout)["summary"]["notes"]
        fixed = next(n for n in notes if n.startswith("fixed: "))
        shown = re.fullmatch(r"fixed: \d+ fix(?:es)? applied to \d+ files? \((.*)\)", fixed)
        assert shown is not None, fixed
        files = shown.group(1).split(", ")
        for file in files:
            assert _opened(place, file).is_file()
        # And git sees exactly those files changed.
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repository,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        changed = {(repository / line[3:]).resolve() for line in status.splitlines()}
        assert {_opened(place, f) for f in files} == changed


def test_a_baseline_written_at_the_top_level_matches_from_anywhere(
    repository: Path, tools: list[str], tmp_path: Path
) -> None:
    places = _places(repository)
    baseline = repository / "gpulint-baseline.json"
    written = _run(
        places["top level"], tools, "--format", "json", "--write-baseline", baseline.name, "ex"
    )
    assert written.returncode == 0, written.stderr
    note = next(n for n in json.loads(written.stdout)["summary"]["notes"] if "baseline" in n)
    assert note.endswith(f"written to {baseline.name}")
    entries = json.loads(baseline.read_text())["entries"]
    total = sum(entry["count"] for entry in entries)
    assert total > 0
    # Findings about no object (a duplicate key) are keyed by file and message too.
    assert any("file" in entry for entry in entries)
    for name in ("subdirectory", "outside"):
        place = places[name]
        given = os.path.relpath(baseline, place.cwd)
        done = _run(place, tools, "--format", "json", "--baseline", given, place.target)
        assert done.returncode == 0, (name, done.stdout, done.stderr)
        summary = json.loads(done.stdout)["summary"]
        assert summary["baseline"] == {"baselined": total, "stale": 0, "notEvaluated": 0}, name
        # Written from here, the baseline is the same file.
        again = tmp_path / f"{name}.json"
        _run(place, tools, "--format", "json", "--write-baseline", str(again), place.target)
        assert json.loads(again.read_text()) == json.loads(baseline.read_text()), name


def test_changed_since_finds_the_repository_from_the_paths(
    tmp_path: Path, tools: list[str]
) -> None:
    repository = _repository(tmp_path)
    _git(repository, "checkout", "-q", "-b", "work")
    hpa = repository / "ex" / "seed-ko" / "broken" / "hpa.yaml"
    hpa.write_text(hpa.read_text().replace("maxReplicas: 2", "maxReplicas: 3"))
    outside = _places(repository)["outside"]
    target = os.path.join(outside.target, "seed-ko")
    done = _run(outside, tools, "--format", "json", "--changed-since", "master", target)
    assert done.returncode == 0, done.stderr  # warnings only: GL102 and GL406 of the HPA
    files = {_opened(outside, f["file"]) for f in json.loads(done.stdout)["findings"]}
    assert files == {hpa.resolve()}

    # Paths in no repository, or in two, are named in the error.
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    done = _run(outside, tools, "--changed-since", "master", str(elsewhere))
    assert done.returncode == 2
    assert f"{os.path.relpath(elsewhere, outside.cwd)} is not in a git repository" in done.stderr
    other = _repository(tmp_path / "second")
    done = _run(outside, tools, "--changed-since", "master", target, str(other / "ex"))
    assert done.returncode == 2
    assert "the paths are in 2 git repositories" in done.stderr


def test_messages_keep_their_baseline_key_from_any_directory(
    repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: dict[str, str] = {}
    for cwd in (repository, repository / "ex", repository / "ex" / "gitops"):
        monkeypatch.chdir(cwd)
        shown = paths.display_path(str(repository / "ex" / "gitops" / "overlays" / "prod"))
        text = f"kustomization {shown} names apps/v1, which is missing."
        written[str(cwd)] = paths.stable_words(text)
    assert set(written.values()) == {
        "kustomization ex/gitops/overlays/prod names apps/v1, which is missing."
    }


def _files_in(value: Any) -> list[str]:
    """Every ``file`` value of a JSON document."""
    if isinstance(value, dict):
        found = [v for k, v in value.items() if k == "file" and isinstance(v, str)]
        return found + [f for v in value.values() for f in _files_in(v)]
    if isinstance(value, list):
        return [f for v in value for f in _files_in(v)]
    return []


def test_trace_names_files_that_open_from_the_working_directory(
    repository: Path, tools: list[str]
) -> None:
    seen: dict[str, set[Path]] = {}
    for name, place in _places(repository).items():
        done = subprocess.run(
            [sys.executable, "-m", "gpulint", "trace", *tools, "--format", "json", place.target],
            cwd=place.cwd,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
            timeout=600,
        )
        assert done.returncode == 1, (name, done.stderr)
        files = _files_in(json.loads(done.stdout))
        assert files, name
        seen[name] = {_opened(place, f) for f in files}
    assert seen["subdirectory"] == seen["top level"] == seen["outside"]
