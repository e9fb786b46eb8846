"""From paths (files, directories, ``-`` for stdin) to YAML documents with positions.

The loader never gives up on a run: a file that does not parse becomes a LoadProblem (reported
as GL702), the documents before the broken one are kept, and parsing resumes at the next
``---`` line. A file full of Helm/Terraform template syntax that does not parse is not a YAML
error of the user's; it is recorded as skipped, with the advice to render it first.
"""

from __future__ import annotations

import bisect
import os
import re
import stat
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

from gpulint.input.document import Document
from gpulint.input.yamlparse import (
    DuplicateKey,
    ParsedDocument,
    YamlError,
    YList,
    YMap,
    looks_templated,
    parse_documents,
    read_json,
)

YAML_SUFFIXES = (".yaml", ".yml", ".json")
_SOURCE_COMMENT = re.compile(rb"^# Source: (\S.*?)\s*$", re.MULTILINE)
_IGNORE_COMMENT = re.compile(rb"#\s*gpulint:\s*ignore\s*=\s*([A-Za-z0-9_, *-]+)")
_DOC_START = re.compile(rb"^---", re.MULTILINE)
STDIN_NAME = "<stdin>"


class LoadProblem(NamedTuple):
    """A file or document that could not be read (GL702)."""

    file: str
    line: int
    column: int
    message: str
    kind: str = "syntax"  # syntax | unreadable | too-large


def read_problem(file: str, error: OSError, what: str = "file") -> LoadProblem:
    """The GL702 problem for a file (or directory, or stdin) that could not be read."""
    reason = error.strerror or str(error)
    if reason.startswith(("file too large", "input too large")):
        return LoadProblem(file, 1, 1, reason, "too-large")
    return LoadProblem(file, 1, 1, f"cannot read {what}: {reason}", "unreadable")


class IgnoreComment(NamedTuple):
    """``# gpulint: ignore=GL101,GL102`` on ``line``; it covers that line and the next."""

    file: str
    line: int
    column: int
    rules: frozenset[str]


class LoadedFile:
    __slots__ = (
        "documents",
        "duplicates",
        "ignore_comments",
        "path",
        "problems",
        "skipped_reason",
        "text",
    )

    def __init__(
        self,
        path: str,
        documents: list[Document] | None = None,
        duplicates: list[tuple[Document | None, DuplicateKey]] | None = None,
        problems: list[LoadProblem] | None = None,
        ignore_comments: list[IgnoreComment] | None = None,
        skipped_reason: str | None = None,
        text: bytes | None = None,
    ) -> None:
        self.path = path
        self.documents: list[Document] = [] if documents is None else documents
        self.duplicates: list[tuple[Document | None, DuplicateKey]] = (
            [] if duplicates is None else duplicates
        )
        self.problems: list[LoadProblem] = [] if problems is None else problems
        self.ignore_comments: list[IgnoreComment] = (
            [] if ignore_comments is None else ignore_comments
        )
        self.skipped_reason = skipped_reason
        self.text = text

    def __repr__(self) -> str:
        return f"LoadedFile(path={self.path!r}, documents={self.documents!r})"


class InputError(Exception):
    """A path given on the command line that cannot be used (exit code 2)."""


MAX_FILE_SIZE = 64 * 1024 * 1024


def read_source(path: str, max_file_size: int = MAX_FILE_SIZE) -> bytes:
    """A file's bytes (``-``: stdin's), refusing anything but a regular file and anything over
    ``max_file_size``. Raises OSError."""
    if path == "-":
        data = sys.stdin.buffer.read(max_file_size + 1)
        if len(data) > max_file_size:
            raise OSError(0, f"input too large: over {max_file_size:,} bytes (--max-file-size)")
        return data
    return read_bounded(path, max_file_size)


