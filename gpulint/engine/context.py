"""Which cluster each unit of a run belongs to, and what of its cluster it is judged with.

A unit's rules see its own objects. Platform components are installed once per cluster and
serve every application in it, and repositories keep them apart from the applications
(``charts/`` beside ``monitoring/``, ``apps/`` beside ``infrastructure/``). So a unit that
autoscales is also given the platform components it lacks, from the one unit of its cluster
that provides them:

* a provider is a unit with platform components (a prometheus-adapter config, dcgm-exporter,
  ServiceMonitors, PodMonitors, Prometheus, PrometheusRules, kube-prometheus-stack or
  gpu-operator values, KServe's inferenceservice-config) and no autoscaler or serving
  object of its own;
* clusters are read from how the repository declares them: a Flux ``Kustomization``
  (``spec.path``) or ``HelmRelease`` (a chart from a ``GitRepository``), an Argo CD
  ``Application`` (``spec.source.path``, ``spec.sources[].path``) or ``ApplicationSet``
  (``git.directories[].path`` of its generators). A unit under a declared path belongs to
  that cluster; a Flux declaration under ``clusters/<name>/`` names cluster ``<name>``, the
  layout Flux documents ("Ways of structuring your repositories"); Argo CD's is the
  destination (``spec.destination.name`` or ``server``), else the Application's name;
* where the repository declares none, proximity is the last resort, and only as the command
  line states it: ``gpulint lint charts/ monitoring/`` names the two directories as one
  cluster, so a unit under one path takes what a provider under another path has. Within one
  path nothing is taken by proximity (a directory of examples or of unrelated repositories
  is no cluster).

A category is taken only when exactly one provider has it, never one of several (the context
says which were left). A provider holds no workload that asks for GPUs, so one application
never lends its Prometheus to another.

The context a unit was judged with is in the report (``UnitSummary.context``). A finding
that uses a borrowed object says where the object came from. Units declared in
``.gpulint.yaml`` (``units:``) are judged as declared, with nothing borrowed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, NamedTuple

from gpulint.core.model import Finding
from gpulint.engine.result import OWN_OBJECTS
from gpulint.input.document import Document
from gpulint.input.units import STDIN, Unit
from gpulint.input.units.clusters import Declared, PathScan, declaration
from gpulint.kinds.classify import Classified, classify_document
from gpulint.kinds.registry import AUTOSCALER, MONITORING, group_of, spec_for, spec_of

ADAPTER = "prometheus-adapter config"
EXPORTER = "dcgm-exporter"
MONITORS = "Prometheus monitoring objects"
CHART_VALUES = "platform chart values"
KSERVE_CONFIG = "KServe inferenceservice-config"
CATEGORIES = (ADAPTER, EXPORTER, MONITORS, CHART_VALUES, KSERVE_CONFIG)

_SERVING = {("serving.kserve.io", "InferenceService"), ("serving.knative.dev", "Service")}


class Borrowed(NamedTuple):
    """Documents of another unit a unit is judged with."""

    category: str
    provider: str  # the providing unit's name
    why: str  # "cluster prod (Flux Kustomization clusters/prod/apps.yaml)", "proximity ..."
    documents: tuple[tuple[Document, bytes | None], ...]
    files: frozenset[str]


class Context(NamedTuple):
    """What a unit is judged with besides its own objects, and how that was decided."""

    borrowed: tuple[Borrowed, ...] = ()
    clusters: tuple[str, ...] = ()
    ambiguous: tuple[tuple[str, tuple[str, ...]], ...] = ()  # category, providers

    @property
    def borrowed_objects(self) -> int:
        """How many objects (not values documents) the unit takes from its cluster."""
        return sum(
            1
            for document, text in borrowed_documents(self)
            for classified in classify_document(document, text)
            if classified.manifest is not None
        )

    def describe(self) -> str:
        """One sentence for the report."""
        parts = []
        if self.clusters:
            parts.append(f"cluster {', '.join(self.clusters)}")
        if self.borrowed:
            taken = "; ".join(f"{b.category} from {b.provider} ({b.why})" for b in self.borrowed)
            parts.append(f"its own objects and {taken}")
        else:
            parts.append(OWN_OBJECTS)
        for category, providers in self.ambiguous:
            parts.append(
                f"{category} not taken: {len(providers)} directories provide it "
                f"({', '.join(providers)})"
            )
        return "; ".join(parts)


class _Role:
    """What a unit holds, as the context asks: whether it autoscales, serves or runs GPU
    workloads and what it declares (read from the objects' data), and its platform documents
    by category (classified only when asked: most units are never asked)."""

    def __init__(self, unit: Unit, scan: PathScan) -> None:
        self.unit = unit
        self.consumer = False
        self.applications = False  # workloads that ask for GPUs
        self.declarations: list[Declared] = []
        self._documents: dict[str, list[tuple[Document, bytes | None]]] | None = None
        for loaded in unit.loaded:
            for document in loaded.documents:
                for data in _objects(document.data):
                    api_version, kind = data["apiVersion"], data["kind"]
                    spec = spec_of(api_version, kind)
                    if (spec is not None and spec.role == AUTOSCALER) or (
                        group_of(api_version),
                        kind,
                    ) in _SERVING:
                        self.consumer = True
                    if _asks_for_gpus(data.get("spec")):
                        self.applications = True
                    self.declarations.extend(declaration(data, document.file, unit.root, scan))

    @property
    def documents(self) -> dict[str, list[tuple[Document, bytes | None]]]:
        if self._documents is None:
            self._documents = {}
            for loaded in self.unit.loaded:
                for document in loaded.documents:
                    for classified in classify_document(document, loaded.text):
                        for category in _categories(classified):
                            self._documents.setdefault(category, []).append(
                                (classified.document, loaded.text)
                            )
        return self._documents


def _objects(data: Any) -> list[dict[str, Any]]:
    """The objects a document holds (a ``List``'s items one by one)."""
    if not isinstance(data, dict):
        return []
    if not isinstance(data.get("apiVersion"), str) or not isinstance(data.get("kind"), str):
        return []
    items = data.get("items")
    if data["kind"].endswith("List") and isinstance(items, list):
        return [
            item
            for item in items
            if isinstance(item, dict)
            and isinstance(item.get("apiVersion"), str)
            and isinstance(item.get("kind"), str)
        ]
    return [data]


def _categories(classified: Classified) -> list[str]:
    """The platform components a classified document is."""
    categories = []
    if classified.adapter_configs:
        categories.append(ADAPTER)
    if classified.scrapes:
        categories.append(EXPORTER)
    if classified.charts:
        categories.append(CHART_VALUES)
    if classified.kserve_mode is not None:
        categories.append(KSERVE_CONFIG)  # the cluster's default deployment mode
    manifest = classified.manifest
    if manifest is not None and manifest.group == "monitoring.coreos.com":
        spec = spec_for(manifest)
        if (spec is not None and spec.role == MONITORING) or manifest.kind == "PrometheusRule":
            categories.append(MONITORS)
    return categories


def infer(units: list[Unit]) -> list[Context]:
    """Each unit's context, in the order of ``units``."""
    if len([u for u in units if u.kind != STDIN]) < 2:
        return [Context() for _ in units]
    scan = PathScan()  # the GitOps paths of every unit, resolved within one bound
    roles = [_Role(unit, scan) for unit in units]
    if scan.spent is not None:
        units[0].notes.append(scan.spent)
    clusters = _clusters(units, roles)
    providers = [
        i
        for i, role in enumerate(roles)
        if not role.consumer
        and not role.applications
        and not units[i].declared
        and units[i].kind != STDIN
        and role.documents
    ]
    contexts = []
    for i, (unit, role) in enumerate(zip(units, roles, strict=True)):
        member = tuple(sorted(clusters[i]))
        if not role.consumer or unit.declared or unit.kind == STDIN:
            contexts.append(Context(clusters=member))
            continue
        serving = [p for p in providers if p != i and _together(units, clusters, i, p)]
        borrowed, ambiguous = [], []
        for category in CATEGORIES if serving else ():
            if category in role.documents:
                continue
            candidates = [p for p in serving if category in roles[p].documents]
            if len(candidates) > 1:
                ambiguous.append((category, tuple(units[p].name for p in candidates)))
                continue
            if not candidates:
                continue
            p = candidates[0]
            shared = sorted(clusters[i] & clusters[p])
            why = (
                f"cluster {', '.join(shared)}"
                if shared
                else f"named beside {units[i].origin} on the command line"
            )
            documents = tuple(roles[p].documents[category])
            borrowed.append(
                Borrowed(
                    category,
                    units[p].name,
                    why,
                    documents,
                    frozenset(d.file for d, _ in documents),
                )
            )
        contexts.append(Context(tuple(borrowed), member, tuple(ambiguous)))
    return contexts


def _together(units: list[Unit], clusters: list[set[str]], a: int, b: int) -> bool:
    """Units in one cluster: both declared into a shared one, or neither declared and found
    under different paths of the command line."""
    if clusters[a] or clusters[b]:
        return bool(clusters[a] & clusters[b])
    first, second = units[a].origin, units[b].origin
    return bool(first and second and first != second)


def _asks_for_gpus(node: Any, depth: int = 0) -> bool:
    """Any ``limits`` or ``requests`` under the spec naming a GPU resource
    (``nvidia.com/gpu``, ``amd.com/gpu``, MIG profiles ``nvidia.com/mig-1g.5gb``)."""
    if depth > 12:
        return False
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("limits", "requests") and isinstance(value, dict):
                if any(isinstance(k, str) and ("gpu" in k or "/mig-" in k) for k in value):
                    return True
            elif _asks_for_gpus(value, depth + 1):
                return True
    elif isinstance(node, list):
        return any(_asks_for_gpus(item, depth + 1) for item in node)
    return False


def _clusters(units: list[Unit], roles: list[_Role]) -> list[set[str]]:
    """The clusters each unit is declared into (empty: the repository does not say)."""
    declared = [(d.directory, d.cluster) for role in roles for d in role.declarations]
    found: list[set[str]] = []
    for unit in units:
        root = os.path.realpath(unit.root) if unit.kind != STDIN else ""
        found.append(
            {
                cluster
                for directory, cluster in declared
                if root and (_within(root, directory) or _within(directory, root))
            }
        )
    return found


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def named_sources(finding: Finding, context: Context, own: Iterable[str]) -> Finding | None:
    """The finding as the unit reports it: dropped when it is about a borrowed object alone
    (the unit providing it judges it), else naming each borrowed object it uses."""
    if not context.borrowed:
        return finding
    own_files = set(own)
    by_file: dict[str, Borrowed] = {}
    for borrowed in context.borrowed:
        for file in borrowed.files:
            by_file.setdefault(file, borrowed)
    related_files = [r.location.file for r in finding.related if r.location is not None]
    if finding.location.file in by_file and not any(f in own_files for f in related_files):
        return None
    uses = []
    for related in finding.related:
        if related.location is None:
            continue
        source = by_file.get(related.location.file)
        if source is not None and related.location.file not in own_files:
            uses.append(
                f"{related.ref.kind} {related.ref.name} comes from {source.provider}, "
                f"taken as this unit's {source.category} ({source.why})"
            )
    if not uses:
        return finding
    message = finding.message.rstrip()
    if not message.endswith("."):
        message += "."
    return finding._replace(message=f"{message} {'; '.join(dict.fromkeys(uses))}.")


def _documents(context: Context) -> list[tuple[Document, bytes | None]]:
    return [d for borrowed in context.borrowed for d in borrowed.documents]


def borrowed_documents(context: Context) -> list[tuple[Document, bytes | None]]:
    """The documents a unit takes from its cluster, each once."""
    seen: set[int] = set()
    found = []
    for document, text in _documents(context):
        if id(document) not in seen:
            seen.add(id(document))
            found.append((document, text))
    return found
