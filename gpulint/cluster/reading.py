"""Discovery, chunked lists, and turning the API's JSON into the inventory's objects.

Shared by cluster mode (one list of each kind) and the informer-style caches (list, then
watch). Objects keep the shape the API gives them; the fields no rule reads and that weigh
the most (``managedFields``, kubectl's last-applied copy of the object) are dropped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from gpulint.cluster.api import ApiError, KubeApi
from gpulint.cluster.decoding import MAX_OBJECT_DEPTH, has_too_deep
from gpulint.cluster.kinds import WatchedKind
from gpulint.cluster.projection import project
from gpulint.input.document import Manifest
from gpulint.kinds.dra import made_for_one_pod

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
PAGE_SIZE = 500

ObjectKey = tuple[str, str, str, str]  # (group, kind, namespace, name)


class Discovery:
    """Which version of a kind the server serves, if any (``/api``, ``/apis/<group>``,
    ``/apis/<group>/<version>``); answers are kept for the life of the object."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self._documents: dict[str, Any] = {}

    def _get(self, path: str) -> Any:
        """A discovery document, or None when the server does not serve the path (404)."""
        if path not in self._documents:
            try:
                self._documents[path] = self.api.get(path)
            except ApiError as error:
                if error.status != 404:
                    raise
                self._documents[path] = None
        return self._documents[path]

    def version(self, kind: WatchedKind) -> str | None:
        """The first of ``kind.versions`` the server serves the resource in; None when it
        serves none (a CRD that is not installed). ApiError for anything but a 404."""
        if kind.group:
            group = self._get(f"/apis/{kind.group}")
            versions = [
                v.get("version")
                for v in (group.get("versions") or [] if isinstance(group, dict) else [])
                if isinstance(v, dict)
            ]
        else:
            core = self._get("/api")
            versions = list(core.get("versions") or []) if isinstance(core, dict) else []
        for version in kind.versions:
            if version not in versions:
                continue
            base = f"/apis/{kind.group}/{version}" if kind.group else f"/api/{version}"
            resources = self._get(base)
            names = [
                r.get("name")
                for r in (resources.get("resources") or [] if isinstance(resources, dict) else [])
                if isinstance(r, dict)
            ]
            if kind.plural in names:
                return version
        return None

    def preferred(self, group: str, versions: tuple[str, ...]) -> str | None:
        """The first of ``versions`` an API group serves (the metrics APIs)."""
        document = self._get(f"/apis/{group}")
        served = [
            v.get("version")
            for v in (document.get("versions") or [] if isinstance(document, dict) else [])
            if isinstance(v, dict)
        ]
        return next((v for v in versions if v in served), None)


def list_query(kind: WatchedKind) -> list[tuple[str, str]]:
    query: list[tuple[str, str]] = []
    if kind.label_selector:
        query.append(("labelSelector", kind.label_selector))
    if kind.field_selector:
        query.append(("fieldSelector", kind.field_selector))
    return query


class Listing:
    """One list of a kind, page by page (``limit``/``continue``), so that a caller holds one
    page of decoded JSON at a time, never the whole kind.

    ``pages()`` yields each page's items and those among them that nest too deeply to be
    read whole (``decoding.MAX_OBJECT_DEPTH``; their deep parts are ``TOO_DEEP``); once it
    is exhausted, ``resource_version`` is the list's, to watch from. A continue token the
    server no longer honours is an ApiError with ``gone``: list again from the start. Past
    ``deadline`` (a ``time.monotonic()`` value), the next page is not asked for: ApiError
    ``Timeout``.
    """

    def __init__(
        self,
        api: KubeApi,
        kind: WatchedKind,
        version: str,
        namespace: str | None,
        page_size: int = PAGE_SIZE,
        deadline: float | None = None,
    ) -> None:
        self.api = api
        self.kind = kind
        self.path = kind.collection_path(version, kind.scope(namespace))
        self.page_size = page_size
        self.deadline = deadline
        self.resource_version = ""
        self.pages_read = 0

    def pages(self) -> Iterator[tuple[list[Any], list[Any]]]:
        query = [*list_query(self.kind), ("limit", str(self.page_size))]
        token = ""
        while True:
            if token and self.deadline is not None and time.monotonic() > self.deadline:
                raise ApiError(
                    None,
                    "Timeout",
                    f"{self.path} was not listed in time ({self.pages_read} pages of "
                    f"{self.page_size} read); listing again",
                )
            data, cut = self.api.get_bounded(
                self.path, [*query, ("continue", token)] if token else query
            )
            if not isinstance(data, dict):
                raise ApiError(200, "BadResponse", f"{self.path} did not answer with a list")
            page = data.get("items")
            page = page if isinstance(page, list) else []
            metadata = data.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            token = str(metadata.get("continue") or "")
            self.pages_read += 1
            if not token:
                self.resource_version = str(metadata.get("resourceVersion") or "")
            yield page, [item for item in page if has_too_deep(item)] if cut else []
            if not token:
                return


def list_objects(
    api: KubeApi,
    kind: WatchedKind,
    version: str,
    namespace: str | None,
    page_size: int = PAGE_SIZE,
) -> tuple[list[Any], str, list[Any]]:
    """Every object of a kind (``Listing``'s pages joined), the list's resourceVersion to
    watch from, and the objects among them that nest too deeply to be read whole."""
    listing = Listing(api, kind, version, namespace, page_size)
    items: list[Any] = []
    too_deep: list[Any] = []
    for page, deep in listing.pages():
        items.extend(page)
        too_deep.extend(deep)
    return items, listing.resource_version, too_deep


def cluster_manifest(
    obj: Any, kind: WatchedKind, version: str, *, projected: bool = True
) -> Manifest | None:
    """An API object as the inventory holds it; None for something that is not an object,
    or that no rule reads and a cluster holds by the thousand (a ResourceClaim made for one
    pod from a template: pods name the template).

    ``projected``: cut to what views and rules read (``gpulint.cluster.projection``); the
    caches keep nothing else. False keeps the object whole (the tests compare the two).

    Items of a list of built-in kinds carry no apiVersion and kind: they are set from the
    list. The file is ``cluster://<namespace>/<kind>/<name>``: findings point there, at line
    and column 1, since the object has no file.
    """
    if not isinstance(obj, dict):
        return None
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return None
    if not isinstance(obj.get("apiVersion"), str):
        obj["apiVersion"] = kind.api_version(version)
    if not isinstance(obj.get("kind"), str):
        obj["kind"] = kind.kind
    if made_for_one_pod(obj):
        return None
    metadata.pop("managedFields", None)
    annotations = metadata.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
    if projected:
        obj = project(obj)
    return Manifest(obj, cluster_file(obj))


def cluster_file(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    namespace = metadata.get("namespace") if isinstance(metadata.get("namespace"), str) else ""
    return f"cluster://{namespace}/{obj.get('kind')}/{metadata.get('name')}"


def too_deep_note(obj: Any, kind: WatchedKind) -> str:
    """What is said of an object that nests too deeply to be read whole."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    namespace, name = metadata.get("namespace"), metadata.get("name")
    where = f"{namespace}/" if isinstance(namespace, str) and namespace else ""
    shown = name[:253] if isinstance(name, str) else "(unnamed)"
    return (
        f"{kind.kind} {where}{shown} nests deeper than {MAX_OBJECT_DEPTH} levels: the parts "
        "below that depth were not read, and nothing gpulint checks is there"
    )


def object_key(manifest: Manifest) -> ObjectKey:
    return (manifest.group, manifest.kind, manifest.namespace or "", manifest.name)


def resource_version(obj: Any) -> str:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    value = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) else ""
