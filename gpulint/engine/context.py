"""Which cluster each unit of a run belongs to, and what of its cluster it is judged with
(docs/context.md says it for users).

A unit's rules see its own objects. Platform components are installed once per cluster and
serve every application in it, and repositories keep them apart from the applications
(``monitoring/`` beside ``apps/``, ``infrastructure/`` beside ``clusters/``). So a unit that
autoscales or serves is also given the platform components it lacks, from its cluster.

Clusters, the first source that speaks for a unit deciding:

1. ``clusters:`` in ``.gpulint.yaml``: named clusters, each with the directories of its
   applications and of its platform;
2. the repository's GitOps objects: a Flux ``Kustomization`` (``spec.path``) or
   ``HelmRelease`` (a chart from a ``GitRepository``), an Argo CD ``Application`` or
   ``ApplicationSet`` (``gpulint.input.units.clusters``);
3. otherwise the input is one cluster: one repository is one cluster, however its paths are
   typed on the command line (``.``, ``apps/ monitoring/``, or each directory by name).

What a unit takes, per platform component (``CATEGORIES``) it does not hold itself:

* a cluster-wide component (``CLUSTER_WIDE``: the prometheus-adapter config, which serves the
  one ``custom.metrics.k8s.io`` API a cluster has; dcgm-exporter, a DaemonSet on every GPU
  node; KServe's ``inferenceservice-config``; Knative's ``config-autoscaler``) from any unit
  of its cluster that holds one, an application's directory included;
* the others (Prometheus servers and monitors, kube-prometheus-stack or gpu-operator values),
  of which a cluster may run several, one per team, only from a platform unit: one with no
  autoscaler, serving object or GPU workload of its own, or under a declared ``platform:``
  directory. So one application never lends its Prometheus to another.

Of several units that could lend a component, the nearest in the directory tree lends it
(the one whose root shares the longest path with the unit's). Two equally near are never
guessed between, unless they are copies of one text (one adapter values file kept in several
application directories), and the context says which were left.

Application-to-application relations (two autoscalers on one workload, a query URL and the
Prometheus objects beside it) are judged within a unit only: nothing of an application is
lent to another.

The context is in the report: one line per cluster (``ClusterSummary``), each unit's
(``UnitSummary.context``), and a finding that uses a borrowed object says where it came from.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from gpulint.core.model import Finding
from gpulint.engine.result import OWN_OBJECTS, ClusterSummary
from gpulint.input.document import Document
from gpulint.input.units import STDIN, Unit
from gpulint.input.units.clusters import Declared, PathScan, declaration
from gpulint.kinds.classify import Classified, classify_document
from gpulint.kinds.registry import AUTOSCALER, MONITORING, group_of, spec_for, spec_of

if TYPE_CHECKING:
    from gpulint.engine.config import Settings

ADAPTER = "prometheus-adapter config"
EXPORTER = "dcgm-exporter"
MONITORS = "Prometheus monitoring objects"
CHART_VALUES = "platform chart values"
KSERVE_CONFIG = "KServe inferenceservice-config"
KNATIVE_CONFIG = "Knative config-autoscaler"
CATEGORIES = (ADAPTER, EXPORTER, MONITORS, CHART_VALUES, KSERVE_CONFIG, KNATIVE_CONFIG)
# One per cluster by nature, so any unit of the cluster that holds one lends it.
CLUSTER_WIDE = frozenset({ADAPTER, EXPORTER, KSERVE_CONFIG, KNATIVE_CONFIG})

# How the run's one cluster is named and why, when nothing declares clusters.
INPUT_CLUSTER = "the input"
INPUT_CLUSTER_WHY = "the input is one cluster"
# Why each kind of cluster is one, as the report's line of the cluster says it.
_SUMMARY_WHY = {
    "input": "no GitOps object or clusters: entry of .gpulint.yaml divides the input",
    "configured": "declared in .gpulint.yaml",
}

_SERVING = {("serving.kserve.io", "InferenceService"), ("serving.knative.dev", "Service")}


class Borrowed(NamedTuple):
    """Documents of another unit a unit is judged with."""

    category: str
    provider: str  # the providing unit's name
    why: str  # "cluster prod", "the input's one cluster", "the nearest of 2"
    documents: tuple[tuple[Document, bytes | None], ...]
    files: frozenset[str]
    # What each of ``documents`` holds, classified once for every unit that takes it.
    classified: tuple[Classified, ...]


class Context(NamedTuple):
    """What a unit is judged with besides its own objects, and how that was decided."""

    borrowed: tuple[Borrowed, ...] = ()
    clusters: tuple[str, ...] = ()
    ambiguous: tuple[tuple[str, tuple[str, ...]], ...] = ()  # category, providers

    @property
    def borrowed_objects(self) -> int:
        """How many objects (not values documents) the unit takes from its cluster."""
        return sum(1 for classified in borrowed_classified(self) if classified.manifest is not None)

    def lacks(self, category: str) -> bool:
        """Did the unit neither hold nor take ``category``, though its cluster may?"""
        return all(b.category != category for b in self.borrowed)

    def providers_left(self, category: str) -> tuple[str, ...]:
        """The units that could have lent ``category`` but were equally near."""
        return next((p for c, p in self.ambiguous if c == category), ())

    def describe(self) -> str:
        """One sentence for the report."""
        parts = []
        if self.clusters:
            parts.append(f"cluster {', '.join(self.clusters)}")
        if self.borrowed:
            taken = "; ".join(f"{b.category} from {b.provider}" for b in self.borrowed)
            parts.append(f"its own objects and {taken}")
        else:
            parts.append(OWN_OBJECTS)
        for category, providers in self.ambiguous:
            parts.append(
                f"{category} not taken: {len(providers)} directories are equally near "
                f"({', '.join(providers)})"
            )
        return "; ".join(parts)


class RunContext(NamedTuple):
    """The contexts of a run's units (in their order) and its clusters, as reported."""

    contexts: list[Context]
    clusters: list[ClusterSummary]


