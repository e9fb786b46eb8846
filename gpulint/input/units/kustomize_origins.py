"""The objects kustomize built, each mapped back to the file, the patches and the generator
it came from (``config.kubernetes.io/origin`` and the transformer annotations of
``buildMetadata``, else a search of the kustomizations' resources)."""

from __future__ import annotations

import os
import weakref
from typing import Any

from gpulint.core.model import Location, SourceFile
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list, has_step
from gpulint.input.loader import (
    LoadedFile,
)
from gpulint.input.units import Unit
from gpulint.input.units.boundary import inside
from gpulint.input.units.buildmetadata import (
    build_annotations,
    origin_path,
    strip_build_annotations,
)
from gpulint.input.units.embedded import EmbeddedSource
from gpulint.input.units.kustomize import (
    Kustomization,
    Patch,
    kustomization_file,
)
from gpulint.input.units.patching import depth_in
from gpulint.input.units.sources import (
    SourceFiles,
    kustomization_chain,
)
from gpulint.kinds.classify import embedded_origin


def map_kustomize_output(
    unit: Unit,
    rendered: LoadedFile,
    base: str,
    kustomization: Kustomization,
    sources: SourceFiles,
    chain: list[Kustomization] | None = None,
) -> None:
    """Give every rendered object a source map, and the unit the comments of the files the
    objects come from."""
    root = kustomization.directory
    if chain is None:
        chain = kustomization_chain(kustomization, sources)
    comment_files: dict[str, None] = {}
    fallback = kustomization.location()
    lineage = Lineage(chain)
    for document in rendered.documents:
        data = document.data
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
            continue
        if not isinstance(data.get("apiVersion"), str):
            continue
        manifest = Manifest(data, document.file, document.index, document.line)
        origin, configured = build_annotations(data)
        strip_build_annotations(manifest)
        document.source = _kustomize_source(
            manifest,
            origin,
            configured,
            base,
            root,
            unit,
            sources,
            fallback,
            comment_files,
            chain,
            lineage,
        )
    for file in comment_files:
        loaded = sources.load(file)
        if loaded is None and not sources.readable(file):
            continue  # an annotation naming a file outside the repository
        unit.files.add(file)
        if loaded is not None:
            unit.ignore_comments.extend(loaded.ignore_comments)


def _kustomize_source(
    manifest: Manifest,
    origin: dict[str, Any],
    configured: list[str],
    base: str,
    root: str,
    unit: Unit,
    sources: SourceFiles,
    fallback: Location,
    comment_files: dict[str, None],
    chain: list[Kustomization],
    lineage: Lineage,
) -> KustomizeSource:
    generated: dict[str, str] = {}
    candidates = _origin_candidates(origin, base, root, chain)
    origin_doc, origin_text, origin_name = _origin_document(
        manifest, candidates, sources, comment_files
    )
    kustomizations = []
    for item in configured:
        file = origin_path(base, item, root)
        directory = os.path.dirname(file) or "."
        if kustomization_file(directory):
            kustomizations.append(sources.kustomization(directory))
            comment_files[kustomization_file(directory) or file] = None
    if not kustomizations:
        # No record of the transformers (a patch replaced the annotations): every
        # kustomization of the unit, bases first; the patches' targets pick the object.
        kustomizations = list(reversed(chain))
    generator = _generator_origin(manifest, origin, base, root, sources, comment_files)
    # The file the kustomizations that built the object read it from (a generator's: its
    # kustomization), when known.
    read_from = origin_doc.file if origin_doc is not None else None
    if read_from is None and candidates and isinstance(origin.get("path"), str):
        read_from = candidates[0]
    if generator is not None:
        fallback, generated = generator
        read_from = fallback.file
    patches: list[Patch] = []
    for owner in kustomizations:
        for patch in owner.patches():
            if patch.applies_to(manifest, origin_name):
                patches.append(patch)
                comment_files[patch.document.file] = None
    return KustomizeSource(
        manifest,
        origin_doc,
        origin_text,
        patches,
        fallback,
        unit.name,
        generated,
        lineage,
        read_from,
    )


