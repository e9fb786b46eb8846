"""Informer-style caches of the cluster, and the admission evaluation they serve.

One background thread per stream (``kinds.watched_kinds``): discover the served version
(a CRD that is not installed is ``absent``), list in chunks and remember the
resourceVersion, then watch from it, applying ADDED/MODIFIED/DELETED to one shared
``Inventory`` under a lock. A 410 Gone (the HTTP status, or an ERROR event with code 410)
means the server no longer keeps that history: list again. A broken connection is retried
with exponential backoff from the last resourceVersion seen. A 403 is recorded
(``forbidden``) and the stream retried now and then, in case RBAC changes.

``ClusterCache.evaluate`` answers from memory only: it lays the admitted object over the
cached inventory (``gpulint.admission.overlay``) under the lock.

One more thread reads the releases the cluster runs (``gpulint.cluster.versions``: Kubernetes
from /version, KEDA and Knative from their CRDs' labels) at start and again every
``recheck_interval``, so that an upgrade is followed; the rules read them from the cache's
settings.
"""

from __future__ import annotations

import gc
import logging
import random
import threading
import time
from typing import TYPE_CHECKING, Any

from gpulint.admission.embedded import EmbeddedWorker
from gpulint.admission.overlay import (
    admitted_manifest,
    check_deadline,
    evaluate_over,
)
from gpulint.admission.overlay import evaluate_alone as alone
from gpulint.cluster.api import ApiError, KubeApi, WatchStream
from gpulint.cluster.decoding import has_too_deep
from gpulint.cluster.kinds import (
    DEFAULT_CONFIGMAP_NAMESPACES,
    AdapterConfigMapSelector,
    WatchedKind,
    watched_kinds,
)
from gpulint.cluster.reading import (
    PAGE_SIZE,
    Discovery,
    Listing,
    ObjectKey,
    cluster_file,
    cluster_manifest,
    list_query,
    object_key,
    resource_version,
    too_deep_note,
)
from gpulint.cluster.versions import read_versions
from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection, all_rules
from gpulint.input.document import Manifest
from gpulint.inventory import Inventory
from gpulint.kinds.classify import Classified, EmbeddedParser, classify_manifest, parse_embedded
from gpulint.live.snapshot import LiveSnapshot

if TYPE_CHECKING:
    import kubernetes


log = logging.getLogger("gpulint.cluster")

SYNCED, SYNCING, ABSENT, FORBIDDEN, ERROR = "synced", "syncing", "absent", "forbidden", "error"
# How long one list of a kind may take, page after page, before it is given up and started
# again (the stream is then in error, and the webhook answers by its failure policy until a
# list completes). Within the five minutes after which the API server's continue tokens
# expire (kube-apiserver --etcd-compaction-interval, default 5m: a later page is 410 Gone),
# so that a list too slow to finish says so rather than failing on a stale token.
LIST_TIMEOUT = 240.0


class _Entry:
    """A cached object as it was classified, and the streams that hold it (a ConfigMap may
    match two selectors)."""

    __slots__ = ("classified", "holders")

    def __init__(self, classified: Classified, holder: str) -> None:
        self.classified = classified
        self.holders = {holder}

    @property
    def manifest(self) -> Manifest:
        manifest = self.classified.manifest
        assert manifest is not None
        return manifest