class _Role:
    """What a unit holds, as the context asks: whether it autoscales, serves or runs GPU
    workloads and what it declares (read from the objects' data), and its platform documents
    by category (classified only when asked: most units are never asked)."""

    def __init__(self, unit: Unit, scan: PathScan | None = None) -> None:
        self.unit = unit
        self.consumer = False
        self.applications = False  # workloads that ask for GPUs
        self.declarations: list[Declared] = []
        self.root = os.path.realpath(unit.root) if unit.kind != STDIN else ""
        self._documents: dict[str, list[tuple[Document, bytes | None]]] | None = None
        # each of those documents' classification, by the document's id
        self.classified: dict[int, Classified] = {}
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
                    # one object that asks for GPUs says it: the others' specs are not walked
                    if not self.applications and _asks_for_gpus(data.get("spec")):
                        self.applications = True
                    self.declarations.extend(declaration(data, document.file, unit.root, scan))

    @property
    def platform(self) -> bool:
        """Holds no application: it may lend every category."""
        return not self.consumer and not self.applications

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
                            self.classified[id(classified.document)] = classified
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
    if classified.knative_class is not None:
        categories.append(KNATIVE_CONFIG)  # the class of revisions that name none
    manifest = classified.manifest
    if manifest is not None and manifest.group == "monitoring.coreos.com":
        spec = spec_for(manifest)
        if (spec is not None and spec.role == MONITORING) or manifest.kind == "PrometheusRule":
            categories.append(MONITORS)
    return categories


class _Membership(NamedTuple):
    """The clusters of one unit, where they come from, and whether it is declared platform."""

    clusters: frozenset[str]
    why: dict[str, str]  # cluster -> why the unit is in it
    platform: bool = False


def infer(units: list[Unit], settings: Settings | None = None) -> RunContext:
    """Each unit's context, in the order of ``units``, and the run's clusters."""
    judged = [u for u in units if u.kind != STDIN]
    if not judged:
        return RunContext([Context() for _ in units], [])
    scan = PathScan()  # the GitOps paths of every unit, resolved within one bound
    roles = [_Role(unit, scan) for unit in units]
    if scan.spent is not None:
        judged[0].notes.append(scan.spent)
    members = _memberships(units, roles, settings)
    lenders = _Lenders(units, roles, members) if len(judged) > 1 else None
    contexts = []
    for i, (unit, role) in enumerate(zip(units, roles, strict=True)):
        member = tuple(sorted(members[i].clusters))
        if lenders is None or unit.kind == STDIN or not role.consumer:
            contexts.append(Context(clusters=member))
            continue
        contexts.append(lenders.context_of(i))
    return RunContext(contexts, _summaries(units, contexts, members))