def _origin_candidates(
    origin: dict[str, Any], base: str, root: str, chain: list[Kustomization]
) -> list[str]:
    """The files an object may come from: its recorded origin, else every resource file."""
    candidates: list[str] = []
    path = origin.get("path")
    if isinstance(path, str) and not origin.get("repo"):
        candidates.append(origin_path(base, path, root))
    elif not origin or as_dict(origin.get("configuredBy")).get("kind") in (
        "PatchTransformer",
        "PatchStrategicMergeTransformer",
        "PatchJson6902Transformer",
    ):
        # No record of the origin (piped output built without buildMetadata, or a patch
        # that replaced the whole annotations map took the record with it): look for the
        # object in the resources of the kustomizations.
        candidates.extend(
            ref.resolved for k in chain for ref in k.files if ref.field[0] == "resources"
        )
    return candidates


def _origin_document(
    manifest: Manifest,
    candidates: list[str],
    sources: SourceFiles,
    comment_files: dict[str, None],
) -> tuple[Document | None, bytes | None, str | None]:
    """The source document of ``manifest`` among ``candidates``, its file's text and the name
    it has there (before a prefix or suffix); Nones when none holds it."""
    for file in candidates:
        loaded = sources.load(file)
        if loaded is None:
            continue
        found = find_origin_document(loaded, manifest, {manifest.name}, strict=len(candidates) > 1)
        if found is None:
            continue
        comment_files[file] = None
        name = as_dict(as_dict(found.data).get("metadata")).get("name")
        return found, loaded.text, name if isinstance(name, str) else None
    return None, None, None


def _generator_origin(
    manifest: Manifest,
    origin: dict[str, Any],
    base: str,
    root: str,
    sources: SourceFiles,
    comment_files: dict[str, None],
) -> tuple[Location, dict[str, str]] | None:
    """For a generated object (a ConfigMap or Secret generator): the generator's entry and the
    files it reads; None for an object that was not generated."""
    configured_in = origin.get("configuredIn")
    by = as_dict(origin.get("configuredBy")).get("kind")
    if not isinstance(configured_in, str) or not isinstance(by, str):
        return None
    file = origin_path(base, configured_in, root)
    directory = os.path.dirname(file) or "."
    if not kustomization_file(directory):
        return None
    generator = sources.kustomization(directory)
    field = generator.generator_entry(by, manifest.name)
    if field is None:
        return None
    generated = _generated_files(generator, field)
    comment_files[generator.file] = None
    comment_files.update(dict.fromkeys(generated.values()))
    return generator.location(field), generated


def _generated_files(kustomization: Kustomization, field: tuple[Any, ...]) -> dict[str, str]:
    """data key -> file for a generator entry's ``files:`` (``key=path`` or ``path``)."""
    items = as_list(kustomization.data.get(field[0]))
    entry = as_dict(items[field[1]]) if isinstance(field[1], int) and field[1] < len(items) else {}
    found = {}
    for item in as_list(entry.get("files")):
        if not isinstance(item, str):
            continue
        key, _, path = item.rpartition("=")
        path = path.strip()
        key = key.strip() or os.path.basename(path)
        file = os.path.normpath(os.path.join(kustomization.directory, path))
        if not os.path.isabs(path) and inside(file, kustomization.boundaries):
            found[key] = file
    return found


def _text(file: str) -> bytes | None:
    try:
        with open(file, "rb") as handle:
            return handle.read(_PATCH_TEXT_LIMIT)
    except OSError:
        return None


_PATCH_TEXT_LIMIT = 1 << 20  # a patch larger than this is placed at its value's first line


