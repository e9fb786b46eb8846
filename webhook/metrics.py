"""What ``/metrics`` exposes, in a registry of the server's own (prometheus-client).

Every label takes its values from a fixed set written here or in gpulint (verdicts, reasons,
rule IDs, the evaluated kinds), never from what a request sends: a label value is a series
kept for the life of the process, so a request that chose one could grow memory and the
``/metrics`` page without end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .live import LiveStatus

# Verdicts of /validate: allowed (nothing found), warned (allowed with warnings), denied,
# fail-open (allowed because gpulint could not evaluate), skipped (not evaluated: DELETE,
# CONNECT, another kind, a subresource, an object being deleted).
VERDICTS = ("allowed", "warned", "denied", "fail-open", "skipped")
FAIL_OPEN_REASONS = ("not-synced", "deadline", "error")
# Why a request to /validate got an error the API server would turn into its failurePolicy:
# busy (429, no room among the bodies being read), no-body (no byte of its body came in
# time), slow-body (its body did not end in time).
POSSIBLE_FAIL_OPEN_REASONS = ("busy", "no-body", "slow-body")
ROUTES = ("skipped", "inline", "worker")
# The ``kind`` of a review that gpulint does not evaluate, whatever it names.
OTHER_KIND = "other"
# The part of a request that did not arrive within --read-timeout.
SLOW_PARTS = ("headers", "body")
# Why accept() failed: out of file descriptors (EMFILE, ENFILE), or anything else.
ACCEPT_ERRORS = ("file-descriptors", "other")
SYNC_STATES = ("synced", "syncing", "absent", "forbidden", "error")

# Answers take well under a millisecond to a few; the API server gives up at timeoutSeconds.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)


class _SyncStateCollector(Collector):
    """The cache's sync state, read when Prometheus scrapes."""

    def __init__(self, synced: Callable[[], bool], state: Callable[[], dict[str, str]]) -> None:
        self._synced = synced
        self._state = state

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "gpulint_webhook_cache_sync_state",
            "1 for the state each watched kind's cache is in "
            "(synced, syncing, absent, forbidden, error)",
            labels=["kind", "state"],
        )
        synced = GaugeMetricFamily(
            "gpulint_webhook_cache_synced",
            "1 when the caches have synced (every watched kind the cluster serves and allows "
            "has been listed); 1 with --no-cluster",
        )
        try:
            states, ready = self._state(), self._synced()
        except Exception:  # a scrape must not fail because the cache misbehaves
            states, ready = {}, False
        for kind, current in sorted(states.items()):
            for state in SYNC_STATES:
                family.add_metric([kind, state], 1.0 if current == state else 0.0)
        synced.add_metric([], 1.0 if ready else 0.0)
        yield family
        yield synced


# A refresh of the live snapshot (--prometheus) takes about a second on a healthy Prometheus
# and at most --prometheus-timeout.
REFRESH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class _LiveStateCollector(Collector):
    """The live snapshot's state, read when Prometheus scrapes."""

    def __init__(self, status: Callable[[], LiveStatus]) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        status = self._status()
        now = time.time()
        usable = GaugeMetricFamily(
            "gpulint_webhook_prometheus_snapshot_usable",
            "1 when the last refresh of the live snapshot succeeded and the live rules "
            "GL801-GL805 run on admissions; 0 when it failed or none has ended yet",
        )
        usable.add_metric([], 1.0 if status.usable else 0.0)
        yield usable
        if status.refreshed_at is not None:
            last = GaugeMetricFamily(
                "gpulint_webhook_prometheus_last_refresh_timestamp_seconds",
                "When the last refresh of the live snapshot ended, successful or not (Unix time)",
            )
            last.add_metric([], status.refreshed_at)
            yield last
        age = status.age(now)
        if status.data_at is not None and age is not None:
            success = GaugeMetricFamily(
                "gpulint_webhook_prometheus_last_success_timestamp_seconds",
                "When the data of the last good live snapshot was read from Prometheus (Unix time)",
            )
            success.add_metric([], status.data_at)
            yield success
            family = GaugeMetricFamily(
                "gpulint_webhook_prometheus_snapshot_age_seconds",
                "Seconds since the data of the last good live snapshot was read; it grows "
                "while refreshes fail",
            )
            family.add_metric([], age)
            yield family


class _LiveMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        from gpulint.live.snapshot import FAILURE_REASONS

        from .live import INTERNAL

        self.refreshes = Counter(
            "gpulint_webhook_prometheus_refreshes",
            "Refreshes of the live snapshot, by result (ok, error)",
            ["result"],
            registry=registry,
        )
        self.failures = Counter(
            "gpulint_webhook_prometheus_refresh_failures",
            "Refreshes of the live snapshot that failed, by reason: unreachable, timeout, "
            "http-error (an error status), bad-answer (not the Prometheus API), internal",
            ["reason"],
            registry=registry,
        )
        self.duration = Histogram(
            "gpulint_webhook_prometheus_refresh_duration_seconds",
            "Seconds one refresh of the live snapshot took",
            buckets=REFRESH_BUCKETS,
            registry=registry,
        )
        for result in ("ok", "error"):
            self.refreshes.labels(result)
        for reason in (*FAILURE_REASONS, INTERNAL):
            self.failures.labels(reason)

    def refreshed(self, reason: str | None, seconds: float) -> None:
        self.refreshes.labels("ok" if reason is None else "error").inc()
        if reason is not None:
            self.failures.labels(reason).inc()
        self.duration.observe(seconds)


