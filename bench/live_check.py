"""Benchmark: the live check for 20 adapter rules against a real Prometheus with 50,000 GPU series.

    python bench/live_check.py [--nodes 250] [--repeat 5]

Starts the fixture dcgm-exporter of the live tests (tests/live/harness.py) for ``--nodes``
nodes with 8 GPUs each, every enabled counter of NVIDIA's counters files (25: 250 nodes give
50,000 series), scraped by /usr/bin/prometheus the way kube-prometheus-stack does
(``honor_labels: false``). Six GPUs per node belong to pods of 25 Deployments in 5 namespaces.

Measured, in the same run and against the same Prometheus:

* floor: the 20 ``/api/v1/series`` calls of the 20 rules, sent as gpulint sends them (4 at a
  time) with urllib, bodies read but not parsed: Prometheus's own answer time;
* collect: ``gpulint.live.collector.collect`` in this process (series calls, parsing, the
  rendered metricsQuery of each rule, the HPA queries);
* end to end: ``gpulint check-adapter --prometheus URL adapter.yaml hpas.yaml`` as a
  subprocess (interpreter start, imports, loading, every offline rule, the report).

Each figure is the median of ``--repeat`` runs. The target is under 3 s end to end.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpulint.engine.config import Settings  # noqa: E402
from gpulint.engine.runner import inventory_from_paths  # noqa: E402
from gpulint.live.collector import collect  # noqa: E402
from gpulint.live.options import LiveOptions  # noqa: E402
from tests.live.harness import (  # noqa: E402
    INSTALL_HINT,
    ExporterServer,
    Gpu,
    Job,
    PrometheusServer,
    Target,
    dcgm_counters,
    prometheus_binary,
    prometheus_config,
)

GPUS_PER_NODE = 8
ALLOCATED = 6
DEPLOYMENTS = 25
NAMESPACES = 5
RULES = 20
CONCURRENCY = 4


def targets(nodes: int) -> list[Target]:
    found = []
    for n in range(nodes):
        gpus = []
        for g in range(GPUS_PER_NODE):
            if g < ALLOCATED:
                index = n * ALLOCATED + g
                deployment = index % DEPLOYMENTS
                pod = f"model-{deployment}-5d8f7c6b9-{index:05d}"
                namespace = f"team-{deployment % NAMESPACES}"
                gpus.append(Gpu(g, 20 + index % 70, 0.2 + (index % 70) / 100, pod, namespace))
            else:
                gpus.append(Gpu(g))
        found.append(
            Target(
                f"node-{n}",
                f"gpu-node-{n:03d}",
                gpus=gpus,
                target_labels={
                    "namespace": "gpu-operator",
                    "pod": f"nvidia-dcgm-exporter-{n:05d}",
                    "container": "nvidia-dcgm-exporter",
                    "service": "nvidia-dcgm-exporter",
                    "endpoint": "gpu-metrics",
                    "instance": f"10.1.{n // 250}.{n % 250}:9400",
                },
            )
        )
    return found


def adapter_config(metrics: list[str]) -> str:
    lines = ["rules:"]
    for name in metrics:
        lines += [
            f'- seriesQuery: \'{name}{{exported_namespace!="",exported_pod!=""}}\'',
            "  resources:",
            "    overrides:",
            "      exported_namespace: {resource: namespace}",
            "      exported_pod: {resource: pod}",
            f'  name: {{matches: "^{name}$", as: "{name.lower()}"}}',
            "  metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'",
        ]
    return "\n".join(lines) + "\n"


def hpas(count: int) -> str:
    docs = []
    for d in range(count):
        docs.append(
            f"""apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: model-{d}, namespace: team-{d % NAMESPACES}}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: model-{d}}}
  minReplicas: 1
  maxReplicas: 100
  metrics:
  - type: Pods
    pods:
      metric: {{name: dcgm_fi_dev_gpu_util}}
      target: {{type: AverageValue, averageValue: "50"}}
