"""``--prometheus``: the live rules in the webhook, from a snapshot refreshed in the background.

A daemon thread checks the cluster's adapter rules and HPAs against Prometheus once the caches
have synced, then again ``--prometheus-refresh`` seconds after each check ends. What the check
reads is copied under the cache lock and the HTTP calls run without it
(``ClusterCache.live_inventory``); the finished ``LiveSnapshot`` is then swapped in
(``ClusterCache.use_live``). An admission never waits on Prometheus: it reads the snapshot in
use, from memory, and finds its evidence by stable keys (``gpulint.live.snapshot``).

What an admission sees:

* after a successful refresh, the live rules GL801-GL805 on admitted HPAs and adapter
  ConfigMaps, with the messages of ``gpulint lint --prometheus``, as warnings
  (``ClusterEvaluator``): evidence only matches an object whose rule or metric is unchanged
  from what the cluster already holds, so a live finding is always a problem the cluster
  already has, which does not block a change (as for any finding an object had before), and
  it is as old as the last refresh;
* after a failed refresh (Prometheus down, too slow, erroring), no live findings until a
  refresh succeeds: evidence that can no longer be checked is not shown. GL809 (Prometheus
  unreachable) is not reported to whoever applies an object: they cannot fix the monitoring
  stack, and the same warning on every review would be noise. The failure goes where the
  operator looks: ``/metrics`` (refresh failures by reason, the time of the last refresh and
  the age of the last good snapshot), one log line when a failure starts or changes reason and
  one when it ends, and the ``prometheus`` part of ``/readyz``, which stays ready: a Prometheus
  outage must not take the webhook out of its Service;
* before the first refresh ends, no live findings.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .logs import JsonLog, where_raised

if TYPE_CHECKING:
    from gpulint.cluster.cache import ClusterCache
    from gpulint.live.options import LiveOptions
    from gpulint.live.snapshot import LiveSnapshot

# A refresh that failed inside gpulint rather than at Prometheus (the cause is logged).
INTERNAL = "internal"
# How often the thread looks whether the caches have synced, before the first refresh.
_SYNC_POLL = 0.2


def shown_url(url: str) -> str:
    """The URL for logs and ``/readyz``, without credentials written into it."""
    return re.sub(r"^(\w+://)[^/@]*@", r"\1", url)


class LiveStatus(NamedTuple):
    """The refreshes so far, replaced as a whole after each one (read from other threads)."""

    refreshed_at: float | None = None  # when the last refresh ended (Unix time)
    data_at: float | None = None  # when the data of the last good snapshot was read
    usable: bool = False  # the last refresh succeeded: its evidence is in use
    error: str | None = None  # why the last refresh failed
    reason: str | None = None  # snapshot.FAILURE_REASONS or INTERNAL
    seconds: float = 0.0  # how long the last refresh took

    def age(self, now: float) -> float | None:
        """Seconds since the data of the last good snapshot was read."""
        return None if self.data_at is None else max(0.0, now - self.data_at)

    def describe(self, url: str, now: float) -> dict[str, Any]:
        """For ``/readyz``: where, whether live findings are given, and how old they are."""
        age = self.age(now)
        return {
            "url": url,
            "usable": self.usable,
            "ageSeconds": None if age is None else round(age, 3),
            "error": self.error,
            "reason": self.reason,
        }


class LiveRefresh:
    """The background refresh of the live snapshot of a ``ClusterCache``."""

    def __init__(
        self, cache: ClusterCache, options: LiveOptions, interval: float, log: JsonLog
    ) -> None:
        # Only this path loads the HTTP client (prometheus-api-client, requests).
        from gpulint.live.collector import collect

        self._collect = collect
        self.cache = cache
        self.options = options
        self.interval = interval
        self.log = log
        self.status = LiveStatus()
        self.on_refresh: Callable[[str | None, float], None] | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpulint-live-refresh", daemon=True)

    @property
    def url(self) -> str:
        return shown_url(self.options.url)

    def current(self) -> LiveStatus:
        return self.status

    def describe(self) -> dict[str, Any]:
        return self.status.describe(self.url, time.time())

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop refreshing. A refresh in flight is not waited for beyond ``timeout``: its
        thread is a daemon, and its requests end at --prometheus-timeout anyway."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            if not self.cache.synced():
                self._stopping.wait(_SYNC_POLL)
                continue
            self.refresh()
            self._stopping.wait(self.interval)

    def refresh(self) -> LiveStatus:
        """Check once and put the result in use; never raises."""
        started = time.monotonic()
        snapshot: LiveSnapshot | None = None
        try:
            snapshot = self._collect(self.cache.live_inventory(), self.options)
            snapshot.index()  # here rather than in the first admission that needs it
            error, reason = snapshot.error, snapshot.error_reason
        except Exception as failure:  # a bug must not end the refreshes: say where, go on
            self.log.error(
                "prometheus-refresh-error", error=type(failure).__name__, at=where_raised(failure)
            )
            snapshot = None
            error, reason = f"internal error ({type(failure).__name__})", INTERNAL
        seconds = time.monotonic() - started
        usable = snapshot is not None and error is None
        # A failed check leaves no evidence to use: the live rules stand down until the next
        # good one, and GL809 is not put in front of whoever applies an object.
        self.cache.use_live(snapshot if usable else None)
        previous = self.status
        if usable and snapshot is not None:
            status = LiveStatus(time.time(), snapshot.evaluated_at, True, None, None, seconds)
        else:
            status = LiveStatus(
                time.time(), previous.data_at, False, error, reason or INTERNAL, seconds
            )
        self.status = status
        self._report(previous, status, snapshot)
        if self.on_refresh is not None:
            self.on_refresh(status.reason, seconds)
        return status

    def _report(
        self, previous: LiveStatus, status: LiveStatus, snapshot: LiveSnapshot | None
    ) -> None:
        """Log the changes of state, not every refresh."""
        if status.usable and snapshot is not None:
            if previous.usable:
                return
            event = (
                "prometheus-recovered" if previous.refreshed_at is not None else "prometheus-live"
            )
            self.log.info(
                event,
                url=self.url,
                adapterRules=len(snapshot.rules),
                hpaMetrics=len(snapshot.hpas),
                requests=snapshot.requests,
                seconds=round(status.seconds, 3),
            )
            return
        if previous.usable or previous.reason != status.reason or previous.refreshed_at is None:
            self.log.warning(
                "prometheus-refresh-failed",
                url=self.url,
                reason=status.reason,
                message=status.error,
                seconds=round(status.seconds, 3),
                liveRules="off until a refresh succeeds",
            )
