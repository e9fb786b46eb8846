"""The objects kustomize built, each mapped back to the file, the patches and the generator
it came from (``config.kubernetes.io/origin`` and the transformer annotations of
``buildMetadata``, else a search of the kustomizations' resources)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from gpulint.input.document import Document, Manifest, as_dict, as_list
from gpulint.input.units.boundary import inside
from gpulint.input.units.kustomize import (
    Kustomization,
    KustomizeSource,
    Patch,
    build_annotations,
    find_origin_document,
    kustomization_file,
    origin_path,
    strip_build_annotations,
)
from gpulint.input.units.sources import (
    SourceFiles,
    kustomization_chain,
)

if TYPE_CHECKING:
    from gpulint.core.model import Location
    from gpulint.input.loader import (
        LoadedFile,
    )
    from gpulint.input.units import Unit


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
            manifest, origin, configured, base, root, unit, sources, fallback, comment_files, chain
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
    if generator is not None:
        fallback, generated = generator
    patches: list[Patch] = []
    for owner in kustomizations:
        for patch in owner.patches():
            if patch.applies_to(manifest, origin_name):
                patches.append(patch)
                comment_files[patch.document.file] = None
    return KustomizeSource(
        manifest, origin_doc, origin_text, patches, fallback, unit.name, generated
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
