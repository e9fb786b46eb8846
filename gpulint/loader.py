"""From paths (files, directories, ``-`` for stdin) to YAML documents with positions.

The loader never gives up on a run: a file that does not parse becomes a LoadProblem (reported
as GL702), the documents before the broken one are kept, and parsing resumes at the next
``---`` line. A file full of Helm/Terraform template syntax that does not parse is not a YAML
error of the user's; it is recorded as skipped, with the advice to render it first.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from gpulint.document import Document
from gpulint.yamlparse import (
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
_SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".tox"}
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


def expand_paths(paths: Iterable[str]) -> Iterator[str]:
    """Files to lint, in a stable order; ``-`` stands for stdin."""
    for raw in paths:
        if raw == "-":
            yield "-"
            continue
        if os.path.isdir(raw):
            found: list[str] = []
            for root, dirs, files in os.walk(raw):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
                found.extend(
                    os.path.join(root, name) for name in files if name.endswith(YAML_SUFFIXES)
                )
            yield from sorted(found)
        elif os.path.exists(raw):
            yield raw
        else:
            raise InputError(f"no such file or directory: {raw}")


def read_source(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as handle:
        return handle.read()


def load_file(path: str, data: bytes | None = None) -> LoadedFile:
    """Parse one file (or stdin) into documents; never raises for bad content."""
    display = STDIN_NAME if path == "-" else path
    loaded = LoadedFile(display)
    if data is None:
        try:
            data = read_source(path)
        except OSError as error:
            loaded.problems.append(
                LoadProblem(display, 1, 1, f"cannot read file: {error.strerror}")
            )
            return loaded
    loaded.text = data
    sources = _source_comments(data) if b"# Source:" in data else []
    if b"gpulint:" in data:
        loaded.ignore_comments = list(_ignore_comments(display, data))
    for parsed in _parse_resyncing(display, data, loaded):
        rendered_from = _rendered_from(sources, parsed.line) if sources else None
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
    while True:
        try:
            yield from parse_documents(chunk, line_offset=offset_line)
            return
        except YamlError as error:
            if is_json and offset_line == 0:
                value = _json_fallback(chunk)
                if value is not None:
                    yield ParsedDocument(value, 1, 1, 1)
                    return
            loaded.problems.append(LoadProblem(display, error.line, error.column, error.message))
            # The error is often found at the next `---` (the broken document never ended):
            # resume there, but always past where this attempt started.
            restart = _next_document_start(data, max(error.line, offset_line + 2))
            if restart is None:
                return
            offset_line, start_byte = restart
            chunk = data[start_byte:]


def _next_document_start(data: bytes, from_line: int) -> tuple[int, int] | None:
    """The (0-based line, byte offset) of the first ``---`` line at or after ``from_line``."""
    for match in _DOC_START.finditer(data):
        line = data.count(b"\n", 0, match.start())
        if line + 1 >= from_line:
            return line, match.start()
    return None


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


def _source_comments(data: bytes) -> list[tuple[int, str]]:
    """``# Source: chart/templates/x.yaml`` comments of ``helm template`` output, by line."""
    found = []
    for match in _SOURCE_COMMENT.finditer(data):
        line = data.count(b"\n", 0, match.start()) + 1
        found.append((line, match.group(1).decode("utf-8", errors="replace")))
    return found


def _rendered_from(sources: list[tuple[int, str]], doc_line: int) -> str | None:
    found = None
    for line, source in sources:
        if line > doc_line:
            break
        found = source
    return found


def _ignore_comments(display: str, data: bytes) -> Iterator[IgnoreComment]:
    for match in _IGNORE_COMMENT.finditer(data):
        line_start = data.rfind(b"\n", 0, match.start()) + 1
        line = data.count(b"\n", 0, match.start()) + 1
        column = len(data[line_start : match.start()].decode("utf-8", errors="replace")) + 1
        names = match.group(1).decode().replace(" ", "")
        rules = frozenset(n.upper() for n in names.split(",") if n)
        yield IgnoreComment(display, line, column, rules)