"""
        )
    return "---\n".join(docs)


def floor(url: str, queries: list[str], window: float) -> float:
    """The rules' series calls, 4 at a time, with the HTTP client gpulint uses and its
    headers (gzip accepted); the raw bodies are read and dropped, not decoded or parsed."""
    now = time.time()
    pending = list(queries)
    lock = threading.Lock()
    session = requests.Session()

    def worker() -> None:
        while True:
            with lock:
                if not pending:
                    return
                query = pending.pop()
            params = {"match[]": query, "start": f"{now - window:.3f}", "end": f"{now:.3f}"}
            with session.get(f"{url}/api/v1/series", params=params, stream=True, timeout=60) as r:
                r.raw.read()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=250)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if prometheus_binary() is None:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    counters = dcgm_counters()
    nodes = targets(args.nodes)
    expected = args.nodes * GPUS_PER_NODE * len(counters)
    metrics = [c.name for c in counters][:RULES]
    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as workdir:
        work = Path(workdir)
        exporter = ExporterServer(nodes).start()
        config = prometheus_config(
            [Job("gpu-operator/nvidia-dcgm-exporter/0", False, nodes)], exporter, "10s"
        )
        prometheus = PrometheusServer(work / "prometheus", config)
        try:
            prometheus.start()
            started = time.monotonic()
            prometheus.wait_until(
                lambda: (
                    sum(
                        int(str(r["value"][1]))  # type: ignore[index]
                        for r in prometheus.query('count({__name__=~"DCGM_.+"})')
                    )
                    >= expected
                ),
                120,
                f"{expected} series",
            )
            ingest = time.monotonic() - started
            adapter = work / "adapter.yaml"
            adapter.write_text(adapter_config(metrics))
            hpa_file = work / "hpas.yaml"
            hpa_file.write_text(hpas(RULES))
            url = prometheus.url
            queries = [f'{m}{{exported_namespace!="",exported_pod!=""}}' for m in metrics]
            window = LiveOptions(url).max_age

            def in_process(paths: list[Path]) -> Callable[[], float]:
                def measure() -> float:
                    inventory = inventory_from_paths([str(p) for p in paths], Settings())
                    snapshot = collect(inventory, LiveOptions(url))
                    assert snapshot.available, snapshot.error
                    assert len(snapshot.rules) == RULES
                    return snapshot.elapsed

                return measure

            def end_to_end(paths: list[Path]) -> Callable[[], float]:
                def measure() -> float:
                    started = time.perf_counter()
                    result = subprocess.run(
                        [sys.executable, "-m", "gpulint", "check-adapter", "--prometheus", url]
                        + [str(p) for p in paths]
                        + ["-f", "json", "-o", os.devnull],
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                    )
                    elapsed = time.perf_counter() - started
                    assert result.returncode in (0, 1), result.stderr
                    return elapsed

                return measure

            floor(url, queries, window)  # warm Prometheus's caches as gpulint will find them
            measurements: list[tuple[str, Callable[[], float]]] = [
                ("floor: the 20 series calls, 4 at a time", lambda: floor(url, queries, window)),
                ("collect, 20 rules", in_process([adapter])),
                ("collect, 20 rules + 20 HPAs", in_process([adapter, hpa_file])),
                ("end to end, 20 rules", end_to_end([adapter])),
                ("end to end, 20 rules + 20 HPAs", end_to_end([adapter, hpa_file])),
            ]
            # Round robin, so that whatever else the machine does weighs on every figure alike.
            times: dict[str, list[float]] = {name: [] for name, _ in measurements}
            for _ in range(args.repeat):
                for name, measure in measurements:
                    times[name].append(measure())
            rows = [(name, statistics.median(values)) for name, values in times.items()]
        finally:
            prometheus.stop()
            exporter.stop()
    version = subprocess.run(
        [str(prometheus_binary()), "--version"], capture_output=True, text=True
    ).stdout.splitlines()[0]
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    print(
        f"series in Prometheus: {expected} ({args.nodes} nodes x {GPUS_PER_NODE} GPUs x "
        f"{len(counters)} counters), ingested in {ingest:.1f} s"
    )
    print(f"machine: {os.cpu_count()} CPUs, {cpu}; Python {platform.python_version()}; {version}")
    print(f"median of {args.repeat} runs")
    print()
    print("| measurement | seconds | x floor |")
    print("|---|---:|---:|")
    base = rows[0][1]
    for name, seconds in rows:
        print(f"| {name} | {seconds:.3f} | {seconds / base:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