class _Lenders:
    """Who may lend each category, indexed once for the run, so that a unit's lender is found
    by walking up its own directory (a run of 10,000 units costs 10,000 short walks, not
    10,000 x 10,000 comparisons)."""

    def __init__(self, units: list[Unit], roles: list[_Role], members: list[_Membership]) -> None:
        self.units, self.roles, self.members = units, roles, members
        # (category, cluster) -> directory -> the lenders whose roots are in it (or it)
        self.under: dict[tuple[str, str], dict[str, list[int]]] = {}
        for p, (unit, role) in enumerate(zip(units, roles, strict=True)):
            if unit.kind == STDIN:
                continue
            for category in role.documents:
                if category not in CLUSTER_WIDE and not (role.platform or members[p].platform):
                    continue
                for cluster in members[p].clusters:
                    index = self.under.setdefault((category, cluster), {})
                    for directory in _ancestors(role.root):
                        index.setdefault(directory, []).append(p)
        self._signatures: dict[tuple[int, str], int] = {}
        self._within: dict[tuple[str, tuple[str, ...], str], list[int]] = {}
        # (category, lenders) -> how many different texts they hold
        self._texts: dict[tuple[str, int], int] = {}

    def context_of(self, i: int) -> Context:
        """What unit ``i`` (a consumer) takes from the units of its clusters."""
        role, member = self.roles[i], self.members[i]
        borrowed, ambiguous = [], []
        for category in CATEGORIES:
            if category in role.documents:
                continue
            nearest, count = self._nearest(i, category)
            if not nearest:
                continue
            if self._different(category, nearest) > 1:
                ambiguous.append((category, tuple(self.units[p].name for p in nearest)))
                continue
            p = nearest[0]  # equally near and the same text: any of them says it
            shared = sorted(member.clusters & self.members[p].clusters)
            why = ", ".join(member.why[c] for c in shared)
            if count > 1:
                why += f"; the nearest of {count} that hold one"
            lender = self.roles[p]
            documents = tuple(lender.documents[category])
            borrowed.append(
                Borrowed(
                    category,
                    self.units[p].name,
                    why,
                    documents,
                    frozenset(d.file for d, _ in documents),
                    tuple(lender.classified[id(d)] for d, _ in documents),
                )
            )
        return Context(tuple(borrowed), tuple(sorted(member.clusters)), tuple(ambiguous))

    def _nearest(self, i: int, category: str) -> tuple[list[int], int]:
        """The lenders of ``category`` in unit ``i``'s clusters whose roots share the longest
        path with its root, and how many lenders there are in all. (Unit ``i`` lacks
        ``category``, so it is none of them.)"""
        clusters = tuple(sorted(self.members[i].clusters))
        indexes = [self.under[(category, c)] for c in clusters if (category, c) in self.under]
        if not indexes:
            return [], 0
        count = len(self._lenders_in(category, clusters, indexes, os.sep))
        for directory in _ancestors(self.roles[i].root):
            found = self._lenders_in(category, clusters, indexes, directory)
            if found:
                return found, count
        return [], count

    def _lenders_in(
        self,
        category: str,
        clusters: tuple[str, ...],
        indexes: list[dict[str, list[int]]],
        directory: str,
    ) -> list[int]:
        """The lenders of ``category`` in ``clusters`` whose roots are in ``directory``,
        sorted: worked out once per directory, for every unit under it (one application
        directory of 10,000 beside 1,000 that hold adapter values would otherwise gather the
        1,000 again for each of the 10,000)."""
        key = (category, clusters, directory)
        found = self._within.get(key)
        if found is None:
            found = self._within[key] = sorted(
                {p for index in indexes for p in index.get(directory, ())}
            )
        return found

    def _different(self, category: str, lenders: list[int]) -> int:
        """How many different texts of ``category`` the lenders hold (once per list of
        lenders: the units of one directory share it)."""
        key = (category, id(lenders))
        found = self._texts.get(key)
        if found is None:
            found = self._texts[key] = len({self._signature(p, category) for p in lenders})
        return found

    def _signature(self, p: int, category: str) -> int:
        """What a lender's documents of a category say (their files' text), to tell copies of
        one component from different ones."""
        key = (p, category)
        found = self._signatures.get(key)
        if found is None:
            texts = sorted({text or b"" for _, text in self.roles[p].documents[category]})
            found = self._signatures[key] = hash(tuple(texts))
        return found


def _ancestors(root: str) -> list[str]:
    """``root`` and every directory above it, nearest first, ending with the top (``/``)."""
    found = [root]
    while True:
        parent = os.path.dirname(found[-1])
        if parent == found[-1]:
            return found
        found.append(parent)


