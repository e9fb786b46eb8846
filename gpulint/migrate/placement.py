"""Where a migration is written: where the HPA came from.

* A plain file: the ScaledObject in a new file beside it, and the HPA's document deleted
  from its file (the file goes when nothing is left in it, as ``gpulint lint --fix`` removes
  an emptied file).
* A kustomization: the ScaledObject in a new file of the kustomization that built the unit
  (the overlay), listed in its ``resources``, and a patch of that overlay that deletes the
  HPA (``$patch: delete``, targeted by kind and the name the HPA has when it reaches the
  overlay). The base is left alone: other overlays that use it keep their HPA until they are
  migrated themselves. kustomize's name references do not know KEDA's ``scaleTargetRef``
  (kubernetes-sigs/kustomize api/konfig/builtinpluginconsts/namereference.go lists the HPA's),
  so the ScaledObject names its target as built; its own name is written without the
  overlay's ``namePrefix`` and ``nameSuffix``, which kustomize adds back.
* A Helm chart: refused. Its templates make the HPA for every release with the values each
  gives; a ScaledObject template written from one rendering would fix the names, namespace
  and thresholds of that one release into the chart.

Edits go through ``gpulint.adoption.edits`` as ``--fix`` makes them: placed at source
positions, checked against the text they replace.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpulint.adoption.edits import DeleteDocument, Extend, Insert, Op, Set
from gpulint.input.document import Document, as_dict, as_list
from gpulint.input.units.helm import HelmSource
from gpulint.input.units.kustomize import Kustomization, kustomization_file
from gpulint.input.units.kustomize_origins import KustomizeSource
from gpulint.migrate.lowering import Lowered
from gpulint.report.escape import escape_controls

__all__ = ["NewFile", "Placed", "Placement", "listed_ops", "place", "scaled_object_text"]


@dataclass(frozen=True)
class NewFile:
    path: str
    text: str


@dataclass
class Placed:
    """What one migration writes: operations on files that exist, and new files."""

    lowered: Lowered
    where: str  # "file", "overlay"
    ops: list[Op] = field(default_factory=list)
    new_files: list[NewFile] = field(default_factory=list)
    # Items added to a list of a kustomization: (its document, the list's key, the item).
    listed: list[tuple[Document, str, Any]] = field(default_factory=list)


@dataclass
class Placement:
    """A refused placement, or the one made."""

    placed: Placed | None
    refusal: str | None = None


# The characters a file name made from an object name keeps; the rest become "-".
_FILE_NAME = re.compile(r"[^a-z0-9.-]+")


def file_stem(name: str) -> str:
    stem = _FILE_NAME.sub("-", name.lower()).strip(".-")[:100]
    return stem or "hpa"


def free_name(directory: str, base: str, taken: set[str]) -> str:
    """``base``.yaml in ``directory``, or ``base-2``.yaml ... when that is there already."""
    candidate, number = f"{base}.yaml", 1
    while (
        os.path.lexists(os.path.join(directory, candidate))
        or os.path.join(directory, candidate) in taken
    ):
        number += 1
        candidate = f"{base}-{number}.yaml"
    taken.add(os.path.join(directory, candidate))
    return candidate


def scaled_object_text(lowered: Lowered, data: dict[str, Any] | None = None) -> str:
    """The new file: a comment saying what it replaces, then the ScaledObject."""
    lines = [
        f"# Migrated by `gpulint migrate keda` from HorizontalPodAutoscaler {lowered.key}.",
    ]
    for trigger in lowered.triggers:
        if trigger.rule is not None:
            lines.append(
                f"# {trigger.metric_type} metric {trigger.metric}: the query of "
                f"{trigger.rule.describe()}, as prometheus-adapter renders it for this HPA."
            )
    header = "".join(f"{escape_controls(line)}\n" for line in lines)
    body = yaml.safe_dump(
        data if data is not None else lowered.scaled_object,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=False,
        width=10_000,
    )
    return header + body


def place(lowered: Lowered, unit_root: str, taken: set[str]) -> Placement:
    document = lowered.hpa.manifest
    source = document.source
    if isinstance(source, HelmSource):
        return Placement(
            None,
            "it is made by a Helm chart's template (" + str(source.rendered_from) + "): "
            "gpulint writes no chart template, since one written from this rendering would fix "
            "this release's names, namespace and thresholds into every release of the chart; "
            "the ScaledObject this release needs is in --format json (refused[].scaled_object)",
        )
    if isinstance(source, KustomizeSource):
        return _in_overlay(lowered, unit_root, taken)
    if source is not None or document.rendered_from is not None or document.file == "-":
        return Placement(None, "it was read from rendered output or stdin, not from its source")
    directory = os.path.dirname(document.file) or "."
    name = free_name(directory, f"scaledobject-{file_stem(lowered.hpa.name)}", taken)
    placed = Placed(lowered, "file")
    placed.ops.append(DeleteDocument(document))
    placed.new_files.append(NewFile(os.path.join(directory, name), scaled_object_text(lowered)))
    return Placement(placed)


def _in_overlay(lowered: Lowered, unit_root: str, taken: set[str]) -> Placement:
    file = kustomization_file(unit_root)
    if file is None:
        return Placement(None, f"no kustomization in {unit_root} to write the change in")
    kustomization = Kustomization(unit_root)
    doc = kustomization.document
    if doc is None or not isinstance(doc.data, dict):
        return Placement(None, f"{file} could not be read")
    data = kustomization.data
    prefix = data.get("namePrefix") if isinstance(data.get("namePrefix"), str) else ""
    suffix = data.get("nameSuffix") if isinstance(data.get("nameSuffix"), str) else ""
    built = lowered.hpa.name
    if not built.startswith(prefix or "") or not built.endswith(suffix or ""):
        return Placement(None, f"its name {built!r} does not carry the overlay's prefix/suffix")
    name = built[len(prefix or "") : len(built) - len(suffix or "")]
    scaled = _with_name(lowered.scaled_object, name)
    stem = file_stem(lowered.hpa.name)
    object_file = free_name(unit_root, f"scaledobject-{stem}", taken)
    patch_file = free_name(unit_root, f"delete-hpa-{stem}", taken)
    placed = Placed(lowered, "overlay")
    placed.new_files.append(
        NewFile(os.path.join(unit_root, object_file), scaled_object_text(lowered, scaled))
    )
    placed.new_files.append(
        NewFile(os.path.join(unit_root, patch_file), _delete_patch(lowered, name))
    )
    placed.listed.append((doc, "resources", object_file))
    target = {"kind": "HorizontalPodAutoscaler", "name": name}
    placed.listed.append((doc, "patches", {"path": patch_file, "target": target}))
    return Placement(placed)


def _with_name(scaled: dict[str, Any], name: str) -> dict[str, Any]:
    metadata = dict(as_dict(scaled.get("metadata")))
    metadata["name"] = name
    return {**scaled, "metadata": metadata}


def _delete_patch(lowered: Lowered, name: str) -> str:
    header = (
        f"# Deletes HorizontalPodAutoscaler {lowered.key}: "
        "the ScaledObject beside this file replaces it (`gpulint migrate keda`)."
    )
    patch = {
        "$patch": "delete",
        "apiVersion": lowered.hpa.manifest.api_version,
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
    }
    body = yaml.safe_dump(patch, sort_keys=False, allow_unicode=False, width=10_000)
    return escape_controls(header) + "\n" + body


def listed_ops(listed: list[tuple[Document, str, Any]]) -> list[Op]:
    """Items added to kustomizations' lists, one operation per list (made when absent), so
    that several migrations of one overlay add to its ``resources`` in one edit."""
    grouped: dict[tuple[int, str], tuple[Document, list[Any]]] = {}
    for doc, key, item in listed:
        grouped.setdefault((id(doc), key), (doc, []))[1].append(item)
    ops: list[Op] = []
    inserted: dict[int, tuple[Document, list[tuple[str, Any]]]] = {}
    for (_, key), (doc, items) in grouped.items():
        data = as_dict(doc.data)
        if as_list(data.get(key)):
            ops.append(Extend(doc, (key,), tuple(items)))
        elif key in data:
            # ``resources: []`` or an empty key: written anew.
            ops.append(Set(doc, (key,), items))
        else:
            inserted.setdefault(id(doc), (doc, []))[1].append((key, items))
    for doc, entries in inserted.values():
        ops.append(Insert(doc, (), tuple(entries)))
    return ops
