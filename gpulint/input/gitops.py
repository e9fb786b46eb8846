"""Chart values that GitOps wrappers carry for charts that live elsewhere.

A Flux ``HelmRelease`` (``spec.values``) or an Argo CD ``Application``
(``spec.source.helm.valuesObject``, or ``values`` as a YAML string; ``spec.sources[]`` alike)
installs a chart from a repository with values written in the wrapper. gpulint reads those
values as it reads a values file of the same chart (prometheus-adapter, dcgm-exporter,
gpu-operator), at their lines in the wrapper, with the release name and namespace the
wrapper gives the install.

A helmfile (``releases: [{name, namespace, chart, values: [...]}]``) installs charts the same
way: its inline values are read like a wrapper's, and the values files it lists get the
release's name and namespace (``ReleaseFile``; the inventory joins them with the files).

Facts: Flux helm-controller names the release ``spec.releaseName``, else
``[<spec.targetNamespace>-]<metadata.name>``, and installs into ``spec.targetNamespace``,
else the HelmRelease's namespace (fluxcd/helm-controller api/v2 ``GetReleaseName``,
``GetReleaseNamespace``). Argo CD names it ``spec.source.helm.releaseName``, else the
Application's name, in ``spec.destination.namespace``. helmfile names the release
``releases[].name`` in ``releases[].namespace``; relative values paths are relative to the
helmfile (helmfile docs, "The helmfile.yaml").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

from gpulint.core.model import Location, SourceFile
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list

FLUX_GROUP = "helm.toolkit.fluxcd.io"
ARGO_GROUP = "argoproj.io"


class WrappedValues(NamedTuple):
    """Values for one chart install, and what the wrapper says about the install."""

    document: Document  # the values, positioned in the wrapper's file
    chart: str | None  # the chart's name, when the wrapper names it
    release: str | None
    namespace: str | None
    wrapper: Manifest


# (text, the wrapper, the path of the string) -> the values a ``values: |`` string holds
ValuesParser = Callable[[str, Manifest, Path], Document | None]


def is_wrapper(manifest: Manifest) -> bool:
    return (manifest.kind == "HelmRelease" and manifest.group == FLUX_GROUP) or (
        manifest.kind == "Application" and manifest.group == ARGO_GROUP
    )


def wrapped_values(manifest: Manifest, parse_string: ValuesParser) -> list[WrappedValues]:
    """The values a HelmRelease or Application passes to its chart(s)."""
    spec = as_dict(manifest.data.get("spec"))
    if manifest.kind == "HelmRelease":
        return _helm_release_values(manifest, spec)
    found = []
    sources: list[tuple[Path, dict[str, Any]]] = []
    if isinstance(spec.get("source"), dict):
        sources.append((("spec", "source"), spec["source"]))
    for i, item in enumerate(as_list(spec.get("sources"))):
        if isinstance(item, dict):
            sources.append((("spec", "sources", i), item))
    destination = as_dict(spec.get("destination")).get("namespace")
    for path, source in sources:
        found.extend(_application_values(manifest, path, source, destination, parse_string))
    return found


def _helm_release_values(manifest: Manifest, spec: dict[str, Any]) -> list[WrappedValues]:
    """A Flux HelmRelease's ``spec.values``, for its release name and target namespace."""
    values = spec.get("values")
    if not isinstance(values, dict):
        return []
    chart = as_dict(as_dict(spec.get("chart")).get("spec")).get("chart")
    target = spec.get("targetNamespace")
    release = spec.get("releaseName")
    if not isinstance(release, str) or not release:
        release = (
            f"{target}-{manifest.name}" if isinstance(target, str) and target else manifest.name
        )
    namespace = target if isinstance(target, str) and target else manifest.namespace
    document = _values_document(manifest, values, ("spec", "values"))
    return [
        WrappedValues(
            document, chart if isinstance(chart, str) else None, release, namespace, manifest
        )
    ]


