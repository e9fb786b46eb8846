"""Fixes as text edits against the file a user edits.

A rule describes its fix as operations on the nodes of a document (``Replace`` a value,
``Rename`` a key, ``Delete`` an entry, ``Insert`` entries into a mapping, ``DeleteDocument``),
grouped in a ``FixPlan`` that is ``safe`` (applying it removes the problem and changes
nothing else the cluster does) or ``unsafe`` (it needs a human's judgment). Operations name
nodes by path, so they cost nothing until someone asks for the edits (``--fix``, ``--diff``,
JSON, SARIF); then ``resolve`` turns them into ``Edit`` spans of the source text, using the
positions the loader recorded and the file's own text, so that comments, key order,
quoting and indentation outside the edited span stay byte for byte as they were.

Every edit is checked against the text it replaces (the old value must read back as the
document's value, a deleted entry must start with its key): a file that changed since it
was read, a position that belongs to a template, or a node gpulint cannot delimit gives no
edit, and the fix stays prose. Documents rendered by kustomize or Helm get edits only where
their source map places the node in a file of the repository and the text there agrees.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import yaml

from gpulint.input.document import Document, Path, dig, plain_data
from gpulint.input.yamlparse import YList, YMap

SAFE, UNSAFE = "safe", "unsafe"
# Files larger than this get no edits (their text is read again to place them).
MAX_FILE_BYTES = 16 * 1024 * 1024


class Edit(NamedTuple):
    """Replace ``start`` up to ``end`` (1-based line and column; ``end`` excluded) by
    ``text``. An insertion has ``start == end``."""

    file: str
    start: tuple[int, int]
    end: tuple[int, int]
    text: str


# --- operations ----------------------------------------------------------------------------


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


class DeleteDocument(NamedTuple):
    """Delete a whole document, and its ``---`` separator."""

    document: Document


Op = Replace | Rename | Delete | Insert | Set | DeleteDocument


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


# --- source texts ----------------------------------------------------------------------------


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


def _read_lines(file: str) -> list[str] | None:
    try:
        if not os.path.isfile(file) or os.path.getsize(file) > MAX_FILE_BYTES:
            return None
        with open(file, encoding="utf-8", newline="") as handle:
            return handle.read().splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return None


# --- resolving -------------------------------------------------------------------------------


class Unresolvable(Exception):
    """An operation gpulint cannot place in the source text."""


def resolve(plan: FixPlan, sources: Sources) -> list[Edit] | None:
    """The plan's edits, or None when any of its operations cannot be placed exactly."""
    edits: list[Edit] = []
    try:
        for op in _emptied_parents(plan.ops):
            edits.extend(_resolve(op, sources))
    except (Unresolvable, yaml.YAMLError, IndexError, ValueError, RecursionError):
        return None
    if not edits or overlapping(edits):
        return None
    return [_line_endings(edit, sources) for edit in edits]


def _line_endings(edit: Edit, sources: Sources) -> Edit:
    """New text in the line endings of its file (a Windows file keeps CRLF)."""
    lines = sources.lines(edit.file)
    if not lines or "\n" not in edit.text or not lines[0].endswith("\r\n"):
        return edit
    return edit._replace(text=edit.text.replace("\r\n", "\n").replace("\n", "\r\n"))


def _emptied_parents(ops: tuple[Op, ...]) -> list[Op]:
    """Deletions that together empty a mapping delete the mapping instead."""
    result = list(ops)
    while True:
        groups: dict[tuple[int, Path], list[Delete]] = {}
        for op in result:
            if isinstance(op, Delete) and len(op.path) > 1:
                groups.setdefault((id(op.document), op.path[:-1]), []).append(op)
        merged = False
        for (_, parent), deletes in groups.items():
            document = deletes[0].document
            node = dig(document.data, parent)
            if (
                len(deletes) > 1
                and isinstance(node, YMap)
                and {d.path[-1] for d in deletes} == set(node)
            ):
                result = [op for op in result if op not in deletes]
                result.append(Delete(document, parent))
                merged = True
                break
        if not merged:
            return result


