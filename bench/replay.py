"""Benchmark: ``gpulint replay`` of 50 HPAs over 24 h at 15 s, against fetching the data alone.

    python bench/replay.py [--autoscalers 50] [--repeat 3]

A real Prometheus (/usr/bin/prometheus) holds a day at 15 s (5,761 points a series) for
``--autoscalers`` GPU Deployments, backfilled with ``promtool tsdb create-blocks-from
openmetrics``: 2 pods each reporting DCGM_FI_DEV_GPU_UTIL as dcgm-exporter does behind
kube-prometheus-stack, and kube-state-metrics' replicas; the loads are the end-to-end tests'
four (step, diurnal, spike train, slow ramp: tests/replay/loads.py), in turn. Each Deployment
has an HPA on gpu_utilization through one prometheus-adapter rule.

Measured, in the same run and against the same Prometheus:

* floor: the range queries a replay sends (the adapter's rendered query and kube-state-metrics'
  replicas, per HPA), sent one after the other with urllib, bodies read but not parsed:
  Prometheus's own answer time for the data;
* replay: ``gpulint replay --format json`` as a subprocess (interpreter start, imports,
  loading the manifests, fetching and parsing the history, replaying each HPA, the JSON
  report), then the same with ``--compare-fix`` (each HPA replayed twice), with
  ``--node-ready-after 5m --gpu-hour-cost 2.5`` (the node pool and the price), and with
  ``--recommend`` (the search over each HPA's targets, behavior and tolerance on the fetched
  history); the peak RSS of each (its own process's, reported by a wrapper).

Each figure is the median of ``--repeat`` runs. The targets are under 10 s for 50 autoscalers
replayed, and under 60 s for their recommendations.
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
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live.harness import INSTALL_HINT, PrometheusServer, prometheus_binary  # noqa: E402
from tests.replay import loads  # noqa: E402

PODS = 2
SCENARIO_NAMES = list(loads.SCENARIOS)


def manifests(count: int) -> str:
    parts = [
        (
            ROOT / "tests" / "replay" / "fixtures" / "scenarios" / "prometheus-adapter.yaml"
        ).read_text()
    ]
    for i in range(count):
        name = f"app-{i:02d}"
        _, target = loads.SCENARIOS[SCENARIO_NAMES[i % 4]]
        parts.append(
            f"""---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: ml}}
spec:
  replicas: {PODS}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: server
        image: nvcr.io/nvidia/tritonserver:24.01-py3
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: {name}, namespace: ml}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}
  minReplicas: 1
  maxReplicas: 8
  metrics:
  - type: Pods
    pods:
      metric: {{name: gpu_utilization}}
      target: {{type: AverageValue, averageValue: "{target:g}"}}