def _application_values(
    manifest: Manifest,
    path: Path,
    source: dict[str, Any],
    destination: Any,
    parse_string: ValuesParser,
) -> list[WrappedValues]:
    """One source of an Argo CD Application: its ``helm.valuesObject`` and ``helm.values``."""
    found = []
    helm = as_dict(source.get("helm"))
    chart = source.get("chart")
    if not isinstance(chart, str) or not chart:
        repo_path = source.get("path")
        chart = repo_path.rstrip("/").rsplit("/", 1)[-1] if isinstance(repo_path, str) else None
    release = helm.get("releaseName")
    release = release if isinstance(release, str) and release else manifest.name
    namespace = destination if isinstance(destination, str) and destination else None
    objects = helm.get("valuesObject")
    if isinstance(objects, dict):
        document = _values_document(manifest, objects, (*path, "helm", "valuesObject"))
        found.append(WrappedValues(document, chart, release, namespace, manifest))
    text = helm.get("values")
    if isinstance(text, str) and text.strip():
        parsed = parse_string(text, manifest, (*path, "helm", "values"))
        if parsed is not None:
            found.append(WrappedValues(parsed, chart, release, namespace, manifest))
    return found


class ReleaseFile(NamedTuple):
    """A values file a helmfile release lists, and the install it is for."""

    file: str  # normalized path of the values file
    chart: str | None
    release: str
    namespace: str | None
    installed_by: str  # "helmfile.yaml release kps"


class HelmfileValues(NamedTuple):
    """Inline values of a helmfile release."""

    document: Document
    chart: str | None
    release: str
    namespace: str | None
    installed_by: str


def is_helmfile(data: Any) -> bool:
    """A helmfile: ``releases`` with at least one entry naming its chart."""
    if not isinstance(data, dict) or "apiVersion" in data or "kind" in data:
        return False
    releases = data.get("releases")
    return isinstance(releases, list) and any(
        isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("chart"), str)
        for r in releases
    )


def helmfile_releases(document: Document) -> tuple[list[HelmfileValues], list[ReleaseFile]]:
    """What a helmfile's releases install: inline values, and the values files they list."""
    inline: list[HelmfileValues] = []
    files: list[ReleaseFile] = []
    base = os.path.dirname(document.file)
    shown = os.path.basename(document.file)
    for index, item in enumerate(as_list(as_dict(document.data).get("releases"))):
        release = as_dict(item)
        name, chart = release.get("name"), release.get("chart")
        if not isinstance(name, str) or not name or "{{" in name:
            continue
        chart_name = chart.rstrip("/").rsplit("/", 1)[-1] if isinstance(chart, str) else None
        namespace = release.get("namespace")
        namespace = namespace if isinstance(namespace, str) and "{{" not in namespace else None
        installed_by = f"{shown} release {name}"
        for v, entry in enumerate(as_list(release.get("values"))):
            if isinstance(entry, str) and entry and "{{" not in entry:
                path = os.path.normpath(os.path.join(base, entry))
                files.append(ReleaseFile(path, chart_name, name, namespace or None, installed_by))
            elif isinstance(entry, dict):
                values = _values_document(document, entry, ("releases", index, "values", v))
                inline.append(
                    HelmfileValues(values, chart_name, name, namespace or None, installed_by)
                )
    return inline, files


def _values_document(manifest: Document, values: dict[str, Any], prefix: Path) -> Document:
    """The values node as a document of its own: its keys keep their lines in the file."""
    document = Document(
        values, manifest.file, manifest.index, manifest.line, manifest.rendered_from
    )
    if manifest.source is not None:
        document.source = NestedSource(manifest, prefix)
    return document


class NestedSource:
    """A node of a rendered object read as a document of its own: placed through the
    object's own source map."""

    def __init__(self, parent: Document, prefix: Path) -> None:
        self.parent = parent
        self.prefix = prefix

    def locate(self, document: Document, path: Path, key: bool | None) -> Location | None:
        return self.parent.location((*self.prefix, *path), key=key)

    def embedded(self, document: Document, path: Path, line: int, column: int) -> None:
        return None

    def made_from(self, document: Document) -> tuple[SourceFile, ...]:
        source = self.parent.source
        return source.made_from(self.parent) if source is not None else ()
