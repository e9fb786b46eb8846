"""Findings made in a forked child (``gpulint.engine.runner``'s rules on a second core), sent
back with the documents they point at named, not copied.

A finding's fix and its suppression anchor point at documents of the inventory; this
process must get its own objects back, not copies, so that fixes are grouped and
suppressions are counted as if it had made the findings itself. The child pickles each
document as its index in the inventory's document list (a list both processes hold, the
same at the fork); a finding that points at a document the list does not hold cannot be
sent this way (``Unplaceable``), and its rule is run again here instead.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from typing import Any

from gpulint.input.document import Document


class Unplaceable(Exception):
    """A finding points at a document that is not in the inventory's list."""


def document_index(documents: list[Document]) -> dict[int, int]:
    """Each document's position in ``documents``, by identity."""
    return {id(document): index for index, document in enumerate(documents)}


def pickled(value: Any, documents: list[Document], index_of: dict[int, int]) -> bytes:
    """``value`` pickled with every document in it named by its index in ``documents``.
    Raises Unplaceable for a document not in ``documents``."""

    def named(document: Document) -> tuple[Callable[[int], Document], tuple[int]]:
        index = index_of.get(id(document))
        if index is None or documents[index] is not document:
            raise Unplaceable
        return _document_at, (index,)

    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=5)
    # A per-pickler table is looked up by exact type in C: only documents cost a call.
    pickler.dispatch_table = {kind: named for kind in _kinds_of(Document)}
    pickler.dump(value)
    return buffer.getvalue()


def unpickled(blob: bytes, documents: list[Document]) -> Any:
    """What ``pickled`` made, with this process's own documents in it."""
    return _Reader(io.BytesIO(blob), documents).load()


class _Reader(pickle.Unpickler):
    """An unpickler that reads a document's name as the document of ``documents``."""

    def __init__(self, file: io.BytesIO, documents: list[Document]) -> None:
        super().__init__(file)
        self.documents = documents

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == _document_at.__name__:
            return self.documents.__getitem__
        return super().find_class(module, name)


def _document_at(index: int) -> Document:
    """What a document's name stands for in a pickle; only ``unpickled`` reads it back."""
    raise pickle.UnpicklingError(f"document {index} named outside gpulint.engine.twocores")


def _kinds_of(cls: type) -> list[type]:
    found = [cls]
    subclasses: list[type] = cls.__subclasses__()
    for sub in subclasses:
        found.extend(_kinds_of(sub))
    return found
