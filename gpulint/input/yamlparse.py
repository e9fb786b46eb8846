"""YAML documents as plain Python values that remember where every node came from.

gpulint reads YAML with libyaml's event parser (``yaml.CSafeLoader``) and builds the values
itself instead of going through PyYAML's composer and constructor:

* no Python object is ever constructed from a tag (only str, int, float, bool, None, dict, list);
* every mapping and sequence keeps the 1-based line and column of its keys and items,
  packed into one ``bytes`` per collection so that a repository of thousands of manifests
  stays small;
* a key written twice is recorded (PyYAML silently keeps the last one);
* aliases share the anchored value, and the size they would expand to is counted, so a
  "billion laughs" document is refused after a few thousand events instead of eating memory;
* a number gpulint cannot hold as one stays its text, as an ``OversizedNumber`` (see there);
* building from events is cheaper than PyYAML's own compose step.

Hostile shapes cost linear time: a key written twice is found through a key -> index table
that a mapping builds only when it needs one (its first duplicate, or a position asked of a
large mapping), and numbers are never converted from more than ``MAX_NUMBER_CHARS``
characters.
"""

from __future__ import annotations

import json
import math
import re
import struct
from array import array
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import yaml
from yaml.resolver import Resolver

# A document that expands to more nodes than this (through aliases) is refused.
MAX_EXPANDED_NODES = 2_000_000
# A plain scalar longer than this is never converted to a number. Kubernetes numbers fit in
# int64 or float64 (at most 20 digits, or a float's 17 and an exponent); 100 characters of
# any base YAML 1.1 allows (hex, octal, binary, base 60) stay far below Python's limit on
# int-to-str conversion (4,300 digits), so no value gpulint holds fails to print.
MAX_NUMBER_CHARS = 100
# Mappings up to this many keys find a key's position by scanning; larger ones build a
# key -> index table the first time they are asked.
_SCAN_KEYS = 16
_COL_BITS = 20
_COL_MASK = (1 << _COL_BITS) - 1


def pack(line: int, column: int) -> int:
    """Pack a 1-based line and column into one int."""
    return (line << _COL_BITS) | min(column, _COL_MASK)


def unpack(packed: int) -> tuple[int, int]:
    return packed >> _COL_BITS, packed & _COL_MASK


# A mapping's or sequence's positions, packed (see ``pack``) into native 8-byte integers: its
# own first, then its keys' and values' (or items'). They are held as ``bytes`` rather than an
# ``array``: a repository holds hundreds of thousands of small collections, and an array costs
# 80 bytes before its first item and grows with slack, where bytes cost 33 and are exact.
_MARK = struct.Struct("=q")
_PAIR = struct.Struct("=qq")


def _mark_at(marks: bytes, slot: int) -> int | None:
    """The packed position in ``slot`` (0: the collection's own) of ``marks``."""
    offset = 8 * slot
    if slot < 0 or offset + 8 > len(marks):
        return None
    value: int = _MARK.unpack_from(marks, offset)[0]
    return value


