"""What a rule module is, and the context it reports through.

A rule is one module in ``gpulint.rules`` (the ``rules/`` folder):

* its docstring is the user documentation, in sections (``## Why is this bad?``,
  ``## Example``, ``## Use instead``, ``## Options``, ``## References``); ``gpulint explain``,
  docs/rules.md with its index and the SARIF help are generated from it;
* its declarations, top-level assignments of literals that ``gpulint.engine.registry``
  reads without importing the module: ``ID``, ``NAME``, ``SEVERITY``, ``SCOPE`` (what
  ``check`` is handed, one of ``SCOPES``) and optionally ``REQUIRES`` (``"live"``,
  ``"cluster"`` or ``"replay"``: the rule runs only when that front door collected its
  data), ``PROBES_CLUSTER`` (``True``: cluster mode asks the cluster's metrics APIs for it),
  ``STAGES`` (the links of ``gpulint trace`` its findings break, from ``TRACE_STAGES``),
  ``STAGE_REACH`` (``"unit"``: its findings are about the whole unit's Prometheus, wherever
  they are placed, and break their stages on every trace of the unit; ``"object"``, the
  default: only on the traces through what they are placed on), ``FIXES``, the kinds of
  fix plan its findings can carry (``("safe",)``, ``("safe", "unsafe")``; none: prose only),
  and ``EXPLAINS``, the rules whose findings follow from one of its own about the same item
  (``("GL802", "GL804")``: a label mapping that names the exporter's pod explains the live
  findings that the series lack the workload's pods; ``gpulint.engine.causes``), and for a
  rule that ``REQUIRES`` data, ``SETTLES``, the offline rules whose finding at the same place
  one of its own settles with what it observed (``gpulint.engine.settled``);
* optionally ``OPTIONS`` (a JSON Schema ``properties`` mapping whose entries carry a
  ``default``);
* ``check(item, inventory, ctx)``, a generator of findings for one item of its scope.

A rule imports gpulint through one module, ``gpulint.ruleapi``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any, NamedTuple

from gpulint.adoption.edits import DeleteDocument, FixPlan
from gpulint.chain.adapter import describe_document
from gpulint.core.message import as_sentence
from gpulint.core.model import (
    Finding,
    Location,
    Node,
    ObjectRef,
    Related,
    Severity,
    SourceFile,
    joined,
)
from gpulint.input.document import Document, Path
from gpulint.kinds.registry import VIEW_SCOPES
from gpulint.kinds.workload import ClaimedGpu, GpuRequest

# What a rule iterates over; the engine hands it one item at a time. The views of kinds
# (the registry: "hpa" HPA, "scaledobject" ScaledObject, "isvc" InferenceService, "knative"
# KnativeService), then:
SCOPES = (
    *VIEW_SCOPES,
    "autoscaler",  # HPA and ScaledObject alike: what sets a workload's replicas through an HPA
    # What reads the custom and external metrics APIs through prometheus-adapter: HPAs, and a
    # Knative Service on the HPA class for the HPA Knative makes (KindView.adapter_reads)
    "metrics-reader",
    "pod-owner",  # gpulint.engine.scopes.PodOwner: anything with pod templates
    "adapter-rule",  # gpulint.chain.adapter.AdapterRule
    "adapter-config",  # gpulint.chain.adapter.AdapterConfig
    # gpulint.chain.adapter.AdapterRule and gpulint.kinds.triggers.PrometheusTrigger: what
    # sends PromQL
    "prometheus-query",
    "target-group",  # gpulint.inventory.TargetGroup
    "monitor",  # gpulint.chain.monitors.Monitor: dcgm-exporter's ServiceMonitors and PodMonitors
    "exporter",  # gpulint.chain.exporter.Exporter: dcgm-exporter DaemonSets
    "prometheus-url",  # gpulint.chain.urls.PrometheusUrl: where the adapter (or KEDA) queries
    "inventory",  # the Inventory itself (load problems, duplicate keys)
)
# The data only one front door collects: --prometheus, --cluster (and the webhook's cache),
# gpulint replay.
REQUIREMENTS = ("live", "cluster", "replay")
# The links of the scrape chain ``gpulint trace`` follows, from the GPU workload to the
# autoscaler that reads its metric.
TRACE_STAGES = (
    "workload",
    "exporter",
    "service",
    "scrape",
    "prometheus",
    "adapter-rule",
    "metrics-api",
    "autoscaler",
)
# Which traces a rule's findings break their STAGES on: those through the object or file they
# are placed on, or every trace of the unit (a finding about the unit's Prometheus).
STAGE_REACHES = ("object", "unit")
# What applying a fix plan risks: "safe" (``--fix``), "unsafe" (``--unsafe-fixes`` too).
FIX_KINDS = ("safe", "unsafe")


class RuleDoc(NamedTuple):
    summary: str
    sections: dict[str, str]

    def section(self, *names: str) -> str:
        for name in names:
            for title, body in self.sections.items():
                if title.lower() == name.lower():
                    return body
        return ""


def parse_doc(text: str | None) -> RuleDoc:
    """Split a rule docstring into its first line and its ``## `` sections."""
    lines = (text or "").strip("\n").splitlines()
    summary = lines[0].strip() if lines else ""
    sections: dict[str, str] = {}
    current = "Description"
    buffer: list[str] = []
    for line in lines[1:]:
        heading = re.match(r"^## (.+)$", line.strip())
        if heading:
            if buffer and "".join(buffer).strip():
                sections[current] = "\n".join(buffer).strip("\n")
            current, buffer = heading.group(1).strip(), []
        else:
            buffer.append(line)
    if buffer and "".join(buffer).strip():
        sections[current] = "\n".join(buffer).strip("\n")
    return RuleDoc(summary, sections)


