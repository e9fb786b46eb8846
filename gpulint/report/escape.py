"""Text from manifests and Prometheus, made safe to print on a terminal or in a CI log.

Object names, label values, file names and the values quoted in messages are written by
whoever wrote the input. Printed raw, an ESC or OSC sequence retitles or recolours a terminal
(or hides text), a BEL rings, and a line that starts with ``::`` (GitHub Actions) or ``##``
(the older ``##[command]`` and Azure's ``##vso[``) is a workflow command in a CI log: the
runner trims leading whitespace and runs it. So reporters show every control character of
input text as an escape (``\\x1b``, ``\\n``), split gpulint's own multi-line text on ``\\n``
only, and make sure no line they print starts a command. gpulint's own colours are added
after escaping, so they stay.

Escaped: C0 controls, DEL and C1 controls (``\\x9b`` is a CSI to some terminals), the Unicode
line and paragraph separators, and the bidirectional controls that reorder what a reader
sees.
"""

from __future__ import annotations

import json
import re
from typing import Any, TextIO

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_UNSAFE = (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *_BIDI)


def _escape(code: int) -> str:
    char = chr(code)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_TABLE = {code: _escape(code) for code in _UNSAFE}
# What JSON leaves raw (it escapes C0 itself): the same characters as JSON escapes.
_JSON_TABLE = {code: f"\\u{code:04x}" for code in _UNSAFE if code >= 0x7F}
_COMMAND_START = re.compile(r"^(\s*)(::|##)")
_NEUTRAL = {"::": "\\x3a:", "##": "\\x23#"}


def escape_controls(text: str) -> str:
    """``text`` with every control character shown as an escape (a newline as ``\\n``)."""
    return text.translate(_TABLE)


def safe_line(line: str) -> str:
    """A line of output that cannot be a CI workflow command: a leading ``::`` or ``##``
    (after any indentation) has its first character escaped."""
    return _COMMAND_START.sub(lambda m: m.group(1) + _NEUTRAL[m.group(2)], line)


def safe_lines(text: str) -> list[str]:
    """gpulint's own multi-line text (a fix) as lines to print: split on ``\\n`` only, each
    line escaped and made safe."""
    return [safe_line(escape_controls(line)) for line in text.split("\n")]


def json_text_safe(document: str) -> str:
    """A JSON text with the control characters JSON allows raw (DEL, C1, the line
    separators, bidirectional controls) written as ``\\u`` escapes: the same data, safe to
    print. They can only occur inside strings, where the escape stands for the same
    character."""
    return document.translate(_JSON_TABLE)


def write_json(data: Any, stream: TextIO, lines: str | None = None) -> None:
    """``data`` as indented JSON, safe to print (``json_text_safe``; JSON escapes C0 controls
    itself). The list at key ``lines`` of ``data`` (the findings) is written one item per
    line, each by the C encoder: a report of 100,000 findings takes a fraction of a second,
    and a reader still sees one finding per line."""
    items = data.get(lines) if lines is not None and isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        stream.write(json_text_safe(json.dumps(data, indent=2, ensure_ascii=False)))
        stream.write("\n")
        return
    compact = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode
    stream.write("{\n")
    keys = list(data)
    for position, key in enumerate(keys):
        last = position == len(keys) - 1
        stream.write(f"  {json.dumps(key, ensure_ascii=False)}: ")
        if key == lines:
            stream.write("[\n")
            stream.write(",\n".join("    " + json_text_safe(compact(item)) for item in items))
            stream.write("\n  ]")
        else:
            text = json.dumps(data[key], indent=2, ensure_ascii=False)
            stream.write(json_text_safe(text.replace("\n", "\n  ")))
        stream.write("\n" if last else ",\n")
    stream.write("}\n")


class SafeStream:
    """A text stream whose every line is written escaped (``safe_lines``): gpulint's
    messages on stderr quote paths, configuration values and tool output, which may hold
    terminal escapes or CI workflow commands."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        lines = text.split("\n")
        self.stream.write("\n".join(safe_line(escape_controls(line)) for line in lines))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()
