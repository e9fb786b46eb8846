"""What a trace is made of: its stages, its links, and the findings that break each link.

``gpulint.trace.chain`` builds traces from these; ``gpulint.trace.render`` writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from gpulint.chain.adapter import describe_document
from gpulint.chain.servers import PrometheusServer
from gpulint.core.model import Finding, Location, ObjectRef, Severity
from gpulint.engine.rule import TRACE_STAGES
from gpulint.input.document import Document, Manifest, Path
from gpulint.metrics.names import Exporter as MetricSource
from gpulint.metrics.names import is_dcgm_field, lookup

STAGES = TRACE_STAGES  # the rules whose findings break each stage declare it (STAGES)
OK, BROKEN, UNKNOWN = "ok", "broken", "unknown"


class Link(NamedTuple):
    stage: str
    object: ObjectRef | None
    location: Location | None
    status: str
    findings: tuple[str, ...]
    detail: str
    severity: Severity | None = None  # of a broken link
    label: str = ""  # a short name for diagrams ("rule rules.custom[0]")
    found: tuple[Finding, ...] = ()  # the findings themselves, as lint reports them
    node: Path = ()  # where in its object the link is written (an adapter rule, a trigger)


class Trace(NamedTuple):
    autoscaler: ObjectRef
    location: Location
    metric: str
    links: tuple[Link, ...]
    unit: str = ""

    def first_broken(self) -> Link | None:
        return next((link for link in self.links if link.status == BROKEN), None)

    def worst(self) -> Severity | None:
        found = [link.severity for link in self.links if link.severity is not None]
        return max(found) if found else None


class Anchor(NamedTuple):
    """An object a link stands for, as findings name it."""

    file: str
    ref: ObjectRef | None  # None: a values document (matched by its file)
    lines: tuple[int, int] | None = None  # only findings on these lines (one adapter rule)
    path: Path | None = None  # only findings under this node (one KEDA trigger)
    # An object that holds several autoscalers (an LLMInferenceService's decode and prefill
    # workloads): the node of the link's one, and the nodes of all. A finding belongs to the
    # autoscaler whose node is the nearest above it; one above none belongs to every one.
    part: Path | None = None
    parts: tuple[Path, ...] = ()


def anchor(
    document: Document,
    lines: tuple[int, int] | None = None,
    path: Path | None = None,
    part: Path | None = None,
    parts: tuple[Path, ...] = (),
) -> Anchor:
    ref = document.ref if isinstance(document, Manifest) else None
    return Anchor(document.location(()).file, ref, lines, path, part, parts)


class StageFindings:
    """The findings of a unit by object and by file, and those about the whole unit's
    Prometheus by stage; ``stage_rules`` says which rules break each stage, ``unit_rules``
    the stages that the findings of a rule about the whole unit break on every trace
    (``STAGE_REACH = "unit"``).

    A finding on an object is matched by the object, not by the file it is reported in: in
    rendered input (a kustomize overlay, a Helm chart) a finding lands in the file that wrote
    the value, often not the file that wrote the object's header."""

    def __init__(
        self,
        findings: Iterable[Finding],
        stage_rules: Mapping[str, frozenset[str]],
        unit_rules: Mapping[str, tuple[str, ...]],
    ) -> None:
        self.stage_rules = stage_rules
        self.by_file: dict[str, list[Finding]] = {}
        self.by_ref: dict[ObjectRef, list[Finding]] = {}
        self.unit: dict[str, list[Finding]] = {}
        for finding in findings:
            stages = unit_rules.get(finding.rule)
            if stages is not None:
                for stage in stages:
                    self.unit.setdefault(stage, []).append(finding)
                continue
            ref = ref_of(finding)
            if ref is not None:
                self.by_ref.setdefault(ref, []).append(finding)
            self.by_file.setdefault(finding.location.file, []).append(finding)

    def on(self, stage: str, anchors: Sequence[Anchor]) -> list[Finding]:
        rules = self.stage_rules[stage]
        found: list[Finding] = list(self.unit.get(stage, []))
        for anchor in anchors:
            in_file = self.by_file.get(anchor.file, [])
            candidates = in_file
            if anchor.ref is not None:
                # Its own findings wherever they are reported, and those on no object.
                own = self.by_ref.get(anchor.ref, [])
                candidates = own + [f for f in in_file if ref_of(f) is None]
            for finding in candidates:
                if finding.rule not in rules or finding in found:
                    continue
                if _on_node(finding, anchor):
                    found.append(finding)
        return found


def _on_node(finding: Finding, anchor: Anchor) -> bool:
    """Is the finding under the anchor's node (``path``: one KEDA trigger, one adapter rule)
    or on its lines (``lines``: one adapter rule of a file)? Another file writes a value in
    rendered input (a patch, a chart's values), so there only the node can tell. On an object
    of several autoscalers, a finding that belongs to another one is not the link's."""
    if anchor.parts:
        nodes = [p for p in anchor.parts if finding.path[: len(p)] == p]
        if nodes and max(nodes, key=len) != anchor.part:
            return False
    if anchor.path is None and anchor.lines is None:
        return True
    if anchor.path is not None and finding.path[: len(anchor.path)] == anchor.path:
        return True
    return (
        anchor.lines is not None
        and finding.location.file == anchor.file
        and anchor.lines[0] <= finding.location.line < anchor.lines[1]
    )


def ref_of(finding: Finding) -> ObjectRef | None:
    ref = finding.object
    if ref is None or not ref.api_version:
        return None  # a values file: its findings are matched by file
    return ref


def link(
    stage: str,
    document: Document | None,
    status: str,
    detail: str,
    findings: list[Finding],
    obj: ObjectRef | None = None,
    path: Path = (),
    label: str = "",
) -> Link:
    severities = [f.severity for f in findings if f.severity >= Severity.WARNING]
    if severities:
        status = BROKEN
    ref = obj if obj is not None else (describe_document(document) if document else None)
    location = document.location(path) if document is not None else None
    severity = max(severities) if severities else (Severity.ERROR if status == BROKEN else None)
    return Link(
        stage,
        ref,
        location,
        status,
        tuple(sorted({f.rule for f in findings})),
        detail,
        severity,
        label or (str(ref) if ref is not None else ""),
        tuple(findings),
        path,
    )


def made(api_version: str, kind: str, namespace: str | None, name: str | None) -> ObjectRef:
    """The object a chart or operator makes, as the link's object."""
    return ObjectRef(api_version, kind, namespace, name or "<release>-dcgm-exporter")


def server_label(server: PrometheusServer) -> str:
    if server.chart is not None:
        return f"kube-prometheus-stack {server.release or server.name or ''}".strip()
    return f"Prometheus {server.name}"


def is_dcgm(names: Iterable[str]) -> bool:
    for name in names:
        known = lookup(name)
        if is_dcgm_field(name) or (known is not None and known.exporter is MetricSource.DCGM):
            return True
    return False


def gpu_metric(series: list[str], served: bool, name: str) -> bool:
    """Is the metric dcgm-exporter's? Its series say, when an adapter rule of the input
    serves it; without one, a name that says GPU is taken to be (an adapter elsewhere, or
    the cluster's, renames DCGM_FI_DEV_GPU_UTIL as gpu_utilization)."""
    if is_dcgm(series):
        return True
    return not served and ("gpu" in name.lower() or "dcgm" in name.lower())