class KustomizeSource:
    """Where a rendered object's nodes are written: its origin file, or the patches of the
    kustomizations that ran on it (see the module docstring)."""

    # One per rendered object, alive for the whole run: no per-instance dictionary.
    __slots__ = (
        "_made_from",
        "fallback",
        "generated_files",
        "lineage",
        "origin",
        "origin_text",
        "patches",
        "read_from",
        "rendered",
        "unit",
    )

    def __init__(
        self,
        rendered: Manifest,
        origin: Document | None,
        origin_text: bytes | None,
        patches: list[Patch],
        fallback: Location,
        unit: str,
        generated_files: dict[str, str] | None = None,
        lineage: Lineage | None = None,
        read_from: str | None = None,
    ) -> None:
        self.rendered = rendered
        self.origin = origin
        self.origin_text = origin_text
        self.patches = patches
        self.fallback = fallback
        self.unit = unit
        # For a ConfigMap a generator made: data key -> the file its value was read from.
        self.generated_files = generated_files or {}
        # The unit's kustomizations, and the file they read the object from (None: not
        # known), for made_from.
        self.lineage = lineage
        self.read_from = read_from
        self._made_from: tuple[SourceFile, ...] | None = None

    def made_from(self, document: Document) -> tuple[SourceFile, ...]:
        """The object's document in its origin file, the patches that apply to it, a
        generator's inputs, and the kustomizations that built it (``Lineage``)."""
        if document.data is not self.rendered.data:
            return ()
        if self._made_from is None:
            found: dict[SourceFile, None] = {}
            if self.origin is not None:
                found[SourceFile(self.origin.file, self.origin.line)] = None
            for patch in self.patches:
                found[SourceFile(patch.document.file, patch.document.line)] = None
            for file in self.generated_files.values():
                found[SourceFile(file)] = None
            if self.lineage is not None:
                found.update(dict.fromkeys(self.lineage.building(self.read_from)))
            self._made_from = tuple(found)
        return self._made_from

    def locate(self, document: Document, path: Path, key: bool | None) -> Location | None:
        if document.data is not self.rendered.data:
            return None
        full = len(path)
        origin_depth, origin_inner = (
            depth_in(self.origin.data, self.rendered.data, path, 0) if self.origin else (-1, ())
        )
        node = (
            self.rendered.get(path) if _rendered_depth(self.rendered.data, path) == full else None
        )
        best = self._deepest_patch(path)
        if origin_depth == full and isinstance(node, dict | list):
            # A mapping or list is where the object defines it, though patches add to it;
            # unless a patch replaced it whole (a list without a merge key, such as an
            # HPA's metrics): then the patch wrote what was rendered, and the origin did not.
            assert self.origin is not None
            replaced = (
                best is not None
                and best[0] == full
                and best[1].document.get(best[2]) == node
                and self.origin.get(origin_inner) != node
            )
            if not replaced:
                return self.origin_location(origin_inner, key)
        if best is not None and (best[0] == full or best[0] > max(origin_depth, 0)):
            depth, patch, inner = best
            if depth == full and key is False and isinstance(patch.document.get(inner), str):
                # A string's own text (a block scalar's first line, not its ``|``), read from
                # the patch file gpulint already loaded (bounded as the loader reads it).
                line, column = embedded_origin(patch.document, inner, _text(patch.document.file))
                return Location(patch.document.file, line + 1, column + 1, self.unit)
            found = patch.document.location(inner, key=key if depth == full else True)
            return found._replace(rendered_from=self.unit)
        if self.origin is not None:
            value = self.origin.get(origin_inner)
            if origin_depth == full and key is False and isinstance(value, str):
                # A string's own text (a block scalar's first line, not its ``|``).
                line, column = embedded_origin(self.origin, origin_inner, self.origin_text)
                return Location(self.origin.file, line + 1, column + 1, self.unit)
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

    def _deepest_patch(self, path: Path) -> tuple[int, Patch, Path] | None:
        """The patch that writes ``path`` (the last one that writes all of it), else the one
        that writes the most of it; with how much, and its own path there."""
        full = len(path)
        best: tuple[int, Patch, Path] | None = None
        for patch in reversed(self.patches):  # the last patch that writes a node wins
            depth, inner = patch.depth(self.rendered.data, path)
            if depth == full and depth > 0:
                return (depth, patch, inner)
            if depth > 0 and (best is None or depth > best[0]):
                best = (depth, patch, inner)
        return best

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
        made_from = self.made_from(document)
        generated = self.generated_files.get(str(key))
        if generated is not None:
            return EmbeddedSource(line, column, generated, 0, 0, self.unit, made_from)
        if self.origin is None:
            return None
        value = self.rendered.get(path)
        if not isinstance(value, str) or self.origin.get(path) != value:
            return None
        origin_line, origin_column = embedded_origin(self.origin, path, self.origin_text)
        return EmbeddedSource(
            line, column, self.origin.file, origin_line, origin_column, self.unit, made_from
        )


