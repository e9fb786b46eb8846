"""Numbers a replay is given that no cluster has: replicas in the hundreds of millions, a
maxReplicas of 2^31-1, values near the largest float. The replay keeps nothing per pod and no
loop per pod, and arithmetic past a float is no reading: it runs in the time and memory of
an ordinary one, and never fails."""

from __future__ import annotations

import bisect
import dataclasses
import math
import time
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulint.core.quantity import INT32_MAX
from gpulint.engine.config import Settings
from gpulint.engine.runner import inventory_from_paths
from gpulint.replay.model import History, ReplayMetric, ReplaySpec
from gpulint.replay.plan import plan
from gpulint.replay.replicas import (
    SUMMED_PODS,
    Pod,
    per_pod_total_replicas,
    plain_metric_replicas,
    repeated_sum,
    replicas_of,
    uniform_pods_replicas,
    usage_ratio_replicas,
)
from gpulint.replay.report import replay_one
from gpulint.replay.simulate import Pods, replay
from tests.replay.test_rules import SCENARIOS

POD_METRIC = ReplayMetric("gpu_utilization", "Pods", "AverageValue", 60.0, "q", cap=100.0)
EXTERNAL = ReplayMetric("queue", "External", "Value", 10.0, "q")
SPEC = ReplaySpec(
    "HorizontalPodAutoscaler",
    "ml",
    "web",
    "Deployment",
    "web",
    1,
    8,
    None,
    (POD_METRIC,),
    120.0,
    "test",
    1,
)
SYNCS = 241  # an hour at the sync period


def history(value: float, observed: int | None, pods: int | None = 1) -> History:
    times = [15.0 * i for i in range(SYNCS)]
    return History(times, [[value] * SYNCS], [[pods] * SYNCS], [observed] * SYNCS)


def bounded(run: object) -> tuple[float, int]:
    """Seconds and peak bytes allocated by ``run()``."""
    tracemalloc.start()
    began = time.perf_counter()
    try:
        run()  # type: ignore[operator]
        return time.perf_counter() - began, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_hundreds_of_millions_of_observed_replicas_cost_nothing_per_replica() -> None:
    """kube-state-metrics says 300,000,000 replicas: the first sync brings them to
    maxReplicas, as the controller does, without a list of 300,000,000 pods."""
    done = []
    seconds, peak = bounded(lambda: done.append(replay(SPEC, history(50.0, 300_000_000))))
    run = done[0]
    assert run.events[0].before == 300_000_000 and run.events[0].after == SPEC.max_replicas
    assert run.events[0].reason == "above maxReplicas"
    assert seconds < 2 and peak < 5 << 20


def test_a_load_that_wants_every_replica_reaches_int32_max_in_a_few_syncs() -> None:
    """maxReplicas 2^31-1 and a value near the largest float: the replicas double each sync
    up to 2^31-1 (max(2 x current, 4) without behavior), each sync one multiplication."""
    spec = dataclasses.replace(SPEC, max_replicas=INT32_MAX, metrics=(EXTERNAL,))
    done = []
    seconds, peak = bounded(lambda: done.append(replay(spec, history(1e300, 1))))
    run = done[0]
    assert max(t.replicas for t in run.ticks) == INT32_MAX
    assert len(run.events) < 40
    assert seconds < 2 and peak < 5 << 20
    pods = dataclasses.replace(spec, metrics=(dataclasses.replace(POD_METRIC, cap=None),))
    done.clear()
    seconds, peak = bounded(lambda: done.append(replay(pods, history(1e300, 1))))
    assert max(t.replicas for t in done[0].ticks) == INT32_MAX
    assert seconds < 2 and peak < 5 << 20


@pytest.mark.parametrize("value", [1.7e308, -1.7e308, 5e-324, 0.0])
@pytest.mark.parametrize(
    "metric", [POD_METRIC, EXTERNAL, dataclasses.replace(EXTERNAL, target_type="AverageValue")]
)
def test_values_at_the_ends_of_a_float_replay_or_read_as_nothing(
    value: float, metric: ReplayMetric
) -> None:
    """A value whose arithmetic goes past a float (times the pods, divided by the target) is
    no reading; the figures and every writer still have numbers."""
    import io
    import json

    from gpulint.replay.render import render_json, render_svg

    spec = dataclasses.replace(SPEC, max_replicas=INT32_MAX, metrics=(metric,))
    replayed = replay_one(spec, history(value, 1000, pods=1000), _inventory(), compare_fix=True)
    assert replayed.run.ticks
    out = io.StringIO()
    render_json([replayed], 0.0, 3600.0, 15.0, out)
    json.loads(out.getvalue(), parse_constant=_refuse)
    assert "nan" not in render_svg(replayed)


def _refuse(constant: str) -> None:
    raise AssertionError(f"{constant} in JSON")


