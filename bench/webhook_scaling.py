"""A review's cost against the size of the webhook's cache: it must follow what the review
relates to, not how many objects the cluster holds.

    python bench/webhook_scaling.py [--sizes 5000,50000] [--adapter-rules 1000]
                                    [--rate 100] [--duration 20] [--record]

For each cache (``--sizes`` objects with one adapter rule, then the smallest size with an
adapter ConfigMap of ``--adapter-rules`` rules), a fresh fake API server and ``gpulint serve``
start as in bench/webhook_load.py; once the caches are synced, the same reviews arrive at a
fixed rate (open loop) and gpulint's own time per review (its decision log) and the client's
latency are recorded. ``--record`` writes the table to bench/RESULTS.md under "Webhook:
cost against cache size". Nothing here asserts.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import webhook_load as load  # noqa: E402

from tests.kubefake import FakeCluster, KubeFake  # noqa: E402

SECTION = "## Webhook: cost against cache size"


def measure(objects: int, adapter_rules: int, rate: float, duration: float) -> dict[str, Any]:
    run = load.loop_runner()
    with tempfile.TemporaryDirectory(prefix="gpulint-webhook-scaling-") as scratch:
        directory = Path(scratch)
        cert, key, context = load.serving_certificate(directory)
        cached = load.cluster_objects(objects, adapter_rules)
        bodies = load.reviews(cached, 3000)
        cluster = FakeCluster()
        for obj in cached:
            cluster.apply(obj)
        kube = KubeFake(cluster).start()
        kubeconfig = kube.write_kubeconfig(directory / "kubeconfig")
        gc.collect()
        gc.freeze()
        gc.disable()
        port = load._free_port()
        try:
            with load.webhook(directory, kubeconfig, cert, key, port) as process:
                synced = load.wait_ready(port, context, timeout=900.0)
                rss = load.rss_mib(process.pid)
                run(load.closed_loop(port, context, bodies, 10, seconds=3))  # warm
                log = load.DecisionLog(directory / "serve.log")
                log.skip()
                tally = run(load.open_loop(port, context, bodies, 20, rate, duration))
                server = log.read()
        finally:
            kube.stop()
            gc.enable()
    row = tally.summary()
    return {
        "objects": objects,
        "adapter_rules": adapter_rules,
        "synced_s": round(synced, 1),
        "rss_mib": round(rss, 1),
        "requests": row["requests"],
        "client_p50_ms": row["p50_ms"],
        "client_p99_ms": row["p99_ms"],
        "server_p50_ms": load._ms(server, 0.50),
        "server_p99_ms": load._ms(server, 0.99),
        "server_max_ms": load._ms(server, 1.0),
        "errors": row["errors"],
        "fail_opens": row["fail_opens"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="5000,50000")
    parser.add_argument("--adapter-rules", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    cases = [(size, 1) for size in sizes] + [(min(sizes), args.adapter_rules)]
    rows = []
    for objects, rules in cases:
        row = measure(objects, rules, args.rate, args.duration)
        print(json.dumps(row), flush=True)
        rows.append(row)
    lines = [
        SECTION,
        "",
        f"Machine: {load.machine()}; load average before the run "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
        f"Command: `python bench/webhook_scaling.py {' '.join(sys.argv[1:])}`".replace(" `", "`"),
        "",
        f"The same reviews (bench/webhook_load.py's mix) at {args.rate:g} req/s for "
        f"{args.duration:g} s over 20 connections, against caches of different sizes.",
        "",
        "| cached objects | adapter rules | synced s | RSS MiB | server p50 / p99 / max ms | "
        "client p50 / p99 ms | errors | fail-opens |",
        "|---:|---:|---:|---:|---|---|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['objects']:,} | {row['adapter_rules']:,} | {row['synced_s']} | "
            f"{row['rss_mib']} | {row['server_p50_ms']} / {row['server_p99_ms']} / "
            f"{row['server_max_ms']} | {row['client_p50_ms']} / {row['client_p99_ms']} | "
            f"{row['errors']} | {row['fail_opens']} |"
        )
    print("\n".join(lines))
    if args.record:
        load.replace_section(SECTION, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
