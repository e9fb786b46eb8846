"""Benchmark ``gpulint lint`` against the YAML parse floor, as whole processes, in one run.

    python bench/run_lint.py [--apps 1000 10000] [--repeat 3]

gpulint is installed the way users get it (a regular, non-editable ``pip install`` into a
fresh virtual environment, with bytecode compiled), so that start-up is measured honestly.
For each size it generates the synthetic repository (bench/generate.py) once, then runs,
alternating, the floor (bench/floor_compose.py: PyYAML's C loader composing the same files,
with the same interpreter) and ``gpulint lint`` on it, and reports the median wall time of
each, their ratio and the peak RSS of the gpulint process. It also times ``gpulint lint`` on
one file next to ``python -c "import yaml"``. Nothing here asserts: it prints figures for
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import generate  # noqa: E402


def timed(command: list[str], cwd: str) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one child process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    errors = process.stderr.read() if process.stderr else b""
    if os.waitstatus_to_exitcode(status) not in (0, 1) or b"Traceback" in errors:
        raise SystemExit(
            f"{command} failed: {process.stderr.read().decode() if process.stderr else ''}"
        )
    return elapsed, usage.ru_maxrss / 1024


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--apps", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    # Users' interpreters write and reuse bytecode; some CI environments turn that off.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"machine: {machine()}")
    print("| apps | files | floor (compose) s | gpulint s | ratio | gpulint peak RSS MiB |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as scratch:
        python = install(Path(scratch))
        # The console script, run from the scratch directory, as a user runs it (``python -m``
        # from the checkout would import the source tree instead of the installed package).
        gpulint = [
            str(Path(python).parent / "gpulint"),
            "lint",
            "--format",
            "json",
            "--output",
            os.devnull,
            "--fail-on",
            "never",
        ]
        one_file = None
        for apps in args.apps:
            root = Path(scratch) / f"apps-{apps}"
            files = generate(apps, root)
            one_file = one_file or next(root.rglob("deployment.yaml"))
            floors, lints, peaks = [], [], []
            for _ in range(args.repeat):
                floors.append(
                    timed([python, str(HERE / "floor_compose.py"), str(root)], scratch)[0]
                )
                wall, peak = timed([*gpulint, str(root)], scratch)
                lints.append(wall)
                peaks.append(peak)
            floor, lint = statistics.median(floors), statistics.median(lints)
            print(
                f"| {apps:,} | {files:,} | {floor:.2f} | {lint:.2f} | {lint / floor:.2f} | "
                f"{max(peaks):.0f} |"
            )
        assert one_file is not None
        timed([*gpulint, str(one_file)], scratch)  # the first run compiles bytecode
        imports = [timed([python, "-c", "import yaml"], scratch)[0] for _ in range(10)]
        singles = [timed([*gpulint, str(one_file)], scratch)[0] for _ in range(10)]
        print()
        print(
            f"one file: gpulint lint {statistics.median(singles) * 1000:.0f} ms, "
            f"python -c 'import yaml' {statistics.median(imports) * 1000:.0f} ms "
            f"(median of 10)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
