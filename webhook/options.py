"""``gpulint serve`` options: the command line, checked into one value.

The CLI builds this parser on every run, so the module imports only argparse and math (no
dataclasses: ``gpulint lint`` start-up time is measured, bench/run_lint.py).
"""

from __future__ import annotations

import argparse
import math
from typing import NamedTuple

from gpulint.live.window import add_window_options

DEFAULT_PORT = 8443
DEFAULT_DEADLINE = 2.0
# The API server sends at most an object and its old version, each at most the 1.5 MiB etcd
# stores by default, JSON-encoded in one review; anything larger is not a review from it.
DEFAULT_MAX_BODY_BYTES = 6 * 1024 * 1024
# kube-apiserver gives a webhook at most 30 s (timeoutSeconds); answers must come before.
MAX_DEADLINE = 30.0
# The headers of a request, and then its body, must each arrive within this: the API server
# sends a review in one write, and has given up on it after timeoutSeconds (10 s by default).
DEFAULT_READ_TIMEOUT = 10.0
# gpulint.cluster.decoding.MAX_OBJECT_DEPTH, spelled out to keep this module's imports
MAX_OBJECT_DEPTH = 100
# Open connections at most. The API servers keep a few each (Go keeps idle connections per
# host); every connection holds a file descriptor and its TLS buffers.
DEFAULT_MAX_CONNECTIONS = 1000
# One client address may hold half of them: each kube-apiserver replica opens a connection per
# review in flight (HTTP/1.1), far fewer than this at any sane rate, while no other client,
# however many connections it opens, can leave it without room.
DEFAULT_MAX_CLIENT_CONNECTIONS = 500
# Request bodies held at once: five of the largest allowed, or thousands of usual reviews
# (a few KiB each); with the cache this stays inside the deployment's 512Mi.
DEFAULT_MAX_BUFFERED_BYTES = 32 * 1024 * 1024
# --prometheus: seconds between refreshes of the live snapshot, and for one refresh (the
# budget `gpulint lint --prometheus` gives its whole check, gpulint.live.options).
DEFAULT_PROMETHEUS_REFRESH = 60.0
DEFAULT_PROMETHEUS_TIMEOUT = 30.0
MIN_PROMETHEUS_REFRESH = 1.0
# gpulint.cluster.kinds.DEFAULT_CONFIGMAP_NAMESPACES, spelled out to keep this module's imports
# light (tests/webhook/test_serve.py checks that the two agree).
DEFAULT_CONFIGMAP_NAMESPACES = ("monitoring", "kserve")


class OptionError(ValueError):
    """A command-line value gpulint serve cannot use."""


