"""Connections: at most ``--max-connections`` open, at most ``--max-client-connections`` of
them from one address, no request slower than ``--read-timeout`` to arrive, and at most
``--max-buffered-bytes`` of request bodies held at once.

aiohttp reads a request's headers for as long as they trickle in, and closes a connection that
waits for a request only after its keep-alive timeout, which gpulint sets longer than the API
server keeps an idle connection (``server.KEEPALIVE_TIMEOUT``). So every connection goes
through a ``GuardedConnection``, a protocol in front of aiohttp's own:

* when bytes arrive while no request is being handled (a new connection, or the next request
  on a kept-alive one), the request's headers have ``--read-timeout`` seconds to be complete,
  or the connection is closed; the handler marks the connection busy once they are
  (``ConnectionGuard.middleware``) and bounds the body itself (``webhook.app``);
* the TLS handshake has the same time limit (``ssl_handshake_timeout``).

gpulint accepts connections itself (``GuardedSite``) and hands each to the event loop
(``connect_accepted_socket``), the same with asyncio and uvloop:

* a connection accepted while ``--max-connections`` are open or in their handshake takes the
  place of the one idle the longest (no request under way: waiting for its first request,
  between two kept-alive requests, or in its TLS handshake), which is closed; one idle for
  under a second goes only after every connection whose request waits on its body, since it
  is most likely the API server's, about to send a review; only when every connection is in
  the middle of a request is the new one closed at once, before any TLS work. Idle
  connections therefore cannot crowd out the API server: each new connection it
  opens finds room;
* the same holds per client address with ``--max-client-connections``: a client at its limit
  gives up its own longest-idle connection for a new one, or the new one is closed, so one
  client cannot hold every connection (each API server replica has an address of its own);
* an accept() that fails because file descriptors ran out (EMFILE, ENFILE) is counted and
  logged, and accepting pauses for a moment while the kernel queues new connections; uvloop
  (libuv) would otherwise accept and close them without a word, asyncio log a traceback for
  each.

Request bodies are read only as their bytes arrive, with room in a pool of
``--max-buffered-bytes`` (``webhook.bodies``). A request whose body has not arrived whole is
no more use to the server than an idle connection: at a limit, when no connection is idle,
the one whose request has waited longest on its body is closed to make room. So connections
that announce bodies and send none, however many and from however many clients, cannot keep
the API server's new connection out.

Each kind of trouble is logged when it starts and then at most once a minute, so that a flood
of them cannot flood the log.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import cast

from aiohttp import web

from .bodies import BODY_SETTLED
from .logs import JsonLog, Throttled
from .metrics import WebhookMetrics

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)
# Connections accepted per wake-up of the listening socket, at most, before other work.
_ACCEPT_BATCH = 64
# Seconds accepting pauses after accept() failed for want of resources; the kernel keeps
# queueing connections (the backlog) meanwhile.
_ACCEPT_PAUSE = 0.5
# A connection idle for less than this (in its handshake, or between it and its request) is
# most likely about to send one: the API server writes its review as soon as TLS is up. It
# makes room only after the connections whose requests wait on a body, so that connections
# opened and reopened at a limit cannot close a review's connection in that gap.
_FRESH = 1.0


class ConnectionGuard:
    """The open connections of one server, and the limits they are held to."""

    def __init__(
        self,
        metrics: WebhookMetrics,
        log: JsonLog,
        *,
        max_connections: int,
        read_timeout: float,
        max_client_connections: int | None = None,
    ) -> None:
        self.metrics = metrics
        self.max_connections = max_connections
        self.max_client_connections = max_client_connections or max_connections
        self.read_timeout = read_timeout
        self.server: web.Server | None = None  # set once the runner has made it
        self._open: dict[asyncio.BaseTransport, GuardedConnection] = {}
        # Connections in their TLS handshake: the client's address and when it started.
        self._handshakes: dict[asyncio.Task[None], tuple[str, float]] = {}
        self._accepted = 0  # connections open or in their TLS handshake
        self._clients: Counter[str] = Counter()  # the same, by client address
        # Connections closed to make room that the event loop has not reported gone yet
        # (it does a moment later), and their clients.
        self._leaving: dict[object, str] = {}
        self._opened_by: dict[asyncio.Task[None], asyncio.BaseTransport] = {}
        self._full = Throttled(log, "connection-limit-reached")
        self._evicted = Throttled(log, "idle-connection-closed")
        self._evicted_waiting = Throttled(log, "waiting-connection-closed")
        self._slow = Throttled(log, "slow-request-headers")
        self._descriptors = Throttled(log, "out-of-file-descriptors")
        self._accept_error = Throttled(log, "accept-failed")
        metrics.watch_connections(self.count)

    def count(self) -> int:
        return len(self._open)

    def protocol(self, client: str, task: asyncio.Task[None]) -> Callable[[], asyncio.Protocol]:
        """The protocol factory for the connection from ``client`` that ``task`` opens."""
        assert self.server is not None, "the guard is used before the runner is set up"
        server = self.server
        return lambda: GuardedConnection(self, server(), client, task)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Marks the connection busy while a request is handled: its headers are complete."""
        connection = self._open.get(request.transport) if request.transport else None
        if connection is None:
            return await handler(request)
        connection.request_started(request.body_exists)
        request[BODY_SETTLED] = connection.body_settled
        try:
            return await handler(request)
        finally:
            connection.request_ended()

    def accept_failed(self, error: OSError) -> None:
        reason = "file-descriptors" if error.errno in _OUT_OF_DESCRIPTORS else "other"
        self.metrics.accept_errors.labels(reason).inc()
        code = errno.errorcode.get(error.errno or 0, "")
        if reason == "file-descriptors":
            self._descriptors(
                message=f"cannot accept connections: {error.strerror} ({code}); "
                f"{len(self._open)} are open; accepting again in {_ACCEPT_PAUSE:g} s",
            )
        else:
            self._accept_error(message=f"accept() failed: {error.strerror} ({code})")

    def admit(self, client: str) -> bool:
        """May one more accepted connection from ``client`` go on to its handshake? At a
        limit, the connection idle the longest (the client's own, for its limit) is closed to
        make room; with none idle, no."""
        leaving = sum(1 for owner in self._leaving.values() if owner == client)
        if (
            self.max_client_connections < self.max_connections
            and self._clients[client] - leaving >= self.max_client_connections
        ):
            # Room among the client's own connections is room among all of them too.
            if not self._make_room(client):
                return self._refuse(
                    f"{self._clients[client]} connections from one client are open "
                    "(--max-client-connections) and none is idle: new ones from it are "
                    "closed as soon as they are accepted"
                )
        elif self._accepted - len(self._leaving) >= self.max_connections and not (
            self._make_room(None)
        ):
            return self._refuse(
                f"{self._accepted} connections are open (--max-connections) and none is "
                "idle: new ones are closed as soon as they are accepted"
            )
        self._accepted += 1
        self._clients[client] += 1
        return True

    def _refuse(self, message: str) -> bool:
        self.metrics.refused_connections.inc()
        self._full(message=message)
        return False

    def _make_room(self, client: str | None) -> bool:
        """Close the connection (of ``client``, or of anyone) idle the longest, or else the
        one whose request has waited longest on its body, or else one idle for less than
        ``_FRESH`` (the longest); False when there is none. A scan of the open connections,
        made only at a limit."""
        now = time.monotonic()
        oldest: tuple[float, object, str] | None = None  # idle longer than _FRESH
        waiting: tuple[float, object, str] | None = None
        fresh: tuple[float, object, str] | None = None  # idle, but only just

        def idle(since: float, victim: object, owner: str) -> None:
            nonlocal oldest, fresh
            if now - since >= _FRESH:
                if oldest is None or since < oldest[0]:
                    oldest = (since, victim, owner)
            elif fresh is None or since < fresh[0]:
                fresh = (since, victim, owner)

        for transport, connection in self._open.items():
            if transport in self._leaving:
                continue
            if client is not None and connection.client != client:
                continue
            if not connection.busy:
                idle(connection.idle_since, transport, connection.client)
            elif connection.body_pending_since is not None and (
                waiting is None or connection.body_pending_since < waiting[0]
            ):
                waiting = (connection.body_pending_since, transport, connection.client)
        for task, (owner, started) in self._handshakes.items():
            if task in self._leaving or (client is not None and owner != client):
                continue
            idle(started, task, owner)
        log, what = self._evicted, "idle the longest"
        if oldest is None:
            log, oldest = self._evicted_waiting, waiting
            what = "whose request waited longest on its body"
        if oldest is None:
            log, oldest, what = self._evicted, fresh, "idle the longest"
        if oldest is None:
            return False
        _, victim, owner = oldest
        self._leaving[victim] = owner
        if isinstance(victim, asyncio.Task):
            victim.cancel()
        else:
            cast(asyncio.Transport, victim).abort()
        self.metrics.evicted_connections.inc()
        limit = "--max-client-connections" if client is not None else "--max-connections"
        log(message=f"the connection {what} was closed to make room for a new one ({limit})")
        return True

    def handshake_started(self, task: asyncio.Task[None], client: str) -> None:
        self._handshakes[task] = (client, time.monotonic())

    def handshake_done(self, task: asyncio.Task[None]) -> None:
        """The connection is open, in the slot its handshake had."""
        self._handshakes.pop(task, None)
        transport = self._opened_by.pop(task, None)
        owner = self._leaving.pop(task, None)
        if owner is not None and transport is not None and transport in self._open:
            # Room was to be made by it as its handshake ended: close it as was meant.
            self._leaving[transport] = owner
            cast(asyncio.Transport, transport).abort()

    def handshake_failed(self, task: asyncio.Task[None], client: str) -> None:
        self._handshakes.pop(task, None)
        self._leaving.pop(task, None)
        if self._opened_by.pop(task, None) is None:
            self._release(client)
        # else the connection was made before the handshake's end failed: closing it
        # releases the slot (``_closed``)

    def _release(self, client: str) -> None:
        self._accepted -= 1
        self._clients[client] -= 1
        if self._clients[client] <= 0:
            del self._clients[client]

    def _opened(self, connection: GuardedConnection, transport: asyncio.BaseTransport) -> None:
        self._open[transport] = connection
        if connection.handshake in self._handshakes:
            self._opened_by[connection.handshake] = transport

    def _closed(self, transport: asyncio.BaseTransport) -> None:
        connection = self._open.pop(transport, None)
        if connection is not None:
            self._leaving.pop(transport, None)
            self._release(connection.client)

    def _too_slow(self) -> None:
        self.metrics.slow_requests.labels("headers").inc()
        self._slow(
            message=f"request headers did not arrive within {self.read_timeout:g} s "
            "(--read-timeout): the connection was closed"
        )