def read_bounded(path: str, max_file_size: int = MAX_FILE_SIZE) -> bytes:
    """A regular file's bytes, refusing anything else or anything over the limit (checked
    on the open file: it may have changed since it was walked). Raises OSError."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(0, f"not a regular file ({special_file_kind(info.st_mode)})")
        if info.st_size > max_file_size:
            raise OSError(
                0,
                f"file too large: {info.st_size:,} bytes, over the limit of {max_file_size:,} "
                "(--max-file-size)",
            )
        chunks = []
        remaining = max_file_size + 1
        expected = info.st_size + 1  # one read for a file that does not grow meanwhile
        while remaining > 0:
            chunk = os.read(fd, min(remaining, max(expected, 1 << 16)))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
            if len(chunk) < expected:
                break
            expected = 1 << 20
        data = b"".join(chunks)
        if len(data) > max_file_size:
            raise OSError(0, f"file too large: over the limit of {max_file_size:,} bytes")
        return data
    finally:
        os.close(fd)


def special_file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def load_file(path: str, data: bytes | None = None) -> LoadedFile:
    """Parse one file (or stdin) into documents; never raises for bad content."""
    display = STDIN_NAME if path == "-" else path
    loaded = LoadedFile(display)
    if data is None:
        try:
            data = read_source(path)
        except OSError as error:
            loaded.problems.append(read_problem(display, error))
            return loaded
    loaded.text = data
    sources = SourceComments(data) if b"# Source:" in data else None
    if b"gpulint:" in data:
        loaded.ignore_comments = list(ignore_comments(display, data))
    for parsed in _parse_resyncing(display, data, loaded):
        rendered_from = sources.before(parsed.line) if sources else None
        doc = Document(parsed.value, display, len(loaded.documents), parsed.line, rendered_from)
        loaded.documents.append(doc)
        loaded.duplicates.extend((doc, dup) for dup in parsed.duplicates)
    if loaded.problems and _is_template(display, data, loaded.problems):
        if loaded.documents:
            # Keep what parsed; the broken part is template syntax, not the user's YAML bug.
            loaded.problems.clear()
            loaded.skipped_reason = (
                "partly template syntax: only the documents that parse as YAML were linted"
            )
            return loaded
        loaded.problems.clear()
        loaded.duplicates.clear()
        loaded.skipped_reason = (
            "template syntax that is not YAML (Helm/Go or Terraform): render it first, "
            "for example `helm template . | gpulint lint -`"
        )
    return loaded


_BLOCK_TEMPLATE = re.compile(rb"\{\{|\{%|%\{")


def _is_template(path: str, data: bytes, problems: list[LoadProblem]) -> bool:
    """Is the parse failure caused by template syntax rather than by broken YAML?

    Helm/Go (``{{ }}``), Jinja (``{% %}``) and Terraform directives (``%{ }``) anywhere in the
    file make it a template. ``${...}`` alone is common in real manifests (shell snippets), so it
    only counts on the line that failed or the one before it.
    """
    if path.endswith((".tpl", ".tftpl")) or _BLOCK_TEMPLATE.search(data):
        return True
    lines = data.split(b"\n")
    for problem in problems:
        for index in (problem.line - 2, problem.line - 1):
            if 0 <= index < len(lines):
                text = lines[index].decode("utf-8", errors="replace")
                if looks_templated(text):
                    return True
    return False


def _parse_resyncing(display: str, data: bytes, loaded: LoadedFile) -> Iterator[ParsedDocument]:
    """All documents of ``data``; after a broken one, start again at the next ``---``."""
    offset_line = 0
    chunk = data
    is_json = display.endswith(".json")
    starts: _DocumentStarts | None = None
    while True:
        try:
            yield from parse_documents(chunk, line_offset=offset_line)
            return
        except YamlError as error:
            # The error's traceback holds the parser's frames, and with them libyaml's
            # buffers; gpulint runs with the cyclic collector off, so drop them now (a file
            # of 10,000 broken documents otherwise keeps 10,000 parsers alive).
            error.__traceback__ = None
            error.__context__ = None
            if is_json and offset_line == 0:
                value = _json_fallback(chunk)
                if value is not None:
                    yield ParsedDocument(value, 1, 1, 1)
                    return
            loaded.problems.append(LoadProblem(display, error.line, error.column, error.message))
            # The error is often found at the next `---` (the broken document never ended):
            # resume there, but always past where this attempt started.
            if starts is None:
                starts = _DocumentStarts(data)
            restart = starts.at_or_after(max(error.line, offset_line + 2))
            if restart is None:
                return
            offset_line, start_byte = restart
            chunk = data[start_byte:]


class _DocumentStarts:
    """The ``---`` lines of a text, found once: resuming after each of thousands of broken
    documents costs a binary search, not a scan from the top."""

    def __init__(self, data: bytes) -> None:
        self.lines: list[int] = []  # 0-based
        self.offsets: list[int] = []
        for line, offset in _line_numbers(data, _DOC_START.finditer(data)):
            self.lines.append(line - 1)
            self.offsets.append(offset)

    def at_or_after(self, from_line: int) -> tuple[int, int] | None:
        """The (0-based line, byte offset) of the first ``---`` line at or after 1-based
        ``from_line``."""
        index = bisect.bisect_left(self.lines, from_line - 1)
        if index == len(self.lines):
            return None
        return self.lines[index], self.offsets[index]


def _line_numbers(data: bytes, matches: Iterator[re.Match[bytes]]) -> Iterator[tuple[int, int]]:
    """(1-based line, byte offset) of each match, in one pass over the text."""
    line, position = 1, 0
    for match in matches:
        start = match.start()
        line += data.count(b"\n", position, start)
        position = start
        yield line, start


def _json_fallback(data: bytes) -> Any:
    """JSON that libyaml refuses (tabs, escaped slashes): values without positions; None
    when it is not JSON either or nests deeper than the JSON reader goes (the YAML error is
    reported then)."""
    try:
        value = read_json(data)
    except (ValueError, RecursionError):
        return None
    return _positionless(value)


def _positionless(value: Any) -> Any:
    """``value`` with YMap/YList for its dicts and lists, built without recursion."""
    if not isinstance(value, dict | list):
        return value
    root: YMap | YList = YMap() if isinstance(value, dict) else YList()
    pending: list[tuple[Any, YMap | YList]] = [(value, root)]
    while pending:
        source, target = pending.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, dict | list):
                child: YMap | YList = YMap() if isinstance(item, dict) else YList()
                pending.append((item, child))
                item = child
            if isinstance(target, YMap):
                target[key] = item
            else:
                target.append(item)
    return root


class SourceComments:
    """``# Source: chart/templates/x.yaml`` comments of ``helm template`` output, by line."""

    def __init__(self, data: bytes) -> None:
        self.lines: list[int] = []
        self.sources: list[str] = []
        matches = list(_SOURCE_COMMENT.finditer(data))
        for (line, _), match in zip(_line_numbers(data, iter(matches)), matches, strict=True):
            self.lines.append(line)
            self.sources.append(match.group(1).decode("utf-8", errors="replace"))

    def __bool__(self) -> bool:
        return bool(self.lines)

    def before(self, line: int) -> str | None:
        """The last ``# Source:`` at or before ``line``."""
        index = bisect.bisect_right(self.lines, line)
        return self.sources[index - 1] if index else None


def ignore_comments(display: str, data: bytes) -> Iterator[IgnoreComment]:
    """Every ``# gpulint: ignore=...`` comment of a text, in one pass."""
    matches = list(_IGNORE_COMMENT.finditer(data))
    for (line, start), match in zip(_line_numbers(data, iter(matches)), matches, strict=True):
        line_start = data.rfind(b"\n", 0, start) + 1
        column = len(data[line_start:start].decode("utf-8", errors="replace")) + 1
        names = match.group(1).decode().replace(" ", "")
        rules = frozenset(n.upper() for n in names.split(",") if n)
        yield IgnoreComment(display, line, column, rules)
