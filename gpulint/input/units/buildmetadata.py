"""The temporary wrapper kustomization gpulint builds a directory through (outside the
user's tree, asking for ``buildMetadata``), and the origin and transformer annotations it
makes kustomize write on every object, read and then stripped before the rules see them."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from gpulint.input.document import Manifest, as_dict, as_list
from gpulint.input.yamlparse import YamlError, YMap, parse_documents, rebuilt_map

ORIGIN = "config.kubernetes.io/origin"


TRANSFORMATIONS = "alpha.config.kubernetes.io/transformations"


BUILD_ANNOTATIONS = (ORIGIN, TRANSFORMATIONS)


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
    kept = rebuilt_map(
        annotations,
        (
            (key, value, index)
            for index, (key, value) in enumerate(annotations.items())
            if key not in BUILD_ANNOTATIONS
        ),
    )
    if kept:
        metadata["annotations"] = kept
    elif isinstance(metadata, YMap):
        metadata.discard("annotations")
    else:
        metadata.pop("annotations", None)


def _small_yaml(text: str) -> dict[str, Any]:
    value = _small_yaml_any(text)
    return value if isinstance(value, dict) else {}


def _small_yaml_any(text: str) -> Any:
    try:
        documents = list(parse_documents(text[:100_000]))
    except YamlError:
        return None
    return documents[0].value if documents else None