class GuardedConnection(asyncio.Protocol):
    """aiohttp's protocol for one connection, behind the guard's limits."""

    def __init__(
        self,
        guard: ConnectionGuard,
        inner: asyncio.Protocol,
        client: str,
        handshake: asyncio.Task[None],
    ) -> None:
        self.guard = guard
        self.inner = inner
        self.client = client
        self.handshake = handshake
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.idle_since = time.monotonic()  # its last bytes or answer: room is made by it
        # When its request began to wait on a body that has not arrived whole; None once it
        # has, and for a request without one.
        self.body_pending_since: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    # --- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have the methods of asyncio.Transport without its class.
        stream = cast(asyncio.Transport, transport)
        self.guard._opened(self, stream)
        self.transport = stream
        self._arm()  # a connection that says nothing is closed as one that is slow to
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            return
        self.inner.data_received(data)
        if not self.busy:
            self.idle_since = time.monotonic()
            self._arm()

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.transport is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.transport is None:
            return
        self.guard._closed(self.transport)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # --- requests --------------------------------------------------------------------------

    def request_started(self, has_body: bool) -> None:
        self.busy = True
        self.body_pending_since = time.monotonic() if has_body else None
        self._disarm()

    def body_settled(self) -> None:
        """The request's body has arrived whole, or will not be read."""
        self.body_pending_since = None

    def request_ended(self) -> None:
        # Idle now: aiohttp's keep-alive timeout governs until bytes of another request come.
        self.busy = False
        self.body_pending_since = None
        self.idle_since = time.monotonic()

    def _arm(self) -> None:
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.guard.read_timeout, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.busy or self.transport is None or self.transport.is_closing():
            return
        self.guard._too_slow()
        self.transport.abort()


