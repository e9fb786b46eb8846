"""Kustomizations: what they reference (resources, bases, components, patches, generators and
the Helm charts they inflate), read without building them.

How they are built and where a rendered node is written:

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

``buildmetadata`` holds the wrapper and the annotations, ``patching`` how a patch matches and
how deep it writes, ``kustomize_origins`` the mapping back (``KustomizeSource``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from gpulint.core.model import Location
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list
from gpulint.input.loader import LoadedFile, load_file
from gpulint.input.units import KUSTOMIZATION_NAMES
from gpulint.input.units.boundary import boundaries_of, inside
from gpulint.input.units.gofields import (
    HELM_GENERATOR as HELM_GENERATOR_CONFIG,
)
from gpulint.input.units.gofields import (
    KUSTOMIZATION,
    Misspelled,
    misspelled,
    unknown,
)
from gpulint.input.units.patching import depth_in, json_pointer, selects
from gpulint.input.units.references import is_remote, remote_reason
from gpulint.input.yamlparse import YamlError, YList, parse_documents
from gpulint.kinds.classify import embedded_origin

if TYPE_CHECKING:
    from collections.abc import Iterator

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
        # Keys kustomize reads as a field gpulint would not see in that spelling, and keys
        # that are no field of a kustomization (``gpulint.input.units.gofields``).
        self.misspelled: list[Misspelled] = list(misspelled(self.data, KUSTOMIZATION))
        self.unknown_keys: list[tuple[Path, str]] = unknown(self.data, KUSTOMIZATION)
        self.directories: list[Reference] = []  # bases and components
        self.files: list[Reference] = []
        self.remote: list[Reference] = []
        self.helm_charts: Path | None = None
        for key in ("helmCharts", "helmChartInflationGenerator"):
            if self.helm_charts is None and self.data.get(key):
                self.helm_charts = (key,)
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
        generators = self._helm_generators()
        if not generators:
            return  # helmGlobals alone inflates nothing
        if self.helm_charts is None and generators:
            self.helm_charts = generators[0][1]
        globals_ = as_dict(self.data.get("helmGlobals"))
        self._read_chart_homes(globals_, generators)
        config_homes: list[tuple[Any, Path]] = [
            (globals_.get("configHome"), ("helmGlobals", "configHome"))
        ]
        config_homes += [
            (data.get("configHome"), _spot(data, field, "configHome")) for data, field in generators
        ]
        for config_home, field in config_homes:
            if config_home is not None:
                self._helm_path(config_home, field)
        for data, field in generators:
            self._read_chart(data, field)

    def _helm_generators(self) -> list[tuple[dict[str, Any], Path]]:
        """Each Helm chart the kustomization inflates (``helmCharts:``, the deprecated
        ``helmChartInflationGenerator:`` kustomize still converts to them, or a
        HelmChartInflationGenerator among its generators and transformers), with its field
        and its settings under helmCharts' names."""
        generators: list[tuple[dict[str, Any], Path]] = []
        for i, item in enumerate(as_list(self.data.get("helmCharts"))):
            generators.append((as_dict(item), ("helmCharts", i)))
        for i, item in enumerate(as_list(self.data.get("helmChartInflationGenerator"))):
            generators.append((_HelmChartArgs(as_dict(item)), ("helmChartInflationGenerator", i)))
        for key in ("generators", "transformers"):
            for i, item in enumerate(as_list(self.data.get(key))):
                for data in self._configurations(item):
                    if data.get("kind") != HELM_GENERATOR:
                        continue
                    generators.append((data, (key, i)))
                    for found in misspelled(data, HELM_GENERATOR_CONFIG):
                        # The plugin reads its configuration case-insensitively too.
                        self.helm_problems.append(
                            Reference(
                                found.key,
                                (key, i),
                                found.key,
                                f"a HelmChartInflationGenerator field {found.field} spelled "
                                f"{found.key!r}",
                            )
                        )
        return generators

    def _read_chart_homes(
        self, globals_: dict[str, Any], generators: list[tuple[dict[str, Any], Path]]
    ) -> None:
        homes: list[tuple[Any, Path]] = [(globals_.get("chartHome"), ("helmGlobals", "chartHome"))]
        homes += [
            (data.get("chartHome"), _spot(data, field, "chartHome")) for data, field in generators
        ]
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

    def _read_chart(self, data: dict[str, Any], field: Path) -> None:
        """One inflated chart: a repository to download, a name that is not local, and the
        values files it reads."""
        repo = data.get("repo")
        name = data.get("name")
        if repo not in (None, ""):
            self.helm_problems.append(
                Reference(
                    str(repo),
                    _spot(data, field, "repo"),
                    str(repo),
                    "a chart repository to download",
                )
            )
        if isinstance(name, str) and (remote_reason(name) or "/" in name or name in ".."):
            self.helm_problems.append(
                Reference(name, _spot(data, field, "name"), name, "a chart name that is not local")
            )
        for key in ("valuesFile", "additionalValuesFiles"):
            values = data.get(key)
            for j, item in enumerate(values if isinstance(values, list) else [values]):
                spot = (
                    (*_spot(data, field, key), j)
                    if isinstance(values, list)
                    else _spot(data, field, key)
                )
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


# helmChartInflationGenerator's fields under the helmCharts and helmGlobals names kustomize
# converts them to (api/types/helmchartargs.go ``SplitHelmParameters``, ``makeHelmChartFromHca``).
_INFLATION_FIELDS = {
    "chartName": "name",
    "chartVersion": "version",
    "chartRepoUrl": "repo",
    "values": "valuesFile",
    "valuesLocal": "valuesInline",
    "valuesMerge": "valuesMerge",
    "releaseName": "releaseName",
    "chartHome": "chartHome",
    "helmHome": "configHome",
}


def _spot(data: dict[str, Any], field: Path, name: str) -> Path:
    """Where the setting ``name`` (a helmCharts name) of a chart inflated at ``field`` is
    written: under its own key, or a helmChartInflationGenerator entry's."""
    written = data.written.get(name, name) if isinstance(data, _HelmChartArgs) else name
    return (*field, written)


class _HelmChartArgs(dict[str, Any]):
    """A helmChartInflationGenerator entry as the helmCharts entry (with its chart and
    configuration homes) kustomize makes of it; ``written`` gives the key as written for a
    helmCharts name, where a problem is placed."""

    def __init__(self, item: dict[str, Any]) -> None:
        super().__init__()
        self.written: dict[str, str] = {}
        for key, value in item.items():
            name = _INFLATION_FIELDS.get(key) if isinstance(key, str) else None
            if name is not None:
                self[name] = value
                self.written[name] = key


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
            return selects(self.target, rendered, names)
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
                op_path = json_pointer(as_dict(op).get("path"))
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
                depth, inner = depth_in(as_dict(op).get("value"), rendered, path, length)
                candidate = (length + depth, (i, "value", *inner) if depth else (i,))
                if candidate[0] >= best[0]:
                    best = candidate
            return best
        return depth_in(self.document.data, rendered, path, 0)


__all__ = [
    "KUSTOMIZATION_NAMES",
    "Kustomization",
    "Patch",
    "Reference",
    "YList",
    "is_remote",
    "kustomization_file",
]
