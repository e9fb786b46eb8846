"""Trees and path lists a pull request can commit to make gpulint walk, copy or glob without
end: every walk is a loop, every copy and glob is within one budget for the run, a unit over
it is a finding and the rest of the report is kept, and no private copy is left behind.
Real git and helm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpulint.engine.config import Settings
from gpulint.engine.files import build_units, plan_units
from gpulint.input.units import RenderOptions
from gpulint.input.units.filetree import remove_tree

from .tools import helm_command, kustomize_command

pytestmark = pytest.mark.slow

HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: NAME}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: missing}
  minReplicas: 1
  maxReplicas: 3
  metrics:
    - type: Resource
      resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
"""


@pytest.fixture(autouse=True)
def _removed(tmp_path: Path) -> Iterator[None]:
    """The trees these tests make, removed without recursion (pytest's own clean-up of old
    temporary directories uses shutil.rmtree, which recurses)."""
    yield
    remove_tree(str(tmp_path))


# A GPU Deployment scaled on CPU: GL101, a finding to see that the rest of a run is judged.
GPU_APP = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: vllm/vllm-openai:v0.6.0
          resources: {limits: {nvidia.com/gpu: 1}}
---
""" + HPA.replace("NAME", "web").replace("name: missing", "name: web")


def _repo(root: Path) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _commit(root: Path) -> None:
    subprocess.run(["git", "add", "-A"], check=True, cwd=root)


def _chart(directory: Path, name: str, dependencies: tuple[str, ...] = ()) -> Path:
    (directory / "templates").mkdir(parents=True, exist_ok=True)
    lines = [f"apiVersion: v2\nname: {name}\nversion: 1.0.0\n"]
    if dependencies:
        lines.append("dependencies:\n")
        for dependency in dependencies:
            lines.append(
                f"  - name: {dependency}\n    version: 1.0.0\n"
                f"    repository: file://../{dependency}\n"
            )
    (directory / "Chart.yaml").write_text("".join(lines))
    (directory / "values.yaml").write_text("{}\n")
    (directory / "templates" / "hpa.yaml").write_text(HPA.replace("NAME", name))
    return directory


def _lint(cwd: Path, tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``gpulint lint -f json`` with a private TMPDIR, which must be empty afterwards."""
    tmp.mkdir(exist_ok=True)
    started = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "gpulint", "lint", "-f", "json"),
            *("--helm", helm_command()[0], "--kustomize", " ".join(kustomize_command())),
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ, TMPDIR=str(tmp)),
        timeout=120,
    )
    seconds = time.monotonic() - started
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr, done.stderr
    assert os.listdir(tmp) == []
    return done, seconds


def _findings(done: subprocess.CompletedProcess[str]) -> list[tuple[str, str, str]]:
    report = json.loads(done.stdout)
    return [(f["rule"], f["message"], f["file"]) for f in report["findings"]]


def _deep(directory: Path, levels: int) -> None:
    """A file ``levels`` directories below ``directory`` (made one level at a time)."""
    path = str(directory)
    os.makedirs(path, exist_ok=True)
    for _ in range(levels):
        path = os.path.join(path, "d")
        os.mkdir(path)
    with open(os.path.join(path, "x.yaml"), "w") as handle:
        handle.write("a: 1\n")


@pytest.mark.parametrize("tracked", [True, False], ids=["git", "no-git"])
def test_a_dependency_1200_directories_deep_is_copied_without_recursion(
    tmp_path: Path, tracked: bool
) -> None:
    root = _repo(tmp_path / "repo") if tracked else tmp_path / "repo"
    root.mkdir(exist_ok=True)
    _chart(root / "app", "app", ("deep",))
    _deep(_chart(root / "deep", "deep") / "files", 1200)
    if tracked:
        _commit(root)
    done, seconds = _lint(root, tmp_path / "tmp", "app")
    assert seconds < 10
    # The chart and its dependency rendered: both HPAs are objects of the unit.
    (unit,) = json.loads(done.stdout)["summary"]["units"]
    assert unit["renderedBy"] == ["helm template app"] and unit["objects"] == 2, unit
    assert not [rule for rule, _, _ in _findings(done) if rule in ("GL704", "GL705")]