class ServeOptions(NamedTuple):
    tls_cert: str
    tls_key: str
    port: int = DEFAULT_PORT
    bind: str | None = None
    config: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    no_cluster: bool = False
    deny_on: str = "error"
    deny_undecodable: bool = False
    deadline: float = DEFAULT_DEADLINE
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_client_connections: int = DEFAULT_MAX_CLIENT_CONNECTIONS
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    adapter_configmap: str | None = None
    adapter_configmap_selector: str | None = None
    configmap_namespaces: tuple[str, ...] = DEFAULT_CONFIGMAP_NAMESPACES
    tls_check_interval: float = 5.0
    client_ca: str | None = None
    client_cn: str | None = None
    shutdown_delay: float = 0.0
    shutdown_timeout: float = 20.0
    prometheus: str | None = None
    prometheus_headers: tuple[tuple[str, str], ...] = ()
    prometheus_timeout: float = DEFAULT_PROMETHEUS_TIMEOUT
    prometheus_refresh: float = DEFAULT_PROMETHEUS_REFRESH
    # None: the live check's own defaults (gpulint.live.window)
    lookback: float | None = None
    lookback_text: str | None = None  # --lookback as written, for the live findings' words
    min_history: float | None = None


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    tls = parser.add_argument_group("TLS (the API server only calls webhooks over HTTPS)")
    tls.add_argument("--tls-cert", required=True, metavar="FILE", help="PEM certificate chain")
    tls.add_argument("--tls-key", required=True, metavar="FILE", help="PEM private key")
    tls.add_argument(
        "--client-ca",
        metavar="FILE",
        help="PEM bundle of the CAs whose client certificates may call /validate (the API "
        "server presents one when its AdmissionConfiguration names it): a client with none "
        "gets HTTP 401 before its body is read, one with a certificate these CAs did not "
        "issue fails the TLS handshake; /healthz, /readyz and /metrics need none (default: "
        "any client may call /validate)",
    )
    tls.add_argument(
        "--client-cn",
        metavar="NAME",
        help="with --client-ca: answer /validate only for a client certificate whose subject's "
        "commonName is NAME (the API server's, e.g. kube-apiserver); another gets HTTP 403 "
        "before its body is read (default: any certificate the CAs issued)",
    )
    tls.add_argument(
        "--tls-check-interval",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between checks for a rotated certificate, key or client CA bundle "
        "(default: 5)",
    )
    listen = parser.add_argument_group("listening")
    listen.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"HTTPS port (default: {DEFAULT_PORT})"
    )
    listen.add_argument(
        "--bind", metavar="ADDRESS", help="address to listen on (default: every interface)"
    )
    listen.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="N",
        help="largest AdmissionReview accepted; larger bodies get HTTP 400 "
        f"(default: {DEFAULT_MAX_BODY_BYTES})",
    )
    listen.add_argument(
        "--read-timeout",
        type=float,
        default=DEFAULT_READ_TIMEOUT,
        metavar="S",
        help="seconds a request's headers, and then its body, may take to arrive (TLS "
        f"handshake included); slower clients are disconnected (default: {DEFAULT_READ_TIMEOUT:g})",
    )
    listen.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="open connections at most; one more takes the place of the one idle the "
        "longest, or is closed as soon as it is accepted when none is idle "
        f"(default: {DEFAULT_MAX_CONNECTIONS})",
    )
    listen.add_argument(
        "--max-client-connections",
        type=int,
        default=DEFAULT_MAX_CLIENT_CONNECTIONS,
        metavar="N",
        help="open connections from one client address at most, held the same way "
        f"(default: {DEFAULT_MAX_CLIENT_CONNECTIONS}; keep it above the connections each API "
        "server replica opens)",
    )
    listen.add_argument(
        "--max-buffered-bytes",
        type=int,
        default=DEFAULT_MAX_BUFFERED_BYTES,
        metavar="N",
        help="bytes of request bodies held at once; a body waits for room up to --deadline, "
        f"then gets HTTP 429 (default: {DEFAULT_MAX_BUFFERED_BYTES})",
    )
    listen.add_argument(
        "--shutdown-delay",
        type=float,
        default=0.0,
        metavar="S",
        help="on SIGTERM, keep answering (not ready) for S seconds while the Service's "
        "endpoints drop this pod, then drain (default: 0)",
    )
    listen.add_argument(
        "--shutdown-timeout",
        type=float,
        default=20.0,
        metavar="S",
        help="how long draining waits for requests in flight (default: 20)",
    )
    decide = parser.add_argument_group("decisions")
    decide.add_argument(
        "--deny-on",
        choices=("error", "warning", "never"),
        default="error",
        help="lowest severity that refuses a request; the rest are warnings (default: error)",
    )
    decide.add_argument(
        "--deny-undecodable",
        action="store_true",
        help="refuse an object of a kind gpulint evaluates when part of it cannot be read "
        f"(nested deeper than {MAX_OBJECT_DEPTH} levels) and nothing else refuses it; by "
        "default it is allowed with a warning, counted and logged",
    )
    decide.add_argument(
        "--deadline",
        type=float,
        default=DEFAULT_DEADLINE,
        metavar="S",
        help="seconds an evaluation may take before the request is allowed unchecked, with a "
        f"warning (default: {DEFAULT_DEADLINE:g}; keep it under the webhook's timeoutSeconds)",
    )
    decide.add_argument("--config", "-c", metavar="FILE", help="a .gpulint.yaml")
    decide.add_argument(
        "--select",
        action="append",
        metavar="IDS",
        help="run only these rules (IDs, names or prefixes such as GL1)",
    )
    decide.add_argument("--ignore", action="append", metavar="IDS", help="do not run these rules")
    cluster = parser.add_argument_group("cluster inventory (cross-object rules)")
    cluster.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig to read the cluster with (default: $KUBECONFIG or ~/.kube/config "
        "when there is one, else the pod's in-cluster service account)",
    )
    cluster.add_argument("--context", metavar="NAME", help="kubeconfig context")
    cluster.add_argument(
        "--namespace", metavar="NS", help="watch one namespace only (default: all namespaces)"
    )
    cluster.add_argument(
        "--no-cluster",
        action="store_true",
        help="evaluate each admitted object on its own, without reading the cluster "
        "(cross-object rules see only that object)",
    )
    cluster.add_argument(
        "--adapter-configmap",
        metavar="[NAMESPACE/]NAME",
        help="the ConfigMap holding the prometheus-adapter config (default: one labelled "
        "app.kubernetes.io/name=prometheus-adapter, or named prometheus-adapter or "
        "adapter-config)",
    )
    cluster.add_argument(
        "--adapter-configmap-selector",
        metavar="LABELS",
        help="label selector of the prometheus-adapter config ConfigMaps, e.g. "
        "team=platform,app=metrics-adapter (with --adapter-configmap, either matches)",
    )
    cluster.add_argument(
        "--configmap-namespaces",
        action="append",
        metavar="NS[,NS...]",
        help="namespaces where the prometheus-adapter and KServe ConfigMaps are listed and "
        "watched, each needing RBAC to read ConfigMaps there (default: "
        f"{','.join(DEFAULT_CONFIGMAP_NAMESPACES)}; "
        "* for every namespace, which needs it cluster-wide; the namespace of "
        "--adapter-configmap NAMESPACE/NAME is added)",
    )
    live = parser.add_argument_group(
        "live rules GL801-GL805 from Prometheus (need the cluster caches: not with --no-cluster)"
    )
    live.add_argument(
        "--prometheus",
        metavar="URL",
        help="base URL of the Prometheus HTTP API the adapter reads: the live rules run on "
        "admitted HPAs and adapter ConfigMaps from a snapshot of the cluster's adapter rules "
        "and HPAs checked against it in the background, never during a request; findings "
        "are warnings. Needs the cluster caches (refused with --no-cluster)",
    )
    live.add_argument(
        "--prometheus-header",
        action="append",
        metavar="K=V",
        help="HTTP header for every request, e.g. 'Authorization=Bearer <token>' (repeatable)",
    )
    live.add_argument(
        "--prometheus-timeout",
        type=float,
        metavar="S",
        help=f"seconds one refresh may take (default: {DEFAULT_PROMETHEUS_TIMEOUT:g})",
    )
    live.add_argument(
        "--prometheus-refresh",
        type=float,
        metavar="S",
        help="seconds between the end of one refresh and the start of the next "
        f"(default: {DEFAULT_PROMETHEUS_REFRESH:g})",
    )
    add_window_options(live, defaults=False)