def _resolve(op: Op, sources: Sources) -> list[Edit]:
    document = op.document
    if document.rendered_from is not None and document.source is None:
        # Rendered output (``helm template`` with its ``# Source:`` comments) saved or piped:
        # the fix belongs in the chart, which gpulint does not map this text back to.
        raise Unresolvable("rendered output without a source map")
    if isinstance(op, DeleteDocument):
        return [_delete_document(document, sources)]
    rendered = document.source is not None
    if rendered and isinstance(op, Insert | Set):
        raise Unresolvable("insertions into rendered output")
    text = _Text.of(document, op.path, sources)
    if isinstance(op, Replace):
        return [text.replace_value(op.path, op.text)]
    if isinstance(op, Rename):
        return [text.rename_key(op.path, op.key)]
    if isinstance(op, Delete):
        return [text.delete_entry(op.path)]
    if isinstance(op, Set):
        return [text.set_entry(op.path, op.value)]
    return [text.insert(op.path, op.entries)]


class _Text:
    """A document's nodes placed in the lines of the file that holds them."""

    def __init__(self, document: Document, file: str, lines: list[str]) -> None:
        self.document = document
        self.file = file
        self.lines = lines

    @classmethod
    def of(cls, document: Document, path: Path, sources: Sources) -> _Text:
        file = document.file
        if document.source is not None:
            located = document.location(path, key=True)
            if located.note is not None or located.file == document.file:
                raise Unresolvable("no source line for this node")
            file = located.file
        lines = sources.lines(file)
        if lines is None:
            raise Unresolvable(f"cannot read {file}")
        return cls(document, file, lines)

    # positions

    def _position(self, path: Path, key: bool) -> tuple[int, int]:
        if self.document.source is not None:
            located = self.document.location(path, key=key)
            if located.note is not None or located.file != self.file:
                raise Unresolvable("no exact source position")
            return located.line, located.column
        node: Any = self.document.data
        here: tuple[int, int] | None = None
        for i, step in enumerate(path):
            last = i == len(path) - 1
            if isinstance(node, YMap) and step in node:
                here = node.key_position(step) if key or not last else node.value_position(step)
                node = node[step]
            elif isinstance(node, YList) and isinstance(step, int) and 0 <= step < len(node):
                here = node.item_position(step)
                node = node[step]
            else:
                raise Unresolvable(f"no node at {path}")
        if here is None:
            raise Unresolvable("no recorded position")
        return here

    def _line(self, number: int) -> str:
        if not 1 <= number <= len(self.lines):
            raise Unresolvable("position outside the file")
        return self.lines[number - 1]

    def _end_of_lines(self, number: int) -> tuple[int, int]:
        """The position just after line ``number``'s end of line."""
        if number >= len(self.lines):
            last = self.lines[-1] if self.lines else ""
            return len(self.lines), len(last) + 1
        return number + 1, 1

    # values

    def replace_value(self, path: Path, text: str) -> Edit:
        if not path:
            raise Unresolvable("the document itself")
        current = dig(self.document.data, path)
        if isinstance(current, YMap | YList) and not _flow_start(self, path):
            raise Unresolvable("block collections are replaced entry by entry")
        line, column = self._position(path, key=False)
        end = _scalar_end(self.lines, line, column)
        old = _span_text(self.lines, (line, column), end)
        if not _reads_as(old, current):
            raise Unresolvable("the source text is not the value gpulint read")
        _check_yaml_value(text)
        return Edit(self.file, (line, column), end, text)

    def rename_key(self, path: Path, key: str) -> Edit:
        line, column = self._position(path, key=True)
        end = _scalar_end(self.lines, line, column, key=True)
        old = _span_text(self.lines, (line, column), end)
        if not _reads_as(old, path[-1]):
            raise Unresolvable("the key is not where gpulint read it")
        return Edit(self.file, (line, column), end, _key_text(key))

    def delete_entry(self, path: Path) -> Edit:
        parent_path, step = path[:-1], path[-1]
        parent = dig(self.document.data, parent_path) if parent_path else self.document.data
        if not isinstance(parent, YMap) or step not in parent:
            raise Unresolvable("only mapping entries are deleted")
        if len(parent) == 1 and parent_path:
            return self.delete_entry(parent_path)  # the mapping would be left empty
        line, column = self._position(path, key=True)
        first = self._line(line)
        if first[: column - 1].strip() not in ("", "-") or _flow_start(self, parent_path):
            raise Unresolvable("entries of flow mappings are not deleted")
        if first[: column - 1].strip() == "-":
            raise Unresolvable("the first entry of a list item")
        old_key = _span_text(
            self.lines, (line, column), _scalar_end(self.lines, line, column, True)
        )
        if not _reads_as(old_key, step):
            raise Unresolvable("the key is not where gpulint read it")
        last = _block_end(self.lines, line, column - 1)
        return Edit(self.file, (line, 1), self._end_of_lines(last), "")

    def set_entry(self, path: Path, value: Any) -> Edit:
        parent_path, step = path[:-1], path[-1]
        parent = dig(self.document.data, parent_path) if parent_path else self.document.data
        if not isinstance(parent, YMap) or step not in parent or not isinstance(step, str):
            raise Unresolvable("only existing mapping entries are rewritten")
        if _flow_start(self, parent_path):
            raise Unresolvable("entries of flow mappings")
        line, column = self._position(path, key=True)
        before = self._line(line)[: column - 1]
        if before.strip() not in ("", "-"):
            raise Unresolvable("an entry that shares its line")
        key_end = _scalar_end(self.lines, line, column, True)
        if not _reads_as(_span_text(self.lines, (line, column), key_end), step):
            raise Unresolvable("the key is not where gpulint read it")
        last = _block_end(self.lines, line, column - 1)
        text = _indented_yaml({step: plain_data(value)}, column - 1)[column - 1 :]
        return Edit(self.file, (line, column), self._end_of_lines(last), text)

    def insert(self, path: Path, new: tuple[tuple[str, Any], ...] | str) -> Edit:
        node: Any = self.document.data
        existing: Path = ()
        for step in path:
            if isinstance(node, YList) and isinstance(step, int) and 0 <= step < len(node):
                child = node[step]
                if not isinstance(child, YMap):
                    raise Unresolvable(f"item {step} is not a mapping")
                existing, node = (*existing, step), child
                continue
            if not isinstance(node, YMap) or step not in node:
                break
            child = node[step]
            if child is not None and not isinstance(child, YMap | YList):
                raise Unresolvable(f"{step} is not a mapping")
            existing, node = (*existing, step), child
            if child is None:
                break
        if isinstance(node, YList):
            raise Unresolvable("insertion into a list")
        missing = path[len(existing) :]
        value: Any = _Block(new) if isinstance(new, str) else {k: plain_data(v) for k, v in new}
        for step in reversed(missing):
            value = {step: value}
        if node is None:
            return self._fill_null(existing, value)
        if not isinstance(node, YMap):
            raise Unresolvable("insertion into something that is not a mapping")
        if not node:
            if not existing:
                raise Unresolvable("an empty document")
            return self._fill_empty_flow(existing, value)
        if _flow_start(self, existing):
            raise Unresolvable("insertion into a flow mapping")
        for key in value:
            if key in node:
                raise Unresolvable(f"{key} is already there")
        keys = list(node)
        _, first_column = self._position((*existing, keys[0]), key=True)
        last_line, last_column = self._position((*existing, keys[-1]), key=True)
        if last_column != first_column:
            raise Unresolvable("keys not aligned")
        indent = first_column - 1
        end = _block_end(self.lines, last_line, indent)
        text = _indented_yaml(value, indent)
        at = self._end_of_lines(end)
        if end >= len(self.lines) and not self.lines[-1].endswith("\n"):
            text = "\n" + text.rstrip("\n")  # the file ends without a newline
        return Edit(self.file, at, at, text)

    def _fill_null(self, path: Path, value: dict[str, Any]) -> Edit:
        """``annotations:`` with nothing after it: the block goes under the key."""
        line, column = self._position(path, key=True)
        key_line = self._line(line)
        after = key_line[column - 1 :].split(":", 1)
        if len(after) != 2 or after[1].split("#", 1)[0].strip() not in ("", "~", "null"):
            raise Unresolvable("an unusual null")
        nested = _indented_yaml(value, column - 1 + 2)
        if after[1].split("#", 1)[0].strip():
            raise Unresolvable("an explicit null is replaced by hand")
        at = self._end_of_lines(line)
        return Edit(self.file, at, at, nested)

    def _fill_empty_flow(self, path: Path, value: dict[str, Any]) -> Edit:
        """``annotations: {}``: the braces give way to a block."""
        key_line, key_column = self._position(path, key=True)
        line, column = self._position(path, key=False)
        if line != key_line or self._line(line)[column - 1 : column + 1] != "{}":
            raise Unresolvable("an empty mapping written otherwise")
        nested = _indented_yaml(value, key_column - 1 + 2).rstrip("\n")
        return Edit(self.file, (line, column), (line, column + 2), "\n" + nested)


