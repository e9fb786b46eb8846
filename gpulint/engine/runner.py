"""The one engine: run the rule pack over an inventory and apply suppressions.

Every front door (CLI, webhook, cluster mode) builds an Inventory and calls ``run``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any

from gpulint.core.deadline import DeadlineExceeded
from gpulint.core.forked import forked
from gpulint.core.model import Finding, Location
from gpulint.engine.config import RuleSettings, Settings
from gpulint.engine.fixes import settle
from gpulint.engine.registry import RuleInfo, Selection, load_rule, rule_by_id, rule_index
from gpulint.engine.rule import Anchor, Context, RuleSpec
from gpulint.engine.scopes import scope_items, scope_items_of
from gpulint.engine.settled import merge_settled
from gpulint.engine.twocores import Unplaceable, document_index, pickled, unpickled
from gpulint.input.document import Document, Manifest, Path, has_step
from gpulint.input.loader import IgnoreComment, load_file
from gpulint.input.units.scope import OWN_FILE, not_input, not_input_by_name
from gpulint.input.units.walk import walk
from gpulint.inventory import Inventory
from gpulint.kinds.workload import pod_templates

IGNORE_ANNOTATION = "gpulint.dev/ignore"
UNUSED_SUPPRESSION = "GL703"
INTERNAL_ERROR = "GL799"
# Below this many objects, running rules on a second core costs more than it saves (the fork
# copies the page tables, and what the child touches is copied page by page).
TWO_CORES_MIN_OBJECTS = 1000


def run(
    inventory: Inventory,
    selection: Selection | None = None,
    items_for: Any = None,
    deadline: float | None = None,
    suppressed: dict[str, int] | None = None,
    per_rule: int | None = None,
    split: bool = False,
    requires: str | None = None,
) -> list[Finding]:
    """Run every enabled rule; return findings after suppression, sorted, their fixes
    weighed against each other (``gpulint.engine.fixes``).

    ``requires`` runs only the rules that need what a front door collected under that name
    (``"replay"``: ``gpulint replay`` hands each replayed autoscaler to them through
    ``items_for``).

    ``suppressed``, when given, counts the findings suppressions silenced, by rule.
    ``per_rule`` stops a rule after that many findings (an admission answer has room for a
    few; thousands of duplicate keys in one ConfigMap must not cost a review seconds).

    ``items_for(scope)`` may narrow what each scope iterates (the webhook evaluates only the
    admitted object and what relates to it); when it has a ``manifests`` attribute, unused
    suppressions are looked for on those manifests only. ``deadline`` is a
    ``time.monotonic()`` value: once it has passed, ``DeadlineExceeded`` is raised before the
    next rule starts.

    ``split`` runs a share of the rules on the second core (``_run_on_two_cores``) when the
    inventory is large enough to pay for it; the findings are the same.
    """
    settings: Settings = inventory.settings
    selection = selection or Selection()
    raw: list[tuple[Finding, Anchor | None]] = []
    available = (inventory.live is not None, inventory.cluster is not None)
    source = items_for if items_for is not None else scope_items_of(inventory)
    plan = _plan(settings, selection, available, requires)
    if (
        split
        and len(inventory) >= TWO_CORES_MIN_OBJECTS
        and len(plan.ids) <= _TaskQueue.MOST
        and items_for is None
        and deadline is None
        and per_rule is None
    ):
        tasks = [
            _Task(rule, [(0, items)])
            for scope, planned in plan.by_scope
            if (items := list(source(scope)))
            for rule in planned
        ]
        raw = [entry for task in _run_on_two_cores(tasks, [inventory]) for entry in task[0]]
    else:
        for scope, planned in plan.by_scope:
            items = list(source(scope))
            if not items:
                continue
            for rule in planned:
                if deadline is not None and time.monotonic() > deadline:
                    raise DeadlineExceeded(rule.info.id)
                raw.extend(rule.run(items, inventory, per_rule))
    manifests = getattr(items_for, "manifests", None)
    return _finished(raw, inventory, plan, selection, manifests, suppressed)


def _finished(
    raw: list[tuple[Finding, Anchor | None]],
    inventory: Inventory,
    plan: _Plan,
    selection: Selection,
    manifests: Iterable[Manifest] | None,
    suppressed: dict[str, int] | None,
) -> list[Finding]:
    """What the rules found, a live finding merged into the offline one it settles, after
    suppression, sorted, each fix weighed against the others."""
    findings = _suppress(merge_settled(raw), inventory, plan.ids, selection, manifests, suppressed)
    findings.sort(key=Finding.sort_key)
    return settle(_dedupe(findings))


def run_units(
    inventories: list[Inventory],
    selection: Selection | None = None,
    suppressed: list[dict[str, int]] | None = None,
    split: bool = False,
) -> list[list[Finding]]:
    """``run`` for each of several inventories (the units of a run), in one pass: each rule
    is started once for all of them, not once per unit, and with ``split`` the second core
    takes a share of the rules when the inventories together are large enough (a run of
    1,000 one-application units is as large as one unit of 1,000 applications). Each
    inventory's findings (and its ``suppressed`` counts, in the same order) are those ``run``
    gives it alone."""
    selection = selection or Selection()
    # One plan for the batch (another only for inventories with other settings or evidence).
    planned_for: dict[tuple[int, bool, bool], _Plan] = {}
    plans = []
    for inventory in inventories:
        available = (inventory.live is not None, inventory.cluster is not None)
        key = (id(inventory.settings), *available)
        if key not in planned_for:
            planned_for[key] = _plan(inventory.settings, selection, available)
        plans.append(planned_for[key])
    tasks: list[_Task] = []
    number_of: dict[int, int] = {}  # id of a planned rule -> its task
    # Per inventory, where its rules' findings are, (task, entry), in the order run makes them.
    steps: list[list[tuple[int, int]]] = []
    for index, (inventory, plan) in enumerate(zip(inventories, plans, strict=True)):
        own: list[tuple[int, int]] = []
        for scope, planned in plan.by_scope:
            items = list(scope_items(inventory, scope))
            if not items:
                continue
            for rule in planned:
                number = number_of.get(id(rule))
                if number is None:
                    number = number_of[id(rule)] = len(tasks)
                    tasks.append(_Task(rule, []))
                own.append((number, len(tasks[number].entries)))
                tasks[number].entries.append((index, items))
        steps.append(own)
    if (
        split
        and sum(len(inventory) for inventory in inventories) >= TWO_CORES_MIN_OBJECTS
        and len(tasks) <= _TaskQueue.MOST
    ):
        results = _run_on_two_cores(tasks, inventories)
    else:
        results = [task.run(inventories) for task in tasks]
    found = []
    for index, (inventory, plan) in enumerate(zip(inventories, plans, strict=True)):
        raw = [entry for number, at in steps[index] for entry in results[number][at]]
        counts = suppressed[index] if suppressed is not None else None
        found.append(_finished(raw, inventory, plan, selection, None, counts))
    return found


class _Planned:
    """One rule a run starts, with its settings and its options' defaults, worked out once
    for every run of the plan (the rule is imported when its scope first has items)."""

    __slots__ = ("defaults", "info", "settings")

    def __init__(self, info: RuleInfo, settings: RuleSettings) -> None:
        self.info = info
        self.settings = settings
        self.defaults: dict[str, Any] | None = None

    def run(
        self,
        items: list[Any],
        inventory: Inventory,
        per_rule: int | None,
        flagged: list[int] | None = None,
    ) -> list[tuple[Finding, Anchor | None]]:
        """The rule's findings over ``items``; ``flagged``, when given, gets the index of
        each item it found something on (or failed on)."""
        spec, options = self.started()
        return _run_rule(spec, items, inventory, self.settings, options, per_rule, flagged)

    def started(self) -> tuple[RuleSpec, dict[str, Any]]:
        """The rule, imported, and its options for this run."""
        spec = load_rule(self.info)
        if self.defaults is None:
            self.defaults = spec.defaults()
        # Merged on every run: a rule's options are its own to change, and the settings'
        # are read as they are now.
        return spec, {**self.defaults, **self.settings.options}


class _Task:
    """One rule over the items of its scope in one or more inventories: ``entries`` holds
    (the inventory's position, its items)."""

    __slots__ = ("entries", "rule")

    def __init__(self, rule: _Planned, entries: list[tuple[int, list[Any]]]) -> None:
        self.rule = rule
        self.entries = entries

    def run(
        self,
        inventories: list[Inventory],
        flagged: list[list[int]] | None = None,
        chosen: list[list[Any]] | None = None,
    ) -> list[list[tuple[Finding, Anchor | None]]]:
        """The rule's findings in each entry (over ``chosen[n]`` instead of entry n's items
        when given); ``flagged``, when given, gets for each entry the indexes of the items it
        found something on."""
        spec, options = self.rule.started()
        found = []
        for number, (index, items) in enumerate(self.entries):
            marks: list[int] | None = None
            if flagged is not None:
                marks = []
                flagged.append(marks)
            judged = items if chosen is None else chosen[number]
            found.append(
                _run_rule(
                    spec, judged, inventories[index], self.rule.settings, options, None, marks
                )
                if judged
                else []
            )
        return found


class _Plan:
    """The rules a run starts, grouped by the scope they iterate (in the order each scope's
    first rule comes in ID order), so that a scope with no items skips its rules at once;
    findings are sorted after the run, so the order rules run in does not show."""

    __slots__ = ("by_scope", "ids")

    def __init__(self, planned: list[_Planned]) -> None:
        groups: dict[str, list[_Planned]] = {}
        for rule in planned:
            groups.setdefault(rule.info.scope, []).append(rule)
        self.by_scope = list(groups.items())
        self.ids = frozenset(rule.info.id for rule in planned)


# The rules a run starts, by what decides them (settings, selection, the evidence at hand):
# worked out once, not on every admission review. The key holds the settings and each rule's
# settings themselves (compared by identity), so none of their ids can be reused by another
# object while the plan is kept, and a rule's settings replaced or switched off plans again;
# the value holds the rule index it was planned from, which forget_index() replaces.
_PLANS: dict[tuple[Any, ...], tuple[list[RuleInfo], _Plan]] = {}


def _plan(
    settings: Settings,
    selection: Selection,
    available: tuple[bool, bool],
    requires: str | None = None,
) -> _Plan:
    """The rules to run, grouped by scope, each with its settings; with ``requires``, only
    the rules that need it."""
    configured = tuple((rule, each, each.enabled) for rule, each in settings.rules.items())
    index = rule_index()
    key = (
        settings,
        configured,
        tuple(selection.select),
        tuple(selection.ignore),
        available,
        requires,
    )
    cached = _PLANS.get(key)
    if cached is not None and cached[0] is index:
        return cached[1]
    has = {"live": available[0], "cluster": available[1]}
    planned = []
    for info in index:
        rule_settings = settings.rule(info.id)
        if not rule_settings.enabled or not selection.allows(info):
            continue
        if requires is not None and info.requires != requires:
            continue
        if requires is None and info.requires is not None and not has.get(info.requires, False):
            continue
        planned.append(_Planned(info, rule_settings))
    if len(_PLANS) >= 32:
        _PLANS.clear()
    plan = _Plan(planned)
    _PLANS[key] = (index, plan)
    return plan


def _run_on_two_cores(
    tasks: list[_Task], inventories: list[Inventory]
) -> list[list[list[tuple[Finding, Anchor | None]]]]:
    """Every task, shared with a forked child (``gpulint.core.forked``); each task's findings
    per entry, as one core makes them.

    The two processes take tasks from one queue, a pipe holding each task's number, so
    that neither waits for the other while tasks are left, however unequal their costs.
    The child sends its tasks' findings back with the documents they point at named, not
    copied (``gpulint.engine.twocores``), so that fixes and suppressions meet this
    process's own documents. A task whose findings point at a document no inventory lists
    is answered with the items it found something on instead, and run again here on those
    items alone; a child that fails leaves its tasks to be run here in full.
    """
    documents = [
        document for inventory in inventories for document in inventory.store.documents.items
    ]
    index_of = document_index(documents)
    queue = _TaskQueue(len(tasks))

    def child() -> Iterator[tuple[int, bytes | list[list[int]]]]:
        for number in queue:
            flagged: list[list[int]] = []
            raw = tasks[number].run(inventories, flagged)
            answer: bytes | list[list[int]]
            try:
                answer = pickled(raw, documents, index_of)
            except Unplaceable:
                answer = flagged
            yield number, answer

    results: dict[int, list[list[tuple[Finding, Anchor | None]]]] = {}
    with queue, forked(child) as collect:
        for number in queue:
            results[number] = tasks[number].run(inventories)
        answers = dict(collect() or ())
    for number, task in enumerate(tasks):
        if number in results:
            continue
        answer = answers.get(number)
        if isinstance(answer, bytes):
            try:
                results[number] = unpickled(answer, documents)
                continue
            except Exception:  # an answer that does not read back: the task runs here
                answer = None
        if answer is None:
            results[number] = task.run(inventories)
            continue
        chosen = [
            [items[at] for at in marks]
            for (_, items), marks in zip(task.entries, answer, strict=True)
        ]
        results[number] = task.run(inventories, chosen=chosen)
    return [results[number] for number in range(len(tasks))]


class _TaskQueue:
    """The numbers 0..count-1 in a pipe, each taken by whichever process reads it first (a
    read of 4 bytes from a pipe is never split). Iterating takes numbers until none is left."""

    # The numbers are written whole before anyone reads: a pipe holds at least a page
    # (4 KiB, 1,024 numbers) on Linux and 16 KiB on macOS. A plan has one number per rule,
    # and ``run`` keeps a larger plan on one core.
    MOST = 1024

    def __init__(self, count: int) -> None:
        import struct

        self._read, write = os.pipe()
        os.write(write, struct.pack(f"<{count}I", *range(count)))
        os.close(write)

    def __iter__(self) -> Iterator[int]:
        while len(taken := os.read(self._read, 4)) == 4:
            yield int.from_bytes(taken, "little")

    def __enter__(self) -> _TaskQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._read)


