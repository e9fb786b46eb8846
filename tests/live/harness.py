"""A real Prometheus scraping fixture GPU exporters: shared by the live tests, the benchmark
(bench/live_check.py) and the walk-through (examples/live/).

* ``ExporterServer`` serves, over aiohttp in a background thread, the text exposition of
  dcgm-exporter (the counters its shipped counters files enable, as gpulint's package data
  lists them, with gpulint's own help texts; labels gpu, UUID, pci_bus_id, device, modelName,
  Hostname or the newer hostname, MIG GPU_I_PROFILE/GPU_I_ID, and the pod mapping labels
  pod/namespace/container), of dcgm-exporter with the 1.x compatibility names, and of the
  legacy nvidia_gpu_prometheus_exporter (nvidia_gpu_*, no pod labels). A metric can stop
  being exported after a number of scrapes.
* ``PrometheusServer`` runs /usr/bin/prometheus on a free loopback port with a temporary
  TSDB and a generated prometheus.yml; history is backfilled with
  ``promtool tsdb create-blocks-from openmetrics`` before it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from aiohttp import web

from gpulint.metrics.names import KNOWN_METRICS, exporter_counters

ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = (
    "the live tests run a real Prometheus: install it with `apt-get install prometheus` "
    "(Debian/Ubuntu; it ships prometheus and promtool)"
)


# --- what the exporters expose ---------------------------------------------------------------


@dataclass(frozen=True)
class Counter:
    name: str
    type: str  # gauge | counter
    help: str


def dcgm_counters() -> list[Counter]:
    """The counters dcgm-exporter's shipped counters files enable (field, type), in file order,
    as gpulint's package data lists them; help texts are gpulint's own descriptions."""
    described = {metric.name: metric.help for metric in KNOWN_METRICS.values()}
    return [Counter(c.field, c.type, described.get(c.field, c.field)) for c in exporter_counters()]


DRIVER_VERSION = "550.54.15"
# dcgm-exporter does not report these per MIG instance (NVIDIA/DCGM#80).
NOT_ON_MIG = {
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
}


@dataclass
class Gpu:
    index: int
    util: float = 0.0  # percent, DCGM_FI_DEV_GPU_UTIL
    engine: float = 0.0  # ratio, DCGM_FI_PROF_GR_ENGINE_ACTIVE
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    mig_profile: str | None = None
    mig_id: int | None = None
    model: str = "NVIDIA A100-SXM4-80GB"

    def uuid(self, node: str) -> str:
        digest = zlib.crc32(f"{node}/{self.index}".encode()) * 4099 % (16**12)
        return f"GPU-{digest:012x}-{self.index:04d}-4c1e-9b2a-5e0d7f3a{self.index:04x}"


@dataclass
class Target:
    """One exporter (one node), scraped by one Prometheus job."""

    name: str
    node: str
    kind: str = "dcgm"  # dcgm | dcgm-1x | nvidia-gpu-exporter | vllm
    gpus: list[Gpu] = field(default_factory=list)
    hostname_label: str = "Hostname"
    # The scrape target's own labels (what Prometheus Operator sets on a ServiceMonitor job).
    target_labels: dict[str, str] = field(default_factory=dict)
    stop_after: dict[str, int] = field(default_factory=dict)  # metric -> scrapes
    counters: list[Counter] = field(default_factory=dcgm_counters)

    def exposition(self, scrape: int) -> str:
        if self.kind == "vllm":
            return _vllm_exposition(scrape)
        if self.kind == "nvidia-gpu-exporter":
            return _legacy_exposition(self, scrape)
        if self.kind == "dcgm-1x":
            return _dcgm_1x_exposition(self, scrape)
        return _dcgm_exposition(self, scrape)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _dcgm_value(counter: Counter, gpu: Gpu, scrape: int) -> float:
    name = counter.name
    busy = gpu.pod is not None
    table = {
        "DCGM_FI_DEV_GPU_UTIL": gpu.util,
        "DCGM_FI_DEV_MEM_COPY_UTIL": round(gpu.util / 2),
        "DCGM_FI_DEV_FB_USED": 38000.0 if busy else 0.0,
        "DCGM_FI_DEV_FB_FREE": 43000.0 if busy else 81000.0,
        "DCGM_FI_DEV_FB_RESERVED": 559.0,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": gpu.engine,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": round(gpu.engine * 0.6, 4),
        "DCGM_FI_PROF_DRAM_ACTIVE": round(gpu.engine * 0.5, 4),
        "DCGM_FI_PROF_PCIE_TX_BYTES": 120000000.0 if busy else 0.0,
        "DCGM_FI_PROF_PCIE_RX_BYTES": 240000000.0 if busy else 0.0,
        "DCGM_FI_DEV_SM_CLOCK": 1410.0,
        "DCGM_FI_DEV_MEM_CLOCK": 1593.0,
        "DCGM_FI_DEV_GPU_TEMP": 41.0 + gpu.util / 5,
        "DCGM_FI_DEV_MEMORY_TEMP": 38.0 + gpu.util / 6,
        "DCGM_FI_DEV_POWER_USAGE": 90.0 + gpu.util * 3,
    }
    if name in table:
        return table[name]
    if counter.type == "counter":
        return float(1000 * (scrape + 1) if "ENERGY" in name or "BANDWIDTH" in name else 0)
    return 0.0


def _dcgm_exposition(target: Target, scrape: int) -> str:
    lines: list[str] = []
    for counter in target.counters:
        stop = target.stop_after.get(counter.name)
        if stop is not None and scrape >= stop:
            continue
        rows = []
        for gpu in target.gpus:
            if gpu.mig_profile is not None and counter.name in NOT_ON_MIG:
                continue
            labels = [
                ("gpu", str(gpu.index)),
                ("UUID", gpu.uuid(target.node)),
                ("pci_bus_id", f"00000000:{0x07 + gpu.index * 8:02X}:00.0"),
                ("device", f"nvidia{gpu.index}"),
                ("modelName", gpu.model),
                (target.hostname_label, target.node),
            ]
            if gpu.mig_profile is not None:
                labels += [("GPU_I_PROFILE", gpu.mig_profile), ("GPU_I_ID", str(gpu.mig_id))]
            labels.append(("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION))
            if gpu.pod is not None:
                labels += [
                    ("container", gpu.container or "main"),
                    ("namespace", gpu.namespace or "default"),
                    ("pod", gpu.pod),
                ]
            rows.append(f"{counter.name}{_labels(labels)} {_dcgm_value(counter, gpu, scrape):g}")
        if rows:
            lines.append(f"# HELP {counter.name} {counter.help}")
            lines.append(f"# TYPE {counter.name} {counter.type}")
            lines.extend(rows)
    return "\n".join(lines) + "\n"


# dcgm-exporter's 1.x compatibility names (etc/1.x-compatibility-metrics.csv), without pod
# mapping: the exporter runs without --kubernetes.
_DCGM_1X = (
    ("dcgm_gpu_utilization", "gauge", "GPU utilization (in %).", "util"),
    ("dcgm_mem_copy_utilization", "gauge", "Memory utilization (in %).", "mem"),
    ("dcgm_fb_used", "gauge", "Framebuffer memory used (in MiB).", "fb"),
    ("dcgm_gpu_temp", "gauge", "GPU temperature (in C).", "temp"),
)


def _dcgm_1x_exposition(target: Target, scrape: int) -> str:
    lines: list[str] = []
    for name, kind, text, field_name in _DCGM_1X:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for gpu in target.gpus:
            value = {"util": gpu.util, "mem": gpu.util / 2, "fb": 12000.0, "temp": 50.0}[field_name]
            labels = [("gpu", str(gpu.index)), ("uuid", gpu.uuid(target.node))]
            lines.append(f"{name}{_labels(labels)} {value:g}")
    return "\n".join(lines) + "\n"


# nvidia_gpu_prometheus_exporter: per-GPU labels minor_number, name, uuid; no pod labels.
_LEGACY = (
    ("nvidia_gpu_duty_cycle", "Percent of time one or more kernels ran on the GPU.", "util"),
    ("nvidia_gpu_memory_used_bytes", "Memory used by the GPU device in bytes.", "used"),
    ("nvidia_gpu_memory_total_bytes", "Total memory of the GPU device in bytes.", "total"),
    ("nvidia_gpu_temperature_celsius", "Temperature of the GPU device in celsius.", "temp"),
    ("nvidia_gpu_power_usage_milliwatts", "Power usage of the GPU device in milliwatts.", "power"),
)


def _legacy_exposition(target: Target, scrape: int) -> str:
    lines = [
        "# HELP nvidia_gpu_num_devices Number of GPU devices",
        "# TYPE nvidia_gpu_num_devices gauge",
        f"nvidia_gpu_num_devices {len(target.gpus)}",
    ]
    for name, text, field_name in _LEGACY:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        for gpu in target.gpus:
            value = {
                "util": gpu.util,
                "used": 12.5 * 2**30,
                "total": 16 * 2**30,
                "temp": 47.0,
                "power": 61000.0,
            }[field_name]
            labels = [
                ("minor_number", str(gpu.index)),
                ("name", "Tesla V100-SXM2-16GB"),
                ("uuid", gpu.uuid(target.node)),
            ]
            lines.append(f"{name}{_labels(labels)} {value:g}")
    return "\n".join(lines) + "\n"


def _vllm_exposition(scrape: int) -> str:
    """A vLLM server's queue gauge: an application target, no GPU series."""
    return (
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        f'vllm:num_requests_waiting{{model_name="llama-3.1-8b"}} {scrape % 5}\n'
    )


