"""Draw the README's replay picture: the seed's HPA replayed on the day in load.csv.

    python examples/replay/picture.py            # writes examples/replay/triton-gpu.svg

The HPA, its workload and the adapter config are examples/seed-ja/fixed (HPA default/triton-gpu
on gpu_utilization and request_rate_per_min); load.csv holds a day of per-minute samples of
what those two queries answer, while the service ran 4 pods. ``gpulint replay`` fetches the same
series from Prometheus; here they are read from the file, so the picture does not depend on a
running Prometheus or on today's date. tests/replay/test_example.py checks that the committed
picture is what this script draws.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from gpulint.engine.config import Settings  # noqa: E402
from gpulint.engine.files import build_units, plan_units, unit_inventory  # noqa: E402
from gpulint.input.units import RenderOptions  # noqa: E402
from gpulint.replay.model import History  # noqa: E402
from gpulint.replay.plan import plan  # noqa: E402
from gpulint.replay.render import render_svg  # noqa: E402
from gpulint.replay.report import replay_one  # noqa: E402

START = 1_768_435_200.0  # 2026-01-15T00:00:00Z
SEED = ROOT / "examples" / "seed-ja" / "fixed"
PICTURE = HERE / "triton-gpu.svg"


def history() -> History:
    times: list[float] = []
    gpu: list[float | None] = []
    pods: list[int | None] = []
    rate: list[float | None] = []
    with open(HERE / "load.csv", encoding="utf-8") as handle:
        for row in csv.DictReader(line for line in handle if not line.startswith("#")):
            times.append(START + float(row["seconds"]))
            gpu.append(float(row["gpu_utilization"]))
            pods.append(int(row["pods"]))
            rate.append(float(row["request_rate_per_min"]))
    return History(times, [gpu, rate], [pods, []], list(pods))


def draw() -> str:
    settings = Settings()
    units = build_units(plan_units([str(SEED)], settings, 64 << 20), RenderOptions())
    inventory = unit_inventory(units[0], settings)
    specs = [s for s in plan(inventory).specs if s.name == "triton-gpu"]
    replayed = replay_one(specs[0], history(), inventory, compare_fix=True)
    return render_svg(replayed)


if __name__ == "__main__":
    PICTURE.write_text(draw())
    print(f"wrote {PICTURE.relative_to(ROOT)}")
