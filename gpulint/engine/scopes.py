"""What each rule scope iterates over in an inventory (see ``gpulint.engine.rule.SCOPES``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from gpulint.input.document import Manifest
from gpulint.inventory import Inventory
from gpulint.kinds.registry import VIEW_SCOPES
from gpulint.kinds.workload import PodTemplate, pod_templates


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


def scope_items(inventory: Inventory, scope: str) -> Iterable[Any]:
    if scope in VIEW_SCOPES:
        return inventory.items_of(scope)
    if scope in ("autoscaler", "metrics-reader"):
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
