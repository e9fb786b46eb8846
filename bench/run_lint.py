"""Benchmark ``gpulint lint`` against the YAML parse floor, one input dimension at a time.

    python bench/run_lint.py [--repeat 3] [--only NAME ...] [--checkov]

Each row is one shape of bench/generate.py, changing one dimension of the input (apps, a
directory or a Helm chart per application, adapter configs, lint units, kustomize overlays,
kinds of objects, document size, autoscalers per target). For each, gpulint (a regular, non-
editable ``pip install`` into a fresh virtual environment, bytecode compiled, run from a scratch
directory as users run it) and the floor (bench/floor_compose.py: PyYAML's C loader composing
the same YAML, with the same interpreter) run alternately; the median wall time of each and
their ratio are printed, with gpulint's peak RSS. For kustomize overlays and Helm charts the
floor composes what kustomize or helm renders, and the renderer's own time (gpulint's render
phase, from its JSON report) is printed beside gpulint's and left out of the ratio.
``--checkov`` also times ``checkov --framework kubernetes`` at 1,000 apps (install it first:
``pip install checkov`` into any environment and pass ``--checkov-bin``). Nothing here asserts:
it prints a Markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import Shape, generate  # noqa: E402

# (row name, dimension, shape)
ROWS: list[tuple[str, str, Shape]] = [
    ("apps-1k", "apps", Shape(1000)),
    ("apps-10k", "apps", Shape(10000)),
    ("per-app-1k", "a unit per application directory", Shape(1000, per_app=True)),
    ("per-app-10k", "a unit per application directory", Shape(10000, per_app=True)),
    ("charts-100", "a Helm chart per application", Shape(100, charts=True)),
    ("charts-1k", "a Helm chart per application", Shape(1000, charts=True)),
    ("adapters-1k", "adapter configs (1 per 10 apps)", Shape(1000, adapter_every=10)),
    ("adapters-10k", "adapter configs (1 per 10 apps)", Shape(10000, adapter_every=10)),
    ("units-100", "units (10,000 apps)", Shape(10000, units=100)),
    ("units-1000", "units (10,000 apps)", Shape(10000, units=1000)),
    ("overlays-1", "kustomize overlays (base of 100 apps)", Shape(100, overlays=1)),
    ("overlays-10", "kustomize overlays (base of 100 apps)", Shape(100, overlays=10)),
    ("overlays-100", "kustomize overlays (base of 100 apps)", Shape(100, overlays=100)),
    ("scaledobjects-10k", "kinds", Shape(10000, kind="scaledobject")),
    ("knative-10k", "kinds", Shape(10000, kind="knative")),
    ("kserve-10k", "kinds", Shape(10000, kind="kserve")),
    ("docsize-1k-x1", "document size", Shape(1000, kind="hpa")),
    ("docsize-1k-x10", "document size", Shape(1000, kind="hpa", doc_scale=10)),
    ("targets-1k-x1", "autoscalers per target", Shape(1000, kind="hpa")),
    (
        "targets-1k-x10",
        "autoscalers per target",
        Shape(1000, kind="hpa", autoscalers_per_target=10),
    ),
]


def timed_rss(command: list[str], cwd: str) -> tuple[float, float, bytes]:
    """Like ``timed``, with the peak RSS of the process (os.wait4)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if os.waitstatus_to_exitcode(status) not in (0, 1) or b"Traceback" in stderr:
        raise SystemExit(f"{command} failed: {stderr.decode(errors='replace')}")
    return elapsed, usage.ru_maxrss / 1024, stdout


def _wall(command: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    return time.perf_counter() - started


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}, load average {load:.1f} at the start"
    )


def install(scratch: Path) -> str:
    """A fresh virtual environment with gpulint installed from this checkout; its python."""
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", str(HERE.parent)],
        check=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    return python


def _kustomize() -> list[str]:
    found = shutil.which("kustomize")
    if found:
        return [found, "build"]
    kubectl = shutil.which("kubectl") or str(Path(sys.executable).parent / "kubectl")
    return [kubectl, "kustomize"]


def _helm() -> str:
    return shutil.which("helm") or str(Path(sys.executable).parent / "helm")


