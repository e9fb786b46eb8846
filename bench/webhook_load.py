"""Load on ``gpulint serve`` over TLS, with a warm cluster cache, on this machine.

    python bench/webhook_load.py [--objects 5000] [--connections 50] [--duration 30]
                                 [--rates 100,300] [--soak 100000] [--record]

What runs, all on this machine:

* the fake Kubernetes API server of the tests (tests/kubefake.py) holding ``--objects``
  objects: GPU Deployments with their HPAs, KEDA ScaledObjects, KServe InferenceServices,
  Knative Services (bench/generate.py's recipes) and a prometheus-adapter ConfigMap;
* ``gpulint serve`` (a regular process, reading that server through a kubeconfig, uvloop if
  installed) with a TLS certificate from a test CA; the run starts once /readyz says the
  caches are synced;
* this load generator: AdmissionReviews for HPAs and Deployments (updates of cached objects,
  new HPAs on cached Deployments, a tenth of them pitfalls that are refused), sent over
  keep-alive TLS connections, the server verified against the CA.

Phases:

1. closed loop: ``--connections`` connections, each sending its next review as soon as the
   previous answer arrives, for ``--duration`` seconds: throughput at saturation, and the
   latency that saturation gives (queueing: with C connections each request waits for the
   C-1 others, so latency is C / throughput, Little's law);
2. open loop: reviews sent at fixed rates (``--rates``) over the same connections, latency
   measured from when each was due (queueing included, no coordinated omission);
3. soak: ``--soak`` reviews closed loop, the server's RSS sampled as it goes.

Latency is measured by the client (request written to answer read) and, from gpulint's own
decision log, by the server (body read to answer built). Errors are anything but an HTTP 200
AdmissionReview answering the request's uid; fail-opens are answers gpulint allowed because
it could not evaluate. Nothing here asserts: it prints figures for bench/RESULTS.md, and
``--record`` writes them there under "Webhook".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import random
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import generate as recipes  # noqa: E402

from tests.kubefake import FakeCluster, KubeFake  # noqa: E402

RESULTS = HERE / "RESULTS.md"
FAIL_OPEN_TEXT = b"gpulint could not evaluate"


# --- the cluster ---------------------------------------------------------------------------


def cluster_objects(count: int, adapter_rules: int = 1) -> list[dict[str, Any]]:
    """``count`` objects from bench/generate.py's recipes, plus the adapter ConfigMap with
    ``adapter_rules`` rules (the first exposes gpu_utilization, which the HPAs read)."""
    adapter_values = yaml.safe_load(recipes.ADAPTER_VALUES.format())
    rules = list(adapter_values["rules"]["custom"])
    template = rules[0]
    for number in range(1, adapter_rules):
        rule = json.loads(json.dumps(template))
        rule["seriesQuery"] = template["seriesQuery"].replace(
            "DCGM_FI_DEV_GPU_UTIL", f"DCGM_FI_PROF_METRIC_{number:04d}"
        )
        rule["name"] = {"matches": f"^DCGM_FI_PROF_METRIC_{number:04d}$", "as": f"gpu_m{number}"}
        rules.append(rule)
    adapter_config = {"rules": rules}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "prometheus-adapter",
                "namespace": "monitoring",
                "labels": {"app.kubernetes.io/name": "prometheus-adapter"},
            },
            "data": {"config.yaml": yaml.safe_dump(adapter_config, sort_keys=False)},
        }
    ]
    index = 0
    while len(objects) < count:
        name = f"model-{index:05d}"
        for text in recipes.app_documents(index, name, index % 40):
            objects.append(yaml.safe_load(text))
        index += 1
    return objects[:count]


def review(obj: dict[str, Any], operation: str, old: dict[str, Any] | None, uid: str) -> bytes:
    api_version, kind = obj["apiVersion"], obj["kind"]
    group, _, version = api_version.rpartition("/")
    metadata = obj["metadata"]
    resource = {"Deployment": "deployments"}.get(kind, "horizontalpodautoscalers")
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:ci:deployer"},
            "object": obj,
            "oldObject": old,
            "dryRun": False,
        },
    }
    return json.dumps(body, separators=(",", ":")).encode()


def reviews(objects: list[dict[str, Any]], count: int, seed: int = 7) -> list[bytes]:
    """HPAs and Deployments the way a cluster changes them: image bumps, replica bounds,
    new HPAs on existing Deployments, and a tenth of pitfalls (a CPU HPA on a GPU
    Deployment) that gpulint refuses."""
    rng = random.Random(seed)
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    hpas = [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    claimed = {
        (o["metadata"]["namespace"], o["spec"]["scaleTargetRef"]["name"])
        for o in objects
        if o["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")
    }
    free = [
        o for o in deployments if (o["metadata"]["namespace"], o["metadata"]["name"]) not in claimed
    ]
    bodies = []
    for number in range(count):
        uid = f"bench-{number:06d}"
        choice = number % 10
        if choice in (0, 1, 2, 3):
            old = rng.choice(deployments)
            new = json.loads(json.dumps(old))
            new["spec"]["template"]["spec"]["containers"][0]["image"] += f"-{number}"
            bodies.append(review(new, "UPDATE", old, uid))
        elif choice in (4, 5, 6):
            old = rng.choice(hpas)
            new = json.loads(json.dumps(old))
            new["spec"]["maxReplicas"] = 8 + number % 5
            bodies.append(review(new, "UPDATE", old, uid))
        elif choice in (7, 8):
            target = rng.choice(free)["metadata"]
            hpa = yaml.safe_load(
                recipes.HPA.format(
                    hpa=target["name"], target=target["name"], team=target["namespace"][5:]
                )
            )
            hpa["metadata"]["name"] = f"{target['name']}-gpu-{number}"
            bodies.append(review(hpa, "CREATE", None, uid))
        else:
            target = rng.choice(free)["metadata"]
            hpa = yaml.safe_load(
                recipes.HPA.format(
                    hpa=target["name"], target=target["name"], team=target["namespace"][5:]
                )
            )
            hpa["metadata"]["name"] = f"{target['name']}-cpu-{number}"
            hpa["spec"]["metrics"] = [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 70},
                    },
                }
            ]
            bodies.append(review(hpa, "CREATE", None, uid))
    return bodies


# --- the load --------------------------------------------------------------------------------


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)  # due -> written, the generator's own
    errors: int = 0
    fail_opens: int = 0
    denied: int = 0
    started: float = 0.0
    ended: float = 0.0

    @property
    def count(self) -> int:
        return len(self.latencies)

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]

    def summary(self) -> dict[str, float]:
        seconds = self.ended - self.started
        return {
            "requests": self.count,
            "seconds": round(seconds, 1),
            "throughput": round(self.count / seconds, 1) if seconds else 0.0,
            "p50_ms": round(self.percentile(0.50) * 1000, 2),
            "p99_ms": round(self.percentile(0.99) * 1000, 2),
            "max_ms": round(max(self.latencies, default=0.0) * 1000, 2),
            "lag_p99_ms": round(
                sorted(self.lags)[int(0.99 * len(self.lags))] * 1000 if self.lags else 0.0, 2
            ),
            "errors": self.errors,
            "fail_opens": self.fail_opens,
            "denied": self.denied,
        }


class Connection:
    """One keep-alive HTTPS connection speaking just enough HTTP/1.1."""

    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        self.port = port
        self.context = context
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            "localhost", self.port, ssl=self.context
        )

    async def send(self, body: bytes, tally: Tally, since: float) -> None:
        if self.writer is None or self.reader is None:
            await self.open()
        assert self.writer is not None and self.reader is not None
        head = (
            b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            + b"Content-Length: %d\r\n\r\n" % len(body)
        )
        tally.lags.append(time.perf_counter() - since)
        try:
            self.writer.write(head + body)
            header = await self.reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in header.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            answer = await self.reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            tally.errors += 1
            self.writer = self.reader = None
            return
        tally.latencies.append(time.perf_counter() - since)
        uid = body[body.index(b'"uid":"') + 7 : body.index(b'"', body.index(b'"uid":"') + 7)]
        if not header.startswith(b"HTTP/1.1 200") or b'"uid":"' + uid + b'"' not in answer:
            tally.errors += 1
        elif FAIL_OPEN_TEXT in answer:
            tally.fail_opens += 1
        elif b'"allowed":false' in answer:
            tally.denied += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def closed_loop(
    port: int,
    context: ssl.SSLContext,
    bodies: list[bytes],
    connections: int,
    *,
    seconds: float | None = None,
    total: int | None = None,
    on_progress: Any = None,
) -> Tally:
    tally = Tally()
    pool = [Connection(port, context) for _ in range(connections)]
    await asyncio.gather(*(c.open() for c in pool))
    counter = iter(range(10**12))
    tally.started = time.perf_counter()
    end = tally.started + seconds if seconds else None

    async def worker(connection: Connection) -> None:
        while True:
            number = next(counter)
            if (total is not None and number >= total) or (
                end is not None and time.perf_counter() >= end
            ):
                return
            await connection.send(bodies[number % len(bodies)], tally, time.perf_counter())
            if on_progress is not None:
                on_progress(number)

    await asyncio.gather(*(worker(c) for c in pool))
    tally.ended = time.perf_counter()
    for connection in pool:
        connection.close()
    return tally


async def open_loop(
    port: int,
    context: ssl.SSLContext,
    bodies: list[bytes],
    connections: int,
    rate: float,
    seconds: float,
) -> Tally:
    """Reviews due every 1/rate seconds, each on an idle connection; latency from when it
    was due, so time spent waiting for a free connection counts."""
    tally = Tally()
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    pool = [Connection(port, context) for _ in range(connections)]
    await asyncio.gather(*(c.open() for c in pool))
    for connection in pool:
        idle.put_nowait(connection)
    tally.started = time.perf_counter()
    tasks = []

    async def one(body: bytes, due: float) -> None:
        connection = await idle.get()
        await connection.send(body, tally, due)
        idle.put_nowait(connection)

    number = 0
    while True:
        due = tally.started + number / rate
        if due - tally.started >= seconds:
            break
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(bodies[number % len(bodies)], due)))
        number += 1
    await asyncio.gather(*tasks)
    tally.ended = time.perf_counter()
    for connection in pool:
        connection.close()
    return tally


# --- the server ------------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class DecisionLog:
    """gpulint's decision log, read phase by phase: the server's own latency."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def skip(self) -> None:
        self.offset = self.path.stat().st_size

    def read(self) -> list[float]:
        """Seconds each decision took since the last read or skip."""
        found = []
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.splitlines():
            if b'"event":"decision"' in line:
                found.append(json.loads(line)["ms"] / 1000)
        return sorted(found)


