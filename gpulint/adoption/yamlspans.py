"""Where a YAML node's text ends in its file (block and flow collections, plain, quoted and
block scalars), whether a span reads back as the value it should, and new entries written in
the indentation and style of the mapping they go into."""

from __future__ import annotations

import functools
import re
from typing import Any

import yaml

from gpulint.adoption.textedits import Unresolvable
from gpulint.input.document import plain_data


def _indent_of(line: str) -> int | None:
    """Indentation of a line with content; None for blank and comment-only lines."""
    stripped = line.lstrip(" ")
    if not stripped.strip() or stripped.startswith("#"):
        return None
    return len(line) - len(stripped)


def block_end(lines: list[str], line: int, indent: int) -> int:
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


def scalar_end(lines: list[str], line: int, column: int, key: bool = False) -> tuple[int, int]:
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
    end = _plain_end(text, start, key, _inside_flow(text, start))
    if not key and line < len(lines):
        _not_continued(lines, line, text)
    return line, end + 1


def _plain_end(text: str, start: int, key: bool, in_flow: bool) -> int:
    """Where a plain scalar (a key when ``key``) that starts at ``start`` ends on its line,
    before a comment and trailing blanks."""
    end = start
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
    return end


def _not_continued(lines: list[str], line: int, text: str) -> None:
    """Refuse a plain scalar continued on the next line: its end is not on its own line."""
    following = _indent_of(lines[line])
    current = _indent_of(text)
    continued = following is not None and current is not None and following > current
    if continued and ":" not in lines[line] and not lines[line].lstrip().startswith("- "):
        raise Unresolvable("a plain scalar continued on the next line")


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


def span_text(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    if start[0] == end[0]:
        return lines[start[0] - 1][start[1] - 1 : end[1] - 1]
    parts = [lines[start[0] - 1][start[1] - 1 :]]
    parts.extend(lines[start[0] : end[0] - 1])
    parts.append(lines[end[0] - 1][: end[1] - 1])
    return "".join(parts)


def reads_as(text: str, value: Any) -> bool:
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
def check_yaml_value(text: str) -> None:
    yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


# A key YAML reads back as the same string when written bare: no indicator, no number,
# boolean or null of YAML 1.1 or 1.2.
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")


_RESOLVED_WORDS = frozenset(
    ["y", "n", "yes", "no", "on", "off", "true", "false", "null"]
)  # matched without regard to case


@functools.lru_cache(maxsize=4096)
def key_text(key: str) -> str:
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


class Block:
    """Block YAML text of a mapping, kept as written (comments and all)."""

    def __init__(self, text: str) -> None:
        keys = _block_keys(text)
        if keys is None:
            raise Unresolvable("inserted text that is not a mapping")
        self.keys = list(keys)
        self.text = text.strip("\n") + "\n"

    def __iter__(self) -> Any:
        return iter(self.keys)


def indented_yaml(value: Any, indent: int) -> str:
    """``value`` as block YAML, every line indented by ``indent`` spaces. ``value`` is a
    ``Block``, a dict nesting one down to a ``Block`` (missing parents), or plain data."""
    if isinstance(value, Block):
        text = value.text
    elif isinstance(value, dict) and len(value) == 1 and _holds_block(value):
        key, inner = next(iter(value.items()))
        text = f"{key_text(str(key))}:\n" + indented_yaml(inner, 2)
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
    return isinstance(value, Block)
