"""Edits as spans of a file's text: the files they are placed in (read once, bounded), which
edits overlap, applying them, and the unified diff of what they change."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from gpulint.core.paths import display_path

# Files larger than this get no edits (their text is read again to place them).
MAX_FILE_BYTES = 16 * 1024 * 1024


class Edit(NamedTuple):
    """Replace ``start`` up to ``end`` (1-based line and column; ``end`` excluded) by
    ``text``. An insertion has ``start == end``."""

    file: str
    start: tuple[int, int]
    end: tuple[int, int]
    text: str


class Sources:
    """The text of each file, read once; stdin's text is given."""

    def __init__(self, given: dict[str, str] | None = None) -> None:
        self._texts: dict[str, list[str] | None] = {}
        for name, text in (given or {}).items():
            self._texts[name] = text.splitlines(keepends=True)

    def give(self, file: str, text: str) -> None:
        self._texts[file] = text.splitlines(keepends=True)

    def lines(self, file: str) -> list[str] | None:
        if file not in self._texts:
            self._texts[file] = _read_lines(file)
        return self._texts[file]

    def forget(self, file: str) -> None:
        self._texts.pop(file, None)


def line_ending(lines: Sequence[str]) -> str:
    """The line ending a file is written with, as its first ended line has it: ``"\\r\\n"``
    (Windows), ``"\\r"`` (bare carriage returns, as classic Mac OS wrote, which YAML reads
    as line breaks too) or ``"\\n"``; ``"\\n"`` for a file of one line without an end."""
    for line in lines:
        if line.endswith("\r\n"):
            return "\r\n"
        if line.endswith(("\n", "\r")):
            return line[-1]
    return "\n"


def ends_line(line: str) -> bool:
    """Does ``line`` (of ``Sources.lines``) end with a line break YAML reads as one?"""
    return line.endswith(("\n", "\r"))


def _read_lines(file: str) -> list[str] | None:
    try:
        if not os.path.isfile(file) or os.path.getsize(file) > MAX_FILE_BYTES:
            return None
        with open(file, encoding="utf-8", newline="") as handle:
            return handle.read().splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return None


class Unresolvable(Exception):
    """An operation gpulint cannot place in the source text."""


def overlapping(edits: Sequence[Edit]) -> bool:
    """Do any two edits of one file touch the same text (or insert at the same point)?"""
    by_file: dict[str, list[Edit]] = {}
    for edit in edits:
        by_file.setdefault(edit.file, []).append(edit)
    for items in by_file.values():
        items.sort(key=lambda e: (e.start, e.end))
        for before, after in itertools.pairwise(items):
            if after.start < before.end or (after.start == before.start):
                return True
    return False


def choose(plans: Iterable[list[Edit]]) -> list[Edit]:
    """Edits of several fixes that can be applied together: a fix whose edits overlap one
    already chosen waits for the next round (after a re-lint)."""
    chosen: list[Edit] = []
    for edits in plans:
        if not overlapping([*chosen, *edits]):
            chosen.extend(edits)
    return chosen


def apply(lines: list[str], edits: Sequence[Edit]) -> str:
    """The text of ``lines`` with non-overlapping ``edits`` (of that file) made."""
    text = "".join(lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        line, column = position
        if line > len(lines):
            return len(text)
        return starts[line - 1] + column - 1

    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: offset(edit.start)] + edit.text + text[offset(edit.end) :]
    return text


def diff_name(file: str) -> str:
    """The name of ``file`` in ``--diff`` headers: as every report shows it, relative to the
    working directory (``gpulint.core.paths``), so ``git apply`` or ``patch -p1`` run there
    applies the patch."""
    return display_path(file)


def diff_names(files: Iterable[str]) -> tuple[dict[str, str], str | None]:
    """The ``--diff`` header name of each of ``files``, and the directory they are named
    from: None for the working directory (``diff_name``). When one lies outside it, no name
    from there is one git or patch accepts (both refuse ``../`` and absolute names), so all
    are named from the deepest directory that holds them all, which is returned; the patch
    applies there (``patch -p1 -d DIR``, ``git -C DIR apply``)."""
    names = {file: diff_name(file) for file in files}
    if not any(name == ".." or name.startswith(("../", "/")) for name in names.values()):
        return names, None
    absolute = {file: os.path.abspath(file) for file in names}
    base = os.path.commonpath([os.path.dirname(path) for path in absolute.values()])
    return {
        file: os.path.relpath(path, base).replace(os.sep, "/") for file, path in absolute.items()
    }, base


def unified_diff(
    file: str, before: list[str], after: str, name: str | None = None, deleted: bool = False
) -> str:
    """``--diff`` output for one file, headed by ``name`` (``diff_name(file)``); ``deleted``:
    the file is removed (``+++ /dev/null``, as git writes a deletion)."""
    import difflib  # only --diff and --fix need it; a plain lint does not import it

    lines = after.splitlines(keepends=True)
    name = diff_name(file) if name is None else name
    target = "/dev/null" if deleted else f"b/{name}"
    diff = difflib.unified_diff(before, lines, fromfile=f"a/{name}", tofile=target)
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff
    )
