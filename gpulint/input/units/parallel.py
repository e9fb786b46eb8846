"""Reading many files on two cores: a forked child parses a share of them.

Parsing is most of a large run's time, and one Python process uses one core. For a large
input, gpulint forks one child that loads every other file (by size) and sends the loaded
files back pickled, while the parent loads the rest; unpickling costs a fraction of parsing,
so a repository of 20,000 files reads in about two thirds of the time. Small inputs, systems
without ``fork``, or any failure of the child fall back to loading everything here: the
result is the same either way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO

from gpulint.input.loader import LoadedFile

# Below this much YAML, a child costs more than it saves.
MIN_BYTES = 1 << 20
# The child's share of the bytes: it also pickles what it parsed.
CHILD_SHARE = 0.42
CHUNK = 500  # files per pickle the child writes


def load_all(files: list[str], load: Callable[[str], LoadedFile]) -> list[LoadedFile]:
    """``[load(f) for f in files]``, on two cores when it pays."""
    if len(files) < 2 or not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return [load(f) for f in files]
    sizes = [_size(file) for file in files]
    total = sum(sizes)
    if total < MIN_BYTES:
        return [load(f) for f in files]
    child_part = _share(sizes, total)
    # Imported here, not at the top: a small input never pays for them.
    import tempfile

    # The child writes what it loaded to a file in chunks, never blocking on the parent, and
    # the parent reads it back a chunk at a time: memory holds one chunk's bytes, not all.
    with tempfile.TemporaryFile() as spool:
        try:
            pid = os.fork()
        except OSError:
            return [load(f) for f in files]
        if pid == 0:  # the child: load its share, spool it, and leave without cleanup
            os._exit(_spool_share(files, child_part, load, spool))
        mine = set(child_part)
        loaded: dict[int, LoadedFile] = {}
        for index, file in enumerate(files):
            if index not in mine:
                loaded[index] = load(file)
        theirs = _receive(spool, pid, len(child_part))
    if theirs is None:
        theirs = [load(files[i]) for i in child_part]
    for index, item in zip(child_part, theirs, strict=True):
        loaded[index] = item
    return [loaded[index] for index in range(len(files))]


def _size(file: str) -> int:
    try:
        return os.stat(file).st_size
    except OSError:
        return 0


def _spool_share(
    files: list[str], child_part: list[int], load: Callable[[str], LoadedFile], spool: IO[bytes]
) -> int:
    """In the child: load its share and write it to ``spool`` a chunk at a time, each chunk
    pickled behind its length; the exit code (1 after any failure)."""
    import pickle
    import struct

    try:
        for start in range(0, len(child_part), CHUNK):
            chunk = [load(files[i]) for i in child_part[start : start + CHUNK]]
            blob = pickle.dumps(chunk, protocol=5)
            spool.write(struct.pack("<Q", len(blob)))
            spool.write(blob)
        spool.flush()
    except BaseException:
        return 1
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


def _receive(spool: IO[bytes], pid: int, count: int) -> list[LoadedFile] | None:
    """What the child spooled, once it is done; None if it failed (then load it here)."""
    import pickle
    import struct

    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = 1
    try:
        if os.waitstatus_to_exitcode(status) != 0:
            return None
        spool.seek(0)
        items: list[LoadedFile] = []
        while len(items) < count:
            header = spool.read(8)
            if len(header) != 8:
                return None
            (size,) = struct.unpack("<Q", header)
            blob = spool.read(size)
            if len(blob) != size:
                return None
            items.extend(pickle.loads(blob))
        return items if len(items) == count else None
    except (OSError, EOFError, pickle.UnpicklingError, struct.error, ValueError):
        return None
