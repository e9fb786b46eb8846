"""Kustomizations: what they reference, how they are built, and where a rendered node is written.

A kustomization directory is built by the real kustomize through a temporary wrapper
kustomization (outside the user's tree) that lists it as its only resource and asks for
``buildMetadata: [originAnnotations, transformerAnnotations]``. Every rendered object then
says which file it came from (``config.kubernetes.io/origin``) and which kustomizations'
transformers ran on it (``alpha.config.kubernetes.io/transformations``); gpulint strips both
before the rules see the object.

``KustomizeSource`` maps a rendered node back to the line a user edits: the same node in the
origin file when it is there; else the patch (a strategic-merge patch file, an inline
``patch: |`` in ``kustomization.yaml``, a JSON6902 operation) that set it, at the patch's
line; else the origin object's first line, with a note that the value was found after
kustomize.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from gpulint.cluster.kinds import selector_matches
from gpulint.core.model import Location
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list, has_step
from gpulint.input.loader import LoadedFile, load_file
from gpulint.input.units import KUSTOMIZATION_NAMES
from gpulint.input.units.boundary import boundaries_of, inside
from gpulint.input.units.references import is_remote, remote_reason
from gpulint.input.yamlparse import YamlError, YList, YMap, parse_documents
from gpulint.kinds.classify import embedded_origin

ORIGIN = "config.kubernetes.io/origin"
TRANSFORMATIONS = "alpha.config.kubernetes.io/transformations"
BUILD_ANNOTATIONS = (ORIGIN, TRANSFORMATIONS)
HELM_GENERATOR = "HelmChartInflationGenerator"
# A generator or transformer configuration file is read only to see whether it inflates a
# Helm chart; kustomize's own configurations are a few lines.
_CONFIG_FILE_LIMIT = 1 << 20


def kustomization_file(directory: str) -> str | None:
    for name in KUSTOMIZATION_NAMES:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    return None


class Reference:
    """A path a kustomization names, where it names it."""

    __slots__ = ("field", "path", "reason", "resolved")

    def __init__(self, path: str, field: Path, resolved: str, reason: str = "") -> None:
        self.path = path  # as written
        self.field = field  # where, in the kustomization's data
        self.resolved = resolved  # joined onto the kustomization's directory
        self.reason = reason  # why it is not read: remote, or outside the repository

    def __repr__(self) -> str:
        return f"Reference({self.path!r})"


class Kustomization:
    """One kustomization file, read for what it references (kustomize itself builds it).

    ``boundaries`` are the directories of the run that may be read (``units.boundary``):
    a reference outside them is kept in ``outside`` and never opened, a reference kustomize
    would fetch is kept in ``remote``, and the Helm charts it inflates are checked for
    downloads and for paths out of the repository (``helm_problems``)."""

    def __init__(self, directory: str, boundaries: tuple[str, ...] | None = None) -> None:
        self.directory = directory
        self.boundaries = boundaries if boundaries is not None else boundaries_of([directory])
        self.file = kustomization_file(directory) or os.path.join(directory, "kustomization.yaml")
        self.outside: list[Reference] = []
        if inside(self.file, self.boundaries) or not os.path.lexists(self.file):
            self.loaded: LoadedFile = load_file(self.file)
        else:
            # A link out of the repository: never read, and never handed to kustomize.
            self.loaded = LoadedFile(self.file)
            self.outside.append(
                Reference(os.path.basename(self.file), (), self.file, "outside the repository")
            )
        documents = self.loaded.documents
        self.document: Document | None = documents[0] if documents else None
        data = self.document.data if self.document is not None else None
        self.data: dict[str, Any] = data if isinstance(data, dict) else {}
        self.is_component = self.data.get("kind") == "Component"
        self.directories: list[Reference] = []  # bases and components
        self.files: list[Reference] = []
        self.remote: list[Reference] = []
        self.helm_charts: Path | None = ("helmCharts",) if self.data.get("helmCharts") else None
        self.chart_homes: list[str] = []  # directories whose charts kustomize's helm reads
        self.helm_problems: list[Reference] = []  # downloads, paths out of the repository
        self._read()
        self._read_helm()

    def __repr__(self) -> str:
        return f"Kustomization({self.directory!r})"

    def _ref(self, value: Any, field: Path) -> Reference | None:
        if not isinstance(value, str) or not value.strip():
            return None
        reason = remote_reason(value)
        value = value.strip()
        if reason is not None:
            reference = Reference(value, field, value, reason)
            self.remote.append(reference)
            return reference
        resolved = os.path.normpath(os.path.join(self.directory, value))
        if os.path.isabs(value) or not inside(resolved, self.boundaries):
            reference = Reference(value, field, resolved, "outside the repository")
            self.outside.append(reference)
            return reference
        reference = Reference(value, field, resolved)
        if os.path.isdir(resolved):
            self.directories.append(reference)
        else:
            self.files.append(reference)
        return reference

    def _read_helm(self) -> None:
        """What kustomize's Helm inflation would fetch or read: a chart ``repo:`` is a
        download (``helm pull``), and ``helmGlobals.chartHome``/``configHome`` and values files
        must stay inside the repository (kustomize pulls into chartHome and points Helm's
        configuration there)."""
        generators: list[tuple[dict[str, Any], Path]] = []
        for i, item in enumerate(as_list(self.data.get("helmCharts"))):
            generators.append((as_dict(item), ("helmCharts", i)))
        for key in ("generators", "transformers"):
            for i, item in enumerate(as_list(self.data.get(key))):
                for data in self._configurations(item):
                    if data.get("kind") == HELM_GENERATOR:
                        generators.append((data, (key, i)))
        if not generators:
            return  # helmGlobals alone inflates nothing
        if self.helm_charts is None and generators:
            self.helm_charts = generators[0][1]
        globals_ = as_dict(self.data.get("helmGlobals"))
        homes: list[tuple[Any, Path]] = [(globals_.get("chartHome"), ("helmGlobals", "chartHome"))]
        homes += [(data.get("chartHome"), (*field, "chartHome")) for data, field in generators]
        for home, field in homes:
            if home is None:
                continue
            if not isinstance(home, str) or not home.strip():
                self.helm_problems.append(
                    Reference(str(home), field, "", "a chart home that is not a path")
                )
                continue
            reference = self._helm_path(home, field)
            if reference is not None:
                self.chart_homes.append(reference)
        if not any(home is not None for home, _ in homes):
            self.chart_homes.append(os.path.join(self.directory, "charts"))  # kustomize's default
        config_homes: list[tuple[Any, Path]] = [
            (globals_.get("configHome"), ("helmGlobals", "configHome"))
        ]
        config_homes += [
            (data.get("configHome"), (*field, "configHome")) for data, field in generators
        ]
        for config_home, field in config_homes:
            if config_home is not None:
                self._helm_path(config_home, field)
        for data, field in generators:
            repo = data.get("repo")
            name = data.get("name")
            if repo not in (None, ""):
                self.helm_problems.append(
                    Reference(
                        str(repo), (*field, "repo"), str(repo), "a chart repository to download"
                    )
                )
            if isinstance(name, str) and (remote_reason(name) or "/" in name or name in ".."):
                self.helm_problems.append(
                    Reference(name, (*field, "name"), name, "a chart name that is not local")
                )
            for key in ("valuesFile", "additionalValuesFiles"):
                values = data.get(key)
                for j, item in enumerate(values if isinstance(values, list) else [values]):
                    spot = (*field, key, j) if isinstance(values, list) else (*field, key)
                    if item is not None:
                        self._helm_path(item, spot)

    def _helm_path(self, value: Any, field: Path) -> str | None:
        """A path of a Helm inflation, resolved when it is local and inside the repository;
        else noted in ``helm_problems``."""
        if not isinstance(value, str) or not value.strip():
            self.helm_problems.append(Reference(str(value), field, "", "not a path"))
            return None
        reason = remote_reason(value)
        if reason is not None:
            self.helm_problems.append(Reference(value, field, value, reason))
            return None
        resolved = os.path.normpath(os.path.join(self.directory, value))
        if os.path.isabs(value) or not inside(resolved, self.boundaries):
            self.helm_problems.append(Reference(value, field, resolved, "outside the repository"))
            return None
        return resolved

    def _configurations(self, item: Any) -> list[dict[str, Any]]:
        """The configurations a ``generators:``/``transformers:`` entry holds: inline YAML,
        or a local file inside the repository (its references are already checked)."""
        if not isinstance(item, str):
            return []
        if "\n" in item:
            text: str | bytes = item
        else:
            if remote_reason(item) is not None:
                return []
            path = os.path.normpath(os.path.join(self.directory, item.strip()))
            if not inside(path, self.boundaries) or not os.path.isfile(path):
                return []
            try:
                with open(path, "rb") as handle:
                    text = handle.read(_CONFIG_FILE_LIMIT)
            except OSError:
                return []
        try:
            documents = list(parse_documents(text))
        except (YamlError, RecursionError, ValueError):
            return []
        return [d.value for d in documents if isinstance(d.value, dict)]

    def _read(self) -> None:
        data = self.data
        for key in ("resources", "bases", "components", "crds", "configurations"):
            for i, item in enumerate(as_list(data.get(key))):
                self._ref(item, (key, i))
        for key in ("generators", "transformers", "validators"):
            for i, item in enumerate(as_list(data.get(key))):
                if isinstance(item, str) and "\n" not in item:
                    self._ref(item, (key, i))
        for i, item in enumerate(as_list(data.get("patches"))):
            self._ref(as_dict(item).get("path"), ("patches", i, "path"))
        for i, item in enumerate(as_list(data.get("patchesJson6902"))):
            self._ref(as_dict(item).get("path"), ("patchesJson6902", i, "path"))
        for i, item in enumerate(as_list(data.get("patchesStrategicMerge"))):
            if isinstance(item, str) and "\n" not in item and ":" not in item:
                self._ref(item, ("patchesStrategicMerge", i))
        for i, item in enumerate(as_list(data.get("replacements"))):
            self._ref(as_dict(item).get("path"), ("replacements", i, "path"))
        self._ref(as_dict(data.get("openapi")).get("path"), ("openapi", "path"))
        for key in ("configMapGenerator", "secretGenerator"):
            for i, item in enumerate(as_list(data.get(key))):
                item = as_dict(item)
                for j, entry in enumerate(as_list(item.get("files"))):
                    if isinstance(entry, str):
                        self._ref(entry.rpartition("=")[2], (key, i, "files", j))
                for j, entry in enumerate(as_list(item.get("envs"))):
                    self._ref(entry, (key, i, "envs", j))
                self._ref(item.get("env"), (key, i, "env"))

    def location(self, field: Path = ()) -> Location:
        if self.document is None:
            return Location(self.file, 1, 1)
        return self.document.location(field)

    def owned_files(self) -> Iterator[str]:
        """The files this kustomization itself reads (not its bases'), all inside the
        repository."""
        yield self.file
        for reference in self.files:
            yield reference.resolved

    def patches(self) -> list[Patch]:
        """Every patch this kustomization applies, in the order kustomize applies them."""
        found: list[Patch] = []
        data = self.data
        for i, item in enumerate(as_list(data.get("patchesStrategicMerge"))):
            field: Path = ("patchesStrategicMerge", i)
            if isinstance(item, str) and ("\n" in item or ":" in item):
                found.extend(self._inline(item, field, None))
            elif isinstance(item, str):
                found.extend(self._from_file(item, field, None))
        for i, item in enumerate(as_list(data.get("patchesJson6902"))):
            entry = as_dict(item)
            target = as_dict(entry.get("target"))
            if isinstance(entry.get("path"), str):
                found.extend(self._from_file(entry["path"], ("patchesJson6902", i), target))
            elif isinstance(entry.get("patch"), str):
                found.extend(self._inline(entry["patch"], ("patchesJson6902", i, "patch"), target))
        for i, item in enumerate(as_list(data.get("patches"))):
            entry = as_dict(item)
            selector: dict[str, Any] | None = as_dict(entry.get("target")) or None
            if isinstance(entry.get("path"), str):
                found.extend(self._from_file(entry["path"], ("patches", i), selector))
            elif isinstance(entry.get("patch"), str):
                found.extend(self._inline(entry["patch"], ("patches", i, "patch"), selector))
        return found

    def _from_file(self, path: str, field: Path, target: dict[str, Any] | None) -> list[Patch]:
        resolved = os.path.normpath(os.path.join(self.directory, path))
        if is_remote(path) or not inside(resolved, self.boundaries) or not os.path.isfile(resolved):
            return []
        loaded = load_file(resolved)
        return [Patch(self, field, doc, target) for doc in loaded.documents if doc.data is not None]

    def _inline(self, text: str, field: Path, target: dict[str, Any] | None) -> list[Patch]:
        if self.document is None:
            return []
        line, column = embedded_origin(self.document, field, self.loaded.text)
        try:
            parsed = list(parse_documents(text, line_offset=line, column_offset=column))
        except YamlError:
            return []
        return [
            Patch(self, field, Document(doc.value, self.file, 0, doc.line), target)
            for doc in parsed
            if doc.value is not None
        ]

    def generator_entry(self, kind: str, name: str) -> Path | None:
        """Where a configMapGenerator/secretGenerator entry makes the object ``name``."""
        key = {"ConfigMapGenerator": "configMapGenerator", "SecretGenerator": "secretGenerator"}
        field = key.get(kind)
        if field is None:
            return None
        for i, item in enumerate(as_list(self.data.get(field))):
            entry_name = as_dict(item).get("name")
            if isinstance(entry_name, str) and (
                name == entry_name or name.startswith(f"{entry_name}-")
            ):
                return (field, i, "name")
        return None


class Patch:
    """One patch of a kustomization: a strategic-merge patch or a list of JSON6902 ops."""

    __slots__ = ("document", "field", "kustomization", "target")

    def __init__(
        self,
        kustomization: Kustomization,
        field: Path,
        document: Document,
        target: dict[str, Any] | None,
    ) -> None:
        self.kustomization = kustomization
        self.field = field
        self.document = document
        self.target = target

    def __repr__(self) -> str:
        return f"Patch({self.kustomization.file}, {self.field})"

    @property
    def is_json6902(self) -> bool:
        return isinstance(self.document.data, list)

    def applies_to(self, rendered: Manifest, origin_name: str | None) -> bool:
        names = {rendered.name} | ({origin_name} if origin_name else set())
        if self.target:
            return _selects(self.target, rendered, names)
        data = as_dict(self.document.data)
        if data.get("kind") != rendered.kind:
            return False
        name = as_dict(data.get("metadata")).get("name")
        return not isinstance(name, str) or name in names

    def depth(self, rendered: Any, path: Path) -> tuple[int, Path]:
        """How many leading steps of ``path`` this patch writes, and the path in the patch's
        own document that writes them."""
        if self.is_json6902:
            best: tuple[int, Path] = (0, ())
            for i, op in enumerate(self.document.data):
                op_path = _pointer(as_dict(op).get("path"))
                if op_path is None or as_dict(op).get("op") not in (
                    "add",
                    "replace",
                    "copy",
                    "move",
                ):
                    continue
                length = len(op_path)
                if tuple(path[:length]) != op_path:
                    continue
                depth, inner = _depth_in(as_dict(op).get("value"), rendered, path, length)
                candidate = (length + depth, (i, "value", *inner) if depth else (i,))
                if candidate[0] >= best[0]:
                    best = candidate
            return best
        return _depth_in(self.document.data, rendered, path, 0)


def _selects(target: dict[str, Any], rendered: Manifest, names: set[str]) -> bool:
    kind = target.get("kind")
    if isinstance(kind, str) and kind and not _full_match(kind, rendered.kind):
        return False
    group = target.get("group")
    if isinstance(group, str) and group and not _full_match(group, rendered.group):
        return False
    name = target.get("name")
    if isinstance(name, str) and name and not any(_full_match(name, n) for n in names):
        return False
    namespace = target.get("namespace")
    if (
        isinstance(namespace, str)
        and namespace
        and not _full_match(namespace, rendered.namespace or "")
    ):
        return False
    labels = {k: str(v) for k, v in rendered.labels.items() if isinstance(k, str)}
    selector = target.get("labelSelector")
    if isinstance(selector, str) and selector and not selector_matches(selector, labels):
        return False
    annotations = {k: str(v) for k, v in rendered.annotations.items() if isinstance(k, str)}
    selector = target.get("annotationSelector")
    return not (
        isinstance(selector, str) and selector and not selector_matches(selector, annotations)
    )


def _full_match(pattern: str, value: str) -> bool:
    try:
        return re.fullmatch(pattern, value) is not None
    except re.error:
        return pattern == value


def _pointer(value: Any) -> Path | None:
    """A JSON pointer (``/spec/metrics/0``) as a path."""
    if not isinstance(value, str) or not value.startswith("/"):
        return None
    steps: list[str | int] = []
    for part in value[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        steps.append(int(part) if part.isdigit() else part)
    return tuple(steps)


def _depth_in(source: Any, rendered: Any, path: Path, start: int) -> tuple[int, Path]:
    """How many steps of ``path[start:]`` exist in ``source`` (walked beside the rendered
    object, list items matched by ``name`` as strategic merge matches containers), and their
    path in ``source``."""
    node, shown = source, rendered
    for step in path[:start]:
        shown = shown[step] if has_step(shown, step) else None
    depth = 0
    inner: list[str | int] = []
    for step in path[start:]:
        if isinstance(node, dict) and isinstance(step, str):
            if step not in node:
                break
            node = node[step]
            inner.append(step)
        elif isinstance(node, list) and isinstance(step, int):
            item = (
                shown[step]
                if isinstance(shown, list) and -len(shown) <= step < len(shown)
                else None
            )
            index = _matching_item(node, item, step)
            if index is None:
                break
            node = node[index]
            inner.append(index)
        else:
            break
        shown = shown[step] if has_step(shown, step) else None
        depth += 1
    return depth, tuple(inner)


def _matching_item(items: list[Any], rendered_item: Any, index: int) -> int | None:
    name = rendered_item.get("name") if isinstance(rendered_item, dict) else None
    if isinstance(name, str):
        for i, item in enumerate(items):
            if isinstance(item, dict) and item.get("name") == name:
                return i
        return None
    return index if -len(items) <= index < len(items) else None


# --- building --------------------------------------------------------------------------------


def wrapper_kustomization(target: str) -> tuple[str, str]:
    """A temporary directory holding a kustomization that builds ``target`` with origin and
    transformer annotations; (directory, the reference it uses). The caller removes it."""
    wrapper = tempfile.mkdtemp(prefix="gpulint-kustomize-")
    reference = os.path.relpath(os.path.realpath(target), os.path.realpath(wrapper))
    with open(os.path.join(wrapper, "kustomization.yaml"), "w", encoding="utf-8") as handle:
        handle.write(
            "# written by gpulint to learn where each rendered object comes from\n"
            "apiVersion: kustomize.config.k8s.io/v1beta1\n"
            "kind: Kustomization\n"
            f"resources:\n  - {_quoted(reference)}\n"
            "buildMetadata: [originAnnotations, transformerAnnotations]\n"
        )
    return wrapper, reference


def remove_wrapper(wrapper: str) -> None:
    shutil.rmtree(wrapper, ignore_errors=True)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def origin_path(base: str, path: str, spelled_root: str) -> str:
    """A path kustomize wrote relative to ``base`` (the wrapper, or the directory a piped
    build was run on), spelled like the unit's root."""
    absolute = os.path.normpath(os.path.join(os.path.realpath(base), path))
    root_real = os.path.realpath(spelled_root)
    relative = os.path.relpath(absolute, root_real)
    return os.path.normpath(os.path.join(spelled_root, relative))


def build_annotations(data: Any) -> tuple[dict[str, Any], list[str]]:
    """(origin, configuredIn files) from the build annotations of an object's data."""
    annotations = as_dict(as_dict(as_dict(data).get("metadata")).get("annotations"))
    origin: dict[str, Any] = {}
    configured: list[str] = []
    text = annotations.get(ORIGIN)
    if isinstance(text, str):
        origin = _small_yaml(text)
    text = annotations.get(TRANSFORMATIONS)
    if isinstance(text, str):
        for item in as_list(_small_yaml_any(text)):
            value = as_dict(item).get("configuredIn")
            if isinstance(value, str) and value not in configured:
                configured.append(value)
    return origin, configured


def strip_build_annotations(manifest: Manifest) -> None:
    """Take kustomize's build annotations off, so that no rule ever sees them."""
    metadata = manifest.data.get("metadata")
    annotations = as_dict(metadata).get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, YMap):
        if isinstance(annotations, dict):
            for key in BUILD_ANNOTATIONS:
                annotations.pop(key, None)
        return
    if not any(key in annotations for key in BUILD_ANNOTATIONS):
        return
    kept = YMap(annotations.start)
    for index, (key, value) in enumerate(annotations.items()):
        if key in BUILD_ANNOTATIONS:
            continue
        kept[key] = value
        if 2 * index + 1 < len(annotations.marks):
            kept.marks.append(annotations.marks[2 * index])
            kept.marks.append(annotations.marks[2 * index + 1])
    if kept:
        metadata["annotations"] = kept
    else:
        _drop_key(metadata, "annotations")