def _delete_document(document: Document, sources: Sources) -> Edit:
    if document.source is not None:
        raise Unresolvable("rendered documents are deleted in their source")
    lines = sources.lines(document.file)
    if lines is None:
        raise Unresolvable("unreadable")
    start = document.line
    if not 1 <= start <= len(lines):
        raise Unresolvable("no such line")
    # From the separator above the document (or the file's start) to the next separator.
    first = start
    while first > 1 and not lines[first - 2].startswith("---"):
        above = lines[first - 2].strip()
        if above and not above.startswith("#"):
            break
        first -= 1
    if first > 1 and lines[first - 2].startswith("---"):
        first -= 1
    last = start
    while last < len(lines) and not lines[last].startswith(("---", "...")):
        last += 1
    if first == 1 and last < len(lines) and lines[last].startswith("---"):
        last += 1  # the first document: its trailing separator goes instead
    end = (last + 1, 1) if last < len(lines) else (len(lines), len(lines[-1]) + 1)
    return Edit(document.file, (first, 1), end, "")


# --- text helpers ----------------------------------------------------------------------------


def _flow_start(text: _Text, path: Path) -> bool:
    """Is the collection at ``path`` written in flow style (``{...}``, ``[...]``)?"""
    node = dig(text.document.data, path) if path else text.document.data
    if not isinstance(node, YMap | YList):
        return False
    if not path:
        return False
    try:
        line, column = text._position(path, key=False)
    except Unresolvable:
        return True
    char = text._line(line)[column - 1 : column]
    return char in ("{", "[")


