"""JSON from the API server and in AdmissionReviews, read with a bound on nesting.

Kubernetes accepts objects nested far deeper than Python's JSON reader goes: the API server
decodes with Go's encoding/json, which allows 10,000 levels (encoding/json scanner.go,
``maxNestingDepth``), and a field of free-form JSON (a DRA ResourceClaimTemplate's
``opaque.parameters``, any CRD field with ``x-kubernetes-preserve-unknown-fields``) takes
whatever a user writes. ``json.loads`` raises RecursionError past about 1,000 levels, and
code that walks a value recursively fails long before that, so one such object would stop
a list (and with it the cache's sync), a watch, or an admission review.

So every document is first measured, without building anything: the structural characters
outside strings are kept (``bytes.translate``, ``bytes.replace`` and one ``split``, all in C),
and innermost bracket pairs are removed pass by pass, at most ``limit`` passes (the cache's
sync time in bench/webhook_load.py is where its cost shows). A document within the limit is
read by ``json.loads`` as before. A deeper one is cut: each value that starts past the limit
is replaced, in the text, by a string that names a random token of this call (an object
cannot contain it by chance or by craft), the rest is read by ``json.loads``, and those
strings become ``TOO_DEEP``. Callers see which objects lost a part (``has_too_deep``) and say
so; nothing else about the document changes.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import Any, Final

# Levels an object may nest and be read whole. Kubernetes objects gpulint reads nest about
# a dozen levels (a Deployment's node affinity values are at 11); 100 leaves room for any
# schema and keeps every recursive walk far from Python's limit of 1,000 frames.
MAX_OBJECT_DEPTH: Final = 100

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'{}[]"')
_BRACKETS = bytes.maketrans(b"{[}]", b"(())")
# A JSON string (escapes included) or a run of brackets: the tokens the cutting pass walks.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]+', re.DOTALL)


class _TooDeep:
    """The value of a part nested too deeply to read: no JSON value is this object."""

    _instance: _TooDeep | None = None

    def __new__(cls) -> _TooDeep:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "TOO_DEEP"

    def __deepcopy__(self, memo: dict[int, Any]) -> _TooDeep:
        return self

    def __copy__(self) -> _TooDeep:
        return self


TOO_DEEP: Final = _TooDeep()


def deeper_than(data: bytes, limit: int) -> bool:
    """Does the JSON text ``data`` nest more than ``limit`` levels (objects and arrays)?

    Linear in ``len(data)`` times ``limit`` at most, every step in C. Text that is not JSON
    gets an answer too (its brackets are counted the same way); ``json.loads`` judges it."""
    if b"\\" in data:
        # An escaped backslash or quote is inside a string: neither delimits anything. Pairs
        # of backslashes go first, left to right, as a reader pairs them; a backslash left
        # before a quote then escapes it.
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = data.translate(None, _NOT_STRUCTURE)
    # Two quotes with nothing kept between them end one string and start the next, or
    # make an empty one: dropping them leaves what is outside strings as it was.
    structure = structure.replace(b'""', b"")
    if b'"' in structure:  # brackets inside strings (a JSON text held in an annotation)
        structure = b"".join(structure.split(b'"')[::2])
    brackets = structure.translate(_BRACKETS)
    if b"(" * (limit + 1) in brackets:
        return True  # that many opened in a row: the one pass the deepest texts need
    for _ in range(limit):
        if not brackets:
            return False
        inner = brackets.replace(b"()", b"")
        if len(inner) == len(brackets):
            return True  # unbalanced: not JSON; deep enough to take the careful path
        brackets = inner
    return bool(brackets)


def loads_bounded(
    data: bytes,
    limit: int,
    loads: Callable[[bytes], Any] = json.loads,
) -> tuple[Any, bool]:
    """The JSON text ``data`` read with values that start deeper than ``limit`` levels
    replaced by ``TOO_DEEP``; and whether any was. ``loads`` reads the (cut) text and raises
    what it raises for text that is not JSON."""
    if not deeper_than(data, limit):
        return loads(data), False
    token = f"gpulint-too-deep-{secrets.token_hex(16)}"
    return _restore(loads(_cut(data, limit, token)), token), True


def _cut(data: bytes, limit: int, token: str) -> bytes:
    """``data`` with every value that opens at depth ``limit + 1`` replaced by the string
    ``token``: one pass over strings and runs of brackets. Within a run, where the depth
    cannot cross ``limit`` or come back to it over the next bytes, they are counted (in C)
    instead of stepped through, so that nesting thousands deep costs a few counts."""
    marker = json.dumps(token).encode()
    parts: list[bytes] = []
    depth = 0
    kept_from = 0
    for match in _TOKEN.finditer(data):
        pos, end = match.span()
        if data[pos] == 0x22:  # a string: nothing in it counts
            continue
        while pos < end:
            # Bytes that cannot take the depth across the boundary, counted at once: above
            # it, fewer than the levels left to close; below it, fewer than the levels left
            # to open.
            room = depth - limit - 1 if depth > limit else limit - depth
            if room > 0:
                step = min(room, end - pos)
                run = data[pos : pos + step]
                depth += 2 * (run.count(b"[") + run.count(b"{")) - step
                pos += step
                continue
            if data[pos] in b"[{":
                depth += 1
                if depth == limit + 1:
                    parts.append(data[kept_from:pos])
                    parts.append(marker)
            else:
                if depth == limit + 1:
                    kept_from = pos + 1
                depth = max(depth - 1, 0)
            pos += 1
    if depth > limit:  # the text ends inside a cut value: not JSON, let the reader say so
        return data
    parts.append(data[kept_from:])
    return b"".join(parts)


def _restore(value: Any, token: str) -> Any:
    """``value`` with the strings ``token`` replaced by ``TOO_DEEP``, without recursion (it
    nests at most ``limit`` levels, but callers' stacks are their own)."""
    if value == token:
        return TOO_DEEP
    pending: list[Any] = [value] if isinstance(value, dict | list) else []
    while pending:
        container = pending.pop()
        keys = container.keys() if isinstance(container, dict) else range(len(container))
        for key in list(keys):
            item = container[key]
            if isinstance(item, dict | list):
                pending.append(item)
            elif item == token:
                container[key] = TOO_DEEP
    return value


def has_too_deep(value: Any) -> bool:
    """Does ``value`` hold a part that was not read (``TOO_DEEP``)? Without recursion."""
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if item is TOO_DEEP:
            return True
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False
