"""The one engine: run the rule pack over an inventory, apply suppressions, count.

Every front door (CLI, webhook, cluster mode) builds an Inventory and calls ``run``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import time
import traceback
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from gpulint.adoption.edits import Edit, Sources, resolve
from gpulint.core.model import Finding, Location, Severity
from gpulint.engine.config import Settings
from gpulint.engine.rule import Anchor, Context, RuleSpec
from gpulint.input.document import Document, Manifest, Path, has_step
from gpulint.input.loader import IgnoreComment
from gpulint.inventory import Inventory
from gpulint.kinds.registry import VIEW_SCOPES
from gpulint.kinds.workload import PodTemplate, pod_templates

IGNORE_ANNOTATION = "gpulint.dev/ignore"
UNUSED_SUPPRESSION = "GL703"
INTERNAL_ERROR = "GL799"


class DeadlineExceeded(Exception):
    """``run`` passed its ``deadline`` (a ``time.monotonic()`` value) between two rules."""

    def __init__(self, rule: str) -> None:
        super().__init__(f"deadline passed before rule {rule}")
        self.rule = rule


class RuleInfo(NamedTuple):
    """What the engine knows about a rule before importing it."""

    id: str
    name: str
    severity: Severity
    scope: str
    requires: str | None  # "live" or "cluster": data only that front door collects
    module: str


_CONSTANT = re.compile(
    r'^(ID|NAME|SCOPE|REQUIRES) = "([^"]*)"(?:\s*#.*)?$|^SEVERITY = Severity\.(\w+)$',
    re.MULTILINE,
)
_index: list[RuleInfo] | None = None
_loaded: dict[str, RuleSpec] = {}


def rule_index() -> list[RuleInfo]:
    """The rule pack, ordered by ID, read from the modules' source without importing them.

    Importing every rule costs more than linting a small file; the engine imports a rule
    only when its scope has something to check.
    """
    global _index
    if _index is None:
        spec = importlib.util.find_spec("gpulint.rules")
        locations = spec.submodule_search_locations if spec else None
        found = []
        for directory in locations or []:
            for entry in sorted(os.listdir(directory)):
                if not (entry.startswith("gl") and entry.endswith(".py")):
                    continue
                with open(os.path.join(directory, entry), encoding="utf-8") as handle:
                    source = handle.read()
                values = {}
                for match in _CONSTANT.finditer(source):
                    if match.group(3):
                        values["SEVERITY"] = match.group(3)
                    else:
                        values[match.group(1)] = match.group(2)
                module = f"gpulint.rules.{entry[:-3]}"
                if not {"ID", "NAME", "SCOPE", "SEVERITY"} <= values.keys():
                    raise ValueError(f"{module}: ID, NAME, SEVERITY and SCOPE must be literals")
                found.append(
                    RuleInfo(
                        values["ID"],
                        values["NAME"],
                        Severity[values["SEVERITY"]],
                        values["SCOPE"],
                        values.get("REQUIRES"),
                        module,
                    )
                )
        _index = sorted(found, key=lambda info: info.id)
    return _index


def load_rule(info: RuleInfo) -> RuleSpec:
    spec = _loaded.get(info.id)
    if spec is None:
        spec = RuleSpec.from_module(importlib.import_module(info.module))
        if (spec.id, spec.name, spec.severity, spec.scope) != (
            info.id,
            info.name,
            info.severity,
            info.scope,
        ):
            raise ValueError(f"{info.module}: constants do not match what the index read")
        _loaded[info.id] = spec
    return spec


def all_rules() -> list[RuleSpec]:
    """Every rule, imported (for documentation, SARIF descriptors and configuration)."""
    return [load_rule(info) for info in rule_index()]


def rule_by_id(rule_id: str) -> RuleSpec | None:
    wanted = rule_id.upper()
    for info in rule_index():
        if info.id == wanted or info.name == rule_id.lower():
            return load_rule(info)
    return None


def unknown_rule_patterns(patterns: Iterable[str]) -> list[tuple[str, str | None]]:
    """The patterns that name no rule: (pattern, the nearest rule ID or name, if any).

    A pattern is a rule ID (GL101), a rule name (hpa-cpu-on-gpu-workload), a prefix of IDs
    (GL1, GL10), or ALL."""
    index = rule_index()
    ids = [info.id for info in index]
    names = [info.name for info in index]
    unknown = []
    for pattern in patterns:
        upper = pattern.upper()
        if upper == "ALL" or pattern.lower() in names:
            continue
        if re.fullmatch(r"GL\d{1,3}", upper) and any(i.startswith(upper) for i in ids):
            continue
        import difflib  # only for a pattern that names no rule

        near = difflib.get_close_matches(upper.replace("O", "0"), ids, n=1, cutoff=0.6)
        if not near:
            near = difflib.get_close_matches(pattern.lower(), names, n=1, cutoff=0.6)
        if not near:
            near = difflib.get_close_matches(upper, ids, n=1, cutoff=0.5)
        unknown.append((pattern, near[0] if near else None))
    return unknown


def rule_names() -> dict[str, str]:
    """Rule name -> rule ID (read from the sources, nothing imported)."""
    return {info.name: info.id for info in rule_index()}


def rule_option_schemas() -> dict[str, dict[str, Any]]:
    return {spec.id: spec.options for spec in all_rules()}


class PodOwner:
    """An object with pod templates: a workload, a Knative Service, an InferenceService."""

    __slots__ = ("manifest", "templates")

    def __init__(
        self,
        manifest: Manifest,
        templates: list[PodTemplate],
    ) -> None:
        self.manifest = manifest
        self.templates = templates

    def __repr__(self) -> str:
        return f"PodOwner(manifest={self.manifest!r}, templates={self.templates!r})"


class Selection:
    """Which rules run: ``--select``/``--ignore`` take IDs or prefixes (GL1 = GL1xx)."""

    __slots__ = ("ignore", "select")

    def __init__(
        self,
        select: list[str] | None = None,
        ignore: list[str] | None = None,
    ) -> None:
        self.select: list[str] = [] if select is None else select
        self.ignore: list[str] = [] if ignore is None else ignore

    def __repr__(self) -> str:
        return f"Selection(select={self.select!r}, ignore={self.ignore!r})"

    def allows(self, spec: RuleSpec | RuleInfo) -> bool:
        def hit(patterns: list[str]) -> bool:
            return any(
                p.upper() == "ALL" or spec.id.startswith(p.upper()) or spec.name == p.lower()
                for p in patterns
            )

        if self.select and not hit(self.select):
            return False
        return not hit(self.ignore)


class UnitSummary(NamedTuple):
    """One lint unit of a run, as reports list it."""

    name: str
    kind: str  # kustomize | helm | files | stdin | cluster
    root: str
    objects: int
    rendered_by: tuple[str, ...] = ()
    render_seconds: float = 0.0


class Result:
    __slots__ = (
        "_edits",
        "baseline",
        "config",
        "files",
        "findings",
        "lint_seconds",
        "notes",
        "objects",
        "render_wall",
        "skipped",
        "sources",
        "suppressed",
        "units",
    )

    def __init__(
        self,
        findings: list[Finding],
        files: int,
        objects: int,
        skipped: list[tuple[str, str]] | None = None,
        notes: list[str] | None = None,
        units: list[UnitSummary] | None = None,
        config: str | None = None,
    ) -> None:
        self.findings = findings
        self.files = files
        self.objects = objects
        self.skipped: list[tuple[str, str]] = [] if skipped is None else skipped
        self.notes: list[str] = [] if notes is None else notes
        self.units: list[UnitSummary] = [] if units is None else units
        self.config = config  # the .gpulint.yaml in use, if any
        self.suppressed: dict[str, int] = {}  # rule -> findings silenced by suppressions
        self.lint_seconds = 0.0
        self.render_wall: float | None = None
        # With --baseline: (findings it absorbed, its entries that matched nothing).
        self.baseline: tuple[int, int] | None = None
        # The texts edits are placed in (files are read when first asked; stdin is given).
        self.sources = Sources()
        self._edits: dict[int, list[Edit] | None] = {}

    def edits_of(self, finding: Finding) -> list[Edit] | None:
        """The finding's fix as edits of the source, or None (no plan, or it cannot be placed
        exactly); resolved once, when a report or ``--fix`` asks."""
        if finding.plan is None:
            return None
        key = id(finding.plan)  # findings of one group share their plan: resolved once
        if key not in self._edits:
            self._edits[key] = resolve(finding.plan, self.sources)
        return self._edits[key]

    @property
    def render_seconds(self) -> float:
        """How long rendering took (the units render side by side)."""
        if self.render_wall is not None:
            return self.render_wall
        return sum(unit.render_seconds for unit in self.units)

    def __repr__(self) -> str:
        return f"Result(findings={self.findings!r}, files={self.files!r})"

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)


def scope_items(inventory: Inventory, scope: str) -> Iterable[Any]:
    if scope in VIEW_SCOPES:
        return inventory.items_of(scope)
    if scope == "autoscaler":
        return _view_scope_items(inventory, scope)
    if scope == "pod-owner":
        return pod_owners(inventory)
    if scope == "adapter-rule":
        return list(inventory.adapter_rules())
    if scope == "adapter-config":
        return inventory.adapter_configs
    if scope == "prometheus-query":
        return [*inventory.adapter_rules(), *_view_scope_items(inventory, scope)]
    if scope == "target-group":
        return list(inventory.target_groups().values())
    if scope == "monitor":
        return inventory.pipeline.all_monitors()
    if scope == "exporter":
        return inventory.pipeline.all_exporters()
    if scope == "prometheus-url":
        return inventory.pipeline.all_urls()
    if scope == "inventory":
        return [inventory]
    raise ValueError(f"unknown scope {scope}")


def _view_scope_items(inventory: Inventory, scope: str) -> list[Any]:
    """What the views of every kind add to ``scope`` (``KindView.scope_items``), in the
    order of the registry."""
    return [
        item
        for view_scope in VIEW_SCOPES
        for view in inventory.items_of(view_scope)
        for item_scope, item in view.scope_items()
        if item_scope == scope
    ]


def scope_items_of(inventory: Inventory) -> Any:
    return lambda scope: scope_items(inventory, scope)


def pod_owners(inventory: Inventory) -> Iterator[PodOwner]:
    for manifest in inventory.workloads:
        owner = pod_owner(manifest, None)
        if owner is not None:
            yield owner
    for scope in VIEW_SCOPES:
        for view in inventory.items_of(scope):
            owner = pod_owner(view.manifest, view)
            if owner is not None:
                yield owner


def pod_owner(manifest: Manifest, view: Any) -> PodOwner | None:
    """An object as the ``pod-owner`` scope sees it: its pod templates, or its view's (a
    Knative Service's revision template, an InferenceService's components); None for
    objects without pods (autoscalers, ConfigMaps)."""
    if view is not None:
        templates = view.pod_templates() if hasattr(view, "pod_templates") else []
        return PodOwner(manifest, templates) if templates else None
    templates = pod_templates(manifest)
    return PodOwner(manifest, templates) if templates else None


def _owner_manifest(item: Any) -> Document | None:
    for attribute in ("manifest", "document"):
        value = getattr(item, attribute, None)
        if isinstance(value, Document):
            return value
    autoscalers = getattr(item, "autoscalers", None)  # a target group
    if autoscalers:
        return _owner_manifest(autoscalers[0])
    return None


def run(
    inventory: Inventory,
    selection: Selection | None = None,
    items_for: Any = None,
    deadline: float | None = None,
    suppressed: dict[str, int] | None = None,
    per_rule: int | None = None,
) -> list[Finding]:
    """Run every enabled rule; return findings after suppression, sorted.

    ``suppressed``, when given, counts the findings suppressions silenced, by rule.
    ``per_rule`` stops a rule after that many findings (an admission answer has room for a
    few; thousands of duplicate keys in one ConfigMap must not cost a review seconds).

    ``items_for(scope)`` may narrow what each scope iterates (the webhook evaluates only the
    admitted object and what relates to it); when it has a ``manifests`` attribute, unused
    suppressions are looked for on those manifests only. ``deadline`` is a
    ``time.monotonic()`` value: once it has passed, ``DeadlineExceeded`` is raised before the
    next rule starts.
    """
    settings: Settings = inventory.settings
    selection = selection or Selection()
    raw: list[tuple[Finding, Anchor | None]] = []
    ran: set[str] = set()
    available = {"live": inventory.live is not None, "cluster": inventory.cluster is not None}
    items_by_scope: dict[str, list[Any]] = {}
    for info in rule_index():
        rule_settings = settings.rule(info.id)
        if not rule_settings.enabled or not selection.allows(info):
            continue
        if info.requires is not None and not available.get(info.requires, False):
            continue
        if deadline is not None and time.monotonic() > deadline:
            raise DeadlineExceeded(info.id)
        ran.add(info.id)
        if info.scope not in items_by_scope:
            source = items_for if items_for is not None else scope_items_of(inventory)
            items_by_scope[info.scope] = list(source(info.scope))
        items = items_by_scope[info.scope]
        if not items:
            continue
        spec = load_rule(info)
        options = spec.defaults()
        options.update(rule_settings.options)
        ctx = Context(spec, options)
        found = 0
        for item in items:
            if per_rule is not None and found >= per_rule:
                break
            try:
                for finding in spec.check(item, inventory, ctx):
                    found += 1
                    if per_rule is not None and found > per_rule:
                        break
                    anchor = ctx.anchors.pop(id(finding), None)
                    if rule_settings.severity is not None:
                        finding = finding._replace(severity=rule_settings.severity)
                    raw.append((finding, anchor))
            except DeadlineExceeded:
                raise
            except Exception as error:  # one rule failing on one item loses nothing else
                internal = _internal_error(spec, item, error)
                if internal is not None:
                    raw.append(internal)
    manifests = getattr(items_for, "manifests", None)
    findings = _suppress(raw, inventory, ran, selection, manifests, suppressed)
    findings.sort(key=Finding.sort_key)
    return _dedupe(findings)


def _internal_error(
    spec: RuleSpec, item: Any, error: BaseException
) -> tuple[Finding, Anchor | None] | None:
    """GL799 for the object a rule failed on, naming the rule and the exception."""
    internal = rule_by_id(INTERNAL_ERROR)
    if internal is None or spec.id == INTERNAL_ERROR:
        return None
    ctx = Context(internal, internal.defaults())
    document = _owner_manifest(item)
    where = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    at = f" at {os.path.basename(where[0].filename)}:{where[0].lineno}" if where else ""
    text = " ".join(str(error).split())[:200]
    message = (
        f"gpulint could not finish rule {spec.id} ({spec.name}) on this object: "
        f"{type(error).__name__}{': ' + text if text else ''}{at}; the other rules still ran"
    )
    fix = "report it to gpulint with this file (and suppress the rule here meanwhile)"
    if document is None:
        return ctx.at(Location("<gpulint>", 1, 1), message, fix), None
    finding = ctx.finding(document, (), message, fix)
    return finding, ctx.anchors.pop(id(finding), None)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for finding in findings:
        key = (finding.rule, finding.location, finding.message)
        if key not in seen:
            seen.add(key)
            unique.append(finding)
    return unique


# --- suppression ---------------------------------------------------------------------------


def _parse_ignore_list(value: Any) -> set[str]:
    if not isinstance(value, str):
        return set()
    return {part.strip().upper() for part in value.replace(";", ",").split(",") if part.strip()}


def _annotation_suppressions(anchor: Anchor) -> list[tuple[Document, Path, set[str]]]:
    """Ignore annotations that cover a finding: the object's, and any pod template's on its
    path (``spec.template.metadata.annotations``)."""
    found: list[tuple[Document, Path, set[str]]] = []
    document, path = anchor.document, anchor.path
    data = document.data
    if isinstance(data, dict):
        annotations = (
            (data.get("metadata") or {}).get("annotations")
            if isinstance(data.get("metadata"), dict)
            else None
        )
        if isinstance(annotations, dict) and IGNORE_ANNOTATION in annotations:
            found.append(
                (
                    document,
                    ("metadata", "annotations", IGNORE_ANNOTATION),
                    _parse_ignore_list(annotations[IGNORE_ANNOTATION]),
                )
            )
    node: Any = data
    for index, step in enumerate(path):
        if not has_step(node, step):
            break
        node = node[step]
        if step in ("template", "leaderTemplate", "workerTemplate") and isinstance(node, dict):
            metadata = node.get("metadata")
            annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
            if isinstance(annotations, dict) and IGNORE_ANNOTATION in annotations:
                where = (*path[: index + 1], "metadata", "annotations", IGNORE_ANNOTATION)
                found.append((document, where, _parse_ignore_list(annotations[IGNORE_ANNOTATION])))
    return found


def _matches(rules: set[str] | frozenset[str], finding: Finding) -> bool:
    return "ALL" in rules or "*" in rules or finding.rule in rules or finding.name.upper() in rules


def _suppress(
    raw: list[tuple[Finding, Anchor | None]],
    inventory: Inventory,
    ran: set[str],
    selection: Selection,
    manifests: Iterable[Manifest] | None = None,
    counts: dict[str, int] | None = None,
) -> list[Finding]:
    comments_by_line: dict[tuple[str, int], list[IgnoreComment]] = {}
    for comment in inventory.ignore_comments:
        comments_by_line.setdefault((comment.file, comment.line), []).append(comment)
    used_comments: set[tuple[IgnoreComment, str]] = set()
    used_annotations: set[tuple[int, Path, str]] = set()
    annotations_seen: dict[tuple[int, Path], tuple[Document, set[str]]] = {}
    kept = []
    for finding, anchor in raw:
        suppressed = False
        location = finding.location
        for line in (location.line, location.line - 1):
            for comment in comments_by_line.get((location.file, line), []):
                if _matches(comment.rules, finding):
                    suppressed = True
                    used_comments.add((comment, finding.rule))
        if anchor is not None:
            for document, where, rules in _annotation_suppressions(anchor):
                annotations_seen[(id(document), where)] = (document, rules)
                if _matches(rules, finding):
                    suppressed = True
                    used_annotations.add((id(document), where, finding.rule))
        if not suppressed:
            kept.append(finding)
        elif counts is not None:
            counts[finding.rule] = counts.get(finding.rule, 0) + 1
    if UNUSED_SUPPRESSION not in ran:
        return kept
    spec = rule_by_id(UNUSED_SUPPRESSION)
    if spec is None:
        return kept
    # Suppressions that silenced nothing: report rule IDs that ran and found nothing there.
    ctx = Context(spec, spec.defaults())
    for comment in inventory.ignore_comments:
        for rule in sorted(comment.rules):
            if rule in ("ALL", "*") or rule not in ran or (comment, rule) in used_comments:
                continue
            kept.append(
                ctx.at(
                    Location(comment.file, comment.line, comment.column),
                    f"`# gpulint: ignore={rule}` suppresses nothing on this line or the next",
                    f"delete {rule} from the comment",
                )
            )
    for manifest in inventory.manifests if manifests is None else manifests:
        for anchor_key in _all_annotation_suppressions(manifest):
            document, where, rules = anchor_key
            for rule in sorted(rules):
                if rule in ("ALL", "*") or rule not in ran:
                    continue
                if (id(document), where, rule) in used_annotations:
                    continue
                kept.append(
                    ctx.finding(
                        document,
                        where,
                        f"annotation {IGNORE_ANNOTATION} lists {rule}, which reports nothing here",
                        f"remove {rule} from the {IGNORE_ANNOTATION} annotation",
                    )
                )
                ctx.anchors.clear()
    return kept


def _all_annotation_suppressions(manifest: Manifest) -> list[tuple[Document, Path, set[str]]]:
    found: list[tuple[Document, Path, set[str]]] = []
    annotations = manifest.annotations
    if IGNORE_ANNOTATION in annotations:
        found.append(
            (
                manifest,
                ("metadata", "annotations", IGNORE_ANNOTATION),
                _parse_ignore_list(annotations[IGNORE_ANNOTATION]),
            )
        )
    for template in pod_templates(manifest):
        if IGNORE_ANNOTATION in template.annotations:
            found.append(
                (
                    manifest,
                    (*template.path, "metadata", "annotations", IGNORE_ANNOTATION),
                    _parse_ignore_list(template.annotations[IGNORE_ANNOTATION]),
                )
            )
    return found


def inventory_from_paths(paths: Iterable[str], settings: Settings) -> Inventory:
    """Every file under ``paths`` (``-`` is stdin) in one inventory, as if they were one
    cluster, without rendering anything (``gpulint.engine.files`` plans units instead). Raises
    InputError for a missing path."""
    from gpulint.input.loader import load_file
    from gpulint.input.units.walk import walk

    inventory = Inventory(settings)
    for path in paths:
        if path == "-":
            inventory.add_file(load_file("-"))
            continue
        walked = walk(path, exclude=settings)
        inventory.problems.extend(walked.problems)
        inventory.skipped.extend(walked.skipped)
        for file in walked.files:
            if not settings.excluded(file):
                inventory.add_file(load_file(file))
    return inventory
