"""Lines a person reads, at the width of their terminal.

Prose (headlines, details, notes, trace lines, ``explain``) is filled to the width; pasted
code (the YAML and PromQL of a fix) keeps its lines, because a reader copies it and a
line break inside a value would change it. Only a code line's comment, which YAML and
PromQL both end at the line's end, is continued on a following comment line at the same
column, so the code still pastes as it is.

The width is ``COLUMNS`` when it is set (as ``shutil.get_terminal_size`` and ruff read it),
else the size of the terminal the output goes to, else 80 columns (the fallback of
``shutil.get_terminal_size``): CI logs and files read as a standard terminal does.
"""

from __future__ import annotations

import os
import re
from typing import TextIO

DEFAULT_WIDTH = 80
# Narrower than this, a location and a rule ID no longer fit on a line with any words.
MIN_WIDTH = 40


def output_width(stream: TextIO) -> int:
    """The width to write ``stream``'s lines at: ``COLUMNS``, the terminal's, or 80."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return max(int(columns), MIN_WIDTH)
    try:
        if stream.isatty():
            return max(os.get_terminal_size(stream.fileno()).columns, MIN_WIDTH)
    except (AttributeError, OSError, ValueError):
        pass
    return DEFAULT_WIDTH


def fill(text: str, width: int, first: str = "", rest: str | None = None) -> list[str]:
    """``text``'s words as lines of at most ``width`` columns, the first starting with
        ``first`` and the others with ``rest`` (by default ``first``'s width in spaces, or four
    when ``first`` takes more than half the line).

        A word longer than a line (a URL, a PromQL query) stays whole on a line of its own:
        cut, it would no longer open or paste. A greedy fill, as ``textwrap`` does for this case
        at a tenth of the cost (a run with 100,000 findings prints each one)."""
    if rest is None:
        rest = " " * (len(first) if len(first) <= width // 2 else 4)
    lines: list[str] = []
    line = first
    empty = True
    for word in text.split():
        if not empty and len(line) + 1 + len(word) > width:
            lines.append(line)
            line, empty = rest, True
        elif empty and line.strip() and len(line) + len(word) > width >= len(rest) + len(word):
            # A long location leaves no room for the first word: the words start below it.
            lines.append(line.rstrip())
            line = rest
        line = line + word if empty else f"{line} {word}"
        empty = False
    if not empty or not lines:
        lines.append(line.rstrip())
    return lines


def comment_start(line: str) -> int:
    """Where a ``#`` comment starts in a YAML or PromQL line (-1 for none): at a ``#`` at the
    line's start or after whitespace, outside quotes (YAML 1.2, 6.6 Comments)."""
    quote = ""
    for at, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or line[at - 1] in " \t"):
            return at
    return -1


# A line of a fix that is a sentence, not code: it starts with two plain words ("move the
# rule", "fix what"), which no YAML line (``key:``, ``- ``, ``#``) does; a PromQL expression
# that does ("sum by (pod) ...", "a and b") has an operator keyword as its second word, and a
# command line ("kubectl get ...") starts with the command.
_PROSE = re.compile(r"\s*[A-Za-z]+,? ([A-Za-z][^\s:]*)[,:]?(?: |$)")
_PROMQL_WORDS = frozenset(
    ("by", "without", "on", "ignoring", "and", "or", "unless", "offset", "bool", "group_left")
)


# Commands a fix gives to run: code, however many plain words they start with.
_COMMANDS = frozenset(("kubectl", "helm", "kustomize", "gpulint", "curl", "promtool", "git"))


def _is_prose(line: str) -> bool:
    match = _PROSE.match(line)
    return (
        match is not None
        and match.group(1) not in _PROMQL_WORDS
        and line.split(None, 1)[0] not in _COMMANDS
    )


def code_lines(lines: list[str], width: int) -> list[str]:
    """A fix at ``width``: its sentences filled, its code as written, a comment that
    overflows continued on comment lines starting at its column; a comment after code
    that starts beyond half the width moves below the code, at the code's indentation."""
    out: list[str] = []
    for line in lines:
        if len(line) > width and _is_prose(line):
            indent = line[: len(line) - len(line.lstrip())]
            out.extend(fill(line, width, indent))
            continue
        if len(line) <= width:
            out.append(line)
            continue
        at = comment_start(line)
        if at < 0:
            out.append(line)
            continue
        code, comment = line[:at].rstrip(), line[at:].lstrip("#").strip()
        column = at
        if code and column > width // 2:
            # Continued at the code's indentation instead of in a narrow strip at the right.
            below = " " * (len(code) - len(code.lstrip())) + "# "
            out.append(code)
            out.extend(fill(comment, width, below, below))
            continue
        prefix = line[:at] + "# "
        filled = fill(comment, width, prefix, " " * column + "# ")
        out.extend(filled)
    return out


_LIST_ITEM = re.compile(r"(\s*(?:[-*]|\d+\.)\s+)")
# Inline code as the rule docstrings write it: ``reStructuredText`` or `Markdown`.
_INLINE_CODE = re.compile(r"``(.+?)``|`([^`\n]+)`")
CODE_INDENT = "    "
_CODE_COLOR, _HEADING_COLOR, _RESET = "\033[36m", "\033[1m", "\033[0m"


def terminal_prose(line: str, color: bool = False) -> str:
    """A line of a document's prose for a terminal: inline code (````x```` or ```x```) as
    ```x```, or coloured without its marks."""

    def code(match: re.Match[str]) -> str:
        text = match.group(1) or match.group(2)
        return f"{_CODE_COLOR}{text}{_RESET}" if color else f"`{text}`"

    return _INLINE_CODE.sub(code, line)


def document_lines(text: str, width: int, color: bool = False) -> list[str]:
    """A document for a terminal (``gpulint explain``): its paragraphs and list items
    refilled at ``width``, inline code marked once (``terminal_prose``); a fenced code
    block's lines as written, indented, without the fences; headings' underlines and blank
    lines as written. ``color`` colours the code and the headings instead of marking them."""
    out: list[str] = []
    paragraph: list[str] = []
    first, rest = "", ""
    fenced = False

    def flush() -> None:
        if paragraph:
            out.extend(fill(terminal_prose(" ".join(paragraph), color), width, first, rest))
            paragraph.clear()

    for line in text.split("\n"):
        if line.startswith("```"):
            flush()
            fenced = not fenced
            if not fenced:  # the prose after a block starts a paragraph of its own
                out.append("")
            continue
        if fenced:
            code = CODE_INDENT + line if line else ""
            out.append(f"{_CODE_COLOR}{code}{_RESET}" if color and code else code)
            continue
        if not line.strip():
            flush()
            out.append(line)
            continue
        if set(line.strip()) <= set("-="):
            flush()
            if color and out and out[-1]:
                out[-1] = f"{_HEADING_COLOR}{out[-1]}{_RESET}"
            out.append(line)
            continue
        item = _LIST_ITEM.match(line)
        if item:
            flush()
            first, rest = item.group(1), " " * len(item.group(1))
            paragraph.append(line[item.end() :])
        elif paragraph and (
            (first.strip() and line.startswith(rest))  # a list item's continuation
            or (not first and not line.startswith(" "))  # a paragraph's next line
        ):
            paragraph.append(line.strip())
        else:
            flush()
            # An indented line (an option of ``explain``) is an entry of its own, continued
            # two columns deeper.
            first = line[: len(line) - len(line.lstrip())]
            rest = first + "  " if first else ""
            paragraph.append(line.strip())
    flush()
    # One blank line between blocks, however the blocks ended.
    return [line for i, line in enumerate(out) if line or i == 0 or out[i - 1]]