# --- servers ----------------------------------------------------------------------------------


class AppServer:
    """An aiohttp application on a free loopback port, served from its own thread."""

    def __init__(self) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def application(self) -> web.Application:
        raise NotImplementedError

    async def _start(self) -> int:
        self._runner = web.AppRunner(self.application(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        return int(server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    def start(self) -> Self:
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _shutdown(self) -> None:
        # A handler still sleeping (a deliberately slow server) must not hold the test up.
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(TimeoutError):
            future.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()


class ExporterServer(AppServer):
    """The fixture exporters; ``/targets/<name>/metrics`` per target."""

    def __init__(self, targets: Iterable[Target]) -> None:
        super().__init__()
        self.targets = {t.name: t for t in targets}
        self.scrapes: dict[str, int] = {name: 0 for name in self.targets}

    def path(self, target: str) -> str:
        return f"/targets/{target}/metrics"

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/targets/{name}/metrics", self._metrics)
        return app

    async def _metrics(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        target = self.targets.get(name)
        if target is None:
            raise web.HTTPNotFound()
        scrape = self.scrapes[name]
        self.scrapes[name] = scrape + 1
        body = target.exposition(scrape)
        return web.Response(text=body, content_type="text/plain", charset="utf-8")


# --- Prometheus ---------------------------------------------------------------------------------


def prometheus_binary() -> str | None:
    return shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None
    )


def promtool_binary() -> str | None:
    return shutil.which("promtool") or (
        "/usr/bin/promtool" if os.access("/usr/bin/promtool", os.X_OK) else None
    )


def _die_with_parent() -> None:
    """In the child: ask Linux to stop this Prometheus when the test process dies, even by
    SIGKILL, so no orphan keeps a port and a CPU."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Job:
    name: str
    honor_labels: bool
    targets: list[Target]


def prometheus_config(jobs: Iterable[Job], exporter: ExporterServer, interval: str) -> str:
    scrape_configs = []
    for job in jobs:
        groups = []
        for target in job.targets:
            labels = {"__metrics_path__": exporter.path(target.name), **target.target_labels}
            groups.append({"targets": [f"127.0.0.1:{exporter.port}"], "labels": labels})
        scrape_configs.append(
            {"job_name": job.name, "honor_labels": job.honor_labels, "static_configs": groups}
        )
    config = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval},
        "scrape_configs": scrape_configs,
    }
    # JSON is YAML: no YAML writer needed.
    return json.dumps(config, indent=2)


class PrometheusServer:
    """``/usr/bin/prometheus`` on a free loopback port with a temporary TSDB."""

    def __init__(
        self, workdir: Path, config: str, backfill: str | None = None, port: int | None = None
    ) -> None:
        self.workdir = workdir
        self.data = workdir / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        (workdir / "prometheus.yml").write_text(config)
        self.backfill = backfill
        self.fixed_port = port
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PrometheusServer:
        return self.launch().wait()

    def launch(self) -> PrometheusServer:
        """Start the process; ``wait`` returns once it answers (start several, then wait)."""
        binary = prometheus_binary()
        if binary is None:
            raise FileNotFoundError(INSTALL_HINT)
        if self.backfill:
            self._create_blocks(self.backfill)
            self.backfill = None
        self.port = self.fixed_port or free_port()
        log = open(self.workdir / "prometheus.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={self.workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.data}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=30d",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        log.close()
        return self

    def wait(self, attempts: int = 3) -> PrometheusServer:
        for _ in range(attempts):
            if self._wait_ready(20):
                return self
            if self.fixed_port:
                break
            # The free port was taken in between: try another one.
            self.stop()
            self.launch()
        raise RuntimeError(f"prometheus did not start; see {self.workdir / 'prometheus.log'}")

    def _create_blocks(self, openmetrics: str) -> None:
        tool = promtool_binary()
        if tool is None:
            raise FileNotFoundError(INSTALL_HINT)
        source = self.workdir / "history.om"
        source.write_text(openmetrics)
        subprocess.run(
            [tool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(self.data)],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def _wait_ready(self, seconds: float) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.process is not None and self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    def query(self, promql: str) -> list[dict[str, object]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.load(response)
        result = answer["data"]["result"]
        assert isinstance(result, list)
        return result

    def wait_until(self, condition: Callable[[], bool], seconds: float, what: str) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                if condition():
                    return
            except OSError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"Prometheus at {self.url}: {what} within {seconds:g} s")

    def wait_for_scrapes(self, targets: int, scrapes: int, seconds: float = 30) -> None:
        """Until every target has been scraped successfully ``scrapes`` times."""

        def done() -> bool:
            up = self.query("count_over_time(up[5m])")
            healthy = self.query("up == 1")
            return (
                len(up) >= targets
                and len(healthy) >= targets
                and min(float(str(r["value"][1])) for r in up) >= scrapes  # type: ignore[index]
            )

        self.wait_until(done, seconds, f"{targets} targets scraped {scrapes} times")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def openmetrics_history(
    series: Iterable[tuple[str, str, dict[str, str], float]],
    start: float,
    end: float,
    step: float,
) -> str:
    """OpenMetrics text for promtool: (name, help, labels, value) sampled from start to end."""
    by_name: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    for name, text, labels, value in series:
        by_name.setdefault(name, []).append((text, labels, value))
    lines: list[str] = []
    for name, rows in by_name.items():
        lines += [f"# HELP {name} {rows[0][0]}", f"# TYPE {name} gauge"]
        for _, labels, value in rows:
            moment = start
            while moment <= end:
                lines.append(f"{name}{_labels(sorted(labels.items()))} {value:g} {moment:.0f}")
                moment += step
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
