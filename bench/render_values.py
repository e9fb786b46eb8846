"""Time the renderings gpulint adds to render what a repository's authors render.

    python bench/render_values.py --before /work/main/.venv/bin/gpulint \
        --after .venv/bin/gpulint [--count 10] [--repeat 3]

Four small repositories, each of ``--count`` copies of one layout, linted by two gpulint
executables (before and after a change; either may be the same):

* ``charts-plain``: charts that render with their values.yaml (no extra rendering: the cost
  of looking for ci/ values and samples);
* ``charts-ci``: charts with two chart-testing ``ci/*-values.yaml`` (a render per file);
* ``charts-sample``: charts that need the ``values_sample.yaml`` beside Chart.yaml (a failed
  render with values.yaml, then one with the sample);
* ``overlays-env``: overlays whose ``.env`` generator input is missing and whose
  replacements read a key from it (stand-ins with the key, against GL704 and the base built
  alone).

For each: the median wall time of ``gpulint lint --format json``, its render phase (the JSON
report's renderSeconds: every helm and kustomize run, the failed ones too), the units, and
how many GL704. Nothing here asserts: it prints a Markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_lint import machine  # noqa: E402

APP = """apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
      - name: vllm
        image: IMAGE
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: vllm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "80"}
"""


def chart(directory: Path, image: str, values: str) -> None:
    (directory / "templates").mkdir(parents=True)
    (directory / "Chart.yaml").write_text(
        f"apiVersion: v2\nname: {directory.name}\nversion: 1.0.0\n"
    )
    (directory / "values.yaml").write_text(values)
    (directory / "templates" / "app.yaml").write_text(APP.replace("IMAGE", image))


def layout(root: Path, name: str, count: int) -> None:
    for i in range(count):
        home = root / f"app-{i}"
        if name == "charts-plain":
            chart(home, "{{ .Values.image }}", "image: nvcr.io/nim:1\n")
        elif name == "charts-ci":
            chart(home, "{{ .Values.image }}", "image: nvcr.io/nim:1\n")
            (home / "ci").mkdir()
            (home / "ci" / "h100-values.yaml").write_text("image: nvcr.io/nim:h100\n")
            (home / "ci" / "h200-values.yaml").write_text("image: nvcr.io/nim:h200\n")
        elif name == "charts-sample":
            chart(home, "{{ .Values.secrets.image }}", "replicas: 1\n")
            (home / "values_sample.yaml").write_text("secrets: {image: nvcr.io/nim:1}\n")
        elif name == "overlays-env":
            base = home / "base"
            base.mkdir(parents=True)
            (base / "kustomization.yaml").write_text("resources: [app.yaml]\n")
            (base / "app.yaml").write_text(APP.replace("IMAGE", "placeholder"))
            overlay = home / "overlay"
            overlay.mkdir()
            (overlay / "kustomization.yaml").write_text(
                "resources: [../base]\n"
                "configMapGenerator:\n- name: vllm\n  envs: [vllm.env]\n"
                "replacements:\n"
                "- source: {kind: ConfigMap, name: vllm, fieldPath: data.CONTAINER_IMAGE_URL}\n"
                "  targets:\n  - select: {kind: Deployment}\n"
                "    fieldPaths: [spec.template.spec.containers.0.image]\n"
            )


LAYOUTS = ("charts-plain", "charts-ci", "charts-sample", "overlays-env")


def measure(gpulint: str, root: Path, repeat: int) -> tuple[float, float, int, int]:
    """(median wall s, median render s, units, GL704)."""
    command = [gpulint, "lint", "--no-config", "--format", "json", "--fail-on", "never", "."]
    subprocess.run(command, cwd=root, capture_output=True, check=True)  # warm
    walls, renders = [], []
    report: dict[str, object] = {}
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(command, cwd=root, capture_output=True, check=True)
        walls.append(time.perf_counter() - started)
        report = json.loads(done.stdout)
        renders.append(report["summary"]["renderSeconds"])  # type: ignore[index]
    summary = report["summary"]
    units = summary["units"]  # type: ignore[index]
    failed = sum(1 for f in report["findings"] if f["rule"] == "GL704")  # type: ignore[attr-defined]
    return statistics.median(walls), statistics.median(renders), len(units), failed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="gpulint executable before the change")
    parser.add_argument("--after", required=True, help="gpulint executable after the change")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print()
    print("| layout | gpulint | wall s | render s | units | GL704 |")
    print("|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="gpulint-bench-values-") as scratch:
        for name in LAYOUTS:
            root = Path(scratch) / name
            root.mkdir()
            layout(root, name, args.count)
            for label, gpulint in (("before", args.before), ("after", args.after)):
                wall, render, units, failed = measure(gpulint, root, args.repeat)
                print(
                    f"| {name} ({args.count}) | {label} | {wall:.2f} | {render:.2f} | "
                    f"{units} | {failed} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