def _ms(ordered: list[float], fraction: float) -> float:
    if not ordered:
        return float("nan")
    return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000, 2)


def fail_open_total(port: int, context: ssl.SSLContext) -> float:
    import http.client

    connection = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith("gpulint_webhook_fail_open_total{")
    )


@contextlib.contextmanager
def webhook(
    directory: Path, kubeconfig: Path, cert: Path, key: Path, port: int
) -> Iterator[subprocess.Popen[bytes]]:
    log = open(directory / "serve.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpulint",
            "serve",
            f"--tls-cert={cert}",
            f"--tls-key={key}",
            f"--port={port}",
            "--bind=127.0.0.1",
            f"--kubeconfig={kubeconfig}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=directory,
    )
    try:
        yield process
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def wait_ready(port: int, context: ssl.SSLContext, timeout: float = 300.0) -> float:
    import http.client

    started = time.monotonic()
    while time.monotonic() - started < timeout:
        with contextlib.suppress(OSError):
            connection = http.client.HTTPSConnection("localhost", port, context=context, timeout=5)
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return time.monotonic() - started
        time.sleep(0.2)
    raise SystemExit(f"gpulint serve was not ready after {timeout} s")


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    loop = "uvloop" if _has_uvloop() else "asyncio"
    return (
        f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}, event loop {loop}"
    )


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def loop_runner() -> Callable[[Any], Any]:
    """``uvloop.run`` when uvloop is installed (as the image has it), else ``asyncio.run``."""
    if _has_uvloop():
        import uvloop

        return uvloop.run
    return asyncio.run