class RuleSpec(NamedTuple):
    id: str
    name: str
    severity: Severity
    scope: str
    check: Callable[..., Iterator[Finding]]
    options: dict[str, dict[str, Any]]
    doc: RuleDoc
    module: str
    fixes: tuple[str, ...] = ()  # "safe", "unsafe": the fix plans its findings can carry

    @property
    def fixable(self) -> bool:
        """Does ``--fix`` (without ``--unsafe-fixes``) fix some of its findings?"""
        return "safe" in self.fixes

    @classmethod
    def from_module(cls, module: ModuleType) -> RuleSpec:
        scope = module.SCOPE
        if scope not in SCOPES:
            raise ValueError(f"{module.__name__}: unknown SCOPE {scope!r}")
        return cls(
            module.ID,
            module.NAME,
            module.SEVERITY,
            scope,
            module.check,
            dict(getattr(module, "OPTIONS", {})),
            parse_doc(module.__doc__),
            module.__name__,
            _fixes(module),
        )

    def defaults(self) -> dict[str, Any]:
        return {name: schema.get("default") for name, schema in self.options.items()}


def _fixes(module: ModuleType) -> tuple[str, ...]:
    fixes = tuple(getattr(module, "FIXES", ()))
    unknown = [kind for kind in fixes if kind not in FIX_KINDS]
    if unknown:
        raise ValueError(f"{module.__name__}: unknown FIXES {unknown}")
    return fixes


class Anchor(NamedTuple):
    """Where a finding was raised, for suppression by annotation."""

    document: Document
    path: Path


