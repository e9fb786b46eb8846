"""A problem of the scrape chain as the rules report it: where a user edits, what is wrong,
the fix, and the objects on the other side; and the wording helpers the questions share."""

from __future__ import annotations

from typing import NamedTuple

from gpulint.core.model import Related
from gpulint.input.document import Document, Path


class Problem(NamedTuple):
    document: Document
    path: Path
    message: str
    fix: str
    related: tuple[Related, ...] = ()


def indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())