"""
        )
    return "".join(parts)


def openmetrics(start: float, count: int) -> str:
    points = int(loads.DAY / loads.STEP) + 1
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for i in range(count):
        load, target = loads.SCENARIOS[SCENARIO_NAMES[i % 4]]
        for pod in range(PODS):
            labels = f'{{exported_namespace="ml",exported_pod="app-{i:02d}-6d8f7c9b5-p{pod:04d}"}}'
            for k in range(points):
                value = min(100.0, load(k * loads.STEP) * target / 8)
                lines.append(
                    f"DCGM_FI_DEV_GPU_UTIL{labels} {value:.3f} {start + k * loads.STEP:.0f}"
                )
    lines.append("# TYPE kube_deployment_status_replicas gauge")
    for i in range(count):
        labels = f'{{deployment="app-{i:02d}",namespace="ml"}}'
        for k in range(points):
            lines.append(
                f"kube_deployment_status_replicas{labels} {PODS} {start + k * loads.STEP:.0f}"
            )
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def floor(url: str, count: int, start: float, end: float) -> float:
    """The range queries of a replay, bodies read, not parsed."""
    began = time.perf_counter()
    for i in range(count):
        name = f"app-{i:02d}"
        for query in (
            'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",'
            f'exported_pod=~"{name}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}"}}) by (exported_pod)',
            "max(kube_horizontalpodautoscaler_status_current_replicas{"
            f'namespace="ml",horizontalpodautoscaler="{name}"}})',
            f'max(kube_deployment_status_replicas{{namespace="ml",deployment="{name}"}})',
        ):
            params = urllib.parse.urlencode(
                {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": "15"}
            )
            with urllib.request.urlopen(f"{url}/api/v1/query_range?{params}", timeout=60) as r:
                r.read()
    return time.perf_counter() - began


# Runs gpulint's CLI and writes its own peak RSS (KiB) on stderr's last line: the peak of
# RUSAGE_CHILDREN would be the largest of every run so far.
_WRAPPER = (
    "import resource, sys\n"
    "from gpulint.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "used = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print(used.ru_utime + used.ru_stime, used.ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def replay_run(url: str, directory: Path, end: float, *extra: str) -> tuple[float, float, float]:
    """Seconds, CPU seconds and the peak RSS (MiB) of one ``gpulint replay``."""
    command = [sys.executable, "-c", _WRAPPER, "replay", str(directory), "--no-config"]
    command += ["--prometheus", url, "--end", str(end), "--range", "24h", "--format", "json"]
    # a generous deadline: on a loaded machine Prometheus answers 50 histories slowly
    command += ["-o", os.devnull, "--fail-on", "never", "--prometheus-timeout", "600", *extra]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    cpu, peak = done.stderr.strip().splitlines()[-1].split()
    return seconds, float(cpu), int(peak) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--autoscalers", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if prometheus_binary() is None:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gpulint-bench-replay-") as scratch:
        work = Path(scratch)
        start = loads.history_start(time.time())
        end = start + loads.DAY
        (work / "manifests").mkdir()
        (work / "manifests" / "all.yaml").write_text(manifests(args.autoscalers))
        began = time.perf_counter()
        server = PrometheusServer(
            work / "prometheus", loads.prometheus_config(), openmetrics(start, args.autoscalers)
        )
        server.start()
        print(f"backfilled and started in {time.perf_counter() - began:.1f} s", file=sys.stderr)
        try:
            floors: list[float] = []
            kinds = {
                "gpulint replay --format json": (),
                "with --compare-fix (two replays each)": ("--compare-fix",),
                "with --node-ready-after 5m --gpu-hour-cost 2.5": (
                    "--node-ready-after",
                    "5m",
                    "--gpu-hour-cost",
                    "2.5",
                ),
                "with --recommend (the search)": ("--recommend",),
            }
            times: dict[str, list[float]] = {name: [] for name in kinds}
            cpus: dict[str, list[float]] = {name: [] for name in kinds}
            peaks: dict[str, list[float]] = {name: [] for name in kinds}
            for _ in range(args.repeat):
                floors.append(floor(server.url, args.autoscalers, start, end))
                for name, extra in kinds.items():
                    seconds, cpu, peak = replay_run(server.url, work / "manifests", end, *extra)
                    times[name].append(seconds)
                    cpus[name].append(cpu)
                    peaks[name].append(peak)
        finally:
            server.stop()
    f = statistics.median(floors)
    print(
        f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{args.autoscalers} HPAs, 24 h at 15 s (5,761 points a series), median of {args.repeat}")
    # CPU seconds beside the wall clock: on a shared machine the wall clock is also the
    # others' load.
    print("| what | s | x floor | CPU s | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|")
    print(f"| floor: the range queries, bodies read | {f:.2f} | 1.0 | - | - |")
    for name in kinds:
        seconds, cpu = statistics.median(times[name]), statistics.median(cpus[name])
        print(
            f"| {name} | {seconds:.2f} | {seconds / f:.1f} | {cpu:.2f} | {max(peaks[name]):.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
