"""Large inputs are read on two cores; the result is exactly what one core reads."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpulint.input.loader import LoadedFile, load_file
from gpulint.input.units import parallel

from .conftest import FIXTURES, in_one_thread


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    sources = sorted(FIXTURES.rglob("*.yaml"))[:60]
    found = []
    for index, source in enumerate(sources):
        target = tmp_path / f"{index:03d}-{source.name}"
        target.write_bytes(source.read_bytes())
        found.append(str(target))
    return found


def _shape(loaded: LoadedFile) -> object:
    return (
        loaded.path,
        [(d.data, d.line, d.index, d.rendered_from) for d in loaded.documents],
        [
            (d.data.key_position(k) if hasattr(d.data, "key_position") else None)
            for d in loaded.documents
            for k in (d.data or {})
        ],
        loaded.problems,
        [(dup.key, dup.line) for _, dup in loaded.duplicates],
        loaded.ignore_comments,
        loaded.skipped_reason,
    )


def _answers(monkeypatch: pytest.MonkeyPatch) -> list[list[Any] | None]:
    """What each child the reading forks answers (None: it failed)."""
    answered: list[list[Any] | None] = []
    real = parallel.forked

    @contextlib.contextmanager
    def spied(work: Callable[[], Iterable[Any]]) -> Iterator[Callable[[], list[Any] | None]]:
        with real(work) as collect:

            def answer() -> list[Any] | None:
                got = collect()
                answered.append(got)
                return got

            yield answer

    monkeypatch.setattr(parallel, "forked", spied)
    return answered


@in_one_thread
def test_two_cores_read_exactly_what_one_does(
    files: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this system")
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "CHUNK", 7)
    answered = _answers(monkeypatch)
    serial = [load_file(f) for f in files]
    both = parallel.load_all(files, load_file)
    # The child read its share: every other file by size, in chunks of 7.
    assert len(answered) == 1 and answered[0] is not None and len(answered[0]) >= 3
    assert [_shape(a) for a in both] == [_shape(b) for b in serial]
    assert all(
        type(a.documents[0].data) is type(b.documents[0].data)
        for a, b in zip(both, serial, strict=True)
        if a.documents
    )


@in_one_thread
def test_a_child_that_fails_costs_time_not_results(
    files: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this system")
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    parent = os.getpid()

    def load(path: str) -> LoadedFile:
        if os.getpid() != parent:
            raise MemoryError("the child ran out of memory")
        return load_file(path)

    answered = _answers(monkeypatch)
    both = parallel.load_all(files, load)
    assert answered == [None]
    assert [a.path for a in both] == files
    assert [_shape(a) for a in both] == [_shape(load_file(f)) for f in files]
