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
