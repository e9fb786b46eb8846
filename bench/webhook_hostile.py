"""Latency of normal reviews while hostile requests are in flight, on ``gpulint serve``.

    python bench/webhook_hostile.py [--rate 100] [--duration 15] [--connections 20]
                                    [--slow-clients 50]

``gpulint serve --no-cluster`` runs as a regular process over TLS (a certificate from a test
CA, uvloop if installed). Normal AdmissionReviews (Deployments and HPAs from bench/generate.py,
as bench/webhook_load.py sends them) are sent at a steady rate over keep-alive connections,
their latency measured from when each was due, first alone, then in one phase each while
hostile requests are kept in flight:

* slow-body clients: connections that send headers and then one byte of body a second;
* a body of JSON nested 100,000 deep (answered 400);
* a Deployment with a 4,301-digit integer in an annotation (answered);
* a ConfigMap labelled as the prometheus-adapter config whose embedded config holds a
  300,000-part base-60 scalar (``1:59:59:...``);
* the same with 25,000 keys written twice in its embedded config;
* a Deployment that asks for half a GPU (refused) with a field nested 1,500 levels deep,
  deeper than Python's JSON reader goes (answered, and refused);
* two senders of a ConfigMap labelled as the prometheus-adapter config whose rule has an
  84 KB ``metricsQuery`` of ``sum(a)+sum(a)+...`` (once quadratic to analyse).

The hostile requests start a second into each phase, once the normal reviews flow, and stop
two seconds before its end; each hostile sender sends its request again as soon as the
previous one is answered, on a new connection. ``/healthz`` is asked every 200 ms meanwhile,
as the kubelet would. The figures are printed as a Markdown table; nothing is asserted and
nothing is written.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from webhook_load import (  # noqa: E402
    Tally,
    _free_port,
    cluster_objects,
    loop_runner,
    machine,
    open_loop,
    reviews,
    rss_mib,
    serving_certificate,
    wait_ready,
)

PHASES = (
    "alone",
    "slow-body clients",
    "JSON nested 100,000 deep",
    "4,301-digit integer",
    "adapter ConfigMap, 300,000-part base-60 scalar",
    "adapter ConfigMap, 25,000 duplicate keys",
    "Deployment nested 1,500 deep (refused)",
    "2 adapter ConfigMaps, 84 KB sum(a)+... query",
)
# Hostile senders at once in a phase (one unless said here).
SENDERS = {PHASES[7]: 2}


# --- hostile requests ------------------------------------------------------------------------


def _envelope(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    group, _, version = obj["apiVersion"].rpartition("/")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": obj["kind"]},
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"]["namespace"],
            "operation": "CREATE",
            "object": obj,
        },
    }


def _adapter_configmap(config: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "prometheus-adapter",
            "namespace": "monitoring",
            "labels": {"app.kubernetes.io/name": "prometheus-adapter"},
        },
        "data": {"config.yaml": config},
    }


def hostile_bodies() -> dict[str, bytes]:
    """The body each hostile phase sends, built once."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "big-number", "namespace": "team-0", "annotations": {"n": "N"}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
    }
    integer = json.dumps(_envelope(deployment, "hostile-int")).replace('"N"', "9" * 4_301)
    # A rule, so that the config is read as a prometheus-adapter config.
    rule = "rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n  metricsQuery: <<.Series>>\n"
    base60 = rule + "v: 1" + ":59" * 300_000 + "\n"
    duplicates = rule + "".join(f"k{i}: 1\n" for i in range(25_000)) * 2
    half_gpu = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "deep", "namespace": "team-0"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "resources": {"limits": {"nvidia.com/gpu": "0.5"}},
                            "x-deep": "DEEP",
                        }
                    ]
                }
            }
        },
    }
    deep = json.dumps(_envelope(half_gpu, "hostile-deep")).replace(
        '"DEEP"', '{"a":' * 1_500 + "1" + "}" * 1_500
    )
    sums = "+".join(["sum(a)"] * 12_000)
    query = rule.replace("<<.Series>>\n", json.dumps(sums) + "\n")
    return {
        PHASES[2]: b"[" * 100_000 + b"]" * 100_000,
        PHASES[3]: integer.encode(),
        PHASES[4]: json.dumps(_envelope(_adapter_configmap(base60), "hostile-60")).encode(),
        PHASES[5]: json.dumps(_envelope(_adapter_configmap(duplicates), "hostile-dup")).encode(),
        PHASES[6]: deep.encode(),
        PHASES[7]: json.dumps(_envelope(_adapter_configmap(query), "hostile-query")).encode(),
    }


# What a hostile request got besides an HTTP status.
BROKEN, STILL_OPEN = 0, -1
_SHOWN = {BROKEN: "connection closed", STILL_OPEN: "still open at the end"}


@dataclass
class Hostile:
    sent: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    longest: float = 0.0

    def shown(self) -> str:
        if not self.sent:
            return "-"
        answers = ", ".join(
            f"{count} {_SHOWN.get(status, f'HTTP {status}')}"
            for status, count in sorted(self.statuses.items(), key=lambda item: -item[1])
        )
        return f"{self.sent}: {answers}"


async def post_once(port: int, context: ssl.SSLContext, body: bytes) -> int:
    """POST one body on a new connection; the HTTP status, BROKEN when the connection broke."""
    reader, writer = await asyncio.open_connection("localhost", port, ssl=context)
    try:
        writer.write(
            b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            + body
        )
        status_line = await reader.readline()
        await reader.read()
        return int(status_line.split()[1]) if status_line else BROKEN
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
        return BROKEN
    finally:
        writer.close()