def _drop_key(mapping: Any, key: str) -> None:
    if isinstance(mapping, YMap):
        keys = list(mapping)
        index = keys.index(key)
        marks = mapping.marks
        del mapping[key]
        if 2 * index + 1 < len(marks):
            del marks[2 * index : 2 * index + 2]
    elif isinstance(mapping, dict):
        mapping.pop(key, None)


def _small_yaml(text: str) -> dict[str, Any]:
    value = _small_yaml_any(text)
    return value if isinstance(value, dict) else {}


def _small_yaml_any(text: str) -> Any:
    try:
        documents = list(parse_documents(text[:100_000]))
    except YamlError:
        return None
    return documents[0].value if documents else None


class KustomizeSource:
    """Where a rendered object's nodes are written: its origin file, or the patches of the
    kustomizations that ran on it (see the module docstring)."""

    def __init__(
        self,
        rendered: Manifest,
        origin: Document | None,
        origin_text: bytes | None,
        patches: list[Patch],
        fallback: Location,
        unit: str,
        generated_files: dict[str, str] | None = None,
    ) -> None:
        self.rendered = rendered
        self.origin = origin
        self.origin_text = origin_text
        self.patches = patches
        self.fallback = fallback
        self.unit = unit
        # For a ConfigMap a generator made: data key -> the file its value was read from.
        self.generated_files = generated_files or {}

    def locate(self, document: Document, path: Path, key: bool | None) -> Location | None:
        if document.data is not self.rendered.data:
            return None
        full = len(path)
        origin_depth, origin_inner = (
            _depth_in(self.origin.data, self.rendered.data, path, 0) if self.origin else (-1, ())
        )
        node = (
            self.rendered.get(path) if _rendered_depth(self.rendered.data, path) == full else None
        )
        if origin_depth == full and isinstance(node, dict | list):
            # A mapping or list is where the object defines it, though patches add to it.
            return self.origin_location(origin_inner, key)
        best: tuple[int, Patch, Path] | None = None
        for patch in reversed(self.patches):  # the last patch that writes a node wins
            depth, inner = patch.depth(self.rendered.data, path)
            if depth == full and depth > 0:
                best = (depth, patch, inner)
                break
            if depth > 0 and (best is None or depth > best[0]):
                best = (depth, patch, inner)
        if best is not None and (best[0] == full or best[0] > max(origin_depth, 0)):
            depth, patch, inner = best
            found = patch.document.location(inner, key=key if depth == full else True)
            return found._replace(rendered_from=self.unit)
        if self.origin is not None:
            located = self.origin.location(origin_inner, key=key if origin_depth == full else True)
            if origin_depth == full or _rendered_depth(self.rendered.data, path) <= origin_depth:
                # Written there, or missing in the rendered object too (the origin's parent
                # is where to add it).
                return located._replace(rendered_from=self.unit)
            return self.origin.location(())._replace(
                rendered_from=self.unit,
                note=(
                    f"found after kustomize built {self.unit}: a transformer (namePrefix, "
                    "namespace, replacements, a generator ...) wrote the value, not this file"
                ),
            )
        return self.fallback._replace(
            rendered_from=self.unit,
            note=f"found after kustomize built {self.unit}; its origin is not in the input",
        )

    def origin_location(self, inner: Path, key: bool | None) -> Location:
        assert self.origin is not None
        return self.origin.location(inner, key=key)._replace(rendered_from=self.unit)

    def embedded(
        self, document: Document, path: Path, line: int, column: int
    ) -> EmbeddedSource | None:
        """YAML in a string of the object: mapped into the origin's copy of the same string,
        or into the file a configMapGenerator read it from."""
        if document.data is not self.rendered.data or len(path) != 2 or path[0] != "data":
            return None
        key = path[1]
        generated = self.generated_files.get(str(key))
        if generated is not None:
            return EmbeddedSource(line, column, generated, 0, 0, self.unit)
        if self.origin is None:
            return None
        value = self.rendered.get(path)
        if not isinstance(value, str) or self.origin.get(path) != value:
            return None
        origin_line, origin_column = embedded_origin(self.origin, path, self.origin_text)
        return EmbeddedSource(line, column, self.origin.file, origin_line, origin_column, self.unit)


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
    ) -> None:
        self.line, self.column = line, column
        self.file = file
        self.source_line, self.source_column = source_line, source_column
        self.unit = unit

    def locate(self, document: Document, path: Path, key: bool | None) -> Location | None:
        raw = document.location(path, key=key, raw=True)
        line = raw.line - self.line + self.source_line
        column = raw.column - self.column + self.source_column
        return Location(self.file, max(line, 1), max(column, 1), self.unit)

    def embedded(
        self, document: Document, path: Path, line: int, column: int
    ) -> EmbeddedSource | None:
        return None