def _run_rule(
    spec: RuleSpec,
    items: list[Any],
    inventory: Inventory,
    rule_settings: RuleSettings,
    options: dict[str, Any],
    per_rule: int | None,
    flagged: list[int] | None = None,
) -> list[tuple[Finding, Anchor | None]]:
    """One rule over the items of its scope: its findings (at most ``per_rule``), each with
    where it was raised, and GL799 for each item it failed on (``flagged``, when given, gets
    the index of each item that added to them)."""
    ctx = Context(spec, options)
    raw: list[tuple[Finding, Anchor | None]] = []
    found = 0
    for index, item in enumerate(items):
        if per_rule is not None and found >= per_rule:
            break
        before = len(raw)
        try:
            ctx.judging(item)
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
        if flagged is not None and len(raw) > before:
            flagged.append(index)
    return raw


def _owner_manifest(item: Any) -> Document | None:
    for attribute in ("manifest", "document"):
        value = getattr(item, attribute, None)
        if isinstance(value, Document):
            return value
    autoscalers = getattr(item, "autoscalers", None)  # a target group
    if autoscalers:
        return _owner_manifest(autoscalers[0])
    return None


def _internal_error(
    spec: RuleSpec, item: Any, error: BaseException
) -> tuple[Finding, Anchor | None] | None:
    """GL799 for the object a rule failed on, naming the rule and the exception."""
    internal = rule_by_id(INTERNAL_ERROR)
    if internal is None or spec.id == INTERNAL_ERROR:
        return None
    ctx = Context(internal, internal.defaults())
    document = _owner_manifest(item)
    import traceback  # only when a rule fails: a lint that goes well does not import it

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


