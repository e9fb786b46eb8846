"""An admitted object laid over an inventory, judged with what it relates to, then taken off.

Every front door that judges one incoming object against the rest of a cluster (the
admission webhook over its list/watch caches; anything else that holds an inventory) goes
through ``evaluate_over``: CREATE adds the object, UPDATE replaces the cached version,
DELETE takes it out; the rules run over the items related to the object
(``gpulint.admission.focus``), and the inventory is restored before returning. Without a
cluster, ``evaluate_alone`` judges the object on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpulint.admission.focus import related_items
from gpulint.core.deadline import DeadlineExceeded
from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection
from gpulint.engine.runner import run
from gpulint.input.document import Manifest
from gpulint.inventory import Inventory
from gpulint.kinds.classify import Classified, EmbeddedParser, classify_manifest, parse_embedded
from gpulint.metrics.promql import analysis_deadline

OPERATIONS = ("CREATE", "UPDATE", "DELETE")
# An admission answer has room for a few findings of each rule (the API server keeps 4 KiB of
# warnings); more only cost time.
FINDINGS_PER_RULE = 25


def check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlineExceeded("(start)")


def admitted_manifest(
    obj: Any, old: dict[str, Any] | None, namespace: str | None, file: Callable[[Any], str]
) -> Manifest | None:
    """The admitted object as a cluster object; None when it is not one (no apiVersion,
    kind or name). A namespace left out of the object comes from the old object or the
    namespace the cache is limited to. ``file`` names it (``cluster://ns/Kind/name``)."""
    if not isinstance(obj, dict):
        return None
    if not isinstance(obj.get("apiVersion"), str) or not isinstance(obj.get("kind"), str):
        return None
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return None
    if not metadata.get("namespace"):
        old_metadata = old.get("metadata") if isinstance(old, dict) else None
        fallback = old_metadata.get("namespace") if isinstance(old_metadata, dict) else None
        fallback = fallback or namespace
        if isinstance(fallback, str) and fallback:
            obj = {**obj, "metadata": {**metadata, "namespace": fallback}}
    return Manifest(obj, file(obj))


def evaluate_alone(
    manifest: Manifest | None,
    operation: str,
    settings: Settings,
    selection: Selection | None = None,
    deadline: float | None = None,
    embedded: EmbeddedParser = parse_embedded,
) -> list[Finding]:
    """An admitted object on its own (cross-object rules see only it). A deletion leaves
    nothing to check."""
    check_deadline(deadline)
    if operation not in OPERATIONS:
        raise ValueError(f"unknown operation {operation!r}")
    if operation == "DELETE" or manifest is None:
        return []
    inventory = Inventory(settings, by_directory=False)
    inventory.add(classify_manifest(manifest, embedded=embedded))
    with analysis_deadline(deadline):
        return run(inventory, selection, deadline=deadline, per_rule=FINDINGS_PER_RULE)


def evaluate_over(
    inventory: Inventory,
    admitted: Classified | None,
    cached: Classified | None,
    operation: str,
    selection: Selection | None,
    deadline: float | None,
) -> list[Finding]:
    """Findings about the admitted object as it would be after ``operation``, given what
    else ``inventory`` holds. ``cached`` is the inventory's current version of the object
    (as it was classified when it was added), if it has one; ``admitted`` the object
    classified (None: not an object)."""
    if operation not in OPERATIONS:
        raise ValueError(f"unknown operation {operation!r}")
    manifest = admitted.manifest if admitted is not None else None
    if admitted is None or manifest is None:
        return []
    if operation == "DELETE":
        return _evaluate_deletion(inventory, cached, selection, deadline)
    previous = cached.manifest if cached is not None else None
    if previous is not None:
        inventory.replace(previous, admitted)
    else:
        inventory.add(admitted)
    try:
        focus = related_items(inventory, manifest, previous)
        # The deadline reaches into the analysis of each query too (one query is one step
        # of one rule): a long one cannot hold the review past it.
        with analysis_deadline(deadline):
            findings = run(
                inventory,
                selection,
                items_for=focus,
                deadline=deadline,
                per_rule=FINDINGS_PER_RULE,
            )
    finally:
        if cached is not None:
            inventory.replace(manifest, cached)
        else:
            inventory.remove_manifest(manifest)
    return focus.select(findings)


def _evaluate_deletion(
    inventory: Inventory,
    cached: Classified | None,
    selection: Selection | None,
    deadline: float | None,
) -> list[Finding]:
    """What deleting ``cached`` breaks among the objects related to it: findings about them
    that appear once it is gone."""
    previous = cached.manifest if cached is not None else None
    if cached is None or previous is None:
        return []
    focus = related_items(inventory, None, previous)
    with analysis_deadline(deadline):
        before = run(
            inventory, selection, items_for=focus, deadline=deadline, per_rule=FINDINGS_PER_RULE
        )
        inventory.remove_manifest(previous)
        try:
            after = run(
                inventory,
                selection,
                items_for=focus,
                deadline=deadline,
                per_rule=FINDINGS_PER_RULE,
            )
        finally:
            inventory.add(cached)
    known = {(f.rule, f.location, f.message) for f in before}
    return [f for f in after if (f.rule, f.location, f.message) not in known]
