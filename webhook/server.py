"""``gpulint serve``: start the caches, listen over HTTPS, rotate the certificate, drain.

Exit codes: 0 after a clean shutdown (SIGTERM or SIGINT), 2 for a usage error, a bad
configuration, an unreadable certificate or a cluster that cannot be reached at start.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from gpulint import __version__

from .options import OptionError, ServeOptions, options_from_args

if TYPE_CHECKING:
    from aiohttp import web

    from gpulint.admission.embedded import EmbeddedWorker
    from gpulint.cluster.cache import ClusterCache
    from gpulint.cluster.kinds import AdapterConfigMapSelector
    from gpulint.engine.config import Settings
    from gpulint.engine.registry import Selection

    from .app import WebhookApp
    from .evaluator import Evaluator
    from .live import LiveRefresh
    from .logs import JsonLog
    from .metrics import WebhookMetrics
    from .tls import ServingCertificate

EXIT_OK, EXIT_USAGE = 0, 2
# Longer than the API server keeps an idle connection to a webhook (Go's 90 s
# IdleConnTimeout), so that gpulint never closes a connection the API server is about to use.
KEEPALIVE_TIMEOUT = 120.0
SWITCH_INTERVAL = 0.0005


class StartError(Exception):
    """gpulint serve cannot start: the message says what to fix."""


def run_serve(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        options = options_from_args(args)
    except OptionError as error:
        stderr.write(f"gpulint: error: {error}\n")
        return EXIT_USAGE
    from .logs import JsonLog, LibraryLogs
    from .tls import CertificateError, ServingCertificate

    log = JsonLog(stdout)
    LibraryLogs.install(log)
    from gpulint.admission.embedded import EmbeddedWorker

    # Embedded YAML (adapter ConfigMaps) is parsed in a child process with limits, started
    # before any thread so that it never inherits one.
    embedded = EmbeddedWorker(timeout=max(0.1, options.deadline / 2))
    embedded.start()
    try:
        settings = _settings(options.config)
        certificate = ServingCertificate(options.tls_cert, options.tls_key, options.client_ca)
        evaluator, adapter_configmaps = _evaluator(options, settings, log, embedded)
    except (StartError, CertificateError) as error:
        embedded.stop()
        stderr.write(f"gpulint: error: {error}\n")
        return EXIT_USAGE
    # A review thread evaluating a large object holds the GIL; the event loop gives it up at
    # every read, write and poll, and may wait up to a switch interval to take it back each
    # time (CPython's default is 5 ms, more than a whole small review). With no thread busy
    # nothing switches, so a shorter interval costs nothing then. bench/webhook_hostile.py's
    # 25,000-key ConfigMap phase, evaluated in a thread: normal reviews' p99 26-70 ms with
    # this and the event-loop path together, 77-231 ms before (bench/RESULTS.md); the
    # interval's own share was not measured apart.
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(
                _serve(options, evaluator, adapter_configmaps, certificate, log, embedded)
            )
    finally:
        embedded.stop()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed (the container image has it): it halves the cost of
    TLS and HTTP per request (bench/webhook_load.py)."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def _settings(path: str | None) -> Settings:
    from gpulint.engine.config import ConfigError, Settings, find_config, load_settings
    from gpulint.engine.registry import rule_names, rule_option_schemas

    path = path or find_config()
    if path is None:
        return Settings()
    try:
        return load_settings(path, rule_option_schemas(), rule_names())
    except ConfigError as error:
        raise StartError(f"configuration error: {error}") from None


def _evaluator(
    options: ServeOptions, settings: Settings, log: JsonLog, embedded: EmbeddedWorker
) -> tuple[Evaluator, AdapterConfigMapSelector]:
    from gpulint.cluster.kinds import AdapterConfigMapSelector
    from gpulint.engine.registry import Selection

    from .evaluator import ClusterEvaluator, StandaloneEvaluator

    selection = Selection(list(options.select), list(options.ignore))
    adapter_configmaps = AdapterConfigMapSelector.parse(
        options.adapter_configmap, options.adapter_configmap_selector
    )
    _warm_up(settings, selection, log)
    if options.no_cluster:
        return StandaloneEvaluator(settings, selection), adapter_configmaps
    from gpulint.cluster.cache import ClusterCache
    from gpulint.cluster.mode import ClusterError, connect

    try:
        api_client, _ = connect(options.kubeconfig, options.context)
    except ClusterError as error:
        raise StartError(f"{error} (or run with --no-cluster)") from None
    cache = ClusterCache(
        api_client,
        settings,
        namespace=options.namespace,
        adapter_configmaps=adapter_configmaps,
        configmap_namespaces=options.configmap_namespaces,
        embedded=embedded,
    )
    return ClusterEvaluator(cache, selection, _live(options, cache, log)), adapter_configmaps


def _live(options: ServeOptions, cache: ClusterCache, log: JsonLog) -> LiveRefresh | None:
    """The background refresh of the live snapshot, with ``--prometheus``."""
    if options.prometheus is None:
        return None
    from dataclasses import replace

    from gpulint.live.options import LiveOptions

    try:
        from .live import LiveRefresh

        live_options = LiveOptions(
            options.prometheus,
            dict(options.prometheus_headers),
            options.prometheus_timeout,
        )
        if options.lookback is not None:
            live_options = replace(
                live_options, lookback=options.lookback, lookback_text=options.lookback_text
            )
        if options.min_history is not None:
            live_options = replace(live_options, min_history=options.min_history)
        return LiveRefresh(cache, live_options, options.prometheus_refresh, log)
    except ImportError as error:
        raise StartError(
            f"--prometheus needs the Prometheus client ({error.name or error} is not "
            "installed): pip install prometheus-api-client, or install gpulint with [webhook]"
        ) from None


_WARM_UP_OBJECTS: tuple[dict[str, Any], ...] = (
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "warm-up", "namespace": "default"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
                }
            }
        },
    },
    {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "warm-up", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "warm-up"},
            "maxReplicas": 2,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "DCGM_FI_DEV_GPU_UTIL"},
                        "target": {"type": "AverageValue", "averageValue": "60"},
                    },
                }
            ],
        },
    },
)


def _warm_up(settings: Settings, selection: Selection, log: JsonLog) -> None:
    """Import every rule and evaluate a few objects before the first request, so that the
    first AdmissionReview is answered as fast as the next ones. An error here is logged, not
    fatal: requests then fail open with the reason ``error`` and the cause in the log."""
    from gpulint.cluster.cache import evaluate_alone
    from gpulint.engine.docs import rules_doc_url
    from gpulint.engine.registry import all_rules

    from .logs import where_raised

    try:
        all_rules()
        rules_doc_url()  # the package metadata, read once: every warning links the docs
        for obj in _WARM_UP_OBJECTS:
            evaluate_alone(obj, "CREATE", settings, selection, None)
    except Exception as error:
        log.error("warm-up-failed", error=type(error).__name__, at=where_raised(error))


async def _watch_certificate(
    certificate: ServingCertificate, interval: float, log: JsonLog, metrics: WebhookMetrics
) -> None:
    from .tls import CertificateError

    last_error = ""
    while True:
        await asyncio.sleep(interval)
        try:
            if certificate.reload_if_changed():
                metrics.certificate_reloads.labels("ok").inc()
                log.info("certificate-reloaded", sha256=certificate.fingerprint[:16])
            last_error = ""
        except CertificateError as error:
            metrics.certificate_reloads.labels("error").inc()
            if str(error) != last_error:
                log.warning("certificate-reload-failed", message=str(error))
            last_error = str(error)


async def _serve(
    options: ServeOptions,
    evaluator: Evaluator,
    adapter_configmaps: AdapterConfigMapSelector,
    certificate: ServingCertificate,
    log: JsonLog,
    embedded: EmbeddedWorker | None = None,
) -> int:
    from aiohttp import web

    from .app import WebhookApp
    from .connections import ConnectionGuard, GuardedSite
    from .live import shown_url
    from .metrics import WebhookMetrics

    metrics = WebhookMetrics()
    webhook = WebhookApp(
        evaluator,
        deny_on=options.deny_on,
        deny_undecodable=options.deny_undecodable,
        deadline=options.deadline,
        max_body_bytes=options.max_body_bytes,
        adapter_configmaps=adapter_configmaps,
        log=log,
        metrics=metrics,
        read_timeout=options.read_timeout,
        embedded=embedded,
        max_buffered_bytes=options.max_buffered_bytes,
        client_certificates=options.client_ca is not None,
        client_name=options.client_cn,
    )
    guard = ConnectionGuard(
        metrics,
        log,
        max_connections=options.max_connections,
        max_client_connections=options.max_client_connections,
        read_timeout=options.read_timeout,
    )
    _make_room_for(options.max_connections, log)
    application = webhook.application()
    application.middlewares.append(guard.middleware)
    runner = web.AppRunner(
        application,
        handle_signals=False,
        access_log=None,
        keepalive_timeout=KEEPALIVE_TIMEOUT,
        shutdown_timeout=options.shutdown_timeout,
    )
    await runner.setup()
    site = GuardedSite(
        runner,
        guard,
        options.bind,
        options.port,
        ssl_context=certificate.context,
        contexts=lambda: certificate.context,
        backlog=1024,
    )
    try:
        await site.start()
    except OSError as error:
        await runner.cleanup()
        log.error("listen-failed", message=f"cannot listen on port {options.port}: {error}")
        return EXIT_USAGE
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    evaluator.start()
    watcher = asyncio.create_task(
        _watch_certificate(certificate, options.tls_check_interval, log, metrics)
    )
    freezer = asyncio.create_task(_freeze_when_ready(evaluator))
    log.info(
        "serving",
        version=__version__,
        port=options.port,
        bind=options.bind or "*",
        cluster=not options.no_cluster,
        namespace=options.namespace,
        configmapNamespaces=None
        if options.no_cluster
        else _shown_scopes(options, adapter_configmaps),
        denyOn=options.deny_on,
        deadlineSeconds=options.deadline,
        clientCertificates=options.client_ca is not None,
        prometheus=shown_url(options.prometheus) if options.prometheus else None,
        prometheusRefreshSeconds=options.prometheus_refresh if options.prometheus else None,
    )
    await stop.wait()
    freezer.cancel()
    return await _shutdown(options, webhook, runner, evaluator, watcher, log)


async def _freeze_when_ready(evaluator: Evaluator, interval: float = 0.5) -> None:
    """Once the caches have synced, set what is in memory then (the rules, the cached
    objects) aside from the garbage collector: a full collection otherwise walks every
    cached object (50,000 objects as bare dicts took 0.7 s of CPU on the benchmark machine)
    in the middle of whichever review happens to allocate at that moment. What the caches
    take in later is collected as usual (Python's gc.freeze)."""
    while not evaluator.ready():
        await asyncio.sleep(interval)
    gc.collect()
    gc.freeze()


def _shown_scopes(options: ServeOptions, adapter: AdapterConfigMapSelector) -> list[str]:
    """Where the caches read ConfigMaps, for the start-up log (``*``: every namespace)."""
    from gpulint.cluster.kinds import ALL_NAMESPACES, configmap_scopes

    scopes = configmap_scopes(adapter, options.configmap_namespaces)
    return [scope or ALL_NAMESPACES for scope in scopes]


# File descriptors the process needs besides its connections: the cluster watches, the
# Prometheus client, the certificate files, the log.
_SPARE_DESCRIPTORS = 256


def _make_room_for(connections: int, log: JsonLog) -> None:
    """Raise the soft limit on open files towards the hard one (as the Go runtime does), so
    that --max-connections connections fit; say so when they cannot."""
    try:
        import resource
    except ImportError:  # not on a POSIX system
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + _SPARE_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < wanted:
        log.warning(
            "file-descriptor-limit",
            message=f"the open-file limit is {soft}, too low for --max-connections "
            f"{connections} and the {_SPARE_DESCRIPTORS} files gpulint needs besides: lower "
            "--max-connections or raise the limit",
        )


async def _shutdown(
    options: ServeOptions,
    webhook: WebhookApp,
    runner: web.AppRunner,
    evaluator: Evaluator,
    watcher: asyncio.Task[None],
    log: JsonLog,
) -> int:
    webhook.shutting_down = True
    log.info("shutting-down", delaySeconds=options.shutdown_delay)
    if options.shutdown_delay:
        await asyncio.sleep(options.shutdown_delay)
    watcher.cancel()
    # Stops listening, lets requests in flight finish (up to --shutdown-timeout), closes.
    await runner.cleanup()
    evaluator.stop()
    webhook.close()
    log.info("stopped")
    return EXIT_OK
