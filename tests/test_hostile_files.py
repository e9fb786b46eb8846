"""Files a pull request can commit that must neither hang, flood nor leak the linter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT, lint_result

HPA = (FIXTURES / "GL101" / "fail_cpu_only.yaml").read_text()


def _lint(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "-f", "json", "--fail-on", "never", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


def test_a_fifo_named_like_yaml_is_never_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "app.yaml").write_text(HPA)
    started = time.monotonic()
    result = _lint(".", cwd=tmp_path, timeout=30)
    assert time.monotonic() - started < 30 and result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "GL101" in {f["rule"] for f in report["findings"]}
    (skipped,) = report["summary"]["skipped"]
    assert skipped["file"].endswith("pipe.yaml") and "named pipe" in skipped["reason"]


def test_links_out_of_the_tree_are_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "secret.yaml"
    secret.parent.mkdir()
    secret.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: do-not-print-me}\n")
    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "zero.yaml").symlink_to("/dev/zero")
    (tree / "shadow.yaml").symlink_to(secret)
    (tree / "linked-dir").symlink_to(secret.parent)
    (tree / "app.yaml").write_text(HPA)
    (tree / "inside.yaml").symlink_to(tree / "app.yaml")  # a link inside the tree is fine
    result = _lint(".", cwd=tree, timeout=30)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "do-not-print-me" not in result.stdout
    skipped = {Path(s["file"]).name: s["reason"] for s in report["summary"]["skipped"]}
    assert set(skipped) == {"zero.yaml", "shadow.yaml", "linked-dir"}
    assert all("out of the linted tree" in reason for reason in skipped.values())
    files = {Path(f["file"]).name for f in report["findings"]}
    assert files == {"app.yaml", "inside.yaml"}


def test_a_file_over_the_size_limit_is_gl702_and_not_read(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_text("x: " + "y" * 5000 + "\n")
    (tmp_path / "app.yaml").write_text(HPA)
    result = _lint("--max-file-size", "1Ki", ".", cwd=tmp_path)
    report = json.loads(result.stdout)
    big = [f for f in report["findings"] if f["file"].endswith("big.yaml")]
    assert [f["rule"] for f in big] == ["GL702"]
    assert "over the limit of 1,024" in big[0]["message"]
    assert "GL101" in {f["rule"] for f in report["findings"]}
    piped = subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "--max-file-size", "1Ki", "-f", "json", "-"],
        input="x: " + "y" * 5000,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert "too large" in piped.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_directory_is_a_finding(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "app.yaml").write_text(HPA)
    locked.chmod(0)
    try:
        findings = lint_result(tmp_path).findings
    finally:
        locked.chmod(0o755)
    assert [(f.rule, Path(f.location.file).name) for f in findings] == [("GL702", "locked")]
    assert "cannot read directory" in findings[0].message


@pytest.mark.slow
def test_hostile_shapes_take_linear_time(tmp_path: Path) -> None:
    """Each of these took minutes (or was killed) before; now each is a few seconds at most
    on this machine: compared with a small multiple of the same shape at a tenth the size."""
    shapes = {
        "broken": lambda n: "".join("---\nbroken: [\n" for _ in range(n)),
        "comments": lambda n: "".join(f"# gpulint: ignore=GL101\nx{i}: 1\n" for i in range(n)),
        "sources": lambda n: "".join(
            f"---\n# Source: c/templates/t{i}.yaml\na{i}: 1\n" for i in range(n)
        ),
    }
    for name, make in shapes.items():
        times = []
        for size in (2_000, 20_000):
            path = tmp_path / f"{name}-{size}.yaml"
            path.write_text(make(size))
            started = time.monotonic()
            lint_result(path)
            times.append(time.monotonic() - started)
        # Quadratic growth would be 100x; allow generous noise above the linear 10x.
        assert times[1] < max(times[0] * 30, 2.0), (name, times)


@pytest.mark.slow
def test_the_repository_is_not_changed_by_linting_it() -> None:
    status = subprocess.run(["git", "status", "--porcelain"], capture_output=True, cwd=ROOT)
    if status.returncode != 0:
        pytest.skip("not a git checkout")
    before = status.stdout
    _lint("tests/fixtures/units", cwd=ROOT)
    after = subprocess.run(["git", "status", "--porcelain"], capture_output=True, cwd=ROOT)
    assert before == after.stdout