class _Used:
    """The suppressions that silenced something: (comment, rule) and (document, path, rule)."""

    def __init__(self) -> None:
        self.comments: set[tuple[IgnoreComment, str]] = set()
        self.annotations: set[tuple[int, Path, str]] = set()


def _suppress(
    raw: list[tuple[Finding, Anchor | None]],
    inventory: Inventory,
    ran: AbstractSet[str],
    selection: Selection,
    manifests: Iterable[Manifest] | None = None,
    counts: dict[str, int] | None = None,
) -> list[Finding]:
    """The findings no ignore comment or annotation covers, then GL703 for the suppressions
    that silenced nothing of a rule that ran."""
    comments_by_line: dict[tuple[str, int], list[IgnoreComment]] = {}
    for comment in inventory.ignore_comments:
        comments_by_line.setdefault((comment.file, comment.line), []).append(comment)
    used = _Used()
    kept = []
    for finding, anchor in raw:
        if not _suppressed(finding, anchor, comments_by_line, used):
            kept.append(finding)
        elif counts is not None:
            counts[finding.rule] = counts.get(finding.rule, 0) + 1
    if UNUSED_SUPPRESSION in ran:
        kept.extend(_unused_suppressions(inventory, ran, used, manifests))
    return kept


def _suppressed(
    finding: Finding,
    anchor: Anchor | None,
    comments_by_line: dict[tuple[str, int], list[IgnoreComment]],
    used: _Used,
) -> bool:
    """Whether a comment on the finding's line or the line before, or an ignore annotation
    on its object or pod template, covers it (every one that does counts as used)."""
    suppressed = False
    location = finding.location
    for line in (location.line, location.line - 1):
        for comment in comments_by_line.get((location.file, line), []):
            if _matches(comment.rules, finding):
                suppressed = True
                used.comments.add((comment, finding.rule))
    if anchor is not None:
        for document, where, rules in _annotation_suppressions(anchor):
            if _matches(rules, finding):
                suppressed = True
                used.annotations.add((id(document), where, finding.rule))
    return suppressed


