"""CPU time of ``gpulint lint`` from two source trees on the same inputs, alternated.

    python bench/compare_trees.py BEFORE_TREE AFTER_TREE DIR [DIR ...] [--repeat 3]

Each DIR is linted (``python -m gpulint lint .`` from inside it) with ``PYTHONPATH`` set to
each tree in turn, by this interpreter, ``--repeat`` times; the median CPU time (user +
system, forked children included: ``os.wait4``), wall time and peak RSS of each are printed
as a Markdown table for bench/RESULTS.md. CPU time is the measure on a shared machine, where
wall time is mostly other processes'. Make the inputs with bench/generate.py; make a tree of
an older commit with ``git worktree add --detach DIR COMMIT``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def measure(tree: Path, directory: Path) -> tuple[float, float, float]:
    """(CPU seconds, wall seconds, peak RSS MiB) of one lint of ``directory``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "gpulint", "lint", "."],
        cwd=directory,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"gpulint from {tree} failed on {directory}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("directories", type=Path, nargs="+")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| input | CPU s before | CPU s after | wall s before / after | RSS MiB before / after |")
    print("|---|---:|---:|---:|---:|")
    for directory in args.directories:
        runs: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
        for _ in range(args.repeat):
            runs["before"].append(measure(args.before.resolve(), directory))
            runs["after"].append(measure(args.after.resolve(), directory))
        cpu = {k: statistics.median(r[0] for r in v) for k, v in runs.items()}
        wall = {k: statistics.median(r[1] for r in v) for k, v in runs.items()}
        rss = {k: max(r[2] for r in v) for k, v in runs.items()}
        print(
            f"| {directory.name} | {cpu['before']:.2f} | {cpu['after']:.2f} | "
            f"{wall['before']:.2f} / {wall['after']:.2f} | "
            f"{rss['before']:.0f} / {rss['after']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