def _split_ids(values: list[str] | None) -> tuple[str, ...]:
    found: list[str] = []
    for value in values or []:
        found.extend(part.strip() for part in value.split(",") if part.strip())
    return tuple(found)


def _seconds(value: float, flag: str, *, minimum: float = 0.0, allow_zero: bool = False) -> float:
    if not math.isfinite(value) or value < minimum or (value == minimum and not allow_zero):
        bound = f"at least {minimum:g}" if allow_zero else f"above {minimum:g}"
        raise OptionError(f"{flag} must be a number of seconds {bound}")
    return value


def options_from_args(args: argparse.Namespace) -> ServeOptions:
    """Check the parsed command line; raises OptionError with the flag at fault."""
    if not 1 <= args.port <= 65535:
        raise OptionError(f"--port must be 1-65535, not {args.port}")
    deadline = _seconds(args.deadline, "--deadline")
    if deadline > MAX_DEADLINE:
        raise OptionError(
            f"--deadline must stay under the API server's webhook timeout "
            f"(at most {MAX_DEADLINE:g} s)"
        )
    if args.max_body_bytes < 1024:
        raise OptionError("--max-body-bytes must be at least 1024")
    if args.max_connections < 1:
        raise OptionError("--max-connections must be at least 1")
    if args.max_client_connections < 1:
        raise OptionError("--max-client-connections must be at least 1")
    if args.client_cn is not None and args.client_ca is None:
        raise OptionError("--client-cn needs --client-ca (the CAs that issue client certificates)")
    if args.max_buffered_bytes < args.max_body_bytes:
        raise OptionError(
            "--max-buffered-bytes must be at least --max-body-bytes "
            f"({args.max_body_bytes}), or the largest body could never be read"
        )
    from gpulint.cluster.kinds import AdapterConfigMapSelector, parse_configmap_namespaces

    try:
        AdapterConfigMapSelector.parse(args.adapter_configmap, args.adapter_configmap_selector)
    except ValueError as error:
        flag = (
            "--adapter-configmap-selector"
            if args.adapter_configmap_selector and "label selector" in str(error)
            else "--adapter-configmap"
        )
        raise OptionError(f"{flag}: {error}") from None
    try:
        configmap_namespaces = parse_configmap_namespaces(args.configmap_namespaces)
    except ValueError as error:
        raise OptionError(f"--configmap-namespaces: {error}") from None
    if args.no_cluster and (
        args.kubeconfig or args.context or args.namespace or args.configmap_namespaces
    ):
        raise OptionError(
            "--no-cluster reads no cluster: drop "
            "--kubeconfig/--context/--namespace/--configmap-namespaces"
        )
    options = ServeOptions(
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        client_ca=args.client_ca,
        client_cn=args.client_cn,
        port=args.port,
        bind=args.bind,
        config=args.config,
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespace=args.namespace,
        no_cluster=args.no_cluster,
        deny_on=args.deny_on,
        deny_undecodable=args.deny_undecodable,
        deadline=deadline,
        max_body_bytes=args.max_body_bytes,
        read_timeout=_seconds(args.read_timeout, "--read-timeout"),
        max_connections=args.max_connections,
        max_client_connections=min(args.max_client_connections, args.max_connections),
        max_buffered_bytes=args.max_buffered_bytes,
        select=_split_ids(args.select),
        ignore=_split_ids(args.ignore),
        adapter_configmap=args.adapter_configmap,
        adapter_configmap_selector=args.adapter_configmap_selector,
        configmap_namespaces=configmap_namespaces,
        tls_check_interval=_seconds(args.tls_check_interval, "--tls-check-interval"),
        shutdown_delay=_seconds(args.shutdown_delay, "--shutdown-delay", allow_zero=True),
        shutdown_timeout=_seconds(args.shutdown_timeout, "--shutdown-timeout"),
    )
    return _with_live_options(options, args)