def _unused_suppressions(
    inventory: Inventory, ran: AbstractSet[str], used: _Used, manifests: Iterable[Manifest] | None
) -> list[Finding]:
    """GL703: suppressions naming a rule that ran and found nothing there."""
    spec = rule_by_id(UNUSED_SUPPRESSION)
    if spec is None:
        return []
    found = []
    ctx = Context(spec, spec.defaults())
    for comment in inventory.ignore_comments:
        for rule in sorted(comment.rules):
            if rule in ("ALL", "*") or rule not in ran or (comment, rule) in used.comments:
                continue
            found.append(
                ctx.at(
                    Location(comment.file, comment.line, comment.column),
                    f"`# gpulint: ignore={rule}` suppresses nothing on this line or the next",
                    f"delete {rule} from the comment",
                )
            )
    for manifest in inventory.manifests if manifests is None else manifests:
        for document, where, rules in _all_annotation_suppressions(manifest):
            for rule in sorted(rules):
                if rule in ("ALL", "*") or rule not in ran:
                    continue
                if (id(document), where, rule) in used.annotations:
                    continue
                found.append(
                    ctx.finding(
                        document,
                        where,
                        f"annotation {IGNORE_ANNOTATION} lists {rule}, which reports nothing here",
                        f"remove {rule} from the {IGNORE_ANNOTATION} annotation",
                    )
                )
                ctx.anchors.clear()
    return found


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
    inventory = Inventory(settings)
    for path in paths:
        if path == "-":
            inventory.add_file(load_file("-"))
            continue
        walked = walk(path, exclude=settings)
        inventory.problems.extend(walked.problems)
        inventory.skipped.extend(walked.skipped)
        for file in walked.files:
            if settings.excluded(file):
                continue
            reason = not_input_by_name(file)
            if reason is None:
                loaded = load_file(file)
                reason = not_input(loaded)
                if reason is None:
                    inventory.add_file(loaded)
                    continue
            if reason != OWN_FILE:
                inventory.skipped.append((file, reason))
    return inventory
