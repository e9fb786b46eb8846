"""Making and removing directory trees without recursion.

On Python 3.11, ``os.makedirs`` and ``shutil.rmtree`` recurse once per directory level, so a
tree a repository commits 1,000 directories deep ends in RecursionError in the copy gpulint
makes of it, or in its removal. These do the same in a loop.
"""

from __future__ import annotations

import contextlib
import os
import stat


def make_directories(path: str) -> int:
    """``path`` and its missing parents, made top down; how many were made."""
    missing = []
    current = path
    while current and not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory)
    return len(missing)


def remove_tree(top: str) -> None:
    """Remove ``top`` and everything below it, never following a link; what cannot be
    removed is left (as ``shutil.rmtree(top, ignore_errors=True)``)."""
    stack: list[tuple[str, bool]] = [(top, False)]
    while stack:
        path, emptied = stack.pop()
        if emptied:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            continue
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if not stat.S_ISDIR(mode):
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        stack.append((path, True))
        try:
            with os.scandir(path) as entries:
                stack.extend((entry.path, False) for entry in entries)
        except OSError:
            continue