class _Listener:
    """One listening socket, accepted from by hand."""

    def __init__(
        self,
        sock: socket.socket,
        guard: ConnectionGuard,
        contexts: Callable[[], ssl.SSLContext | None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.sock = sock
        self.guard = guard
        self.contexts = contexts
        self.loop = loop
        self._handshakes: set[asyncio.Task[None]] = set()
        self._closed = False
        self._resume: asyncio.TimerHandle | None = None
        loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(_ACCEPT_BATCH):
            try:
                connection, address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as error:  # EMFILE, ENFILE, ENOBUFS, ENOMEM ...
                self.guard.accept_failed(error)
                self._pause()
                return
            client = str(address[0]) if isinstance(address, tuple) else str(address)
            if not self.guard.admit(client):
                connection.close()
                continue
            connection.setblocking(False)
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self.loop.create_task(self._handshake(connection, client))
            self.guard.handshake_started(task, client)
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, connection: socket.socket, client: str) -> None:
        task = asyncio.current_task()
        assert task is not None
        context = self.contexts()
        try:
            await self.loop.connect_accepted_socket(
                self.guard.protocol(client, task),
                connection,
                ssl=context,
                ssl_handshake_timeout=self.guard.read_timeout if context else None,
            )
        except (Exception, asyncio.CancelledError):
            # A client that went away or spoke no TLS, a handshake that took too long, room
            # made for a newer connection, or the site closing: the event loop has closed the
            # connection, or never took it.
            self.guard.handshake_failed(task, client)
            connection.close()
        else:
            self.guard.handshake_done(task)

    def _pause(self) -> None:
        self.loop.remove_reader(self.sock.fileno())
        self._resume = self.loop.call_later(_ACCEPT_PAUSE, self._resume_accepting)

    def _resume_accepting(self) -> None:
        self._resume = None
        if not self._closed:
            self.loop.add_reader(self.sock.fileno(), self._accept)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._resume is not None:
            self._resume.cancel()
        else:
            self.loop.remove_reader(self.sock.fileno())
        for task in self._handshakes:
            task.cancel()
        self.sock.close()


def listening_sockets(bind: str | None, port: int, backlog: int) -> list[socket.socket]:
    """Sockets for ``bind`` (every interface when None, IPv6 and IPv4 where both exist),
    made as ``loop.create_server`` makes them."""
    if bind is None:
        if socket.has_dualstack_ipv6():
            return [
                socket.create_server(
                    ("", port), family=socket.AF_INET6, backlog=backlog, dualstack_ipv6=True
                )
            ]
        return [socket.create_server(("", port), backlog=backlog)]
    found: list[socket.socket] = []
    try:
        infos = socket.getaddrinfo(bind, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, _, _, _, address in dict.fromkeys(infos):
            found.append(socket.create_server(address, family=family, backlog=backlog))
    except OSError:
        for sock in found:
            sock.close()
        raise
    return found


class GuardedSite(web.BaseSite):
    """A TCP site that accepts through a ``ConnectionGuard``, with the TLS handshake held to
    the guard's read timeout. With ``contexts``, each new connection's TLS context is asked
    of it (a certificate reload may replace the context), else ``ssl_context`` serves all."""

    __slots__ = ("_bind", "_contexts", "_listeners", "_port", "guard")

    def __init__(
        self,
        runner: web.BaseRunner,
        guard: ConnectionGuard,
        bind: str | None,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        contexts: Callable[[], ssl.SSLContext | None] | None = None,
        backlog: int = 128,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self.guard = guard
        self._contexts = contexts or (lambda: ssl_context)
        self._bind = bind
        self._port = port
        self._listeners: list[_Listener] = []

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._bind or '0.0.0.0'}:{self._port}"

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        self.guard.server = self._runner.server
        sockets = listening_sockets(self._bind, self._port, self._backlog)
        for sock in sockets:
            sock.setblocking(False)
        self._listeners = [_Listener(s, self.guard, self._contexts, loop) for s in sockets]

    async def stop(self) -> None:
        for listener in self._listeners:
            listener.close()
        self._listeners = []
        await super().stop()