def _memberships(
    units: list[Unit], roles: list[_Role], settings: Settings | None
) -> list[_Membership]:
    """Each unit's clusters: declared in the configuration, else by GitOps objects, else the
    input's one cluster."""
    declared = _configured(settings)
    gitops = [(d.directory, d.cluster, d.by) for role in roles for d in role.declarations]
    found = []
    for unit, role in zip(units, roles, strict=True):
        if unit.kind == STDIN:
            found.append(_Membership(frozenset(), {}))
            continue
        configured = {
            name: platform
            for directory, name, platform in declared
            if _within(role.root, directory) or _within(directory, role.root)
        }
        if configured:
            why = {name: f"cluster {name}, declared in .gpulint.yaml" for name in configured}
            found.append(_Membership(frozenset(configured), why, any(configured.values())))
            continue
        by_gitops = {
            cluster: f"cluster {cluster}, declared by {by}"
            for directory, cluster, by in gitops
            if _within(role.root, directory) or _within(directory, role.root)
        }
        if by_gitops:
            found.append(_Membership(frozenset(by_gitops), by_gitops))
            continue
        found.append(_Membership(frozenset({INPUT_CLUSTER}), {INPUT_CLUSTER: INPUT_CLUSTER_WHY}))
    return found


def _configured(settings: Settings | None) -> list[tuple[str, str, bool]]:
    """(real directory, cluster, is platform) of every ``clusters:`` entry's directories.
    Raises InputError for a pattern that matches nothing."""
    if settings is None or not settings.clusters:
        return []
    from gpulint.input.units.plan import declared_directories

    found = []
    for cluster in settings.clusters:
        for key, patterns, platform in (
            ("applications", cluster.applications, False),
            ("platform", cluster.platform, True),
        ):
            where = f"clusters.{cluster.name}.{key}"
            for directory in declared_directories(settings, patterns, where):
                found.append((os.path.realpath(directory), cluster.name, platform))
    return found


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


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


def _summaries(
    units: list[Unit], contexts: list[Context], members: list[_Membership]
) -> list[ClusterSummary]:
    """One summary per cluster: its units, and who lends what to how many of them."""
    names: dict[str, None] = {}
    for member in members:
        names.update(dict.fromkeys(sorted(member.clusters)))
    summaries = []
    for name in names:
        inside = [i for i, m in enumerate(members) if name in m.clusters]
        why = next(members[i].why[name] for i in inside)
        if why == INPUT_CLUSTER_WHY:
            why = _SUMMARY_WHY["input"]
        elif why.endswith("declared in .gpulint.yaml"):
            why = _SUMMARY_WHY["configured"]
        else:
            why = why.split(", ", 1)[1]  # "declared by Kustomization apps (...)"
        lends: dict[tuple[str, str], list[str]] = {}
        left: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for i in inside:
            for borrowed in contexts[i].borrowed:
                lends.setdefault((borrowed.category, borrowed.provider), []).append(units[i].name)
            for category, providers in contexts[i].ambiguous:
                left.setdefault((category, providers), []).append(units[i].name)
        summaries.append(
            ClusterSummary(
                name,
                why,
                tuple(units[i].name for i in inside),
                tuple((c, p, tuple(b)) for (c, p), b in lends.items()),
                tuple((c, ps, tuple(b)) for (c, ps), b in left.items()),
            )
        )
    return summaries


def components_of(unit: Unit) -> dict[str, list[str]]:
    """The platform components a unit holds, by category, each with the files it is in."""
    if unit.kind == STDIN:
        return {}
    return {
        category: list(dict.fromkeys(document.file for document, _ in documents))
        for category, documents in _Role(unit).documents.items()
    }


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
                f"{related.ref.described} comes from {source.provider}, "
                f"taken as this unit's {source.category} ({source.why})"
            )
    if not uses:
        return finding
    message = finding.message.rstrip()
    if not message.endswith((".", "?", "!")):
        message += "."
    return finding._replace(message=f"{message} {'; '.join(dict.fromkeys(uses))}.")


def borrowed_classified(context: Context) -> list[Classified]:
    """What the documents a unit takes from its cluster hold, each document once: classified
    once for the run (an adapter values file lent to 1,000 units is read once, not 1,000
    times), the same objects in every unit that takes them."""
    seen: set[int] = set()
    found: list[Classified] = []
    for borrowed in context.borrowed:
        for classified in borrowed.classified:
            if id(classified.document) not in seen:
                seen.add(id(classified.document))
                found.append(classified)
    return found
