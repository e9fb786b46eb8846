"""Where a finding points: the object and the place in its file.

Below the documents that compute them (``gpulint.input.document``) and the findings that carry
them (``gpulint.core.model``, which exports them too).
"""

from __future__ import annotations

from typing import NamedTuple


class ObjectRef(NamedTuple):
    """A Kubernetes object (or a non-object document such as a Helm values file)."""

    api_version: str
    kind: str
    namespace: str | None
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0] if "/" in self.api_version else ""

    @property
    def described(self) -> str:
        """How a sentence names it: ``Deployment llm``, ``Helm values values.yaml``."""
        return f"{_FILE_KINDS.get(self.kind, self.kind)} {self.name}"


# The stand-in kinds of documents that are files, not objects, as a sentence says them.
_FILE_KINDS = {
    "HelmValues": "Helm values",
    "PrometheusAdapterConfig": "prometheus-adapter config",
    "Document": "document",
}


class Location(NamedTuple):
    """Where a finding points: a file and a 1-based line and column.

    ``rendered_from`` is what rendered the object the finding is about: the template path
    of a ``# Source:`` comment in ``helm template`` output, or the kustomization that was
    built. ``note`` says how the position was found when it is not the exact node (an
    object's first line, when kustomize or a template produced the offending value).
    """

    file: str
    line: int
    column: int
    rendered_from: str | None = None
    note: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class Node(NamedTuple):
    """A node of a document as its author wrote it, whatever unit read the document: where
    the document starts (its file, line and column, through a rendered document's source
    map, so that the overlays that build one base object agree) and the node's path in it.
    Findings of several units name one place when their nodes agree
    (``gpulint.engine.causes``)."""

    file: str
    line: int
    column: int
    path: tuple[str | int, ...]

    def holds(self, other: Node) -> bool:
        """Is ``other`` this node or a node inside it, in the same document?"""
        return (
            self.line == other.line
            and self.column == other.column
            and self.file == other.file
            and other.path[: len(self.path)] == self.path
        )


class SourceFile(NamedTuple):
    """A file that produced a rendered object, and the first line of the YAML document in it
    that did (a kustomize base's object, a patch, a chart template's object); 0 when any line
    of the file counts (a kustomization, a values file, a chart's helpers)."""

    file: str
    line: int = 0