class WebhookMetrics:
    def __init__(self) -> None:
        # `_created` samples double the page and say nothing a restart counter does not.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "gpulint_webhook_requests",
            "AdmissionReviews answered, by the admitted object's kind (the kinds gpulint "
            "evaluates, or other), the operation and the verdict",
            ["kind", "operation", "verdict"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "gpulint_webhook_request_duration_seconds",
            "Seconds from reading an AdmissionReview to answering it",
            ["verdict"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.findings = Counter(
            "gpulint_webhook_findings",
            "Findings in answers, by rule and severity",
            ["rule", "severity"],
            registry=self.registry,
        )
        self.fail_open = Counter(
            "gpulint_webhook_fail_open",
            "Requests allowed unevaluated: caches not synced, deadline passed, internal error",
            ["reason"],
            registry=self.registry,
        )
        self.invalid = Counter(
            "gpulint_webhook_invalid_requests",
            "Requests answered HTTP 400 (not an AdmissionReview gpulint can answer), 401 "
            "(reason unauthenticated: no client certificate with --client-ca), 403 (reason "
            "forbidden: a client certificate for another name than --client-cn) or 429 (reason "
            "busy: no room among the bodies being read), by reason",
            ["reason"],
            registry=self.registry,
        )
        self.possible_fail_open = Counter(
            "gpulint_webhook_possible_fail_open",
            "Requests to /validate answered with an error before their body was read whole, "
            "which the API server treats as a failed call (failurePolicy Ignore then admits "
            "the object unjudged), by reason: busy (HTTP 429: no room among the bodies being "
            "read), no-body (no byte of the body came in time), slow-body (the body did not "
            "end in time)",
            ["reason"],
            registry=self.registry,
        )
        self.undecodable = Counter(
            "gpulint_webhook_undecodable_objects",
            "AdmissionReviews of evaluated kinds whose object gpulint could not read whole "
            "(nested deeper than it reads), by verdict: warned (allowed with a warning), "
            "denied (refused by a finding, or by --deny-undecodable), fail-open",
            ["reason", "verdict"],
            registry=self.registry,
        )
        self.cache_too_deep = Gauge(
            "gpulint_webhook_cache_too_deep_objects",
            "Objects listed or watched into the cluster cache with parts nested too deeply to "
            "read (cached without those parts), since the start",
            registry=self.registry,
        )
        self.routes = Counter(
            "gpulint_webhook_review_routes",
            "AdmissionReviews by where they were answered: skipped (an object no rule reads, "
            "answered without evaluation), inline (evaluated on the event loop: small, "
            "read whole, nothing to parse in a child process), worker (evaluated in a review "
            "thread: large, too deep, an adapter ConfigMap, or the cluster cache was busy)",
            ["route"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "gpulint_webhook_in_flight_requests",
            "AdmissionReviews being read, evaluated or answered",
            registry=self.registry,
        )
        self.certificate_reloads = Counter(
            "gpulint_webhook_certificate_reloads",
            "Serving certificate reloads after the files changed, by result (ok, error)",
            ["result"],
            registry=self.registry,
        )
        self.slow_requests = Counter(
            "gpulint_webhook_slow_requests",
            "Requests whose headers or body did not arrive within --read-timeout (the "
            "connection was closed), by the part that was late",
            ["part"],
            registry=self.registry,
        )
        self.refused_connections = Counter(
            "gpulint_webhook_refused_connections",
            "Connections closed as soon as they were accepted because --max-connections "
            "connections (or --max-client-connections from the same address) were open and "
            "none was idle",
            registry=self.registry,
        )
        self.evicted_connections = Counter(
            "gpulint_webhook_evicted_connections",
            "Idle connections closed to make room for a new one at --max-connections or "
            "--max-client-connections",
            registry=self.registry,
        )
        self.body_pool_bytes = Gauge(
            "gpulint_webhook_buffered_body_bytes",
            "Bytes of request bodies reserved now (at most --max-buffered-bytes)",
            registry=self.registry,
        )
        self.accept_errors = Counter(
            "gpulint_webhook_accept_errors",
            "Failures to accept a connection, by reason: file-descriptors (the process or the "
            "system ran out of them: EMFILE, ENFILE), other",
            ["reason"],
            registry=self.registry,
        )
        for reason in FAIL_OPEN_REASONS:
            self.fail_open.labels(reason)
        for reason in POSSIBLE_FAIL_OPEN_REASONS:
            self.possible_fail_open.labels(reason)
        for verdict in ("warned", "denied", "fail-open"):
            self.undecodable.labels("too-deep", verdict)
        for part in SLOW_PARTS:
            self.slow_requests.labels(part)
        for reason in ACCEPT_ERRORS:
            self.accept_errors.labels(reason)
        for result in ("ok", "error"):
            self.certificate_reloads.labels(result)
        for verdict in VERDICTS:
            self.latency.labels(verdict)
        for route in ROUTES:
            self.routes.labels(route)

    def watch_cache(self, synced: Callable[[], bool], state: Callable[[], dict[str, str]]) -> None:
        self.registry.register(_SyncStateCollector(synced, state))

    def watch_too_deep(self, count: Callable[[], int]) -> None:
        """The cache's count of objects read without their too-deep parts."""
        self.cache_too_deep.set_function(count)

    def watch_connections(self, count: Callable[[], int]) -> None:
        """The number of open connections, read when Prometheus scrapes."""
        gauge = Gauge(
            "gpulint_webhook_open_connections",
            "Connections open now (at most --max-connections)",
            registry=self.registry,
        )
        gauge.set_function(count)

    def watch_live(self, status: Callable[[], LiveStatus]) -> Callable[[str | None, float], None]:
        """The refreshes of the live snapshot (``--prometheus``); returns what counts each
        one as it ends (its failure reason, None when it succeeded, and its duration)."""
        live = _LiveMetrics(self.registry)
        self.registry.register(_LiveStateCollector(status))
        return live.refreshed

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