class Context:
    """Handed to ``check``: the rule's options and a way to build findings."""

    __slots__ = ("_item", "_place", "anchors", "options", "spec")

    def __init__(self, spec: RuleSpec, options: dict[str, Any]) -> None:
        self.spec = spec
        self.options = options
        self.anchors: dict[int, Anchor] = {}
        self._item: Any = None
        # Where the item is written ((document, path)), worked out when a finding first asks;
        # False: not yet asked.
        self._place: tuple[Document, Path] | bool | None = False

    def judging(self, item: Any) -> None:
        """The item of the rule's scope ``check`` is handed next: its findings are about it."""
        self._item = item
        self._place = False

    def _about(self, document: Document, path: Sequence[str | int]) -> Node:
        """What a finding at ``path`` of ``document`` is about: the item being judged when
        the finding is placed in the item's document, else its own node."""
        if self._place is False:
            self._place = item_place(self._item) if self._item is not None else None
        place = self._place
        if isinstance(place, tuple) and place[0] is document:
            return node_of(document, place[1])
        return node_of(document, path)

    def finding(
        self,
        document: Document,
        path: Sequence[str | int],
        message: str,
        fix: str = "",
        *,
        related: Sequence[Related] = (),
        key: bool = True,
        obj: ObjectRef | None = None,
        severity: Severity | None = None,
        plan: FixPlan | None = None,
        deletes: Sequence[Document] = (),
        writes: Sequence[Document] | None = None,
        fix_at_path: bool = True,
    ) -> Finding:
        """A finding at ``path`` of ``document``; ``severity`` defaults to the rule's (a
        ``severity`` in ``.gpulint.yaml`` still replaces it for every finding of the rule).
        ``plan``: the fix as edits (adoption.edits), when it can be applied mechanically; its
        kind must be one the rule declares in ``FIXES``.

        What the fix does to objects, which ``gpulint.engine.fixes`` weighs against the other
        findings' fixes: ``deletes``, the objects it deletes or replaces (the plan's deleted
        documents count without being named); ``writes``, those it changes and keeps (by
        default the finding's own object, unless the fix deletes it, and every document the
        plan edits); ``fix_at_path=False``: the fix is written for the whole objects it
        names, not for the node at ``path``, so that findings of one cause elsewhere that
        print the same text share it."""
        if plan is not None and plan.applicability not in self.spec.fixes:
            raise ValueError(f"{self.spec.id} declares no {plan.applicability} fixes (FIXES)")
        location = document.location(tuple(path), key=key)
        related = tuple(related)
        subject = obj or describe_document(document)
        removed = [describe_document(d) for d in deletes]
        changed = [subject] if writes is None else [describe_document(d) for d in writes]
        if plan is not None:
            for op in plan.ops:
                ref = describe_document(op.document)
                (removed if isinstance(op, DeleteDocument) else changed).append(ref)
        gone = tuple(dict.fromkeys(removed))
        kept = tuple(ref for ref in dict.fromkeys(changed) if ref not in gone)
        finding = Finding(
            self.spec.id,
            self.spec.name,
            self.spec.severity if severity is None else severity,
            as_sentence(message),
            location,
            fix,
            subject,
            related,
            plan=plan,
            path=tuple(path),
            made_from=joined(made_from(document), *(r.made_from for r in related)),
            deletes=gone if fix else (),
            writes=kept if fix else (),
            fix_at_path=fix_at_path,
            about=self._about(document, path),
        )
        self.anchors[id(finding)] = Anchor(document, tuple(path))
        return finding

    def at(
        self,
        location: Location,
        message: str,
        fix: str = "",
        *,
        obj: ObjectRef | None = None,
        related: Sequence[Related] = (),
    ) -> Finding:
        """A finding at a known location (load problems have no document)."""
        return Finding(
            self.spec.id,
            self.spec.name,
            self.spec.severity,
            as_sentence(message),
            location,
            fix,
            obj,
            tuple(related),
        )


def related(document: Document, path: Sequence[str | int] = (), role: str = "") -> Related:
    return Related(
        describe_document(document),
        document.location(tuple(path)),
        role,
        made_from(document),
        node_of(document, path),
    )


def node_of(document: Document, path: Sequence[str | int]) -> Node:
    """The node at ``path`` of ``document``, named by where the document starts as its
    author wrote it (``Document.location``: through a rendered document's source map)."""
    start = document.location(())
    return Node(start.file, start.line, start.column, tuple(path))


def item_place(item: Any) -> tuple[Document, Path] | None:
    """Where an item of a rule scope is written: a node of a document (an adapter rule, a
    trigger of a ScaledObject: its ``document`` or ``manifest`` and its ``path``) or a whole
    object (a kind's view: its manifest); None for an item that is neither (a target group,
    the inventory)."""
    for attribute in ("document", "manifest"):
        document = getattr(item, attribute, None)
        if isinstance(document, Document):
            path = getattr(item, "path", ())
            return document, tuple(path) if isinstance(path, tuple) else ()
    return None


def made_from(document: Document) -> tuple[SourceFile, ...]:
    """The files a rendered document was made from (``SourceMap.made_from``); () for one
    read from its own file."""
    source = document.source
    return source.made_from(document) if source is not None else ()


def claim_links(gpus: Iterable[GpuRequest]) -> list[Related]:
    """The DRA ResourceClaims and ResourceClaimTemplates GPUs are claimed through, as related
    objects at their requests: a finding about a GPU workload names what made it one (and an
    admitted template is judged by the findings that name it)."""
    found: dict[tuple[int, Path], Related] = {}
    for gpu in gpus:
        if isinstance(gpu, ClaimedGpu) and gpu.source is not None:
            key = (id(gpu.source), gpu.source_path)
            if key not in found:
                found[key] = related(gpu.source, gpu.source_path, "DRA claim")
    return list(found.values())
