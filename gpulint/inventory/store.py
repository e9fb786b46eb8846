"""The objects of one inventory and the indexes every other part looks them up by.

Objects come and go (a cluster cache's watch events, an admission overlay): every list here
can give up an item in O(1) (swap with the last), and the indexes follow each change, so that
one change costs what relates to it, never the size of the store.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from gpulint.input.document import Document, Manifest
from gpulint.inventory.nearest import nearest
from gpulint.kinds.registry import VIEW_SCOPES
from gpulint.kinds.view import KindView

Key = tuple[str, str, str]  # (kind, namespace or "", name)


def key_of(kind: str, namespace: str | None, name: str) -> Key:
    return (kind, namespace or "", name)


class PositionedList:
    """A list whose items can be taken out in O(1) (the order is not kept after removals)."""

    __slots__ = ("items", "positions")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.positions: dict[int, int] = {}

    def append(self, item: Any) -> None:
        self.positions[id(item)] = len(self.items)
        self.items.append(item)

    def remove(self, item: Any) -> bool:
        """Take ``item`` out by moving the last item into its place; False if it is absent."""
        index = self.positions.pop(id(item), None)
        if index is None:
            return False
        last = self.items.pop()
        if last is not item:
            self.items[index] = last
            self.positions[id(last)] = index
        return True

    def __contains__(self, item: Any) -> bool:
        return id(item) in self.positions

    def __len__(self) -> int:
        return len(self.items)


class ObjectStore:
    """Documents and Kubernetes objects, by kind/namespace/name and by rule scope."""

    def __init__(self) -> None:
        self.documents = PositionedList()  # every classified document, objects included
        self.manifests = PositionedList()
        self.workloads = PositionedList()  # objects with pod templates and no view
        self.scoped: dict[str, PositionedList] = {scope: PositionedList() for scope in VIEW_SCOPES}
        self.by_key: dict[Key, list[Manifest]] = defaultdict(list)
        self.by_name: dict[tuple[str, str], list[Manifest]] = defaultdict(list)
        self.by_kind: dict[str, PositionedList] = defaultdict(PositionedList)
        self.views: dict[int, KindView] = {}  # id(manifest) -> its typed view

    def add_document(self, document: Document) -> None:
        self.documents.append(document)

    def remove_document(self, document: Document) -> None:
        self.documents.remove(document)

    def add(
        self, manifest: Manifest, view: KindView | None, scope: str | None, workload: bool
    ) -> None:
        self.documents.append(manifest)
        self.manifests.append(manifest)
        self.by_key[key_of(manifest.kind, manifest.namespace, manifest.name)].append(manifest)
        self.by_name[(manifest.kind, manifest.name)].append(manifest)
        self.by_kind[manifest.kind].append(manifest)
        if view is not None and scope is not None:
            self.views[id(manifest)] = view
            self.scoped[scope].append(view)
        elif workload:
            self.workloads.append(manifest)

    def remove(self, manifest: Manifest) -> tuple[bool, KindView | None]:
        """Take an object out; (was it there, its view)."""
        if not self.manifests.remove(manifest):
            return False, None
        self.documents.remove(manifest)
        _remove_identical(
            self.by_key, key_of(manifest.kind, manifest.namespace, manifest.name), manifest
        )
        _remove_identical(self.by_name, (manifest.kind, manifest.name), manifest)
        kind_items = self.by_kind.get(manifest.kind)
        if kind_items is not None:
            kind_items.remove(manifest)
        view = self.views.pop(id(manifest), None)
        if view is not None:
            for items in self.scoped.values():
                if items.remove(view):
                    break
        else:
            self.workloads.remove(manifest)
        return True, view

    def __contains__(self, manifest: Manifest) -> bool:
        return manifest in self.manifests

    def view_of(self, manifest: Manifest) -> KindView | None:
        view = self.views.get(id(manifest))
        return view if view is not None and view.manifest is manifest else None

    def scoped_view(self, scope: str, manifest: Manifest) -> Any:
        """The view of ``manifest`` when the registry files its kind under ``scope`` (``isvc``,
        ``knative``), else None: typed by the caller, as the scope lists are."""
        view = self.view_of(manifest)
        return view if view is not None and view in self.scoped[scope] else None

    def of_kind(self, kind: str) -> list[Manifest]:
        found = self.by_kind.get(kind)
        return found.items if found is not None else []

    def find(
        self, kind: str, namespace: str | None, name: str, near: Document | None = None
    ) -> Manifest | None:
        """An object by kind, namespace and name.

        Manifests often leave the namespace to ``kubectl -n`` or kustomize; when either side
        does not say, a unique object of that kind and name matches. When the same object is
        written in several places (one directory per environment), ``near`` picks the copy
        nearest to the document asking.
        """
        exact = self.by_key.get(key_of(kind, namespace, name))
        if exact:
            if near is not None and len(exact) > 1:
                return nearest(exact, near.file, lambda manifest: manifest.file)[0]
            return exact[0]
        candidates = self.by_name.get((kind, name), [])
        if namespace is None:
            return candidates[0] if len(candidates) == 1 else None
        unnamespaced = [m for m in candidates if m.namespace is None]
        return unnamespaced[0] if len(unnamespaced) == 1 else None

    def find_in_group(
        self, group: str, kind: str, namespace: str | None, name: str, near: Document | None = None
    ) -> Manifest | None:
        """``find`` among the objects of one API group: a core Service and a Knative Service
        may share a namespace and name (Knative makes one for each of its Services)."""
        exact = [m for m in self.by_key.get(key_of(kind, namespace, name), []) if m.group == group]
        if exact:
            if near is not None and len(exact) > 1:
                return nearest(exact, near.file, lambda manifest: manifest.file)[0]
            return exact[0]
        candidates = [m for m in self.by_name.get((kind, name), []) if m.group == group]
        if namespace is None:
            return candidates[0] if len(candidates) == 1 else None
        unnamespaced = [m for m in candidates if m.namespace is None]
        return unnamespaced[0] if len(unnamespaced) == 1 else None


def _remove_identical(index: dict[Any, list[Manifest]], key: Any, manifest: Manifest) -> None:
    remaining = [m for m in index.get(key, []) if m is not manifest]
    if remaining:
        index[key] = remaining
    else:
        index.pop(key, None)