def _rendered_depth(data: Any, path: Path) -> int:
    depth = 0
    for step in path:
        if not has_step(data, step):
            break
        data = data[step]
        depth += 1
    return depth


def find_origin_document(
    loaded: LoadedFile, rendered: Manifest, names: set[str], strict: bool = False
) -> Document | None:
    """The document of an origin file that became ``rendered``: same kind and name (the name
    before prefixes and suffixes), else (unless ``strict``) the only document of that kind."""
    same_kind = [
        doc
        for doc in loaded.documents
        if isinstance(doc.data, dict) and doc.data.get("kind") == rendered.kind
    ]
    for doc in same_kind:
        name = as_dict(doc.data.get("metadata")).get("name")
        if isinstance(name, str) and name in names:
            return doc
    for doc in same_kind:
        name = as_dict(doc.data.get("metadata")).get("name")
        if isinstance(name, str) and name and name in rendered.name:
            return doc
    if len(same_kind) == 1 and not strict:
        return same_kind[0]
    return None


__all__ = [
    "KUSTOMIZATION_NAMES",
    "Kustomization",
    "KustomizeSource",
    "Patch",
    "Reference",
    "YList",
    "build_annotations",
    "find_origin_document",
    "is_remote",
    "kustomization_file",
    "origin_path",
    "remove_wrapper",
    "strip_build_annotations",
    "wrapper_kustomization",
]
