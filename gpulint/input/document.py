"""A YAML document as gpulint sees it: its data, its file, and the way back to a line and column."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from gpulint.core.location import Location, ObjectRef, SourceFile
from gpulint.input.yamlparse import YList, YMap

Path = tuple[str | int, ...]


class SourceMap(Protocol):
    """Maps a node of a rendered document back to the source a user edits."""

    def locate(self, document: Document, path: Path, key: bool | None) -> Location | None:
        """Where the node at ``path`` of ``document`` is written; None: not known."""

    def embedded(self, document: Document, path: Path, line: int, column: int) -> SourceMap | None:
        """The map for YAML embedded in the string at ``path`` (a ConfigMap's config), which
        starts at ``line``/``column`` offsets of the rendered text; None: not known."""

    def made_from(self, document: Document) -> tuple[SourceFile, ...]:
        """The files whose change changes what was rendered into ``document``: the file and
        document it was written in, and whatever else the renderer applied to it (patches,
        the kustomizations of the chain that built it, a generator's inputs; a chart's
        helpers, values and Chart.yaml). () when not known. The same tuple each time."""


def position_of(
    data: Any, path: Sequence[str | int], *, key: bool | None = None
) -> tuple[int, int]:
    """The 1-based (line, column) of the node at ``path`` inside ``data``.

    A path that goes past what exists stops at the deepest node that does exist, so a finding
    about a missing field points at its would-be parent. By default a mapping entry is placed
    at its key (the line a user reads as "the field") and a list entry at the item.
    ``key=False`` asks for the value's own position (inside a multi-line string, say).
    """
    node = data
    pos: tuple[int, int] | None = None
    if isinstance(data, YMap | YList) and data.start:
        pos = (data.start >> 20, data.start & ((1 << 20) - 1))
    last = len(path) - 1
    for i, step in enumerate(path):
        here: tuple[int, int] | None = None
        if isinstance(node, YMap) and step in node:
            if i < last or key is not False:
                here = node.key_position(step)
            else:
                here = node.value_position(step)
            node = node[step]
        elif isinstance(node, YList) and isinstance(step, int) and -len(node) <= step < len(node):
            here = node.item_position(step % len(node))
            node = node[step]
        elif has_step(node, step):
            node = node[step]
        else:
            break
        if here is not None:
            pos = here
    return pos or (1, 1)


class Document:
    """One YAML document (or one item of a ``kind: List``) from one file.

    Views such as HPA or AdapterConfig wrap a Document; findings are placed through
    ``location(path)``, with paths relative to ``data``.
    """

    __slots__ = ("data", "file", "index", "line", "rendered_from", "source", "text_starts")

    def __init__(
        self,
        data: Any,
        file: str,
        index: int = 0,
        line: int = 1,
        rendered_from: str | None = None,
    ) -> None:
        self.data = data
        self.file = file
        self.index = index
        self.line = line
        self.rendered_from = rendered_from
        # For rendered input (kustomize, Helm): where the user wrote what this document says.
        self.source: SourceMap | None = None
        # Where the text of a block scalar (``query: |``) starts, for the string values whose
        # findings point at their text (path -> line, column); filled from the file's text
        # when the document is classified (``gpulint.kinds.classify``).
        self.text_starts: dict[Path, tuple[int, int]] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # Plain files only cross processes (units.parallel); a source map stays behind.
        return (Document, (self.data, self.file, self.index, self.line, self.rendered_from))

    def location(
        self, path: Sequence[str | int] = (), *, key: bool | None = None, raw: bool = False
    ) -> Location:
        """Where the node at ``path`` is written. For rendered input, the line a user edits
        (``source``); ``raw=True`` gives the position in the rendered text itself."""
        if self.source is not None and not raw:
            found = self.source.locate(self, tuple(path), key)
            if found is not None:
                return found
        if key is False and self.text_starts is not None:
            start = self.text_starts.get(tuple(path))
            if start is not None:
                return Location(self.file, start[0], start[1], self.rendered_from)
        line, column = position_of(self.data, path, key=key)
        if not path and not (isinstance(self.data, YMap | YList) and self.data.start):
            line, column = self.line, 1
        return Location(self.file, line, column, self.rendered_from)

    def get(self, path: Sequence[str | int], default: Any = None) -> Any:
        return dig(self.data, path, default)


class Manifest(Document):
    """A Kubernetes object: a document with string ``apiVersion`` and ``kind``."""

    __slots__ = ("api_version", "generated", "kind", "name", "namespace", "templates")

    def __init__(
        self,
        data: dict[str, Any],
        file: str,
        index: int = 0,
        line: int = 1,
        rendered_from: str | None = None,
    ) -> None:
        super().__init__(data, file, index, line, rendered_from)
        self.api_version: str = data["apiVersion"]
        self.kind: str = data["kind"]
        metadata = data.get("metadata")
        if not isinstance(metadata, dict):
            metadata = {}
        name = metadata.get("name")
        if not isinstance(name, str):
            generate = metadata.get("generateName")
            name = f"{generate}<generated>" if isinstance(generate, str) else ""
        namespace = metadata.get("namespace")
        self.name: str = name
        self.namespace: str | None = namespace if isinstance(namespace, str) and namespace else None
        # Its pod templates, read once (gpulint.kinds.workload.pod_templates): many rules ask.
        self.templates: list[Any] | None = None
        # Made by KEDA, KServe or Knative (gpulint.inventory.claims), asked once.
        self.generated: bool | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (Manifest, (self.data, self.file, self.index, self.line, self.rendered_from))

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0] if "/" in self.api_version else ""

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.api_version, self.kind, self.namespace, self.name)

    @property
    def metadata(self) -> dict[str, Any]:
        metadata = self.data.get("metadata")
        return metadata if isinstance(metadata, dict) else {}

    @property
    def annotations(self) -> dict[str, Any]:
        annotations = self.metadata.get("annotations")
        return annotations if isinstance(annotations, dict) else {}

    @property
    def labels(self) -> dict[str, Any]:
        labels = self.metadata.get("labels")
        return labels if isinstance(labels, dict) else {}

    @property
    def owner_references(self) -> list[dict[str, Any]]:
        owners = self.metadata.get("ownerReferences")
        return [o for o in owners if isinstance(o, dict)] if isinstance(owners, list) else []

    def __repr__(self) -> str:
        return f"<Manifest {self.ref} {self.file}:{self.line}>"


class ManifestView:
    """A typed view of one Kubernetes object (HPA, ScaledObject, InferenceService ...)."""

    manifest: Manifest

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def namespace(self) -> str | None:
        return self.manifest.namespace


def has_step(node: Any, step: str | int) -> bool:
    """Can ``node[step]`` be taken (a present key, or an index in range)?"""
    if isinstance(node, dict):
        return step in node
    if isinstance(node, list) and isinstance(step, int):
        return -len(node) <= step < len(node)
    return False


def dig(data: Any, path: Sequence[str | int], default: Any = None) -> Any:
    """``data[p0][p1]...`` or ``default`` when any step is missing or of the wrong type."""
    node = data
    for step in path:
        if isinstance(node, dict):
            if step not in node:
                return default
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int):
            if not -len(node) <= step < len(node):
                return default
            node = node[step]
        else:
            return default
    return node


def plain_data(value: Any) -> Any:
    """A copy made of plain dicts and lists (positions dropped), for building fixes."""
    if isinstance(value, dict):
        return {key: plain_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain_data(item) for item in value]
    return value


def yaml_text(value: Any) -> str:
    """Block-style YAML for a fix snippet, keys in the order given, no trailing newline."""
    import yaml

    # libyaml's emitter writes the same text as PyYAML's Python one, ~8x faster: a refusal
    # from the webhook builds its fixes in the request path.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text: str = yaml.dump(
        plain_data(value), Dumper=dumper, sort_keys=False, default_flow_style=False, width=1000
    )
    return text.rstrip("\n")


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