class YMap(dict[Any, Any]):
    """A mapping that knows the position of each key and each value.

    ``marks`` holds the mapping's own position, then two per key, in insertion order: the
    key's and the value's. Keys are only ever added (``put``) or dropped whole (``discard``);
    the key -> index table of a large mapping relies on that.
    """

    __slots__ = ("_order", "marks")

    def __init__(self, marks: bytes = b"") -> None:
        super().__init__()
        self.marks = marks
        self._order: dict[Any, int] | None = None

    @property
    def start(self) -> int:
        """The mapping's own packed position; 0 when it has none."""
        return _mark_at(self.marks, 0) or 0

    def _index(self, key: Any) -> int:
        """The insertion index of ``key``, -1 when absent; amortized O(1) for large mappings."""
        size = len(self)
        if size <= _SCAN_KEYS:
            for i, k in enumerate(self):
                if k == key:
                    return i
            return -1
        if key not in self:
            return -1
        order = self._order
        if order is None or len(order) > size:
            order = self._order = {k: i for i, k in enumerate(self)}
        elif len(order) < size:
            # Keys added since the table was built are the last ones: take them from the end.
            known = len(order)
            for index, k in zip(range(size - 1, known - 1, -1), reversed(self), strict=False):
                order[k] = index
        return order.get(key, -1)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled compactly, items straight into the new mapping: large inputs are parsed by
        # a second process (units.parallel).
        return (YMap, (self.marks,), None, None, iter(self.items()))

    def put(self, key: Any, value: Any, key_mark: int, value_mark: int) -> None:
        """Add a key that is not there yet, with its and its value's packed positions."""
        if key in self:
            raise ValueError(f"{key!r} is already in the mapping")
        if not self.marks and not self:
            self.marks = _MARK.pack(0)
        if len(self.marks) != 8 * (2 * len(self) + 1):
            raise ValueError("the mapping's positions do not cover its keys")
        self[key] = value
        self.marks += _PAIR.pack(key_mark, value_mark)

    def discard(self, key: Any) -> None:
        """Take ``key`` out, with its positions."""
        index = self._index(key)
        if index < 0:
            return
        del self[key]
        offset = 8 * (2 * index + 1)
        if offset + 16 <= len(self.marks):
            self.marks = self.marks[:offset] + self.marks[offset + 16 :]
        self._order = None

    def key_mark(self, index: int) -> int | None:
        """The packed position of the key at insertion ``index``."""
        return _mark_at(self.marks, 2 * index + 1) if index >= 0 else None

    def value_mark(self, index: int) -> int | None:
        """The packed position of the value of the key at insertion ``index``."""
        return _mark_at(self.marks, 2 * index + 2) if index >= 0 else None

    def key_position(self, key: Any) -> tuple[int, int] | None:
        mark = self.key_mark(self._index(key))
        return None if mark is None else unpack(mark)

    def value_position(self, key: Any) -> tuple[int, int] | None:
        mark = self.value_mark(self._index(key))
        return None if mark is None else unpack(mark)


def rebuilt_map(source: Any, entries: Iterable[tuple[Any, Any, int]]) -> YMap:
    """A new mapping at ``source``'s position holding ``entries``: (key, value, insertion
    index of the key of ``source`` whose positions it takes). Positions stop at the first
    entry ``source`` has none for (a plain dict has none at all)."""
    placed = isinstance(source, YMap)
    marks = array("q", (source.start if placed else 0,))
    rebuilt = YMap()
    for key, value, index in entries:
        rebuilt[key] = value
        if placed:
            key_mark, value_mark = source.key_mark(index), source.value_mark(index)
            if key_mark is None or value_mark is None:
                placed = False
            else:
                marks.append(key_mark)
                marks.append(value_mark)
    if len(marks) > 1 or marks[0]:
        rebuilt.marks = marks.tobytes()
    return rebuilt


class YList(list[Any]):
    """A sequence that knows the position of each item (``marks``: its own, then each item's)."""

    __slots__ = ("marks",)

    def __init__(self, marks: bytes = b"") -> None:
        super().__init__()
        self.marks = marks

    @property
    def start(self) -> int:
        return _mark_at(self.marks, 0) or 0

    def item_position(self, index: int) -> tuple[int, int] | None:
        mark = _mark_at(self.marks, index + 1) if index >= 0 else None
        return None if mark is None else unpack(mark)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled compactly, items straight into the new list (see YMap.__reduce__).
        return (YList, (self.marks,), None, iter(self))


class OversizedNumber(str):
    """The text of a plain scalar that YAML 1.1 reads as a number gpulint does not convert:
    longer than ``MAX_NUMBER_CHARS`` characters (``1:59:59:...`` in base 60 over 300,000
    parts, a 4,301-digit integer, a 4,000-digit hex one), or a float beyond float64 (as
    kubectl's YAML reader, go-yaml, keeps a number it cannot hold as a string).

    It is a ``str``, so code that expects a number sees a string and code that prints it
    cannot fail; rules that read numbers tell it apart (``isinstance``) to say the value is
    out of range, where it is written.
    """

    __slots__ = ()


class DuplicateKey(NamedTuple):
    key: str
    line: int
    column: int
    first_line: int
    first_column: int


