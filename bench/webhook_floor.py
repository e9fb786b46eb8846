"""``gpulint serve --no-cluster`` against its floor: a bare aiohttp TLS server, same run.

    python bench/webhook_floor.py [--connections 50] [--duration 15] [--rate 500]
                                  [--rate-duration 20] [--rounds 2] [--record]
                                  [--baseline OTHER_CHECKOUT/.venv/bin/python]

Both servers run as regular processes on this machine, over TLS with one certificate from
a test CA, on uvloop when it is installed, and answer ``POST /validate``:

* the floor: aiohttp with nothing but a handler that reads the body and answers a fixed
  AdmissionReview carrying the request's uid (found in the bytes, not decoded). No server
  that parses HTTP and TLS in Python answers faster, so gpulint's figures are ratios to it;
* ``gpulint serve --no-cluster``.

The same reviews (bench/webhook_load.py's mix: Deployment and HPA updates, new HPAs, a tenth
refused) go to each, in ``--rounds`` alternating rounds so that a change in the machine's
load falls on both: a closed loop over ``--connections`` keep-alive connections for
``--duration`` seconds (capacity), then an open loop at ``--rate`` requests/s (latency from
when each review was due, queueing included). The table is printed; ``--record`` writes it
to bench/RESULTS.md under "Webhook: against a bare TLS server". With ``--baseline``, each
round also measures the gpulint another interpreter has installed (the release before, from
its own checkout), so that before and after share the machine's load. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import webhook_load as load  # noqa: E402

SECTION = "## Webhook: against a bare TLS server"

# The floor server, run with `python -c`: a handler that cannot do less and still answer.
FLOOR_SERVER = r"""
import asyncio, ssl, sys
from aiohttp import web

cert, key, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
HEAD = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"'
TAIL = b'","allowed":true}}'

async def validate(request):
    body = await request.read()
    start = body.index(b'"uid":"') + 7
    uid = body[start : body.index(b'"', start)]
    return web.Response(body=HEAD + uid + TAIL, content_type="application/json")

async def readyz(request):
    return web.Response(body=b'{"ready":true}', content_type="application/json")

context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(cert, key)
app = web.Application()
app.router.add_post("/validate", validate)
app.router.add_get("/readyz", readyz)
try:
    import uvloop
    uvloop.install()
except ImportError:
    pass
web.run_app(app, host="127.0.0.1", port=port, ssl_context=context, access_log=None,
            print=None, backlog=1024)
"""


@contextlib.contextmanager
def server(command: list[str], directory: Path, name: str) -> Iterator[subprocess.Popen[bytes]]:
    log = open(directory / f"{name}.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=directory)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def measure(
    command: list[str],
    directory: Path,
    name: str,
    port: int,
    context: ssl.SSLContext,
    bodies: list[bytes],
    args: argparse.Namespace,
    run: Callable[[Any], Any],
) -> dict[str, Any]:
    with server(command, directory, name):
        load.wait_ready(port, context)
        run(load.closed_loop(port, context, bodies, args.connections, seconds=2))  # warm up
        closed = run(
            load.closed_loop(port, context, bodies, args.connections, seconds=args.duration)
        ).summary()
        # gpulint's own time per review in the open loop (its decision log: body read to
        # answer built), apart from what TLS, HTTP and the machine add around it.
        log = load.DecisionLog(directory / f"{name}.log")
        log.skip()
        opened = run(
            load.open_loop(port, context, bodies, args.connections, args.rate, args.rate_duration)
        ).summary()
        own = log.read()
    shown = "-"
    if own:
        shown = f"{load._ms(own, 0.5)} / {load._ms(own, 0.99)} / {load._ms(own, 1.0)}"
    return {"closed": closed, "open": opened, "server": shown}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--rate-duration", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--baseline",
        metavar="PYTHON",
        help="also measure the gpulint installed for this interpreter (another checkout's "
        "virtualenv: the release before) in each round, for a before/after in one run",
    )
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()

    run = load.loop_runner()
    load_before = os.getloadavg()
    bodies = load.reviews(load.cluster_objects(400), 5000)
    gc.collect()
    gc.freeze()
    gc.disable()
    rows: list[tuple[int, str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="gpulint-webhook-floor-") as scratch:
        directory = Path(scratch)
        cert, key, context = load.serving_certificate(directory)
        for number in range(1, args.rounds + 1):
            port = load._free_port()
            floor = [sys.executable, "-c", FLOOR_SERVER, str(cert), str(key), str(port)]
            rows.append(
                (
                    number,
                    "bare aiohttp",
                    measure(floor, directory, "floor", port, context, bodies, args, run),
                )
            )
            servers = [("gpulint serve --no-cluster", sys.executable)]
            if args.baseline:
                servers.append(("the same, release before (--baseline)", args.baseline))
            for name, python in servers:
                port = load._free_port()
                gpulint = [
                    python, "-m", "gpulint", "serve", f"--tls-cert={cert}",
                    f"--tls-key={key}", f"--port={port}", "--bind=127.0.0.1", "--no-cluster",
                ]  # fmt: skip
                rows.append(
                    (number, name,
                     measure(gpulint, directory, "gpulint", port, context, bodies, args, run))
                )  # fmt: skip
            print(f"round {number}: done", file=sys.stderr)
    load_after = os.getloadavg()
    lines = [
        SECTION,
        "",
        f"Machine: {load.machine()}; load average before the run "
        f"{', '.join(f'{x:.2f}' for x in load_before)}, after "
        f"{', '.join(f'{x:.2f}' for x in load_after)}.",
        "",
        f"Command: `python bench/webhook_floor.py {' '.join(sys.argv[1:])}`".replace(" `", "`"),
        "",
        f"Closed loop over {args.connections} keep-alive TLS connections for "
        f"{args.duration:g} s (capacity), then an open loop at {args.rate:g} req/s for "
        f"{args.rate_duration:g} s (client latency from when each review was due).",
        "",
        "| round | server | capacity req/s | x floor | closed p50 / p99 ms | "
        f"{args.rate:g} req/s p50 / p99 / max ms | server's own p50 / p99 / max ms "
        "| errors | fail-opens | refused |",
        "|---|---|---:|---:|---|---|---|---:|---:|---:|",
    ]
    floors = {number: row["closed"]["throughput"] for number, name, row in rows if "bare" in name}
    for number, name, row in rows:
        closed, opened = row["closed"], row["open"]
        ratio = closed["throughput"] / floors[number] if floors[number] else float("nan")
        lines.append(
            f"| {number} | {name} | {closed['throughput']:,} | {ratio:.2f} | "
            f"{closed['p50_ms']} / {closed['p99_ms']} | {opened['p50_ms']} / "
            f"{opened['p99_ms']} / {opened['max_ms']} | {row['server']} | "
            f"{closed['errors'] + opened['errors']} | "
            f"{closed['fail_opens'] + opened['fail_opens']} | "
            f"{closed['denied'] + opened['denied']} |"
        )
    print("\n".join(lines))
    if args.record:
        load.replace_section(SECTION, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