def _indent_of(line: str) -> int | None:
    """Indentation of a line with content; None for blank and comment-only lines."""
    stripped = line.lstrip(" ")
    if not stripped.strip() or stripped.startswith("#"):
        return None
    return len(line) - len(stripped)


def _block_end(lines: list[str], line: int, indent: int) -> int:
    """The last line of the block entry whose key is at ``line`` with ``indent``: the lines
    after it that are indented deeper, or are list items at the same indentation (an
    indentless sequence), or are blank or comments in between."""
    last = line
    number = line + 1
    while number <= len(lines):
        text = lines[number - 1]
        if text.startswith(("---", "...")):
            break
        depth = _indent_of(text)
        if depth is None:
            number += 1
            continue
        if depth > indent or (depth == indent and text.lstrip(" ").startswith("- ")):
            last = number
            number += 1
            continue
        break
    return last


def _scalar_end(lines: list[str], line: int, column: int, key: bool = False) -> tuple[int, int]:
    """The end of the scalar or flow collection that starts at ``line``/``column``."""
    text = lines[line - 1]
    start = column - 1
    if start >= len(text):
        raise Unresolvable("nothing at that column")
    char = text[start]
    if char == "'":
        return _quoted_end(lines, line, start, "'")
    if char == '"':
        return _quoted_end(lines, line, start, '"')
    if char in "{[":
        return _flow_end(lines, line, start)
    if char in "|>":
        raise Unresolvable("block scalars")
    if char in "&*!":
        raise Unresolvable("anchors, aliases and tags")
    end = start
    in_flow = _inside_flow(text, start)
    while end < len(text):
        c = text[end]
        if c in "\r\n":
            break
        if c == "#" and end > start and text[end - 1] in " \t":
            break
        if key and c == ":" and (end + 1 == len(text) or text[end + 1] in " \t\r\n"):
            break
        if in_flow and c in ",]}":
            break
        if in_flow and key and c == ":":
            break
        end += 1
    while end > start and text[end - 1] in " \t":
        end -= 1
    if not key and line < len(lines):
        following = _indent_of(lines[line])
        current = _indent_of(text)
        continued = following is not None and current is not None and following > current
        if continued and ":" not in lines[line] and not lines[line].lstrip().startswith("- "):
            raise Unresolvable("a plain scalar continued on the next line")
    return line, end + 1


