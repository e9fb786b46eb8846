"""Draw docs/migrate.md's picture: the seed's HPA and the ScaledObject `gpulint migrate keda`
writes for it, replayed side by side on the day in examples/replay/load.csv.

    python examples/migrate/picture.py            # writes examples/migrate/triton-gpu-keda.svg

The HPA, its workload and the adapter config are examples/seed-ja/fixed. The HPA reads the
pods' mean GPU utilization and the service's request rate through the adapter; the
ScaledObject reads the sum of the pods' GPU utilization and the same rate through its two
triggers. load.csv holds a day of per-minute samples of what the adapter's queries answered
(the mean over the pods, the pods reporting, the rate); the sum KEDA's query answers is that
mean times those pods. `gpulint migrate keda --prometheus` fetches both from Prometheus; here
they are read from the file, so the picture depends on neither a running Prometheus nor
today's date. tests/test_migrate_example.py checks that the committed picture is what this
script draws.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from examples.replay.picture import history  # noqa: E402
from gpulint.engine.config import Settings  # noqa: E402
from gpulint.engine.files import build_units, plan_units, unit_inventory  # noqa: E402
from gpulint.input.units import RenderOptions  # noqa: E402
from gpulint.migrate.lowering import Lowered, candidates, lower  # noqa: E402
from gpulint.migrate.proof import Proof, compare, scaled_object_view, side_by_side  # noqa: E402
from gpulint.replay.model import History  # noqa: E402
from gpulint.replay.plan import hpa_spec, scaled_object_spec  # noqa: E402
from gpulint.replay.report import replay_one  # noqa: E402

SEED = ROOT / "examples" / "seed-ja" / "fixed"
PICTURE = HERE / "triton-gpu-keda.svg"
# The seed's adapter config names no Prometheus: the one kube-prometheus-stack installs.
SERVER = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"


def keda_history(adapter: History) -> History:
    """What the ScaledObject's triggers read on the same day: the GPU utilization summed over
    the pods (the mean times the pods reporting), and the same request rate."""
    gpu, rate = adapter.values
    pods = adapter.pods[0]
    summed = [m * p if m is not None and p else None for m, p in zip(gpu, pods, strict=True)]
    return History(adapter.times, [summed, rate], [[], []], list(adapter.observed))


def proof() -> Proof:
    settings = Settings()
    units = build_units(plan_units([str(SEED)], settings, 64 << 20), RenderOptions())
    inventory = unit_inventory(units[0], settings)
    [hpa] = [h for h in candidates(inventory) if h.name == "triton-gpu"]
    lowered = lower(hpa, inventory, SERVER)
    assert isinstance(lowered, Lowered), lowered
    before = hpa_spec(hpa, inventory, None)
    after = scaled_object_spec(scaled_object_view(lowered), inventory, None)
    recorded = history()
    result = Proof(lowered)
    result.hpa = replay_one(before, recorded, inventory)
    result.scaled = replay_one(after, keda_history(recorded), inventory)
    compare(result, result.hpa, result.scaled)
    return result


def draw() -> str:
    return side_by_side(proof())


if __name__ == "__main__":
    PICTURE.write_text(draw())
    print(f"wrote {PICTURE.relative_to(ROOT)}")