class ClusterCache:
    """The cluster's autoscaling objects, kept current by list and watch.

    ``start`` returns at once; ``synced`` says when every kind the server serves has been
    listed once (kinds that are absent or forbidden do not hold it back).
    """

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        settings: Settings,
        *,
        namespace: str | None = None,
        adapter_configmaps: AdapterConfigMapSelector | None = None,
        configmap_namespaces: tuple[str, ...] = DEFAULT_CONFIGMAP_NAMESPACES,
        watch_timeout: int = 300,
        page_size: int = PAGE_SIZE,
        backoff: tuple[float, float] = (0.5, 30.0),
        recheck_interval: float = 300.0,
        embedded: EmbeddedWorker | None = None,
        list_timeout: float = LIST_TIMEOUT,
    ) -> None:
        self.api = KubeApi(api_client)
        # A copy: what the cluster says it runs replaces the configured releases in it only.
        self.settings = settings.with_versions(settings.versions)
        self.configured_versions = settings.versions
        streams = watched_kinds(adapter_configmaps, configmap_namespaces)
        # Each stream holds a connection while it watches; with fewer in the pool, urllib3
        # drops connections instead of reusing them.
        self.api.reserve_connections(len(streams) + 8)
        self.namespace = namespace or None
        self.adapter_configmaps = adapter_configmaps or AdapterConfigMapSelector()
        self.watch_timeout = watch_timeout
        self.page_size = page_size
        self.list_timeout = list_timeout
        self.backoff = backoff
        self.recheck_interval = recheck_interval
        # Parses the YAML a ConfigMap embeds (the adapter's config) with limits, away from
        # this process; without one, in the stream's thread.
        self.embedded = embedded
        self.inventory = Inventory(self.settings, by_directory=False)
        self.lock = threading.RLock()
        self._store: dict[ObjectKey, _Entry] = {}
        self._stopping = threading.Event()
        self._streams = [_Stream(self, kind) for kind in streams]
        self._versions = _VersionReader(self)
        self._warmed = False
        # Objects listed or watched with parts nested too deeply to read (kept without them).
        self.too_deep_objects = 0

    def __repr__(self) -> str:
        return f"ClusterCache({self.api.server!r}, {self.sync_state()!r})"

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start listing and watching in background threads; returns at once."""
        for stream in self._streams:
            stream.start()
        self._versions.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every stream and wait up to ``timeout`` seconds for the threads to end."""
        self._stopping.set()
        for stream in self._streams:
            stream.interrupt()
        end = time.monotonic() + timeout
        for thread in [*self._streams, self._versions]:
            if thread.is_alive():
                thread.join(max(0.0, end - time.monotonic()))

    def synced(self) -> bool:
        return all(s.state in (SYNCED, ABSENT, FORBIDDEN) for s in self._streams)

    def sync_state(self) -> dict[str, str]:
        """Stream -> synced | syncing | absent | forbidden | error."""
        return {s.kind.key: s.state for s in self._streams}

    def sync_details(self) -> dict[str, str]:
        """Stream -> what the server last said when it was not synced (for logs and notes)."""
        return {s.kind.key: s.detail for s in self._streams if s.detail}

    def __len__(self) -> int:
        with self.lock:
            return len(self._store)

    # --- applying what the streams see ------------------------------------------------------

    def _apply(self, stream: _Stream, event: str, obj: Any) -> None:
        manifest = cluster_manifest(obj, stream.kind, stream.version or "")
        if manifest is not None:
            self._apply_manifest(stream, event, manifest)

    def _apply_manifest(self, stream: _Stream, event: str, manifest: Manifest) -> None:
        key = object_key(manifest)
        # Classified (a ConfigMap's embedded config parsed) before the lock is taken.
        classified = None
        if event != "DELETED":
            skipped: list[str] = []
            classified = classify_manifest(manifest, embedded=self.embedded_parser(None, skipped))
            for reason in skipped:
                log.warning(
                    "%s %s/%s: its embedded configuration was not read: %s",
                    manifest.kind,
                    manifest.namespace,
                    manifest.name[:253],
                    reason,
                )
        with self.lock:
            entry = self._store.get(key)
            if classified is None:
                if entry is not None:
                    self._release(key, entry, stream.kind.key)
                return
            if entry is None:
                self._store[key] = _Entry(classified, stream.kind.key)
                self.inventory.add(classified)
                return
            entry.holders.add(stream.kind.key)
            version = resource_version(manifest.data)
            if not version or version != resource_version(entry.manifest.data):
                self.inventory.replace(entry.manifest, classified)
                entry.classified = classified

    def _too_deep(self, stream: _Stream, obj: Any) -> None:
        """An object that lost parts nested too deeply: counted and logged; it is cached
        without them, and the stream goes on."""
        self.too_deep_objects += 1
        log.warning("%s", too_deep_note(obj, stream.kind))

    def _apply_page(self, stream: _Stream, items: list[Any], seen: set[ObjectKey]) -> None:
        """One page of a (re)list applied, the keys of its objects added to ``seen``. The lock
        is taken object by object, so that admissions are not held up by a long list."""
        for obj in items:
            manifest = cluster_manifest(obj, stream.kind, stream.version or "")
            if manifest is not None:
                seen.add(object_key(manifest))
                self._apply_manifest(stream, "ADDED", manifest)

    def _drop_unseen(self, stream: _Stream, seen: set[ObjectKey]) -> None:
        """The end of a (re)list: what the stream holds becomes exactly what it listed."""
        with self.lock:
            for key, entry in list(self._store.items()):
                if stream.kind.key in entry.holders and key not in seen:
                    self._release(key, entry, stream.kind.key)

    def _drop_stream(self, stream: _Stream) -> None:
        """Forget everything a stream held (its kind went away)."""
        with self.lock:
            for key, entry in list(self._store.items()):
                if stream.kind.key in entry.holders:
                    self._release(key, entry, stream.kind.key)

    def _release(self, key: ObjectKey, entry: _Entry, holder: str) -> None:
        entry.holders.discard(holder)
        if not entry.holders:
            del self._store[key]
            self.inventory.remove_manifest(entry.manifest)

    def _warm_up(self) -> None:
        """Once everything is listed: import the rules and build the indexes the first
        admission would otherwise pay for."""
        if self._warmed or not self.synced():
            return
        self._warmed = True
        all_rules()
        with self.lock:
            self.inventory.target_groups()
            self.inventory.metrics_read()
            self.inventory.isvc_for_component(None, "")
        # The cache is the bulk of the process's objects and lives as long as it: keep it out
        # of the cyclic collector, whose full passes over it would stall answers for tens of
        # milliseconds (objects that arrive later are collected as usual).
        gc.freeze()

    def embedded_parser(self, deadline: float | None, skipped: list[str]) -> EmbeddedParser:
        """How YAML embedded in objects is parsed: in the worker, within ``deadline`` (its
        own time limit without one), a text a limit stopped read as empty and noted in
        ``skipped``."""
        if self.embedded is None:
            return parse_embedded
        return self.embedded.parser(deadline, skipped)

    # --- the live Prometheus check (gpulint serve --prometheus) ------------------------------

    def live_inventory(self) -> Inventory:
        """What the live check reads, in an inventory of its own: the adapter ConfigMaps and
        the HPAs that read custom or external metrics. The objects are taken under the lock
        (cached objects are never changed, only replaced), the inventory is built without it,
        so the check's HTTP calls never hold up an admission."""
        with self.lock:
            owners = {id(c.owner): c.owner for c in self.inventory.adapter_configs if c.owner}
            manifests = list(owners.values())
            manifests += [
                hpa.manifest for hpa in self.inventory.hpas if any(m.is_custom for m in hpa.metrics)
            ]
        inventory = Inventory(self.settings, by_directory=False)
        for manifest in manifests:
            inventory.add_manifest(manifest)
        return inventory

    def use_live(self, snapshot: LiveSnapshot | None) -> None:
        """Put a ``LiveSnapshot`` in use for the evaluations that follow (None: no live rules)."""
        with self.lock:
            self.inventory.live = snapshot

    # --- admission ----------------------------------------------------------------------------

    def evaluate(
        self,
        obj: dict[str, Any],
        operation: str,
        old: dict[str, Any] | None = None,
        selection: Selection | None = None,
        deadline: float | None = None,
        embedded: EmbeddedParser = parse_embedded,
    ) -> list[Finding]:
        """Findings about ``obj`` as it would be after ``operation``, given the cluster.

        Answers from memory; raises ``DeadlineExceeded`` once ``deadline`` (a
        ``time.monotonic()`` value) has passed, checked between rules. ``embedded`` parses
        YAML embedded in the object (an adapter ConfigMap's config), before the lock.
        """
        check_deadline(deadline)
        manifest = admitted_manifest(obj, old, self.namespace, cluster_file)
        admitted = None
        if manifest is not None and operation != "DELETE":
            admitted = classify_manifest(manifest, embedded=embedded)
        elif manifest is not None:
            admitted = Classified(manifest)
        with self.lock:
            entry = self._store.get(object_key(manifest)) if manifest is not None else None
            cached = entry.classified if entry is not None else None
            return evaluate_over(self.inventory, admitted, cached, operation, selection, deadline)


