"""The cluster cache's memory and time per object, in one process, without a server.

    python bench/cache_memory.py [--objects 50000] [--whole]

bench/webhook_load.py's mix of objects, served in pages of 500 as JSON (as the API server
answers a list), each decoded, cut to its projection (``--whole``: kept whole, as before
gpulint.cluster.projection), classified and added to one inventory as ClusterCache does,
then the indexes the first admission asks for built. Prints the growth of the process's
RSS and the seconds taken. bench/webhook_scaling.py measures the same through ``gpulint
serve`` and the fake API server; this isolates the cache from both.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import webhook_load as load  # noqa: E402

import gpulint.cluster.reading as reading  # noqa: E402
from gpulint.cluster.kinds import watched_kinds  # noqa: E402
from gpulint.engine.config import Settings  # noqa: E402
from gpulint.engine.registry import all_rules  # noqa: E402
from gpulint.inventory import Inventory  # noqa: E402
from gpulint.kinds.classify import classify_manifest  # noqa: E402

PAGE = 500


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=50000)
    parser.add_argument("--whole", action="store_true")
    args = parser.parse_args()
    if args.whole:
        reading.project = lambda obj: obj  # type: ignore[assignment]
    objects = load.cluster_objects(args.objects)
    pages = [json.dumps(objects[i : i + PAGE]).encode() for i in range(0, len(objects), PAGE)]
    del objects
    streams = {s.kind: s for s in watched_kinds()}
    all_rules()
    gc.collect()
    before = load.rss_mib(os.getpid())
    started = time.monotonic()
    inventory = Inventory(Settings(), by_directory=False)
    for page in pages:
        for obj in json.loads(page):
            manifest = reading.cluster_manifest(obj, streams[obj["kind"]], "v1")
            if manifest is not None:
                inventory.add(classify_manifest(manifest))
    inventory.target_groups()
    inventory.metrics_read()
    seconds = time.monotonic() - started
    gc.collect()
    grown = load.rss_mib(os.getpid()) - before
    print(
        json.dumps(
            {
                "objects": args.objects,
                "kept": "whole" if args.whole else "projection",
                "seconds": round(seconds, 1),
                "rss_growth_mib": round(grown, 1),
                "bytes_per_object": round(grown * 2**20 / args.objects),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
