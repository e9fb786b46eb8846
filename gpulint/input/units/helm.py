"""Helm charts: rendered by ``helm template``, findings placed in the template that made them.

``helm template`` writes ``# Source: <chart>/templates/<file>`` before each object. gpulint
reports an object's findings in that template. Where the template writes the value literally
(its text, template actions blanked, reads as YAML with the value Helm rendered), at the line
and column that write it, as in a plain file; else at the line that writes the offending key
when the template spells it out (``maxReplicas: {{ .Values.max }}``); else at the object's
first line in the template, with a note that the value comes from a template expression.
The JSON report keeps the rendered template path as ``renderedFrom``.

What made an object (``HelmSource.made_from``, what ``--changed-since`` asks) is its template
document and what every template of the chart reads: the helpers (``templates/_*``, whose
named templates any template may include), the values files it was rendered with and
Chart.yaml (``.Chart``), the chart's and its subcharts' (``chart_inputs``). A file a template
reads with ``.Files.Get`` is not followed.
"""

from __future__ import annotations

import os
import re
from typing import Any

from gpulint.core.model import Location, SourceFile
from gpulint.core.paths import within
from gpulint.input.document import Document, Path, dig, position_of
from gpulint.input.units.boundary import real
from gpulint.input.units.embedded import EmbeddedSource
from gpulint.input.yamlparse import YamlError, parse_documents

_KIND_LINE = re.compile(r"^kind:\s*\S")
_ACTION = re.compile(r"\{\{.*?\}\}")
_MISSING = object()


def chart_name(chart: str) -> str:
    """The ``name`` of Chart.yaml (what ``# Source:`` paths start with), else the directory's."""
    documents = []
    chart_yaml = os.path.join(chart, "Chart.yaml")
    root = real(chart)
    found = real(chart_yaml)
    if root is not None and found is not None and within(found, root):
        try:
            with open(found, "rb") as handle:
                documents = list(parse_documents(handle.read(1 << 20)))
        except (OSError, YamlError, RecursionError, ValueError):
            documents = []
    data = documents[0].value if documents else None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else os.path.basename(os.path.abspath(chart))


def template_file(chart: str, name: str, source: str) -> str | None:
    """The file a ``# Source:`` path names, inside ``chart`` (whose Chart.yaml says ``name``).

    The comment is text anyone can write (``# Source: c/../../x.yaml`` in piped output, a
    template that prints one): a path that leaves the chart, or a link out of it, names
    nothing, so no finding is mapped to, and no byte read from, a file outside the chart."""
    head, _, rest = source.partition("/")
    if head != name or not rest or "\x00" in rest or os.path.isabs(rest):
        return None
    candidate = os.path.normpath(os.path.join(chart, rest))
    root, found = real(chart), real(candidate)
    if root is None or found is None or found == root or not within(found, root):
        return None
    return candidate if os.path.isfile(candidate) else None


