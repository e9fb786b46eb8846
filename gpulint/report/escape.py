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

Every writer of gpulint takes its escaping from here:

* text (the lint and trace reports, messages on stderr): ``escape_controls``, ``safe_line``,
  ``safe_lines``, ``SafeStream``;
* JSON and SARIF keep the raw values (``write_json``: valid JSON, the same data, printable);
* Markdown (the job summary, the title of a Mermaid trace): ``markdown_text`` for prose,
  ``markdown_code`` for code a reader copies (a fix);
* SVG and HTML (the pictures and the page of ``gpulint replay``): ``xml_text``;
* Mermaid labels: ``mermaid_label``;
* ``--diff``: ``safe_patch``, a patch that still applies, or None for one that cannot be
  shown as it is.
"""

from __future__ import annotations

import html
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


# --- Markdown ---------------------------------------------------------------------------------

# What starts markup inside a line: emphasis, code, links and images, tables, strikethrough,
# a heading or an issue reference.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~#])")
# What starts a block at the start of a line: a list item, a setext underline.
_MARKDOWN_LINE_START = re.compile(r"^(\s*\d*)([-+=.)])")
# A zero-width space (as an entity) after these keeps GitHub from turning what follows into
# a mention (``@user``, ``@org/team``), an e-mail link, or a link of a bare URL or
# ``www.`` name (GFM's autolink extension): the reader sees the same text.
_ZWSP = "&#8203;"
_UNLINKED = re.compile(r"(@|:(?=//)|(?<![\w.])www(?=\.))", re.IGNORECASE)


def markdown_text(text: str) -> str:
    """Input text as literal Markdown on one line (a table cell, a quote, a bold title), as
    GitHub renders it: control characters as escapes (``escape_controls``, so no newline
    starts a block), ``&``, ``<`` and ``>`` as entities (no HTML, no autolink in angle
    brackets, no entity of the input's), markup characters behind a backslash (no link, no
    image, no emphasis), and no mention or bare link (``_UNLINKED``)."""
    text = escape_controls(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    text = _MARKDOWN_LINE_START.sub(r"\1\\\2", text)
    return _UNLINKED.sub(lambda m: m.group(1) + _ZWSP, text)


def markdown_code(code: str) -> str:
    """Code (a fix) as a fenced code block, which GitHub renders literally: no entity, link,
    mention or markup inside it, so what a reader copies is ``code`` itself. Control
    characters are escapes (``escape_controls``), line by line; the fence is longer than any
    run of backticks in the code, so no line of it closes the block (CommonMark 0.31, 4.5
    Fenced code blocks)."""
    lines = [escape_controls(line) for line in code.rstrip("\n").split("\n")]
    longest = max((len(run) for run in re.findall(r"`+", "\n".join(lines))), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence, *lines, fence])


# --- SVG and HTML -----------------------------------------------------------------------------


def xml_text(text: str) -> str:
    """Input text for an SVG picture or an HTML page, as an element's text or a quoted
    attribute's value: control characters as escapes (XML 1.0 allows no C0 control but tab
    and line breaks, so one ESC makes an SVG no XML at all; C1 controls and bidirectional
    overrides are escaped as everywhere), then ``&``, ``<``, ``>`` and both quotes as
    entities, so that no name opens an element or ends an attribute."""
    return html.escape(escape_controls(text), quote=True)


# --- Mermaid ----------------------------------------------------------------------------------

# A label is a quoted string ``["..."]``: a quote would end it. Mermaid reads ``#name;`` and
# ``#code;`` as entities (mermaid: "Entity codes to escape characters"), and finds
# ``%%{...}%%`` directives anywhere in the text, not only at the start of a line; angle
# brackets would be HTML in a label, a backtick starts a Markdown string.
_MERMAID_ENTITIES = {
    '"': "#quot;",
    "<": "#lt;",
    ">": "#gt;",
    "&": "#amp;",
    "#": "#35;",
    "%": "#37;",
    ";": "#59;",
    "`": "#96;",
    "|": "#124;",
    "{": "#123;",
    "}": "#125;",
}
_MERMAID_TABLE = str.maketrans(_MERMAID_ENTITIES)


def mermaid_label(text: str) -> str:
    """Input text for the inside of a quoted Mermaid label: on one line (control characters
    as escapes), with every character that could end the label, start a directive, HTML or
    an entity of the input's written as a Mermaid entity."""
    return escape_controls(text).translate(_MERMAID_TABLE)


# --- patches (--diff) -------------------------------------------------------------------------

_NO_NEWLINE = "\\ No newline at end of file\n"
_PATCH_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")
_CONTROL_BUT_TAB = re.compile("[" + "".join(re.escape(chr(c)) for c in _UNSAFE if c != 0x09) + "]")


def has_controls(text: str) -> bool:
    """Whether ``text`` holds a character ``escape_controls`` would escape."""
    return escape_controls(text) != text


def safe_patch(diff: str) -> str | None:
    """A unified diff of ordinary files, made safe to print and still a patch that
    ``git apply`` and ``patch`` apply to the same result: a context line that a CI runner
    would run as a workflow command (`` ::error ...``: the runner trims the leading space) is
    written as the removal and addition of the same line, which changes nothing and starts
    with ``-`` and ``+``. None when a line holds a control character (a tab, and a carriage
    return before the line's end, as in a CRLF file, are ordinary): a patch must hold the
    file's characters, so such a diff cannot be printed both safely and exactly."""
    lines = _PATCH_LINE.findall(diff)  # on "\n" only: "\r", "\x85" ... are in lines
    out: list[str] = []
    for position, line in enumerate(lines):
        if _CONTROL_BUT_TAB.search(line.removesuffix("\n").removesuffix("\r")):
            return None
        content = line[1:]
        if not line.startswith(" ") or safe_line(content) == content:
            if line != _NO_NEWLINE or not out or out[-1] != _NO_NEWLINE:  # not written yet
                out.append(line)
            continue
        last = position + 1 < len(lines) and lines[position + 1] == _NO_NEWLINE
        tail = [_NO_NEWLINE] if last else []
        out.extend(["-" + content, *tail, "+" + content, *tail])
    return "".join(out)