def evaluate_alone(
    obj: dict[str, Any],
    operation: str,
    settings: Settings,
    selection: Selection | None = None,
    deadline: float | None = None,
    embedded: EmbeddedParser = parse_embedded,
) -> list[Finding]:
    """``evaluate`` without a cluster: the object on its own (cross-object rules see only
    it). A deletion leaves nothing to check."""
    return alone(
        admitted_manifest(obj, None, None, cluster_file),
        operation,
        settings,
        selection,
        deadline,
        embedded,
    )


class _VersionReader(threading.Thread):
    """Reads the releases the cluster runs, at start and every ``recheck_interval``."""

    def __init__(self, cache: ClusterCache) -> None:
        super().__init__(name="gpulint-versions", daemon=True)
        self.cache = cache
        self.notes: list[str] = []

    def run(self) -> None:
        cache = self.cache
        failures = 0
        while not cache._stopping.is_set():
            try:
                versions, notes = read_versions(cache.api, cache.configured_versions)
            except ApiError as error:  # unreachable: try again soon
                first, most = cache.backoff
                failures += 1
                log.warning("versions not read: %s; retrying", error.message)
                cache._stopping.wait(min(most, first * (2 ** min(failures, 16))))
                continue
            except Exception:  # never let it die: log and try again later
                log.exception("versions not read: unexpected error")
                cache._stopping.wait(cache.recheck_interval)
                continue
            failures = 0
            if versions != cache.settings.versions:
                log.info("judged for %s", versions.describe())
            cache.settings.versions = versions  # one assignment: evaluations see old or new
            for note in notes:
                if note not in self.notes:
                    log.warning("%s", note)
            self.notes = notes
            cache._stopping.wait(cache.recheck_interval)


