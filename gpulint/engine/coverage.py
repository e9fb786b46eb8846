"""Checks that could not run on an object, and what to add so that they can: said once per
object, as pint says which checks it could not run, so that silence never means "fine".

Three relations have no other side in a unit's context:

* an autoscaler reading Pods, Object or External metrics through prometheus-adapter, in a
  cluster whose input holds no adapter config (or several equally near, none taken): the
  adapter rules (GL401 and the other GL4xx checks of what it serves) cannot say whether the
  metric exists;
* a KEDA ``prometheus`` trigger (or an adapter) querying an in-cluster Prometheus Service,
  in a cluster whose input defines no Prometheus: GL603 cannot say whether the address
  reaches one;
* an autoscaler whose scale target is not in the input: the checks of the pods it scales
  (GPU requests, a CPU metric on GPU pods, two autoscalers on one workload) cannot run.

They are notes, not findings: reports list them (JSON ``notChecked``), the exit code
ignores them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from gpulint.core.model import NotChecked
from gpulint.engine.config import Settings
from gpulint.engine.context import ADAPTER, MONITORS, Context
from gpulint.engine.registry import Selection, rule_index
from gpulint.inventory import Inventory

# A name of another adapter (the Stackdriver adapter's ``a|b|c``): never prometheus-adapter's.
_OTHER_ADAPTER = "|"


def not_checked(
    inventory: Inventory, context: Context, selection: Selection | None = None
) -> list[NotChecked]:
    """What could not be judged in a unit's inventory, one note per object and cause, for the
    checks the run selects and the configuration enables."""
    found = [*_unserved_metrics(inventory, context), *_unknown_targets(inventory)]
    found.extend(_unjudged_addresses(inventory, context))
    wanted = _wanted(inventory.settings, selection or Selection())
    return sorted((n for n in found if wanted(n)), key=NotChecked.sort_key)


def merged(per_unit: list[tuple[str, list[NotChecked]]]) -> list[NotChecked]:
    """One note per object and cause, naming the units it was found in when there are
    several (a base rendered into two overlays)."""
    first: dict[tuple[object, ...], tuple[NotChecked, list[str]]] = {}
    for unit, notes in per_unit:
        for note in notes:
            # Overlays render one base object in several namespaces: its place is the same.
            where = note.location
            key = (note.checks, where.file, where.line, where.column, note.reason, note.remedy)
            _, names = first.setdefault(key, (note, []))
            if unit not in names:
                names.append(unit)
    found = [
        note._replace(units=tuple(names), location=note.location._replace(rendered_from=None))
        if len(names) > 1
        else note
        for note, names in first.values()
    ]
    return sorted(found, key=NotChecked.sort_key)


def _wanted(settings: Settings, selection: Selection) -> Callable[[NotChecked], bool]:
    infos = {info.id: info for info in rule_index()}

    def wanted(note: NotChecked) -> bool:
        return any(
            rule in infos and selection.allows(infos[rule]) and settings.rule(rule).enabled
            for rule in note.checks.split(", ")
        )

    return wanted


def _unserved_metrics(inventory: Inventory, context: Context) -> Iterator[NotChecked]:
    if inventory.adapter_configs:
        return
    left = context.providers_left(ADAPTER)
    if left:
        reason = (
            f"{len(left)} prometheus-adapter configs of its cluster are equally near "
            f"({', '.join(left)}), so none was taken"
        )
        remedy = "declare which cluster each belongs to under clusters: in .gpulint.yaml"
    else:
        reason = "its cluster's input holds no prometheus-adapter config"
        remedy = (
            "lint the adapter's Helm values or ConfigMap with it (name its directory too, or "
            "list it under clusters: in .gpulint.yaml)"
        )
    for view in inventory.metrics_api_readers():
        if view.generator() is not None:
            continue  # made by KEDA or KServe: read through their own metrics servers
        reads = [
            metric
            for metric in view.adapter_reads()
            if metric.name and _OTHER_ADAPTER not in metric.name
        ]
        if not reads:
            continue
        names = ", ".join(f"{m.type} metric {m.name}" for m in reads[:3])
        more = f" and {len(reads) - 3} more" if len(reads) > 3 else ""
        manifest = view.manifest
        yield NotChecked(
            "GL401",
            manifest.ref,
            manifest.location(reads[0].name_path),
            f"whether prometheus-adapter serves its {names}{more}: {reason}",
            remedy,
        )


def _unknown_targets(inventory: Inventory) -> Iterator[NotChecked]:
    seen: set[int] = set()
    for autoscaler in inventory.autoscalers():
        ref = autoscaler.ref
        manifest = autoscaler.manifest
        if autoscaler.implicit or ref is None or id(manifest) in seen:
            continue
        if manifest.ref.kind == "VerticalPodAutoscaler":
            continue
        resolved = inventory.resolve_target(manifest.namespace, ref, manifest)
        if resolved.found:
            continue
        seen.add(id(manifest))
        yield NotChecked(
            "GL101, GL103, GL501",
            manifest.ref,
            manifest.location(autoscaler.path),
            f"the pods it scales: {resolved.describe()} is not in the input",
            "lint the workload's manifest with it",
        )


def _unjudged_addresses(inventory: Inventory, context: Context) -> Iterator[NotChecked]:
    from gpulint.chain.adapter import describe_document
    from gpulint.chain.urltarget import prometheus_services

    for url in inventory.prometheus_urls():
        if url.service is None or url.parsed is None:
            continue  # outside the cluster, templated or not a URL: GL603 never judges it
        if prometheus_services(inventory, url.document):
            continue
        left = context.providers_left(MONITORS)
        reason = (
            f"{len(left)} units holding Prometheus objects are equally near ({', '.join(left)})"
            if left
            else "its cluster's input defines no Prometheus server or Service"
        )
        yield NotChecked(
            "GL603",
            url.owner.ref if url.owner is not None else describe_document(url.document),
            url.document.location(url.path),
            f"whether {url.url[:200]} reaches a Prometheus: {reason}",
            "lint the Prometheus (kube-prometheus-stack values, a Prometheus object or its "
            "Service) with it",
        )
