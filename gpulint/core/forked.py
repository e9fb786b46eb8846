"""Work on the second core: a forked child does part of a job while this process does the rest.

One Python process uses one core. Where a large run's work splits into parts that need
nothing from each other (reading files, running rules), gpulint forks one child for a share
of it. The child sees everything this process holds at the fork, copied on write; what it
makes comes back pickled through a file it writes as it goes, never blocking on this process.
Anything that goes wrong (no ``fork`` on this system, a child that fails or dies, a result
that does not unpickle) ends in ``None``, and the caller does the child's share itself: the
result is the same either way, only slower.

Only a process with one thread may fork this way (a lock held by another thread at the fork
would stay held in the child forever); ``can_fork`` says whether this one may.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any


def can_fork() -> bool:
    """Whether a child may be forked here: ``fork`` exists, there is a second core, and this
    process runs one thread."""
    return hasattr(os, "fork") and (os.cpu_count() or 1) >= 2 and threading.active_count() == 1


@contextlib.contextmanager
def forked(work: Callable[[], Iterable[Any]]) -> Iterator[Callable[[], list[Any] | None]]:
    """Start ``work`` in a forked child; inside the block, the function given waits for it
    and returns what it yielded, in order, or None when it failed (or could not start).

    Each item ``work`` yields is pickled on its own as soon as it is made, so that the
    child's memory holds one item's bytes at a time. Leaving the block without asking
    stops the child.
    """
    import pickle
    import struct
    import tempfile

    if not can_fork():
        yield lambda: None
        return
    with tempfile.TemporaryFile() as spool:
        try:
            pid = os.fork()
        except OSError:
            yield lambda: None
            return
        if pid == 0:  # the child: do the work, spool it, and leave without any cleanup
            code = 1
            try:
                for item in work():
                    blob = pickle.dumps(item, protocol=5)
                    spool.write(struct.pack("<Q", len(blob)))
                    spool.write(blob)
                spool.flush()
                code = 0
            finally:
                os._exit(code)
        reaped = False

        def collect() -> list[Any] | None:
            nonlocal reaped
            reaped = True
            return _collect(spool, pid)

        try:
            yield collect
        finally:
            if not reaped:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)


def _collect(spool: IO[bytes], pid: int) -> list[Any] | None:
    """What the child spooled, once it has ended; None unless it ended well."""
    import pickle
    import struct

    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    if os.waitstatus_to_exitcode(status) != 0:
        return None
    try:
        spool.seek(0)
        items: list[Any] = []
        while header := spool.read(8):
            if len(header) != 8:
                return None
            (size,) = struct.unpack("<Q", header)
            blob = spool.read(size)
            if len(blob) != size:
                return None
            items.append(pickle.loads(blob))
        return items
    except Exception:  # an unreadable spool or result: the caller does the work itself
        return None
