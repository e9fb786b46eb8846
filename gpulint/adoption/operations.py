"""A rule's fix as operations on the nodes of a document (``Replace`` a value, ``Rename`` a
key, ``Delete`` an entry, ``Insert`` or ``Set`` entries, ``Extend`` a list,
``DeleteDocument``), grouped in a ``FixPlan`` that is safe or unsafe. See
``gpulint.adoption.edits``."""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.input.document import Document, Path

pass


SAFE, UNSAFE = "safe", "unsafe"


class Replace(NamedTuple):
    """Replace the value at ``path`` (a scalar or a flow collection) by ``text``, written as
    YAML (``v2``, ``"70"``, ``{name: gpu_util}``)."""

    document: Document
    path: Path
    text: str


class Rename(NamedTuple):
    """Rename the mapping key at ``path`` (its last step) to ``key``."""

    document: Document
    path: Path
    key: str


class Delete(NamedTuple):
    """Delete the mapping entry at ``path``, its value and the lines under it; a mapping left
    empty goes with it."""

    document: Document
    path: Path


class Insert(NamedTuple):
    """Add ``entries`` to the mapping at ``path``, after its last entry, creating the mapping
    (and missing parents) when absent. ``entries`` are key/value pairs, or block YAML text
    (which may carry comments) of a mapping, written as at the top level."""

    document: Document
    path: Path
    entries: tuple[tuple[str, Any], ...] | str


class Set(NamedTuple):
    """Write the entry at ``path`` (key and value, block style) in place of the one there."""

    document: Document
    path: Path
    value: Any


class Extend(NamedTuple):
    """Add ``items`` after the last item of the block sequence at ``path`` (written as its
    items are: ``- `` at their indentation); the items already there stay as they are."""

    document: Document
    path: Path
    items: tuple[Any, ...]


class DeleteDocument(NamedTuple):
    """Delete a whole document, and its ``---`` separator."""

    document: Document


Op = Replace | Rename | Delete | Insert | Set | Extend | DeleteDocument


class FixPlan(NamedTuple):
    """The edits of one finding, all or none."""

    applicability: str  # SAFE or UNSAFE
    ops: tuple[Op, ...]

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(op.document.file for op in self.ops))


def safe(*ops: Op) -> FixPlan:
    return FixPlan(SAFE, ops)


def unsafe(*ops: Op) -> FixPlan:
    return FixPlan(UNSAFE, ops)


def entries(**values: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(values.items())