async def repeat_hostile(
    port: int, context: ssl.SSLContext, body: bytes, until: float, tally: Hostile
) -> None:
    while time.perf_counter() < until:
        started = time.perf_counter()
        tally.sent += 1
        status = await post_once(port, context, body)
        tally.statuses[status] = tally.statuses.get(status, 0) + 1
        tally.longest = max(tally.longest, time.perf_counter() - started)


async def slow_body_client(
    port: int, context: ssl.SSLContext, until: float, tally: Hostile
) -> None:
    """Headers, then a byte of body a second, again whenever the server hangs up."""
    while time.perf_counter() < until:
        started = time.perf_counter()
        tally.sent += 1
        try:
            reader, writer = await asyncio.open_connection("localhost", port, ssl=context)
        except OSError:
            tally.statuses[BROKEN] = tally.statuses.get(BROKEN, 0) + 1
            await asyncio.sleep(0.5)
            continue
        writer.write(
            b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{"
        )
        status = STILL_OPEN
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, ValueError, IndexError):
            while time.perf_counter() < until:
                try:
                    line = await asyncio.wait_for(reader.readline(), 1.0)
                except TimeoutError:
                    writer.write(b" ")
                    continue
                status = int(line.split()[1]) if line else BROKEN
                break
        writer.close()
        tally.statuses[status] = tally.statuses.get(status, 0) + 1
        tally.longest = max(tally.longest, time.perf_counter() - started)


async def probe_health(port: int, context: ssl.SSLContext, until: float) -> list[float]:
    """Seconds each /healthz took, asked every 200 ms."""
    found: list[float] = []
    while time.perf_counter() < until:
        started = time.perf_counter()
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            reader, writer = await asyncio.open_connection("localhost", port, ssl=context)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            await reader.read()
            writer.close()
            found.append(time.perf_counter() - started)
        await asyncio.sleep(max(0.0, 0.2 - (time.perf_counter() - started)))
    return found


# --- the run ---------------------------------------------------------------------------------


async def run_phase(
    name: str,
    port: int,
    context: ssl.SSLContext,
    normal: list[bytes],
    args: argparse.Namespace,
    hostile: dict[str, bytes],
) -> tuple[Tally, Hostile, list[float]]:
    normal_loop = asyncio.ensure_future(
        open_loop(port, context, normal, args.connections, args.rate, args.duration)
    )
    # The normal reviews' connections are open and their clock runs before the hostile
    # requests start, so that a stall they cause is measured.
    await asyncio.sleep(1.0)
    until = time.perf_counter() + args.duration - 2.0
    tally = Hostile()
    senders: list[Awaitable[Any]] = []
    if name == PHASES[1]:
        senders = [slow_body_client(port, context, until, tally) for _ in range(args.slow_clients)]
    elif name in hostile:
        senders = [
            repeat_hostile(port, context, hostile[name], until, tally)
            for _ in range(SENDERS.get(name, 1))
        ]
    health = asyncio.ensure_future(probe_health(port, context, until))
    background = [asyncio.ensure_future(s) for s in senders]
    normal_tally = await normal_loop
    await asyncio.gather(*background, return_exceptions=True)
    return normal_tally, tally, await health


def _row(name: str, normal: Tally, hostile: Hostile, health: list[float]) -> str:
    summary = normal.summary()
    worst_health = max(health, default=float("nan")) * 1000
    return (
        f"| {name} | {summary['requests']} | {summary['p50_ms']:.1f} | {summary['p99_ms']:.1f} "
        f"| {summary['max_ms']:.1f} | {summary['errors']} | {summary['fail_opens']} "
        f"| {worst_health:.0f} | {hostile.shown()} | "
        + (f"{hostile.longest:.1f}" if hostile.sent else "-")
        + " |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=100.0, help="normal reviews per second")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per phase")
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--slow-clients", type=int, default=50)
    args = parser.parse_args()

    run = loop_runner()
    hostile = hostile_bodies()
    normal = reviews(cluster_objects(400), 2000)
    with tempfile.TemporaryDirectory(prefix="gpulint-webhook-hostile-") as scratch:
        directory = Path(scratch)
        cert, key, context = serving_certificate(directory)
        port = _free_port()
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
                "--no-cluster",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=directory,
        )
        rows = []
        try:
            wait_ready(port, context)
            run(open_loop(port, context, normal, args.connections, args.rate, 2.0))  # warm up
            for name in PHASES:
                normal_tally, hostile_tally, health = run(
                    run_phase(name, port, context, normal, args, hostile)
                )
                rows.append(_row(name, normal_tally, hostile_tally, health))
                print(f"{name}: done", file=sys.stderr)
            rss = rss_mib(process.pid)
        finally:
            process.terminate()
            process.wait(30)
            log.close()
    print(
        f"\n`gpulint serve --no-cluster` over TLS; {machine()}; normal reviews at "
        f"{args.rate:g}/s over {args.connections} connections, {args.duration:g} s per phase; "
        f"{args.slow_clients} slow-body clients; server RSS at the end {rss:.0f} MiB; "
        f"`{' '.join(['python', *sys.argv])}` ({os.getloadavg()[0]:.2f} load)\n"
    )
    print(
        "| hostile requests in flight | normal reviews | p50 ms | p99 ms | max ms | errors "
        "| fail-open | /healthz max ms | hostile requests: answers | hostile longest s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
