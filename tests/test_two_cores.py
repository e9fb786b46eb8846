"""A large inventory's rules run on two cores; the findings are exactly what one core finds."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpulint.core.model import Finding
from gpulint.engine import runner, twocores
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection
from gpulint.engine.runner import inventory_from_paths, run
from gpulint.input.document import Document, Manifest
from gpulint.inventory import Inventory

from .conftest import CORPUS, FIXTURES, ROOT, in_one_thread

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")


class _Forks:
    """Counts the children started and what they answered."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started = 0
        self.answered: list[list[Any] | None] = []
        real = runner.forked

        @contextlib.contextmanager
        def counted(
            work: Callable[[], Iterable[Any]],
        ) -> Iterator[Callable[[], list[Any] | None]]:
            self.started += 1
            with real(work) as collect:

                def answer() -> list[Any] | None:
                    got = collect()
                    self.answered.append(got)
                    return got

                yield answer

        monkeypatch.setattr(runner, "forked", counted)
        monkeypatch.setattr(runner, "TWO_CORES_MIN_OBJECTS", 0)


def _inventory(paths: list[Path]) -> Inventory:
    return inventory_from_paths([str(p) for p in paths], Settings())


def _both(inventory: Inventory) -> tuple[list[Finding], list[Finding]]:
    one = run(inventory, Selection())
    two = run(inventory, Selection(), split=True)
    return one, two


def _inputs() -> list[Any]:
    inputs = [
        pytest.param([FIXTURES], id="rule-fixtures"),
        pytest.param([ROOT / "examples"], id="examples"),
    ]
    if CORPUS.is_dir():
        inputs.append(pytest.param([CORPUS], id="corpus", marks=pytest.mark.corpus))
    return inputs