def _inside_flow(text: str, position: int) -> bool:
    depth = 0
    quote = ""
    for c in text[:position]:
        if quote:
            if c == quote:
                quote = ""
            continue
        if c in "'\"":
            quote = c
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
    return depth > 0


def _quoted_end(lines: list[str], line: int, start: int, quote: str) -> tuple[int, int]:
    number, position = line, start + 1
    while number <= len(lines):
        text = lines[number - 1]
        while position < len(text):
            c = text[position]
            if quote == '"' and c == "\\":
                position += 2
                continue
            if c == quote:
                if quote == "'" and position + 1 < len(text) and text[position + 1] == "'":
                    position += 2
                    continue
                return number, position + 2
            position += 1
        number, position = number + 1, 0
    raise Unresolvable("unterminated quote")


def _flow_end(lines: list[str], line: int, start: int) -> tuple[int, int]:
    depth = 0
    quote = ""
    number, position = line, start
    while number <= len(lines):
        text = lines[number - 1]
        while position < len(text):
            c = text[position]
            if quote:
                if c == quote:
                    quote = ""
            elif c in "'\"":
                quote = c
            elif c == "#" and position > 0 and text[position - 1] in " \t":
                break
            elif c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return number, position + 2
            position += 1
        number, position = number + 1, 0
    raise Unresolvable("unterminated flow collection")


def _span_text(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    if start[0] == end[0]:
        return lines[start[0] - 1][start[1] - 1 : end[1] - 1]
    parts = [lines[start[0] - 1][start[1] - 1 :]]
    parts.extend(lines[start[0] : end[0] - 1])
    parts.append(lines[end[0] - 1][: end[1] - 1])
    return "".join(parts)


def _reads_as(text: str, value: Any) -> bool:
    """Does YAML ``text`` mean ``value`` (as gpulint's loader read it)?"""
    try:
        parsed = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return False
    expected = plain_data(value)
    if parsed == expected:
        return True
    # YAML 1.1 spellings the loader keeps as strings (on, yes, 0755 ...).
    return isinstance(expected, str) and str(parsed) == expected and text.strip() == expected


@functools.lru_cache(maxsize=1024)
def _check_yaml_value(text: str) -> None:
    yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


# A key YAML reads back as the same string when written bare: no indicator, no number,
# boolean or null of YAML 1.1 or 1.2.
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_RESOLVED_WORDS = frozenset(
    ["y", "n", "yes", "no", "on", "off", "true", "false", "null"]
)  # matched without regard to case


@functools.lru_cache(maxsize=4096)
def _key_text(key: str) -> str:
    if _PLAIN_KEY.fullmatch(key) and key.lower() not in _RESOLVED_WORDS:
        return key
    plain = yaml.safe_dump({key: 0}, default_flow_style=True, width=10_000).strip()
    return plain[1 : plain.rindex(":")].strip()


@functools.lru_cache(maxsize=256)
def _block_keys(text: str) -> tuple[str, ...] | None:
    """The top-level keys of block YAML text, or None when it is not a mapping."""
    parsed = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not isinstance(parsed, dict) or not parsed:
        return None
    return tuple(parsed)


class _Block:
    """Block YAML text of a mapping, kept as written (comments and all)."""

    def __init__(self, text: str) -> None:
        keys = _block_keys(text)
        if keys is None:
            raise Unresolvable("inserted text that is not a mapping")
        self.keys = list(keys)
        self.text = text.strip("\n") + "\n"

    def __iter__(self) -> Any:
        return iter(self.keys)


def _indented_yaml(value: Any, indent: int) -> str:
    """``value`` as block YAML, every line indented by ``indent`` spaces. ``value`` is a
    ``_Block``, a dict nesting one down to a ``_Block`` (missing parents), or plain data."""
    if isinstance(value, _Block):
        text = value.text
    elif isinstance(value, dict) and len(value) == 1 and _holds_block(value):
        key, inner = next(iter(value.items()))
        text = f"{_key_text(str(key))}:\n" + _indented_yaml(inner, 2)
    else:
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        text = yaml.dump(
            value, Dumper=dumper, sort_keys=False, default_flow_style=False, width=1000
        )
    return _indented(text, indent)


@functools.lru_cache(maxsize=1024)
def _indented(text: str, indent: int) -> str:
    """Every non-blank line of ``text`` indented by ``indent`` spaces (the same fix text
    goes into many files: computed once per text and indentation)."""
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True))