class TemplateText:
    """A template's lines, with where each object of it starts."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.lines = text.split("\n")
        self.starts = [i for i, line in enumerate(self.lines) if _KIND_LINE.match(line)]
        self.document_starts = [i for i, line in enumerate(self.lines) if line.startswith("---")]
        self._written: dict[int, Any] = {}

    def string_start(self, written: Any, path: Path) -> tuple[int, int]:
        """(line offset, column offset) of a string value's first character: for a block
        scalar (``|``, ``>``) the first non-empty line under its indicator."""
        line, column = position_of(written, path, key=False)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text[column - 1 : column] in ("|", ">"):
            for follow in range(line, len(self.lines)):
                row = self.lines[follow]
                if row.strip():
                    return follow, len(row) - len(row.lstrip(" "))
        return line - 1, column - 1

    def chunk_starts(self) -> list[int]:
        """The 0-based first line of each of the template's YAML documents."""
        return [0, *(d + 1 for d in self.document_starts)]

    def written(self, start: int) -> Any:
        """The object starting at 0-based line ``start`` as the template writes it, parsed at
        its lines, or None when the template text is no YAML. Template actions are blanked
        first (a line that is only an action, ``{{- if ... }}``, as an empty line; one inside
        a line as underscores of its width), so a literal value keeps its line and column
        and a templated one cannot equal what Helm rendered."""
        if start not in self._written:
            following = [d for d in self.document_starts if d > start]
            end = following[0] if following else len(self.lines)
            lines = []
            for line in self.lines[start:end]:
                if line.strip().startswith("{{") and _ACTION.sub("", line).strip() == "":
                    lines.append("")
                else:
                    lines.append(_ACTION.sub(lambda m: "_" * len(m.group(0)), line))
            try:
                documents = list(parse_documents("\n".join(lines), line_offset=start))
            except (YamlError, RecursionError, ValueError):
                documents = []
            self._written[start] = documents[0].value if len(documents) == 1 else None
        return self._written[start]

    def object_start(self, index: int) -> int:
        """The 0-based line where the ``index``-th object rendered from it starts: its
        ``apiVersion``/``kind`` block (the last one when the template loops)."""
        if not self.starts:
            return 0
        kind_line = self.starts[min(index, len(self.starts) - 1)]
        first = kind_line
        # The object begins at the first line after the previous document separator.
        previous = [d for d in self.document_starts if d < kind_line]
        floor = previous[-1] + 1 if previous else 0
        for line in range(kind_line - 1, floor - 1, -1):
            text = self.lines[line]
            if text.startswith(("apiVersion:", "metadata:")):
                first = line
        return first

    def key_line(self, start: int, path: Path) -> tuple[int, int] | None:
        """(0-based line, 1-based column) of the last key of ``path`` when the template
        spells every key of it out below ``start``; None otherwise."""
        end = len(self.lines)
        following = [d for d in self.document_starts if d > start]
        if following:
            end = following[0]
        if not any(isinstance(step, str) for step in path):
            return None
        line, indent, column = start, -1, 1
        for step in path:
            found = (
                self._item(line, end, indent, step)
                if isinstance(step, int)
                else self._key(line, end, indent, step)
            )
            if found is None:
                return None
            line, indent = found
            column = indent + 1
        return line, column

    def _key(self, line: int, end: int, indent: int, key: str) -> tuple[int, int] | None:
        pattern = re.compile(r"^(\s*(?:-\s+)*)" + re.escape(key) + r"\s*:")
        for candidate in range(line, end):
            match = pattern.match(self.lines[candidate])
            if match and len(match.group(1)) > indent:
                return candidate, len(match.group(1))
        return None

    def _item(self, line: int, end: int, indent: int, index: int) -> tuple[int, int] | None:
        """The ``index``-th ``- `` item below ``line`` (its content's indentation)."""
        item_indent = None
        seen = 0
        for candidate in range(line + 1, end):
            text = self.lines[candidate]
            stripped = text.lstrip(" ")
            if not stripped or stripped.startswith(("#", "{{")):
                continue
            here = len(text) - len(stripped)
            if here <= indent and not stripped.startswith("- "):
                return None  # the list ended
            if stripped.startswith("- ") and (item_indent is None or here == item_indent):
                item_indent = here
                if seen == index:
                    return candidate, here + 2  # the item's content, after "- "
                seen += 1
        return None


def _existing(data: Any, path: Path) -> Path:
    """The longest start of ``path`` that names a node of ``data``."""
    for end in range(len(path), 0, -1):
        if dig(data, path[:end], _MISSING) is not _MISSING:
            return path[:end]
    return ()


def _identity(data: dict[Any, Any]) -> tuple[Any, Any, Any]:
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return data.get("apiVersion"), data.get("kind"), name


# A chart's directory is walked for its helpers, values and Chart.yaml files up to this many
# entries (a chart is a few dozen files; a directory of data beside the templates is not).
_CHART_WALK_LIMIT = 10_000