def _rendered_floor_input(root: Path, floor_dir: Path) -> None:
    """What kustomize renders for each overlay (helm for each chart), as files for the floor
    to compose, with the plain files beside them."""
    floor_dir.mkdir(parents=True, exist_ok=True)
    if (root / "overlays").is_dir():
        for overlay in sorted((root / "overlays").iterdir()):
            output = subprocess.run([*_kustomize(), str(overlay)], capture_output=True, check=True)
            (floor_dir / f"{overlay.name}.yaml").write_bytes(output.stdout)
        for extra in root.glob("*.yaml"):
            shutil.copy(extra, floor_dir / extra.name)
        return
    for chart in sorted(root.glob("teams/*/*/Chart.yaml")):
        output = subprocess.run(
            [_helm(), "template", chart.parent.name, str(chart.parent)],
            capture_output=True,
            check=True,
        )
        (floor_dir / f"{chart.parent.name}.yaml").write_bytes(output.stdout)
    for extra in root.glob("teams/*/platform/*.yaml"):
        shutil.copy(extra, floor_dir / f"{extra.parent.parent.name}-{extra.name}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", help="row names (default: all)")
    parser.add_argument("--checkov-bin", help="a checkov executable to time at 1,000 apps")
    parser.add_argument(
        "--each", action="store_true", help="also print every run (stderr), with the load average"
    )
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # users' interpreters cache bytecode
    rows = [r for r in ROWS if not args.only or r[0] in args.only]
    print(f"machine: {machine()}")
    print()
    print(
        "| row | dimension | input | files | floor s | gpulint s | ratio | render s | "
        "peak RSS MiB |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as scratch:
        python = install(Path(scratch))
        gpulint = [
            str(Path(python).parent / "gpulint"),
            "lint",
            "--format",
            "json",
            "--fail-on",
            "never",
        ]
        for name, dimension, shape in rows:
            root = Path(scratch) / name
            files = generate(root, shape)
            floor_input = root
            if shape.overlays or shape.charts:
                floor_input = Path(scratch) / f"{name}-rendered"
                _rendered_floor_input(root, floor_input)
            timed_rss([*gpulint, str(root)], scratch)  # warm: bytecode, page cache
            floors, lints, renders, peaks = [], [], [], []
            for _ in range(args.repeat):
                floors.append(
                    timed_rss([python, str(HERE / "floor_compose.py"), str(floor_input)], scratch)[
                        0
                    ]
                )
                wall, peak, out = timed_rss([*gpulint, str(root)], scratch)
                render = json.loads(out)["summary"].get("renderSeconds", 0.0)
                lints.append(wall - render)
                renders.append(render)
                peaks.append(peak)
                if args.each:
                    # one line per run on stderr: on a shared machine the spread matters
                    print(
                        f"{name} run {len(lints)}: floor {floors[-1]:.2f} s, gpulint "
                        f"{lints[-1]:.2f} s, ratio {lints[-1] / floors[-1]:.2f}, peak RSS "
                        f"{peak:.0f} MiB, load average {os.getloadavg()[0]:.2f}",
                        file=sys.stderr,
                        flush=True,
                    )
            floor, lint = statistics.median(floors), statistics.median(lints)
            print(
                f"| {name} | {dimension} | {shape.describe()} | {files:,} | {floor:.2f} | "
                f"{lint:.2f} | {lint / floor:.2f} | {statistics.median(renders):.2f} | "
                f"{max(peaks):.0f} |",
                flush=True,
            )
            shutil.rmtree(root, ignore_errors=True)
        if args.checkov_bin:
            root = Path(scratch) / "checkov-1k"
            generate(root, Shape(1000))
            command = [
                args.checkov_bin,
                "-d",
                str(root),
                "--framework",
                "kubernetes",
                "--quiet",
                "--compact",
                "--skip-download",
                "-o",
                "json",
            ]
            # checkov exits 1 when checks fail and prints the traceback of a guidelines
            # download it cannot make offline: neither is a failure of the measurement.
            checkov = [_wall(command, scratch) for _ in range(args.repeat)]
            ours = [timed_rss([*gpulint, str(root)], scratch)[0] for _ in range(args.repeat)]
            print()
            theirs, mine = statistics.median(checkov), statistics.median(ours)
            print(
                f"checkov --framework kubernetes at 1,000 apps: {theirs:.2f} s; gpulint: "
                f"{mine:.2f} s ({theirs / mine:.1f}x faster)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
