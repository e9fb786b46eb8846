"""The two monitoring setups the live tests run against, each a real Prometheus.

``stack``: kube-prometheus-stack style. Prometheus Operator scrapes dcgm-exporter through a
ServiceMonitor with ``honorLabels: false``, so the target labels pod/namespace/container name
the exporter and the workload's labels become exported_pod/exported_namespace/
exported_container.

* gpu-node-1 (dcgm-exporter, ``Hostname``): Deployment triton in namespace ml, one GPU per pod
  (GPU_UTIL 32 and 84); StatefulSet llm with two GPUs per pod: llm-0 (81 and 89) and llm-1
  (30 and 40).
* gpu-node-2 (a newer dcgm-exporter, lowercase ``hostname``): GPU 0 split into two MIG
  1g.10gb instances for Deployment embedder in namespace search (no DCGM_FI_DEV_GPU_UTIL);
  GPU 1 unallocated.
* gpu-node-3: dcgm-exporter with the 1.x compatibility names (dcgm_gpu_utilization ...) and
  no Kubernetes mapping.
* gpu-node-4: the legacy nvidia_gpu_prometheus_exporter (nvidia_gpu_duty_cycle ...).
* on both dcgm-exporter nodes DCGM_FI_PROF_PIPE_TENSOR_ACTIVE stops being exported after
  the second scrape.
* history: Triton's nv_gpu_utilization for namespace ml, from three days ago until two days
  ago (backfilled with promtool).

``noexporter``: a Prometheus whose scrape config leaves dcgm-exporter out: it scrapes only a
vLLM server (``vllm:num_requests_waiting``) as ``serviceMonitor/llm/vllm/0``.

``exporterdown``: a Prometheus whose dcgm-exporter job (``serviceMonitor/gpu-operator/
nvidia-dcgm-exporter/0``) points at a port nothing listens on: the target is down with
"connection refused".

``gmp``: a Prometheus that keeps the exporter's labels (``honor_labels: true``, like GKE
managed collection): pod/namespace name the workload. gke-gpu-node-1 runs Deployment whisper
in namespace speech (GPU_UTIL 45 and 71) and pod trainer-0 of StatefulSet trainer in research
(two GPUs at 91 and 93); gke-gpu-node-2 runs trainer-1 (two GPUs at 50 and 60).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from .harness import (
    ExporterServer,
    Gpu,
    Job,
    PrometheusServer,
    Target,
    free_port,
    openmetrics_history,
    prometheus_config,
)

STOPPING_METRIC = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
STOP_AFTER = 2
HISTORY_METRIC = "nv_gpu_utilization"
HISTORY_END_AGO = 2 * 86400.0  # the metric disappeared two days ago


def _operator_labels(pod: str, namespace: str, ip: str, service: str) -> dict[str, str]:
    """Target labels prometheus-operator sets for a ServiceMonitor endpoint (promcfg.go)."""
    return {
        "namespace": namespace,
        "pod": pod,
        "container": service,
        "service": service,
        "endpoint": "gpu-metrics",
        "instance": f"{ip}:9400",
    }


def stack_targets() -> list[Target]:
    return [
        Target(
            "stack-gpu-node-1",
            "gpu-node-1",
            gpus=[
                Gpu(0, 32, 0.31, "triton-7d9f8b6c5-x2k4q", "ml", "triton"),
                Gpu(1, 84, 0.77, "triton-7d9f8b6c5-p9w7z", "ml", "triton"),
                Gpu(2, 81, 0.70, "llm-0", "ml", "vllm"),
                Gpu(3, 89, 0.74, "llm-0", "ml", "vllm"),
                Gpu(4, 30, 0.28, "llm-1", "ml", "vllm"),
                Gpu(5, 40, 0.36, "llm-1", "ml", "vllm"),
            ],
            target_labels=_operator_labels(
                "nvidia-dcgm-exporter-7xk2p", "gpu-operator", "10.0.1.11", "nvidia-dcgm-exporter"
            ),
            stop_after={STOPPING_METRIC: STOP_AFTER},
        ),
        Target(
            "stack-gpu-node-2",
            "gpu-node-2",
            hostname_label="hostname",
            gpus=[
                Gpu(0, 0, 0.42, "embedder-6f5b7c8d9-h7k2m", "search", "embedder", "1g.10gb", 1),
                Gpu(0, 0, 0.38, "embedder-6f5b7c8d9-q4n8s", "search", "embedder", "1g.10gb", 2),
                Gpu(1, 0, 0.0),
            ],
            target_labels=_operator_labels(
                "nvidia-dcgm-exporter-m4r8t", "gpu-operator", "10.0.2.11", "nvidia-dcgm-exporter"
            ),
            stop_after={STOPPING_METRIC: STOP_AFTER},
        ),
        Target(
            "stack-gpu-node-3",
            "gpu-node-3",
            kind="dcgm-1x",
            gpus=[Gpu(0, 55), Gpu(1, 61)],
            target_labels=_operator_labels(
                "dcgm-exporter-1x-b7x9k", "monitoring", "10.0.3.11", "dcgm-exporter-1x"
            ),
        ),
        Target(
            "stack-gpu-node-4",
            "gpu-node-4",
            kind="nvidia-gpu-exporter",
            gpus=[Gpu(0, 35), Gpu(1, 67)],
            target_labels=_operator_labels(
                "nvidia-gpu-exporter-5d8kq", "monitoring", "10.0.4.11", "nvidia-gpu-exporter"
            ),
        ),
    ]


def gmp_targets() -> list[Target]:
    return [
        Target(
            "gmp-gpu-node-1",
            "gke-gpu-node-1",
            gpus=[
                Gpu(0, 45, 0.41, "whisper-6b8d7c9f4-k2j4h", "speech", "whisper"),
                Gpu(1, 71, 0.66, "whisper-6b8d7c9f4-m8n3p", "speech", "whisper"),
                Gpu(2, 91, 0.85, "trainer-0", "research", "trainer"),
                Gpu(3, 93, 0.88, "trainer-0", "research", "trainer"),
            ],
            target_labels={"instance": "10.8.0.5:9400"},
        ),
        Target(
            "gmp-gpu-node-2",
            "gke-gpu-node-2",
            hostname_label="hostname",
            gpus=[
                Gpu(0, 50, 0.45, "trainer-1", "research", "trainer"),
                Gpu(1, 60, 0.52, "trainer-1", "research", "trainer"),
            ],
            target_labels={"instance": "10.8.1.7:9400"},
        ),
    ]


def stack_history(now: float) -> str:
    end = now - HISTORY_END_AGO
    series = [
        (
            HISTORY_METRIC,
            "GPU utilization (0.0 - 1.0)",
            {
                "gpu_uuid": f"GPU-5e0d7f3a-000{i}",
                "job": "triton",
                "instance": "10.0.1.20:8002",
                "namespace": "ml",
                "pod": f"triton-5c4d8b7f6-zzq2{i}",
            },
            0.4 + i / 10,
        )
        for i in range(2)
    ]
    return openmetrics_history(series, end - 86400.0, end, 300.0)


@dataclass
class World:
    exporter: ExporterServer
    stack: PrometheusServer
    gmp: PrometheusServer
    noexporter: PrometheusServer
    exporterdown: PrometheusServer

    def url(self, name: str) -> str:
        return {
            "stack": self.stack.url,
            "gmp": self.gmp.url,
            "noexporter": self.noexporter.url,
            "exporterdown": self.exporterdown.url,
        }[name]

    def stop(self) -> None:
        for server in (self.stack, self.gmp, self.noexporter, self.exporterdown):
            server.stop()
        self.exporter.stop()


DCGM_JOB = "serviceMonitor/gpu-operator/nvidia-dcgm-exporter/0"


def vllm_target() -> Target:
    return Target(
        "vllm-server",
        "cpu-node-1",
        kind="vllm",
        target_labels=_operator_labels("llm-7c9d8b6f5-q2w4e", "llm", "10.0.5.21", "vllm"),
    )


def down_config(port: int, interval: str) -> str:
    """A dcgm-exporter job whose only target is a loopback port nothing listens on."""
    config = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [
            {
                "job_name": DCGM_JOB,
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{port}"],
                        "labels": _operator_labels(
                            "nvidia-dcgm-exporter-z8x2c",
                            "gpu-operator",
                            "10.0.1.12",
                            "nvidia-dcgm-exporter",
                        ),
                    }
                ],
            }
        ],
    }
    return json.dumps(config, indent=2)


def start_world(
    workdir: Path, interval: str = "1s", ports: tuple[int | None, int | None] = (None, None)
) -> World:
    """Start the exporters and both Prometheus servers; return once the data is in.

    ``ports``: fixed ports for (stack, gmp); free loopback ports by default.
    """
    stack, gmp, vllm = stack_targets(), gmp_targets(), vllm_target()
    exporter = ExporterServer([*stack, *gmp, vllm]).start()
    stack_jobs = [
        Job(DCGM_JOB, False, stack[:2]),
        Job("monitoring/dcgm-exporter-1x/0", False, stack[2:3]),
        Job("monitoring/nvidia-gpu-exporter/0", False, stack[3:]),
    ]
    gmp_jobs = [Job("gke-gmp-system/dcgm-exporter", True, gmp)]
    stack_server = PrometheusServer(
        workdir / "stack",
        prometheus_config(stack_jobs, exporter, interval),
        backfill=stack_history(time.time()),
        port=ports[0],
    )
    gmp_server = PrometheusServer(
        workdir / "gmp", prometheus_config(gmp_jobs, exporter, interval), port=ports[1]
    )
    noexporter_server = PrometheusServer(
        workdir / "noexporter",
        prometheus_config([Job("serviceMonitor/llm/vllm/0", False, [vllm])], exporter, interval),
    )
    exporterdown_server = PrometheusServer(
        workdir / "exporterdown", down_config(free_port(), interval)
    )
    servers = (stack_server, gmp_server, noexporter_server, exporterdown_server)
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server.wait()
        stack_server.wait_for_scrapes(len(stack), STOP_AFTER + 2)
        gmp_server.wait_for_scrapes(len(gmp), 2)
        noexporter_server.wait_for_scrapes(1, 1)
        exporterdown_server.wait_until(
            lambda: bool(exporterdown_server.query("up == 0")), 15, "the exporter target down"
        )
        stack_server.wait_until(
            lambda: not stack_server.query(STOPPING_METRIC),
            15,
            f"{STOPPING_METRIC} went stale",
        )
    except BaseException:
        for server in servers:
            server.stop()
        exporter.stop()
        raise
    return World(exporter, stack_server, gmp_server, noexporter_server, exporterdown_server)