def _holds_block(value: Any) -> bool:
    while isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    return isinstance(value, _Block)


# --- applying --------------------------------------------------------------------------------


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
    """The name of ``file`` in ``--diff`` headers: relative to the working directory when it
    is under it."""
    name = os.path.normpath(file)
    if os.path.isabs(name):
        relative = os.path.relpath(name)
        name = name if relative.startswith("..") else relative
    return name


def unified_diff(file: str, before: list[str], after: str, name: str | None = None) -> str:
    """``--diff`` output for one file, headed by ``name`` (``diff_name(file)``)."""
    import difflib  # only --diff and --fix need it; a plain lint does not import it

    lines = after.splitlines(keepends=True)
    name = diff_name(file) if name is None else name
    diff = difflib.unified_diff(before, lines, fromfile=f"a/{name}", tofile=f"b/{name}")
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff
    )


class Applied(NamedTuple):
    """What one round of fixing changes: each file's text before and after."""

    before: dict[str, list[str]]
    after: dict[str, str]
    fixed: list[Any]  # the findings whose fix is in ``after``
    plans: int  # distinct fixes in ``after`` (a group's shared plan counts once)
    waiting: int  # fixable findings left for the next round (their edits overlapped)
    refused: list[str]  # files a fix would edit that may not be written


def plan_edits(
    findings: Iterable[Any],
    sources: Sources,
    unsafe_too: bool = False,
    writable: Callable[[str], bool] | None = None,
) -> Applied:
    """One round: the edits of every fixable finding (safe ones, and unsafe ones when asked),
    skipping fixes that overlap one already taken or touch a file ``writable`` refuses;
    files are not written."""
    chosen: list[Edit] = []
    fixed: list[Any] = []
    waiting = 0
    refused: dict[str, None] = {}
    seen: set[tuple[Edit, ...]] = set()
    resolved: dict[int, list[Edit] | None] = {}  # the findings of a group share one plan
    for finding in findings:
        plan: FixPlan | None = finding.plan
        if plan is None or (plan.applicability != SAFE and not unsafe_too):
            continue
        if id(plan) not in resolved:
            resolved[id(plan)] = resolve(plan, sources)
        edits = resolved[id(plan)]
        if edits is None:
            continue
        if writable is not None:
            denied = [e.file for e in edits if not writable(e.file)]
            if denied:
                refused.update(dict.fromkeys(denied))
                continue
        key = tuple(sorted(edits))
        if key in seen:  # the same fix from another finding of the group
            fixed.append(finding)
            continue
        if overlapping([*chosen, *edits]):
            waiting += 1
            continue
        seen.add(key)
        chosen.extend(edits)
        fixed.append(finding)
    before: dict[str, list[str]] = {}
    after: dict[str, str] = {}
    for file in dict.fromkeys(edit.file for edit in chosen):
        lines = sources.lines(file)
        if lines is None:
            continue
        before[file] = lines
        after[file] = apply(lines, [e for e in chosen if e.file == file])
    return Applied(before, after, fixed, len(seen), waiting, list(refused))
