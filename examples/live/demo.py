"""Start the walk-through's monitoring: fixture GPU exporters and two real Prometheus servers.

    python examples/live/demo.py [--port 9090]

* ``http://127.0.0.1:9090``: kube-prometheus-stack style (dcgm-exporter scraped with
  ``honor_labels: false``, so the workload's pod is in ``exported_pod``);
* ``http://127.0.0.1:9091``: a Prometheus that keeps the exporter's labels
  (``honor_labels: true``, like GKE managed collection).

The exporters and the data are those of gpulint's live tests (tests/live/world.py): dcgm-exporter
on four GPU nodes (Deployment triton and StatefulSet llm in namespace ml, MIG instances for
Deployment embedder in namespace search, a 1.x-named exporter and the legacy
nvidia_gpu_prometheus_exporter), a profiling metric that stops after two scrapes, and Triton's
nv_gpu_utilization backfilled until two days ago. Needs the ``prometheus`` binary
(``apt-get install prometheus``) and aiohttp (``pip install -e '.[test]'``). Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.live.harness import INSTALL_HINT, prometheus_binary  # noqa: E402
from tests.live.world import start_world  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=9090, help="first of two ports (default 9090)")
    args = parser.parse_args()
    if prometheus_binary() is None:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with tempfile.TemporaryDirectory(prefix="gpulint-live-demo-") as workdir:
        print("starting the exporters and Prometheus (about 10 s) ...", flush=True)
        world = start_world(Path(workdir), ports=(args.port, args.port + 1))
        try:
            print(f"honor_labels: false (kube-prometheus-stack): {world.stack.url}")
            print(f"honor_labels: true  (exporter's own labels): {world.gmp.url}")
            print("ready; Ctrl-C stops both", flush=True)
            stop.wait()
        except KeyboardInterrupt:
            pass
        finally:
            world.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
