"""Where ``gpulint serve --no-cluster`` spends its CPU under load: py-spy on the running
server while bench/webhook_load.py's closed loop keeps it busy.

    pip install py-spy
    python bench/webhook_profile.py [--connections 50] [--duration 15] [--rate 0]

The server runs as in bench/webhook_floor.py (TLS, uvloop when installed); py-spy samples
every thread of it (``--threads --idle``: a thread waiting counts too, so that a hand-off
shows) at 250 Hz for ``--duration`` seconds of a closed loop over ``--connections``
connections (or an open loop at ``--rate`` req/s). Each sample is put in the first bucket
whose pattern one of its frames matches, from the innermost frame out, and the table says
what share of the samples of the busiest thread, and of all threads, each bucket holds.
Nothing here asserts or writes.
"""

from __future__ import annotations

import argparse
import collections
import gc
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import webhook_load as load  # noqa: E402
from webhook_floor import server  # noqa: E402

# (bucket, substrings of a frame "function (file:line)"), tried from the innermost frame out:
# the first frame that matches any bucket names the sample.
BUCKETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # uvloop's TLS transport is C: its encryption and the send() show as the Python frame
    # that called transport.write, its receive as SSLObject.read.
    ("TLS: encrypt and send the answer", ("http_writer.py", "SSLObject.write")),
    ("TLS: receive and decrypt", ("SSLObject.read", "SSLObject.pending", "SSLObject.do_")),
    ("waiting for the GIL or a thread", ("_worker (concurrent", "wait (threading")),
    ("thread hand-off", ("run_in_executor", "futures/", "thread.py")),
    ("logging (decision line)", ("webhook/logs.py",)),
    ("metrics (prometheus_client)", ("prometheus_client",)),
    ("JSON decode of the review", ("parse_review", "loads_bounded", "read_json", "decoder.py")),
    ("JSON encode of the answer", ("encoder.py", "_json (webhook/app.py")),
    ("engine: inventory and rules", ("(gpulint/", "(rules/")),
    ("webhook: review path and body pool", ("(webhook/",)),
    ("aiohttp: HTTP parsing and routing", ("aiohttp/",)),
    ("event loop", ("asyncio/", "Runner.run", "uvloop")),
)


def bucket(stack: str) -> str:
    frames = stack.split(";")
    for frame in reversed(frames):
        for name, patterns in BUCKETS:
            if any(p in frame for p in patterns):
                return name
    return "other"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--rate", type=float, default=0.0, help="open loop instead (req/s)")
    parser.add_argument("--cluster-objects", type=int, default=0, help="serve from a cache")
    parser.add_argument("--raw", type=Path, help="keep py-spy's stacks (collapsed) here")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    run = load.loop_runner()
    bodies = load.reviews(load.cluster_objects(max(400, args.cluster_objects)), 5000)
    with tempfile.TemporaryDirectory(prefix="gpulint-webhook-profile-") as scratch:
        directory = Path(scratch)
        cert, key, context = load.serving_certificate(directory)
        port = load._free_port()
        command = [
            sys.executable, "-m", "gpulint", "serve", f"--tls-cert={cert}",
            f"--tls-key={key}", f"--port={port}", "--bind=127.0.0.1",
        ]  # fmt: skip
        kube = None
        if args.cluster_objects:
            from tests.kubefake import FakeCluster, KubeFake

            cluster = FakeCluster()
            for obj in load.cluster_objects(args.cluster_objects):
                cluster.apply(obj)
            kube = KubeFake(cluster).start()
            command.append(f"--kubeconfig={kube.write_kubeconfig(directory / 'kubeconfig')}")
        else:
            command.append("--no-cluster")
        gc.collect()
        gc.freeze()
        gc.disable()
        raw = directory / "profile.txt"
        try:
            with server(command, directory, "gpulint") as process:
                load.wait_ready(port, context, timeout=600)
                run(load.closed_loop(port, context, bodies, args.connections, seconds=2))
                recorder = subprocess.Popen(
                    [spy, "record", "--pid", str(process.pid), "--rate", "250", "--threads",
                     "--format", "raw", "--nonblocking", "--duration",
                     f"{args.duration:g}", "--output", str(raw)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                )  # fmt: skip
                if args.rate:
                    tally = run(
                        load.open_loop(
                            port, context, bodies, args.connections, args.rate, args.duration
                        )
                    )
                else:
                    tally = run(
                        load.closed_loop(
                            port, context, bodies, args.connections, seconds=args.duration
                        )
                    )
                _, errors = recorder.communicate(timeout=120)
        finally:
            if kube is not None:
                kube.stop()
        if not raw.exists():
            raise SystemExit(f"py-spy wrote nothing: {errors.decode(errors='replace')}")
        if args.raw:
            shutil.copyfile(raw, args.raw)
        threads: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            thread = stack.split(";", 1)[0]
            threads[thread][bucket(stack)] += int(count)
    summary = tally.summary()
    print(
        f"{summary['requests']} requests, {summary['throughput']} req/s, "
        f"p50 {summary['p50_ms']} ms, p99 {summary['p99_ms']} ms; machine {load.machine()}"
    )
    total: collections.Counter[str] = collections.Counter()
    for counts in threads.values():
        total.update(counts)
    busiest = max(threads, key=lambda t: sum(threads[t].values()) - _idle(threads[t]))
    print(f"\nthreads sampled: {', '.join(sorted(threads))}; busiest: {busiest}\n")
    print("| where | share of the busiest thread | share of all samples |")
    print("|---|---:|---:|")
    main_counts = threads[busiest]
    main_total, all_total = sum(main_counts.values()), sum(total.values())
    for name, count in total.most_common():
        print(
            f"| {name} | {100 * main_counts[name] / main_total:.1f} % | "
            f"{100 * count / all_total:.1f} % |"
        )
    return 0


def _idle(counts: collections.Counter[str]) -> int:
    return sum(v for k, v in counts.items() if k.startswith("idle"))


if __name__ == "__main__":
    sys.exit(main())
