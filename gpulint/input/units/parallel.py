"""Reading many files on two cores: a forked child parses a share of them.

Parsing is most of a large run's time, and one Python process uses one core. For a large
input, gpulint forks one child (``gpulint.core.forked``) that loads every other file (by
size) and sends the loaded files back pickled, while the parent loads the rest; unpickling
costs a fraction of parsing, so a repository of 20,000 files reads in about two thirds of the
time. Small inputs, or a child that cannot run or fails, fall back to loading everything
here: the result is the same either way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from gpulint.core.forked import can_fork, forked
from gpulint.input.loader import LoadedFile

# Below this much YAML, a child costs more than it saves.
MIN_BYTES = 1 << 20
# The child's share of the bytes: it also pickles what it parsed.
CHILD_SHARE = 0.42
CHUNK = 500  # files per pickle the child writes


def load_all(files: list[str], load: Callable[[str], LoadedFile]) -> list[LoadedFile]:
    """``[load(f) for f in files]``, on two cores when it pays."""
    if len(files) < 2 or not can_fork():
        return [load(f) for f in files]
    sizes = [_size(file) for file in files]
    total = sum(sizes)
    if total < MIN_BYTES:
        return [load(f) for f in files]
    child_part = _share(sizes, total)

    def theirs() -> Iterator[list[LoadedFile]]:
        for start in range(0, len(child_part), CHUNK):
            yield [load(files[i]) for i in child_part[start : start + CHUNK]]

    mine = set(child_part)
    loaded: dict[int, LoadedFile] = {}
    with forked(theirs) as collect:
        for index, file in enumerate(files):
            if index not in mine:
                loaded[index] = load(file)
        chunks = collect()
    received = [item for chunk in chunks or () for item in chunk]
    if len(received) != len(child_part):
        received = [load(files[i]) for i in child_part]
    for index, item in zip(child_part, received, strict=True):
        loaded[index] = item
    return [loaded[index] for index in range(len(files))]


def _size(file: str) -> int:
    try:
        return os.stat(file).st_size
    except OSError:
        return 0


def _share(sizes: list[int], total: int) -> list[int]:
    """Indexes for the child: every other file by size, until it has its share of bytes."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    taken: list[int] = []
    budget = total * CHILD_SHARE
    used = 0
    for position, index in enumerate(order):
        if position % 2 == 0 and used < budget:
            taken.append(index)
            used += sizes[index]
    return sorted(taken)
