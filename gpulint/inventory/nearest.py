"""The copy nearest to a file: for repositories that keep one directory per app or environment.

Within one lint unit, the same kind of thing may still be written in several directories (an
adapter values file in some apps' directories, say). An object then reads the one nearest to
its own file: the items in its directory or below, else in its parent's, and so on up.

With ``consumers`` (the files of the objects that read the items), an item that sits in
another consumer's directory belongs to that consumer: ``apps/a/adapter-values.yaml`` next to
``apps/a/hpa.yaml`` serves app ``a``, not its sibling ``apps/b``, which reads a config further
up (``monitoring/adapter-values.yaml``) instead. Precisely: an item is visible from a
directory when that directory lies between the item and the deepest ancestor of the item that
holds a consumer (at or below it). ``DirectoryIndex`` answers in time proportional to the
directory depth, whatever the number of items.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


@functools.lru_cache(maxsize=65536)
def directory_parts(file: str) -> tuple[str, ...]:
    return tuple(os.path.dirname(os.path.abspath(file)).split(os.sep))


def consumer_directories(files: Iterable[str]) -> set[tuple[str, ...]]:
    """Every directory that holds one of ``files`` at or below it."""
    found: set[tuple[str, ...]] = set()
    for file in files:
        parts = directory_parts(file)
        for depth in range(len(parts), -1, -1):
            prefix = parts[:depth]
            if prefix in found:
                break
            found.add(prefix)
    return found


class DirectoryIndex(Generic[T]):
    """Items by the directories they are visible from, in the order they were given."""

    __slots__ = ("_at", "items")

    def __init__(
        self,
        items: Iterable[T],
        file_of: Callable[[T], str],
        consumers: set[tuple[str, ...]] | None = None,
    ) -> None:
        self.items = list(items)
        self._at: dict[tuple[str, ...], list[T]] = {}
        for item in self.items:
            parts = directory_parts(file_of(item))
            top = 0
            if consumers:
                for depth in range(len(parts), -1, -1):
                    if parts[:depth] in consumers:
                        top = depth
                        break
            for depth in range(len(parts), top - 1, -1):
                self._at.setdefault(parts[:depth], []).append(item)

    def __len__(self) -> int:
        return len(self.items)

    def at_or_below(self, parts: tuple[str, ...]) -> list[T]:
        """Items visible from the directory ``parts``."""
        return self._at.get(parts, [])

    def near(self, file: str) -> list[T]:
        """The items nearest to ``file``: those visible from its directory or, failing that,
        from the nearest parent that sees any."""
        parts = directory_parts(file)
        for depth in range(len(parts), -1, -1):
            found = self._at.get(parts[:depth])
            if found:
                return found
        return []


def nearest(items: list[T], file: str, file_of: Callable[[T], str]) -> list[T]:
    """The items whose file shares the longest directory prefix with ``file`` (every item
    when none does). For a handful of items (copies of one object)."""
    if len(items) < 2:
        return items
    return DirectoryIndex(items, file_of).near(file) or items