class Lineage:
    """The kustomizations of one unit's chain, and for a file they read, the ones whose
    change changes what it renders to: those that read it, every kustomization above them
    (an overlay's namespace, name prefix or suffix, labels, replacements and patches apply to
    everything below it) and the components any of those include. A file none of them reads
    (an object whose origin is not known) is built by any of them.

    It keeps what it needs of the chain, not the kustomizations themselves: the rendered
    objects' source maps hold it for the rest of the run."""

    def __init__(self, chain: list[Kustomization]) -> None:
        self._files: dict[str, str] = {}  # directory -> its kustomization file
        self._reads: list[tuple[str, frozenset[str]]] = []  # directory -> what it reads
        self._parents: dict[str, list[str]] = {}
        self._components: dict[str, list[str]] = {}
        self._building: dict[str | None, tuple[SourceFile, ...]] = {}
        self._interned: dict[tuple[SourceFile, ...], tuple[SourceFile, ...]] = {}
        for kustomization in chain:
            directory = _key(kustomization.directory)
            self._files[directory] = kustomization.file
            self._reads.append((directory, _owned(kustomization)))
        for kustomization in chain:
            directory = _key(kustomization.directory)
            for reference in kustomization.directories:
                child = _key(reference.resolved)
                if child not in self._files:
                    continue
                self._parents.setdefault(child, []).append(directory)
                if reference.field[0] == "components":
                    self._components.setdefault(directory, []).append(child)

    def building(self, file: str | None) -> tuple[SourceFile, ...]:
        """The kustomization files that build what ``file`` holds, each as a whole; one
        tuple for every file built by the same kustomizations."""
        found = self._building.get(file)
        if found is None:
            key = _key(file) if file is not None else None
            kustomizations = self._kustomizations(key)
            # Kept under the name as given (the origin document's own string), and the same
            # tuple for every file the same kustomizations build.
            found = self._interned.setdefault(kustomizations, kustomizations)
            self._building[file] = found
        return found

    def _kustomizations(self, key: str | None) -> tuple[SourceFile, ...]:
        readers = [directory for directory, reads in self._reads if key in reads] if key else []
        if not readers:
            return tuple(SourceFile(file) for file in self._files.values())
        seen = self._closure(readers, self._parents)
        seen |= self._closure(list(seen), self._components)
        return tuple(SourceFile(self._files[d]) for d in self._files if d in seen)

    @staticmethod
    def _closure(start: list[str], edges: dict[str, list[str]]) -> set[str]:
        seen: set[str] = set()
        stack = list(start)
        while stack:
            directory = stack.pop()
            if directory not in seen:
                seen.add(directory)
                stack.extend(edges.get(directory, ()))
        return seen


# The files each kustomization reads, as keys: a base under a hundred overlays is one
# Kustomization object (SourceFiles reads each once), indexed once, not once per overlay.
_owned_keys: weakref.WeakKeyDictionary[Kustomization, frozenset[str]] = weakref.WeakKeyDictionary()


def _owned(kustomization: Kustomization) -> frozenset[str]:
    found = _owned_keys.get(kustomization)
    if found is None:
        found = _owned_keys[kustomization] = frozenset(
            _key(file) for file in kustomization.owned_files()
        )
    return found


def _key(path: str) -> str:
    return os.path.abspath(path)


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
