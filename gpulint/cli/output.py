"""Where a command writes its report (``--output`` or stdout), in which format and whether
in color."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


@contextlib.contextmanager
def report_stream(path: str | None, stdout: TextIO) -> Iterator[TextIO]:
    """``--output FILE`` opened for the report and closed after it, else stdout."""
    if not path:
        yield stdout
        return
    with open(path, "w", encoding="utf-8") as handle:
        yield handle


def report_written(
    path: str | None, stdout: TextIO, stderr: TextIO, write: Callable[[TextIO], None]
) -> bool:
    """The report written by ``write`` to ``--output FILE`` or stdout; False, with the reason
    on stderr, when FILE cannot be written (a directory that is not there, no permission)."""
    try:
        with report_stream(path, stdout) as out:
            write(out)
    except OSError as error:
        if not path or isinstance(error, BrokenPipeError):
            raise  # stdout's reader went away: gpulint.cli.main says nothing more
        from gpulint.report.escape import escape_controls

        shown = escape_controls(f"{path}: {error.strerror or error}")
        stderr.write(f"gpulint: error: cannot write {shown}\n")
        return False
    return True


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
