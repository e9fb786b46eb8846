"""Fix operations placed in the text of the file that holds their document: each operation
becomes the ``Edit`` that makes it, or ``Unresolvable`` when gpulint cannot place it exactly."""

from __future__ import annotations

from typing import Any

from gpulint.adoption.operations import (
    Delete,
    DeleteDocument,
    Extend,
    Insert,
    Op,
    Rename,
    Replace,
    Set,
)
from gpulint.adoption.textedits import Edit, Sources, Unresolvable, ends_line
from gpulint.adoption.yamlspans import (
    Block,
    block_end,
    check_yaml_value,
    indented_yaml,
    key_text,
    reads_as,
    scalar_end,
    span_text,
)
from gpulint.input.document import Document, Path, dig, plain_data
from gpulint.input.yamlparse import YList, YMap


def resolve_op(op: Op, sources: Sources) -> list[Edit]:
    document = op.document
    if document.rendered_from is not None and document.source is None:
        # Rendered output (``helm template`` with its ``# Source:`` comments) saved or piped:
        # the fix belongs in the chart, which gpulint does not map this text back to.
        raise Unresolvable("rendered output without a source map")
    if isinstance(op, DeleteDocument):
        return [_delete_document(document, sources)]
    rendered = document.source is not None
    if rendered and isinstance(op, Insert | Set | Extend):
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
    if isinstance(op, Extend):
        return [text.extend_list(op.path, op.items)]
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
        end = scalar_end(self.lines, line, column)
        old = span_text(self.lines, (line, column), end)
        if not reads_as(old, current):
            raise Unresolvable("the source text is not the value gpulint read")
        check_yaml_value(text)
        return Edit(self.file, (line, column), end, text)

    def rename_key(self, path: Path, key: str) -> Edit:
        line, column = self._position(path, key=True)
        end = scalar_end(self.lines, line, column, key=True)
        old = span_text(self.lines, (line, column), end)
        if not reads_as(old, path[-1]):
            raise Unresolvable("the key is not where gpulint read it")
        return Edit(self.file, (line, column), end, key_text(key))

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
        old_key = span_text(self.lines, (line, column), scalar_end(self.lines, line, column, True))
        if not reads_as(old_key, step):
            raise Unresolvable("the key is not where gpulint read it")
        last = block_end(self.lines, line, column - 1)
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
        key_end = scalar_end(self.lines, line, column, True)
        if not reads_as(span_text(self.lines, (line, column), key_end), step):
            raise Unresolvable("the key is not where gpulint read it")
        last = block_end(self.lines, line, column - 1)
        text = indented_yaml({step: plain_data(value)}, column - 1)[column - 1 :]
        return Edit(self.file, (line, column), self._end_of_lines(last), text)

    def extend_list(self, path: Path, items: tuple[Any, ...]) -> Edit:
        node = dig(self.document.data, path) if path else None
        if not isinstance(node, YList) or not node or not items:
            raise Unresolvable("only a non-empty list is extended")
        if _flow_start(self, path):
            raise Unresolvable("items of flow sequences")
        line, column = self._position((*path, 0), key=False)
        dash = self._line(line)[: column - 1].rstrip()
        if not dash.endswith("-") or dash[:-1].strip():
            raise Unresolvable("a list whose first item is not on a line of its own")
        indent = len(dash) - 1
        end = block_end(self.lines, line, indent)
        text = indented_yaml([plain_data(item) for item in items], indent)
        at = self._end_of_lines(end)
        if end >= len(self.lines) and not ends_line(self.lines[-1]):
            text = "\n" + text.rstrip("\n")  # the file ends without a newline
        return Edit(self.file, at, at, text)

    def insert(self, path: Path, new: tuple[tuple[str, Any], ...] | str) -> Edit:
        existing, node = self._deepest(path)
        if isinstance(node, YList):
            raise Unresolvable("insertion into a list")
        missing = path[len(existing) :]
        value: Any = Block(new) if isinstance(new, str) else {k: plain_data(v) for k, v in new}
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
        return self._append(existing, node, value)

    def _deepest(self, path: Path) -> tuple[Path, Any]:
        """The longest part of ``path`` the document has, and the node there (list items
        and mappings on the way; a null at the end is where the rest goes)."""
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
        return existing, node

    def _append(self, existing: Path, node: YMap, value: dict[str, Any]) -> Edit:
        """New entries after the last entry of the block mapping at ``existing``."""
        for key in value:
            if key in node:
                raise Unresolvable(f"{key} is already there")
        keys = list(node)
        _, first_column = self._position((*existing, keys[0]), key=True)
        last_line, last_column = self._position((*existing, keys[-1]), key=True)
        if last_column != first_column:
            raise Unresolvable("keys not aligned")
        indent = first_column - 1
        end = block_end(self.lines, last_line, indent)
        text = indented_yaml(value, indent)
        at = self._end_of_lines(end)
        if end >= len(self.lines) and not ends_line(self.lines[-1]):
            text = "\n" + text.rstrip("\n")  # the file ends without a newline
        return Edit(self.file, at, at, text)

    def _fill_null(self, path: Path, value: dict[str, Any]) -> Edit:
        """``annotations:`` with nothing after it: the block goes under the key."""
        line, column = self._position(path, key=True)
        key_line = self._line(line)
        after = key_line[column - 1 :].split(":", 1)
        if len(after) != 2 or after[1].split("#", 1)[0].strip() not in ("", "~", "null"):
            raise Unresolvable("an unusual null")
        nested = indented_yaml(value, column - 1 + 2)
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
        nested = indented_yaml(value, key_column - 1 + 2).rstrip("\n")
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