def chart_inputs(
    chart: str, values: tuple[str, ...] = (), vendored: dict[str, str] | None = None
) -> tuple[SourceFile, ...]:
    """The files every object of a chart is rendered from, each as a whole: Chart.yaml and
    values.yaml of the chart and of its subcharts (``charts/``, and the ``file://``
    dependencies gpulint vendored), their helpers (``_*`` under ``templates/``: Helm renders
    no file whose name starts with an underscore, and any template may include the named
    templates they define), and ``values`` (``--helm-values``)."""
    from gpulint.input.units.walk import tree_files  # a loop: a chart may be deep

    found: dict[str, None] = {}
    for home in (chart, *sorted((vendored or {}).values())):
        for directory, files in tree_files(home, limit=_CHART_WALK_LIMIT):
            in_templates = "templates" in os.path.relpath(directory, home).split(os.sep)
            for name in files:
                if (in_templates and name.startswith("_")) or (
                    not in_templates and name in ("Chart.yaml", "values.yaml")
                ):
                    found[os.path.join(directory, name)] = None
    found.update(dict.fromkeys(values))
    return tuple(SourceFile(file) for file in found)


class HelmSource:
    """Where a rendered object's nodes are written in its chart."""

    def __init__(
        self,
        data: Any,
        template: TemplateText,
        index: int,
        rendered_from: str,
        unit: str,
        chart_files: tuple[SourceFile, ...] = (),
    ) -> None:
        self.data = data
        self.template = template
        self.start = template.object_start(index)
        self.rendered_from = rendered_from
        self.unit = unit
        self.chart_files = chart_files  # chart_inputs(), one tuple for the chart
        self._made_from: tuple[SourceFile, ...] | None = None
        # The template's own document for this object, when its text is YAML: the one Helm
        # rendered unchanged, else the one of the same kind and name (its values templated).
        self.written: Any = None
        candidates = [template.written(start) for start in template.chunk_starts()]
        same = [w for w in candidates if w is not None and w == data]
        if not same and isinstance(data, dict):
            same = [
                w for w in candidates if isinstance(w, dict) and _identity(w) == _identity(data)
            ]
        if not same and isinstance(data, dict):
            # A templated name: the template's only document of that apiVersion and kind.
            kinds = [
                w
                for w in candidates
                if isinstance(w, dict) and _identity(w)[:2] == _identity(data)[:2]
            ]
            same = kinds if len(kinds) == 1 else []
        if len(same) == 1 or (same and all(w == same[0] for w in same)):
            self.written = same[0]
            self.start = position_of(self.written, ())[0] - 1

    def locate(self, document: Document, path: Path, key: bool | None) -> Location | None:
        if document.data is not self.data:
            return None
        written = self.written
        # A path past what exists (a missing field) is placed at its deepest existing node.
        there = _existing(self.data, path)
        value = dig(written, there, _MISSING) if written is not None else _MISSING
        if value is not _MISSING and value == dig(self.data, there, _MISSING):
            # The template writes the value literally: at the line that wrote it (a string's
            # own text when asked for the value: a block scalar's first line, not its ``|``).
            if key is False and there == path and isinstance(value, str):
                line, column = (n + 1 for n in self.template.string_start(written, path))
                return Location(self.template.file, line, column, self.rendered_from)
            line, column = position_of(written, path, key=key)
            return Location(self.template.file, line, column, self.rendered_from)
        found = self.template.key_line(self.start, path) if path else None
        if found is not None:
            line, column = found
            return Location(self.template.file, line + 1, column, self.rendered_from)
        note = None
        if path:
            note = (
                f"helm template {self.unit}: the value comes from a template expression; "
                "this is the object's first line in the template"
            )
        return Location(self.template.file, self.start + 1, 1, self.rendered_from, note)

    def made_from(self, document: Document) -> tuple[SourceFile, ...]:
        """The template's document that wrote the object, and ``chart_files``."""
        if document.data is not self.data:
            return ()
        if self._made_from is None:
            own = SourceFile(self.template.file, self.start + 1)
            self._made_from = (own, *self.chart_files)
        return self._made_from

    def embedded(
        self, document: Document, path: Path, line: int, column: int
    ) -> EmbeddedSource | None:
        """YAML in a string the template writes literally (a ConfigMap's ``config.yaml: |``):
        mapped to the same place in the template."""
        if document.data is not self.data or self.written is None:
            return None
        value = dig(self.written, path, _MISSING)
        if not isinstance(value, str) or value != dig(self.data, path, _MISSING):
            return None
        source_line, source_column = self.template.string_start(self.written, path)
        return EmbeddedSource(
            line,
            column,
            self.template.file,
            source_line,
            source_column,
            self.unit,
            self.made_from(document),
        )