class ParsedDocument:
    """One YAML document: its value, where it starts, and what the parser noticed."""

    __slots__ = ("column", "duplicates", "end_line", "line", "value")

    def __init__(
        self,
        value: Any,
        line: int,
        column: int,
        end_line: int,
        duplicates: list[DuplicateKey] | None = None,
    ) -> None:
        self.value = value
        self.line = line
        self.column = column
        self.end_line = end_line
        self.duplicates: list[DuplicateKey] = [] if duplicates is None else duplicates

    def __repr__(self) -> str:
        return f"ParsedDocument(value={self.value!r}, line={self.line!r})"


class YamlError(Exception):
    """A document that cannot be read, with the position the parser gave."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


# --- scalars -------------------------------------------------------------------------------

_TAG = "tag:yaml.org,2002:"
_resolvers = Resolver.yaml_implicit_resolvers
_scalar_cache: dict[str, Any] = {}
_SCALAR_CACHE_LIMIT = 200_000
_TIMESTAMP = _TAG + "timestamp"


def _to_int(text: str) -> int | str:
    if len(text) > MAX_NUMBER_CHARS:
        return OversizedNumber(text)
    value = text.replace("_", "")
    sign = 1
    if value[:1] == "-":
        sign, value = -1, value[1:]
    elif value[:1] == "+":
        value = value[1:]
    if value == "0":
        return 0
    if value.startswith("0b"):
        return sign * int(value[2:], 2)
    if value.startswith("0x"):
        return sign * int(value[2:], 16)
    if value.startswith("0o"):
        return sign * int(value[2:], 8)
    if value[0] == "0":
        return sign * int(value, 8)
    if ":" in value:
        total = 0
        for part in value.split(":"):
            total = total * 60 + int(part)
        return sign * total
    return sign * int(value)


def _to_float(text: str) -> float | str:
    if len(text) > MAX_NUMBER_CHARS:
        return OversizedNumber(text)
    value = text.replace("_", "").lower()
    sign = 1.0
    if value[:1] == "-":
        sign, value = -1.0, value[1:]
    elif value[:1] == "+":
        value = value[1:]
    if value == ".inf":
        return sign * math.inf
    if value == ".nan":
        return math.nan
    if ":" in value:
        total = 0.0
        for part in value.split(":"):
            total = total * 60 + float(part)
    else:
        total = float(value)
    if math.isinf(total):
        return OversizedNumber(text)
    return sign * total


def _convert(tag: str, text: str) -> Any:
    try:
        if tag == _TAG + "null":
            return None
        if tag == _TAG + "bool":
            return text.lower() in ("yes", "true", "on", "y")
        if tag == _TAG + "int":
            return _to_int(text)
        if tag == _TAG + "float":
            return _to_float(text)
    except ValueError:
        return text
    # str, timestamps (Kubernetes treats them as strings), binary, merge, value...
    return text


def resolve_plain(text: str) -> Any:
    """The value of a plain (unquoted) scalar, resolved as YAML 1.1 does."""
    cached = _scalar_cache.get(text, _scalar_cache)
    if cached is not _scalar_cache:
        return cached
    tag = _TAG + "str"
    for candidate, regexp in _resolvers.get(text[:1] if text else "", ()):
        if regexp.match(text):
            tag = candidate
            break
    value = _convert(tag, text) if tag not in (_TAG + "str", _TIMESTAMP) else text
    if len(text) <= 64:
        if len(_scalar_cache) > _SCALAR_CACHE_LIMIT:
            _scalar_cache.clear()
        if isinstance(value, str):
            value = _scalar_cache.setdefault(text, value)
        else:
            _scalar_cache[text] = value
    return value


def _tagged(tag: str, text: str) -> Any:
    if tag.startswith(_TAG):
        return _convert(tag, text)
    # Unknown or local tags (!Ref, !reference ...) are read as their plain text: gpulint
    # never constructs objects from tags.
    return text


def _json_int(text: str) -> int | str:
    return OversizedNumber(text) if len(text) > MAX_NUMBER_CHARS else int(text)


def _json_float(text: str) -> float | str:
    if len(text) > MAX_NUMBER_CHARS:
        return OversizedNumber(text)
    number = float(text)
    return OversizedNumber(text) if math.isinf(number) else number


def _json_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON value")


def read_json(data: bytes | str) -> Any:
    """A JSON text as plain values, with the bounds of the YAML reader on numbers: one longer
    than ``MAX_NUMBER_CHARS`` or beyond float64 stays its text (``OversizedNumber``).

    Raises ValueError for what is not JSON (``NaN`` and ``Infinity`` included, which Python
    alone accepts) and RecursionError for nesting deeper than Python's JSON reader goes.
    """
    return json.loads(
        data, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant
    )


def _hashable_key(value: Any) -> Any:
    if isinstance(value, dict | list):
        return repr(value)
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


# --- documents -----------------------------------------------------------------------------


def _yaml_error(error: yaml.YAMLError) -> YamlError:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    message = f"{context}: {problem}" if context else str(problem)
    if mark is None:
        return YamlError(message, 1, 1)
    return YamlError(message, mark.line + 1, mark.column + 1)


def parse_documents(
    data: bytes | str, line_offset: int = 0, column_offset: int = 0
) -> Iterator[ParsedDocument]:
    """Yield every document of a YAML stream.

    ``line_offset``/``column_offset`` shift every position; they place a YAML text embedded
    in another file (a ConfigMap's block scalar) at its real place in that file.
    Raises YamlError at the first problem; the documents before it have been yielded.
    """
    parser = yaml.CSafeLoader(data)
    problem: YamlError | None = None
    try:
        yield from _build(parser, line_offset, column_offset)
    except yaml.YAMLError as error:
        problem = _yaml_error(error)
        problem.line += line_offset
        problem.column += column_offset
    except RecursionError:
        problem = YamlError("document is nested too deeply", line_offset + 1, 1)
    finally:
        parser.dispose()
        del parser
    if problem is not None:
        # Raised outside the handler, so that it carries neither the parser's exception nor
        # its frames: gpulint runs with the cyclic collector off, and libyaml's buffers would
        # stay alive with them.
        raise problem


def _build(parser: Any, line_offset: int, column_offset: int) -> Iterator[ParsedDocument]:
    # This loop runs once per YAML event and dominates gpulint's run time: the collection
    # being filled lives in local variables, and the parent's state is pushed as one tuple
    # when a child collection starts.
    get_event = parser.get_event
    scalar_event = yaml.ScalarEvent
    mapping_start = yaml.MappingStartEvent
    sequence_start = yaml.SequenceStartEvent
    alias_event = yaml.AliasEvent
    mapping_end = yaml.MappingEndEvent
    sequence_end = yaml.SequenceEndEvent
    document_start = yaml.DocumentStartEvent
    document_end = yaml.DocumentEndEvent
    cache = _scalar_cache
    missing = _scalar_cache  # a sentinel no cached value can be
    line_base = line_offset + 1
    column_base = column_offset + 1
    col_bits = _COL_BITS
    col_mask = _COL_MASK
    limit = MAX_EXPANDED_NODES

    stack: list[tuple[Any, ...]] = []
    anchors: dict[str, tuple[Any, int]] = {}
    open_anchors: set[str] = set()
    duplicates: list[DuplicateKey] = []
    root: Any = None
    root_mark = 0
    count = 0  # nodes so far, counting what aliases would expand to
    # The positions of every open collection, innermost last: each one's own, then its keys'
    # and values' (items'); a collection takes its part as bytes when it ends.
    marks = array("q")
    # The collection being filled, and where its part of ``marks`` begins:
    container: Any = None
    base = 0
    is_map = False
    pending = False  # a mapping key has been read, its value not yet
    key: Any = None
    key_mark = 0
    merges: list[tuple[Any, int]] | None = None
    anchor_name: str | None = None
    start_count = 0

    while True:
        event = get_event()
        if event is None:
            return
        cls = type(event)
        value: Any
        if cls is scalar_event:
            start = event.start_mark
            mark = ((start.line + line_base) << col_bits) | (
                (start.column + column_base) & col_mask
            )
            tag = event.tag
            text = event.value
            if tag is None:
                # Plain scalars are resolved (int, bool, null ...); quoted ones stay strings.
                if event.style:
                    value = text
                else:
                    value = cache.get(text, missing)
                    if value is missing:
                        value = resolve_plain(text)
            elif tag == "!":
                value = text
            else:
                value = _tagged(tag, text)
            count += 1
            if event.anchor:
                anchors[event.anchor] = (value, 1)
        elif cls is mapping_start or cls is sequence_start:
            start = event.start_mark
            mark = ((start.line + line_base) << col_bits) | (
                (start.column + column_base) & col_mask
            )
            if container is not None:
                stack.append(
                    (
                        container,
                        base,
                        is_map,
                        pending,
                        key,
                        key_mark,
                        merges,
                        anchor_name,
                        start_count,
                    )
                )
            is_map = cls is mapping_start
            container = YMap() if is_map else YList()
            base = len(marks)
            marks.append(mark)
            pending = False
            merges = None
            anchor_name = event.anchor
            if anchor_name:
                open_anchors.add(anchor_name)
            start_count = count
            count += 1
            continue
        elif cls is mapping_end or cls is sequence_end:
            value = container
            if merges:
                _apply_merges(value, merges, marks, base)
            mark = marks[base]
            value.marks = marks[base:].tobytes()
            del marks[base:]
            if anchor_name:
                open_anchors.discard(anchor_name)
                anchors[anchor_name] = (value, count - start_count)
            if stack:
                (
                    container,
                    base,
                    is_map,
                    pending,
                    key,
                    key_mark,
                    merges,
                    anchor_name,
                    start_count,
                ) = stack.pop()
            else:
                container = None
        elif cls is alias_event:
            start = event.start_mark
            mark = ((start.line + line_base) << col_bits) | (
                (start.column + column_base) & col_mask
            )
            name = event.anchor
            if name in open_anchors:
                raise YamlError(f"recursive alias *{name}", *unpack(mark))
            if name not in anchors:
                raise YamlError(f"found undefined alias *{name}", *unpack(mark))
            value, size = anchors[name]
            count += size
            if count > limit:
                line, column = unpack(mark)
                raise YamlError(
                    f"aliases expand this document to more than {limit:,} nodes "
                    "(an alias bomb?); gpulint refuses to expand it",
                    line,
                    column,
                )
        elif cls is document_start:
            stack.clear()
            del marks[:]
            anchors.clear()
            open_anchors.clear()
            duplicates = []
            root = None
            root_mark = 0
            count = 0
            container = None
            continue
        elif cls is document_end:
            if root_mark:
                line, column = unpack(root_mark)
            else:
                line, column = event.start_mark.line + line_base, 1
            yield ParsedDocument(root, line, column, event.end_mark.line + line_base, duplicates)
            continue
        else:  # stream start/end
            continue

        if container is None:
            root, root_mark = value, mark
        elif not is_map:
            container.append(value)
            marks.append(mark)
        elif not pending:
            key = value if type(value) is str else _hashable_key(value)
            key_mark = mark
            pending = True
        else:
            pending = False
            if key == "<<" and isinstance(value, dict | list):
                if merges is None:
                    merges = []
                merges.append((value, mark))
            elif key in container:
                at = base + 1 + 2 * container._index(key)
                first_line, first_column = unpack(marks[at])
                line, column = unpack(key_mark)
                duplicates.append(DuplicateKey(str(key), line, column, first_line, first_column))
                container[key] = value
                marks[at] = key_mark
                marks[at + 1] = mark
            else:
                container[key] = value
                marks.append(key_mark)
                marks.append(mark)


def _apply_merges(
    target: YMap, merges: list[tuple[Any, int]], marks: array[int], base: int
) -> None:
    """YAML merge keys: explicit keys win, earlier merged mappings win over later ones.
    ``target`` is still open: its positions are ``marks[base:]``."""
    for source, mark in merges:
        sources = source if isinstance(source, list) else [source]
        for item in sources:
            if not isinstance(item, YMap):
                continue
            for i, (key, value) in enumerate(item.items()):
                if key in target:
                    continue
                target[key] = value
                key_mark, value_mark = item.key_mark(i), item.value_mark(i)
                marks.append(mark if key_mark is None else key_mark)
                marks.append(mark if value_mark is None else value_mark)


_TEMPLATE_MARKERS = re.compile(r"\{\{|\}\}|\{%|%\{|\$\{")


def looks_templated(text: str) -> bool:
    """True when text carries Helm/Go, Jinja or Terraform template syntax."""
    return bool(_TEMPLATE_MARKERS.search(text))