def _inventory() -> object:
    return inventory_from_paths([str(SCENARIOS)], Settings())


def test_replica_counts_past_a_float_are_int32_max() -> None:
    assert replicas_of(math.inf) == replicas_of(math.nan) == replicas_of(1e300) == INT32_MAX
    assert replicas_of(2.1) == 3
    assert usage_ratio_replicas(INT32_MAX, 1e300, INT32_MAX) == INT32_MAX
    assert per_pod_total_replicas(INT32_MAX, 1.7e308, 1e-300) == INT32_MAX
    assert uniform_pods_replicas(5, INT32_MAX, 0, 1.7e308, 60.0) == INT32_MAX


def test_uniform_pods_past_the_summed_bound_give_the_calculators_answer() -> None:
    """Beyond ``SUMMED_PODS`` ready pods the pods' values are summed by ``repeated_sum``:
    the same replicas as calcPlainMetricReplicas over the pods, on either side of the
    tolerance and of a whole number (3,000 pods at 66.1 against 60 are 3305.000...04)."""
    for ready in (SUMMED_PODS, SUMMED_PODS + 1, 1000, 3000):
        for value in (30.0, 54.0, 59.9, 66.1, 75.0, 100.0):
            for pending in (0, 7):
                pods = [Pod(value)] * ready + [Pod(None, phase="Pending")] * pending
                expected = plain_metric_replicas(ready + pending, pods, 60.0)
                got = uniform_pods_replicas(ready + pending, ready, pending, value, 60.0)
                assert got == expected, (ready, value, pending)
    began = time.perf_counter()
    assert uniform_pods_replicas(INT32_MAX, INT32_MAX, 0, 90.0, 60.0) == INT32_MAX
    assert time.perf_counter() - began < 0.1


def _added(value: float, count: int) -> float:
    total = 0.0
    for _ in range(count):
        total += value
    return total


_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(0, 200),
    st.sampled_from([66.1, 59.9, 0.1, 5e-324, 2.0**-1022, 1.7e308, 0.5, 1 + 2.0**-52]),
)


@settings(max_examples=300, deadline=None)
@given(_FLOATS, st.integers(0, 5000))
def test_repeated_sum_is_the_loop_it_stands_for(value: float, count: int) -> None:
    expected, got = _added(value, count), repeated_sum(value, count)
    assert got == expected or (math.isnan(got) and math.isnan(expected)), (value, count)
    assert math.copysign(1, got) == math.copysign(1, expected) or math.isnan(got)


class _EveryPod:
    """What ``Pods`` replaced: one ready time per pod, ascending."""

    def __init__(self, ready: int) -> None:
        self.ready_at = [-math.inf] * ready

    def counts(self, now: float) -> tuple[int, int]:
        ready = bisect.bisect_right(self.ready_at, now)
        return ready, len(self.ready_at) - ready

    def resize(self, now: float, before: int, after: int, ready_after: float) -> None:
        if after > before:
            self.ready_at.extend([now + ready_after] * (after - before))
            self.ready_at.sort()
        else:
            del self.ready_at[after:]


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 30),
    st.sampled_from([0.0, 15.0, 120.0, 180.0, 600.0]),
    st.lists(st.integers(0, 40), max_size=60),
)
def test_pods_in_batches_count_as_one_ready_time_per_pod(
    start: int, ready_after: float, replicas: list[int]
) -> None:
    batches, every = Pods(start), _EveryPod(start)
    current = start
    for sync, wanted in enumerate(replicas):
        now = 15.0 * sync
        batches.advance(now)
        assert (batches.ready, batches.starting) == every.counts(now), sync
        if wanted > current:
            batches.add(wanted - current, now + ready_after)
        elif wanted < current:
            batches.remove(current - wanted)
        every.resize(now, current, wanted, ready_after)
        current = wanted


def test_replica_bounds_no_api_server_accepts_are_not_replayed(tmp_path: object) -> None:
    from pathlib import Path

    root = Path(str(tmp_path))
    text = (SCENARIOS / "workloads.yaml").read_text()
    (root / "workloads.yaml").write_text(text.replace("maxReplicas: 4", "maxReplicas: 2147483648"))
    (root / "adapter.yaml").write_text((SCENARIOS / "prometheus-adapter.yaml").read_text())
    found = plan(inventory_from_paths([str(root)], Settings()))
    skipped = {s.name: s.reason for s in found.skipped}
    assert set(skipped) == {"step"}
    # lint's verdict (GL108) is the reason, as lint words it
    assert skipped["step"].startswith(
        "lint says it does not scale as written (GL108 hpa-invalid-spec): "
        "HorizontalPodAutoscaler step: maxReplicas is out of range."
    )
    assert "step" not in {s.name for s in found.specs}
