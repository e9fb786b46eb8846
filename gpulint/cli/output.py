"""Where a command writes its report (``--output`` or stdout) and whether in color."""

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
