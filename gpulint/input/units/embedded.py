"""Where YAML embedded in a rendered string came from: the same relative place in the
source that wrote the string (a ConfigMap's config in a kustomize patch or a Helm template)."""

from __future__ import annotations

from gpulint.core.model import Location, SourceFile
from gpulint.input.document import Document, Path


class EmbeddedSource:
    """YAML embedded in a rendered string, at the same relative place in its source."""

    def __init__(
        self,
        line: int,
        column: int,
        file: str,
        source_line: int,
        source_column: int,
        unit: str,
        made_from: tuple[SourceFile, ...] = (),
    ) -> None:
        self.line, self.column = line, column
        self.file = file
        self.source_line, self.source_column = source_line, source_column
        self.unit = unit
        self._made_from = made_from  # the object's whose string holds the YAML

    def locate(self, document: Document, path: Path, key: bool | None) -> Location | None:
        raw = document.location(path, key=key, raw=True)
        line = raw.line - self.line + self.source_line
        column = raw.column - self.column + self.source_column
        return Location(self.file, max(line, 1), max(column, 1), self.unit)

    def embedded(
        self, document: Document, path: Path, line: int, column: int
    ) -> EmbeddedSource | None:
        return None

    def made_from(self, document: Document) -> tuple[SourceFile, ...]:
        return self._made_from