_LIVE_FLAGS = (
    ("prometheus_header", "--prometheus-header"),
    ("prometheus_timeout", "--prometheus-timeout"),
    ("prometheus_refresh", "--prometheus-refresh"),
    ("lookback", "--lookback"),
    ("min_history", "--min-history"),
)


def _with_live_options(options: ServeOptions, args: argparse.Namespace) -> ServeOptions:
    """``options`` with the ``--prometheus`` options checked in."""
    if not args.prometheus:
        given = [flag for name, flag in _LIVE_FLAGS if getattr(args, name) is not None]
        if given:
            raise OptionError(f"{given[0]} needs --prometheus URL")
        return options
    if args.no_cluster:
        raise OptionError(
            "--prometheus needs the cluster caches (the live check reads the cluster's "
            "adapter ConfigMaps and HPAs): drop --no-cluster, or drop --prometheus"
        )
    from gpulint.live.options import OptionError as LiveOptionError
    from gpulint.live.options import (
        parse_duration,
        parse_fraction,
        parse_header,
        parse_url,
        written_duration,
    )

    timeout = DEFAULT_PROMETHEUS_TIMEOUT
    if args.prometheus_timeout is not None:
        timeout = _seconds(args.prometheus_timeout, "--prometheus-timeout")
    refresh = DEFAULT_PROMETHEUS_REFRESH
    if args.prometheus_refresh is not None:
        refresh = _seconds(args.prometheus_refresh, "--prometheus-refresh")
        if refresh < MIN_PROMETHEUS_REFRESH:
            raise OptionError(f"--prometheus-refresh must be at least {MIN_PROMETHEUS_REFRESH:g} s")
    try:
        return options._replace(
            prometheus=parse_url(args.prometheus),
            prometheus_headers=tuple(parse_header(h) for h in args.prometheus_header or []),
            prometheus_timeout=timeout,
            prometheus_refresh=refresh,
            lookback=None if args.lookback is None else parse_duration(args.lookback),
            lookback_text=None if args.lookback is None else written_duration(args.lookback),
            min_history=None if args.min_history is None else parse_fraction(args.min_history),
        )
    except LiveOptionError as error:
        raise OptionError(str(error)) from None