def serving_certificate(directory: Path) -> tuple[Path, Path, ssl.SSLContext]:
    """A certificate for localhost from a test CA, written to ``directory`` (tls.crt, tls.key),
    and a client context that trusts the CA."""
    import trustme

    ca = trustme.CA()
    issued = ca.issue_cert("localhost")
    cert, key = directory / "tls.crt", directory / "tls.key"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return cert, key, context


# --- the run ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument(
        "--adapter-rules", type=int, default=1, help="rules in the adapter ConfigMap"
    )
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--rates", default="100,300", help="open-loop rates, requests/s")
    parser.add_argument("--rate-duration", type=float, default=20.0)
    parser.add_argument("--soak", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=10, help="RSS samples in the soak")
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args()

    loop_run = loop_runner()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gpulint-webhook-load-") as scratch:
        directory = Path(scratch)
        cert, key, context = serving_certificate(directory)
        objects = cluster_objects(args.objects, args.adapter_rules)
        kinds: dict[str, int] = {}
        for obj in objects:
            kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
        bodies = reviews(objects, 5000)
        port = _free_port()
        cluster = FakeCluster()
        for obj in objects:
            cluster.apply(obj)
        kube = KubeFake(cluster).start()
        kubeconfig = kube.write_kubeconfig(directory / "kubeconfig")
        # This process holds the fake API server's 5,000 objects and their history: a full
        # collection over them stalls the load generator's loop for ~150 ms, which would be
        # counted as the server's latency. Set them aside and collect nothing while measuring.
        gc.collect()
        gc.freeze()
        gc.disable()
        try:
            with webhook(directory, kubeconfig, cert, key, port) as process:
                sync_seconds = wait_ready(port, context)
                rss_ready = rss_mib(process.pid)
                loop_run(closed_loop(port, context, bodies, args.connections, seconds=3))
                log = DecisionLog(directory / "serve.log")
                results: dict[str, Any] = {}

                def phase(name: str, tally: Tally) -> None:
                    row: dict[str, Any] = tally.summary()
                    server = log.read()
                    row["server_p50_ms"] = _ms(server, 0.50)
                    row["server_p99_ms"] = _ms(server, 0.99)
                    row["server_max_ms"] = _ms(server, 1.0)
                    results[name] = row

                fail_before = fail_open_total(port, context)
                log.skip()
                phase(
                    f"closed loop, {args.connections} connections, {args.duration:g} s",
                    loop_run(
                        closed_loop(port, context, bodies, args.connections, seconds=args.duration)
                    ),
                )
                for rate in [float(r) for r in args.rates.split(",") if r]:
                    phase(
                        f"open loop, {rate:g} req/s over {args.connections} connections, "
                        f"{args.rate_duration:g} s",
                        loop_run(
                            open_loop(
                                port, context, bodies, args.connections, rate, args.rate_duration
                            )
                        ),
                    )
                samples: list[tuple[int, float]] = [(0, rss_mib(process.pid))]
                every = max(1, args.soak // args.samples)

                def sample(number: int) -> None:
                    if number and number % every == 0:
                        samples.append((number, rss_mib(process.pid)))

                tally = loop_run(
                    closed_loop(
                        port,
                        context,
                        bodies,
                        args.connections,
                        total=args.soak,
                        on_progress=sample,
                    )
                )
                samples.append((args.soak, rss_mib(process.pid)))
                phase(f"soak, {args.soak} requests closed loop", tally)
                fail_after = fail_open_total(port, context)
        finally:
            kube.stop()
    report = {
        "machine": machine(),
        "load_average_before": [round(x, 2) for x in load_before],
        "objects": kinds,
        "sync_seconds": round(sync_seconds, 2),
        "rss_ready_mib": round(rss_ready, 1),
        "results": results,
        "server_fail_opens": fail_after - fail_before,
        "connections": args.connections,
        "rss_mib": [(n, round(v, 1)) for n, v in samples],
        "command": " ".join(["python", "bench/webhook_load.py", *sys.argv[1:]]),
    }
    print(json.dumps(report, indent=2))
    if args.record:
        record(report)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def replace_section(heading: str, section: str) -> None:
    """Write ``section`` (starting with its ``heading`` line) into bench/RESULTS.md in place
    of the section under ``heading`` up to the next ``## ``, or at the end if there is none."""
    text = RESULTS.read_text()
    start = text.find(heading)
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + (text[end + 1 :] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)


def record(report: dict[str, Any]) -> None:
    """Replace (or add) the "## Webhook" section of bench/RESULTS.md."""
    results = report["results"]
    lines = [
        "## Webhook",
        "",
        f"Machine: {report['machine']}; load average before the run "
        f"{', '.join(str(x) for x in report['load_average_before'])} (the machine is shared).",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Cluster cache: {sum(report['objects'].values())} objects "
        f"({', '.join(f'{v} {k}' for k, v in sorted(report['objects'].items()))}) served by "
        f"the fake API server of the tests, synced {report['sync_seconds']} s after start; "
        f"gpulint serve's RSS {report['rss_ready_mib']} MiB when ready. Reviews: Deployment "
        "and HPA updates, new HPAs, a tenth of them refused (a CPU HPA on a GPU Deployment).",
        "",
        "| phase | requests | req/s | p50 ms | p99 ms | max ms | server p50 / p99 / max ms "
        "| errors | fail-opens | refused |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in results.items():
        lines.append(
            f"| {name} | {row['requests']} | {row['throughput']} | {row['p50_ms']} | "
            f"{row['p99_ms']} | {row['max_ms']} | {row['server_p50_ms']} / "
            f"{row['server_p99_ms']} / {row['server_max_ms']} | {row['errors']} | "
            f"{row['fail_opens']} | {row['denied']} |"
        )
    closed = next(iter(results.values()))
    queueing = report["connections"] / closed["throughput"] * 1000 if closed["throughput"] else 0
    met = [name for name, row in results.items() if row["p99_ms"] < 10]
    lines += [
        "",
        "Client latency is from when a review was due (open loop) or sent (closed loop) to its "
        "answer, over TLS; server latency is gpulint's own, from its decision log (body read "
        f"to answer built). Fail-opens counted by /metrics over the run: "
        f"{report['server_fail_opens']:g}.",
        "",
        f"The closed loop measures saturation: {report['connections']} connections that each "
        "send the next review as soon as the last is answered keep one gpulint process busy, "
        "so each review waits for the others (Little's law: "
        f"{report['connections']} / {closed['throughput']} req/s = {queueing:.0f} ms). The "
        "p99 < 10 ms target is met in: " + ("; ".join(met) if met else "no phase") + ".",
        "",
        "RSS of gpulint serve across the soak (reviews answered: MiB): "
        + ", ".join(f"{n}: {v}" for n, v in report["rss_mib"])
        + ".",
        "",
    ]
    section = "\n".join(lines)
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n\n"
    start = text.find("## Webhook")
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + (text[end + 1 :] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