class _Stream(threading.Thread):
    """List and watch one kind, forever, until the cache stops."""

    def __init__(self, cache: ClusterCache, kind: WatchedKind) -> None:
        super().__init__(name=f"gpulint-watch-{kind.key}", daemon=True)
        self.cache = cache
        self.kind = kind
        self.state = SYNCING
        self.detail = ""
        self.version: str | None = None
        self._watch: WatchStream | None = None
        self._failures = 0

    def interrupt(self) -> None:
        watch = self._watch
        if watch is not None:
            watch.close()

    @property
    def stopping(self) -> threading.Event:
        return self.cache._stopping

    def _pause(self, seconds: float) -> None:
        self.stopping.wait(seconds)

    def _backoff(self) -> float:
        first, most = self.cache.backoff
        delay = min(most, first * (2 ** min(self._failures, 16)))
        self._failures += 1
        return float(delay * random.uniform(0.8, 1.2))

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                if self.version is None:
                    discovery = Discovery(self.cache.api)  # ask afresh after a failure
                    self.version = discovery.version(self.kind)
                    if self.version is None:
                        self._absent("the API server does not serve this kind")
                        continue
                self._list_and_watch()
            except ApiError as error:
                self._failed(error)
            except Exception as error:  # never let a stream die: log, back off, try again
                log.exception("stream %s: unexpected error", self.kind.key)
                self._failed(ApiError(None, type(error).__name__, str(error)))

    def _absent(self, detail: str) -> None:
        if self.state != ABSENT:
            log.info("%s: %s; skipped", self.kind.key, detail)
        self.state, self.detail = ABSENT, detail
        self.cache._drop_stream(self)
        self.cache._warm_up()
        self._pause(self.cache.recheck_interval)

    def _failed(self, error: ApiError) -> None:
        if error.status == 403:
            if self.state != FORBIDDEN:
                log.warning("%s: forbidden: %s", self.kind.key, error.message)
            self.state, self.detail = FORBIDDEN, error.message
            self.cache._drop_stream(self)  # what it held can no longer be kept current
            self.cache._warm_up()
            self._pause(self.cache.recheck_interval)
            return
        if error.status == 404:
            self.version = None  # the CRD went away; discover again
            self._absent(error.message or "not found")
            return
        if error.status == 410:
            return  # relist at once
        if self.state != SYNCED:
            self.state = ERROR
        self.detail = f"{error.reason or error.status or 'unreachable'}: {error.message}"
        log.warning("%s: %s; retrying", self.kind.key, self.detail)
        self._pause(self._backoff())

    def _list_and_watch(self) -> None:
        version = self.version or ""
        cache = self.cache
        # Each page is applied as it comes and let go: the process holds one page of the
        # API's JSON at a time, never a whole kind of it.
        listing = Listing(
            cache.api,
            self.kind,
            version,
            cache.namespace,
            cache.page_size,
            time.monotonic() + cache.list_timeout,
        )
        seen: set[ObjectKey] = set()
        for page, too_deep in listing.pages():
            for obj in too_deep:
                cache._too_deep(self, obj)
            cache._apply_page(self, page, seen)
            if self.stopping.is_set():
                return
        cache._drop_unseen(self, seen)
        rv = listing.resource_version
        self.state, self.detail = SYNCED, ""
        self._failures = 0
        self.cache._warm_up()
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                rv, events = self._watch_from(version, rv)
                if not events and time.monotonic() - started < 1.0:
                    self._pause(self._backoff())  # a server that ends watches at once
            except ApiError as error:
                if error.gone or error.status not in (None, 429, 500, 502, 503, 504):
                    raise  # relist (410), or let run() sort out 403/404 and the rest
                self.detail = f"watch: {error.reason or 'connection lost'}: {error.message}"
                log.warning("%s: %s; resuming", self.kind.key, self.detail)
                self._pause(self._backoff())

    def _watch_from(self, version: str, rv: str) -> tuple[str, int]:
        """One watch request; returns the resourceVersion to continue from and how many
        events came."""
        timeout = self.cache.watch_timeout
        query = [
            *list_query(self.kind),
            ("watch", "1"),
            ("resourceVersion", rv),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout)),
        ]
        path = self.kind.collection_path(version, self.kind.scope(self.cache.namespace))
        watch = self.cache.api.stream(path, query, (10.0, timeout + 30.0))
        self._watch = watch
        if self.stopping.is_set():
            watch.close()
        events = 0
        try:
            for event, cut in watch.events():
                kind = event.get("type")
                obj = event.get("object")
                if cut and kind in ("ADDED", "MODIFIED") and has_too_deep(obj):
                    self.cache._too_deep(self, obj)
                if kind == "ERROR":
                    status = obj if isinstance(obj, dict) else {}
                    code = status.get("code")
                    raise ApiError(
                        code if isinstance(code, int) else 500,
                        str(status.get("reason") or ""),
                        str(status.get("message") or "watch error"),
                    )
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self.cache._apply(self, kind, obj)
                elif kind != "BOOKMARK":
                    continue
                rv = resource_version(obj) or rv
                events += 1
                self._failures = 0
        finally:
            self._watch = None
            watch.close()
        return rv, events