def test_the_fallback_of_a_refused_chart_walks_a_deep_tree_without_recursion(
    tmp_path: Path,
) -> None:
    root = _repo(tmp_path / "repo")
    chart = _chart(root / "app", "app")
    _deep(chart / "files", 1200)
    (chart / "files" / "out").symlink_to("/etc/hostname")
    _commit(root)
    done, seconds = _lint(root, tmp_path / "tmp", "app")
    assert seconds < 10
    assert any(r == "GL705" and "link out of it" in m for r, m, _ in _findings(done))


def test_dependencies_that_multiply_with_links_stop_at_the_bound(tmp_path: Path) -> None:
    """Five levels of file:// dependencies, four per chart, 2,000 links to a directory in
    each: the copy would hold millions of entries. It stops at its bound, quickly, with a
    finding, and the other chart of the run is still judged."""
    root = _repo(tmp_path / "repo")
    levels, width, links = 5, 4, 2000
    for level in range(levels):
        below = tuple(f"c{level + 1}x{i}" for i in range(width)) if level < levels - 1 else ()
        for i in range(width):
            chart = _chart(root / f"c{level}x{i}", f"c{level}x{i}", below)
            (chart / "files" / "d").mkdir(parents=True)
            (chart / "files" / "d" / "f.txt").write_text("f\n")
            for n in range(links):
                (chart / "files" / f"l{n}").symlink_to("d")
    _chart(root / "other", "other")
    _commit(root)
    done, seconds = _lint(root, tmp_path / "tmp", "c0x0", "other")
    assert seconds < 10, seconds
    findings = _findings(done)
    assert any(
        rule == "GL705" and "Chart c0x0 was not rendered" in message and "more than" in message
        for rule, message, _ in findings
    ), findings
    units = {u["name"]: u for u in json.loads(done.stdout)["summary"]["units"]}
    assert units["c0x0"]["renderedBy"] == []
    assert units["other"]["renderedBy"] == ["helm template other"]


def test_an_applicationset_of_thousands_of_path_globs_is_bounded_per_run(
    tmp_path: Path,
) -> None:
    root = _repo(tmp_path / "repo")
    for i in range(50):
        for j in range(20):
            (root / "apps" / f"a{i}" / f"b{j}").mkdir(parents=True)
    paths = "\n".join(f"          - path: 'apps/*/*/x{i}*'" for i in range(5000))
    (root / "appset.yaml").write_text(
        "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: s}\n"
        "spec:\n  generators:\n    - git:\n        repoURL: https://example.invalid/r\n"
        f"        revision: HEAD\n        directories:\n{paths}\n"
        "  template:\n    spec:\n      destination: {server: https://kubernetes.default.svc}\n"
    )
    items = "\n".join(
        f"  - apiVersion: argoproj.io/v1alpha1\n    kind: Application\n"
        f"    metadata: {{name: a{i}}}\n    spec:\n      source: {{path: 'apps/*/*/y{i}*'}}\n"
        "      destination: {server: https://kubernetes.default.svc}"
        for i in range(5000)
    )
    (root / "list.yaml").write_text(f"apiVersion: v1\nkind: List\nitems:\n{items}\n")
    (root / "app.yaml").write_text(GPU_APP)
    done, seconds = _lint(root, tmp_path / "tmp", ".")
    assert seconds < 10, seconds
    report = json.loads(done.stdout)
    skipped = report["summary"]["skipped"]
    assert any("Flux and Argo CD" in json.dumps(s) for s in skipped), skipped
    assert ("GL101", "app.yaml") in {(r, f) for r, _, f in _findings(done)}  # the rest


def test_no_private_copy_is_left_when_rendering_fails_unexpectedly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpulint.input.units.tracked as tracked

    root = _repo(tmp_path / "repo")
    _chart(root / "app", "app", ("dep",))
    _chart(root / "dep", "dep")
    (root / "k").mkdir()
    (root / "k" / "kustomization.yaml").write_text("resources: [hpa.yaml]\n")
    (root / "k" / "hpa.yaml").write_text(HPA.replace("NAME", "k"))
    _commit(root)
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    calls = [0]
    copyfile = tracked.shutil.copyfile

    def failing(source: str, target: str) -> object:
        calls[0] += 1
        if calls[0] > 1:
            raise RuntimeError("disk on fire")
        return copyfile(source, target)

    monkeypatch.setattr(tracked.shutil, "copyfile", failing)
    options = RenderOptions(" ".join(kustomize_command()), helm_command()[0])
    for path in ("app", "k"):
        with pytest.raises(RuntimeError, match="disk on fire"):
            build_units(plan_units([str(root / path)], Settings()), options)
        assert os.listdir(private) == []
        calls[0] = 0