@pytest.mark.parametrize("paths", _inputs())
@in_one_thread
def test_two_cores_find_exactly_what_one_core_finds(
    paths: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    forks = _Forks(monkeypatch)
    one, two = _both(_inventory(paths))
    assert forks.started == 1 and forks.answered[0] is not None
    # The child ended well; the rules it took were answered with their findings, or, for a
    # rule whose findings point at a document the inventory does not list (an adapter
    # configuration embedded in a ConfigMap), with the items to run it on here.
    answers = forks.answered[0]
    assert all(isinstance(answer, bytes | list) for _, answer in answers)
    assert len(one) >= 20
    assert two == one
    # The fixes point at this process's own documents, not at copies.
    for first, second in zip(one, two, strict=True):
        if first.plan is not None:
            assert all(
                a.document is b.document
                for a, b in zip(first.plan.ops, second.plan.ops, strict=True)
            )


@in_one_thread
def test_rules_the_child_cannot_send_findings_of_are_run_again_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forks = _Forks(monkeypatch)

    def unplaceable(*args: Any) -> bytes:
        raise twocores.Unplaceable

    monkeypatch.setattr(runner, "pickled", unplaceable)
    one, two = _both(_inventory([FIXTURES]))
    answers = forks.answered[0]
    assert answers is not None
    assert all(isinstance(answer, list) for _, answer in answers)
    assert two == one and len(one) > 50


@in_one_thread
def test_an_answer_that_does_not_read_back_is_run_again_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _Forks(monkeypatch)

    def unreadable(*args: Any) -> Any:
        raise EOFError("the answer was cut short")

    monkeypatch.setattr(runner, "unpickled", unreadable)
    one, two = _both(_inventory([FIXTURES]))
    assert two == one and len(one) > 50


def test_documents_travel_by_name_and_come_back_as_themselves() -> None:
    inventory = _inventory([ROOT / "examples"])
    documents = list(inventory.store.documents.items)
    manifest = next(d for d in documents if isinstance(d, Manifest))
    plain = next(d for d in documents if type(d) is Document)
    value = {"findings": [(manifest, ("spec",)), (plain, ())], "text": "kept"}
    blob = twocores.pickled(value, documents, twocores.document_index(documents))
    back = twocores.unpickled(blob, documents)
    assert back["findings"][0][0] is manifest and back["findings"][1][0] is plain
    assert back["text"] == "kept"
    stranger = Document({"a": 1}, "elsewhere.yaml", 0, 1)
    with pytest.raises(twocores.Unplaceable):
        twocores.pickled([stranger], documents, twocores.document_index(documents))


@in_one_thread
def test_a_child_that_fails_leaves_its_rules_to_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forks = _Forks(monkeypatch)
    parent = os.getpid()
    real_start = runner._Planned.started

    def failing(self: Any) -> Any:
        if os.getpid() != parent:
            raise MemoryError("the child ran out of memory")
        return real_start(self)

    monkeypatch.setattr(runner._Planned, "started", failing)
    one, two = _both(_inventory([FIXTURES]))
    assert forks.answered == [None]
    assert two == one and len(one) > 50


def test_small_inventories_and_narrowed_runs_stay_on_one_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forks = _Forks(monkeypatch)
    inventory = _inventory([ROOT / "examples"])
    monkeypatch.setattr(runner, "TWO_CORES_MIN_OBJECTS", len(inventory) + 1)
    run(inventory, Selection(), split=True)
    monkeypatch.setattr(runner, "TWO_CORES_MIN_OBJECTS", 0)
    run(inventory, Selection(), split=True, per_rule=3)  # an admission review's bound
    run(inventory, Selection())
    assert forks.started == 0


@in_one_thread
def test_no_child_is_forked_while_another_thread_runs() -> None:
    """A lock another thread holds at the fork would stay held in the child forever."""
    import threading

    from gpulint.core.forked import forked

    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        with forked(lambda: [os.getpid()]) as collect:
            assert collect() is None
    finally:
        release.set()
        other.join()
    with forked(lambda: [os.getpid()]) as collect:
        answered = collect()
    assert answered is not None and answered[0] != os.getpid()


@in_one_thread
def test_leaving_without_asking_stops_the_child(tmp_path: Path) -> None:
    import time

    from gpulint.core.forked import forked

    marker = tmp_path / "started"

    def slow() -> Iterator[int]:
        marker.write_text("the child runs")
        time.sleep(60)
        yield 1

    started = time.monotonic()
    with pytest.raises(RuntimeError), forked(slow):
        while not marker.exists() and time.monotonic() - started < 20:
            time.sleep(0.01)
        raise RuntimeError("this process failed first")
    assert marker.exists()
    assert time.monotonic() - started < 30


@in_one_thread
def test_units_judged_in_one_pass_find_what_each_finds_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_units over several inventories, on one core and on two, gives each inventory the
    findings and suppression counts run gives it alone."""
    forks = _Forks(monkeypatch)
    source = min((FIXTURES / "GL101").glob("fail_*.yaml"))
    lines = source.read_text().splitlines(keepends=True)
    first = next(f for f in run(_inventory([source]), Selection()) if f.rule == "GL101")
    lines.insert(first.location.line - 1, "# gpulint: ignore=GL101\n")
    (tmp_path / source.name).write_text("".join(lines))
    inventories = [
        _inventory([FIXTURES / name]) for name in ("GL101", "GL102", "GL401", "GL703", "GL108")
    ]
    inventories.append(_inventory([tmp_path]))
    alone_counts: list[dict[str, int]] = [{} for _ in inventories]
    alone = [
        run(inventory, Selection(), suppressed=counts)
        for inventory, counts in zip(inventories, alone_counts, strict=True)
    ]
    one_counts: list[dict[str, int]] = [{} for _ in inventories]
    one = runner.run_units(inventories, Selection(), one_counts)
    assert forks.started == 0
    two_counts: list[dict[str, int]] = [{} for _ in inventories]
    two = runner.run_units(inventories, Selection(), two_counts, split=True)
    assert forks.started == 1 and forks.answered[0] is not None
    assert one == alone and two == alone and all(alone)
    assert one_counts == alone_counts == two_counts and alone_counts[-1] == {"GL101": 1}


def test_a_run_of_many_units_starts_each_rule_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One directory per application is one unit per application; the rules are planned,
    looked up and their options merged once for the run, not once per unit."""
    from gpulint.engine.assembly import assemble
    from gpulint.engine.registry import load_rule, rule_index

    from .test_unit_context import ADAPTER_UNNAMED, DEPLOYMENT, HPA, _write

    layout = {}
    for service in range(12):
        name = f"svc-{service}"
        layout[f"teams/t/{name}/deployment.yaml"] = DEPLOYMENT.format(name=name)
        layout[f"teams/t/{name}/hpa.yaml"] = HPA.format(name=name, target=name)
    layout["teams/t/svc-0/prometheus-adapter.yaml"] = ADAPTER_UNNAMED
    _write(tmp_path, layout)
    started: list[str] = []

    def counted(info: Any) -> Any:
        started.append(info.id)
        return load_rule(info)

    planned: list[object] = []
    real_plan = runner._plan

    def counted_plan(*args: Any) -> Any:
        planned.append(args)
        return real_plan(*args)

    monkeypatch.setattr(runner, "load_rule", counted)
    monkeypatch.setattr(runner, "_plan", counted_plan)
    settings = Settings()
    assembly = assemble([str(tmp_path)], settings)
    result = assembly.lint(settings, Selection())
    assert len(result.units) == 12
    assert len(started) == len(set(started)) and len(started) <= len(rule_index())
    assert len(planned) == 1


def test_judged_units_are_freed_with_the_cyclic_collector_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gpulint lint` runs with the cyclic collector off; the inventories of judged units
    (whose indexes refer to each other) must not all be kept to the end of the run."""
    import gc
    import weakref

    from gpulint.engine import files
    from gpulint.engine.assembly import assemble

    from .test_unit_context import DEPLOYMENT, HPA, _write

    _write(
        tmp_path,
        {
            f"apps/svc-{n}/{kind}.yaml": text
            for n in range(6)
            for kind, text in (
                ("deployment", DEPLOYMENT.format(name=f"svc-{n}")),
                ("hpa", HPA.format(name=f"svc-{n}", target=f"svc-{n}")),
            )
        },
    )
    built: list[weakref.ref[Inventory]] = []
    original = files.unit_inventory

    def recorded(*args: Any) -> Inventory:
        inventory = original(*args)
        built.append(weakref.ref(inventory))
        return inventory

    monkeypatch.setattr(files, "unit_inventory", recorded)
    monkeypatch.setattr(files, "BATCH_OBJECTS", 4)  # two units a batch
    settings = Settings()
    assembly = assemble([str(tmp_path)], settings)
    enabled = gc.isenabled()
    gc.disable()
    try:
        result = assembly.lint(settings, Selection())
        assert len(built) == len(result.units) == 6
        assert [ref() for ref in built] == [None] * 6
        assert not gc.isenabled()
    finally:
        if enabled:
            gc.enable()
