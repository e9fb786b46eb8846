"""Where a command writes its report (``--output`` or stdout), in which format and whether
in color."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from collections.abc import Iterator


@contextlib.contextmanager
def report_stream(path: str | None, stdout: TextIO) -> Iterator[TextIO]:
    """``--output FILE`` opened for the report and closed after it, else stdout."""
    if not path:
        yield stdout
        return
    with open(path, "w", encoding="utf-8") as handle:
        yield handle


def wants_color(choice: str, out: TextIO) -> bool:
    """``--color``: always, never, or auto (a terminal, unless NO_COLOR is set: no-color.org)."""
    return choice == "always" or (
        choice == "auto" and out.isatty() and "NO_COLOR" not in os.environ
    )


def report_format(choice: str | None, out: TextIO) -> str:
    """``--format``, or when it is not given: ``concise`` for a person at a terminal, one
    line per finding that a screen holds, and ``text`` for a file, a pipe or a CI log, read
    later and whole (each finding with why and its fix)."""
    if choice:
        return choice
    try:
        terminal = out.isatty()
    except (AttributeError, ValueError, OSError):
        terminal = False
    return "concise" if terminal else "text"
