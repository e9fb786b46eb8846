"""Hostile clients against ``gpulint serve`` as a real process over TLS: slow headers, slow
bodies, silent connections, too many connections, no file descriptors left.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import objects
from .harness import Certificates, Webhook, admission_review, running

READ_TIMEOUT = 1.0
GUARDED = ["--no-cluster", f"--read-timeout={READ_TIMEOUT:g}", "--max-connections=4"]


@pytest.fixture(scope="module")
def guarded(
    module_certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    log = tmp_path_factory.mktemp("guarded") / "serve.log"
    with running(module_certificates, log, GUARDED) as hook:
        yield hook


def _tls(hook: Webhook) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", hook.port), timeout=10)
    return hook.certificates.client_context().wrap_socket(raw, server_hostname="localhost")


def _seconds_until_closed(sock: socket.socket, trickle: bytes = b"", limit: float = 15.0) -> float:
    """Send ``trickle`` a byte at a time, every 0.2 s, until the server closes the connection."""
    started = time.monotonic()
    with sock:
        sock.settimeout(0.2)
        while time.monotonic() - started < limit:
            try:
                if trickle:
                    sock.sendall(trickle[:1])
                    trickle = trickle[1:] or trickle
                if sock.recv(1024) == b"":
                    return time.monotonic() - started
            except TimeoutError:
                continue
            except (ConnectionError, ssl.SSLError, OSError):
                return time.monotonic() - started
    raise AssertionError(f"still open after {limit} s")


def _answer(sock: ssl.SSLSocket, request: bytes) -> tuple[float, bytes]:
    """Send ``request`` and read the whole answer (the server closes after it)."""
    started = time.monotonic()
    sock.sendall(request)
    sock.settimeout(15)
    data = b""
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while chunk := sock.recv(65536):
            data += chunk
    return time.monotonic() - started, data


def _body(review: dict[str, object]) -> bytes:
    return json.dumps(review).encode()


# --- slow clients ----------------------------------------------------------------------------


@pytest.mark.slow
def test_headers_that_trickle_in_are_cut_off_at_the_read_timeout(guarded: Webhook) -> None:
    before = guarded.metrics().value("gpulint_webhook_slow_requests_total", part="headers")
    sock = _tls(guarded)
    sock.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n")
    elapsed = _seconds_until_closed(sock, trickle=b"X-Slow: " + b"a" * 200)
    assert READ_TIMEOUT * 0.8 < elapsed < READ_TIMEOUT + 2
    after = guarded.metrics().value("gpulint_webhook_slow_requests_total", part="headers")
    assert after == before + 1
    assert any(r["event"] == "slow-request-headers" for r in guarded.log_records())


@pytest.mark.slow
def test_the_next_request_on_a_kept_alive_connection_has_the_same_limit(guarded: Webhook) -> None:
    sock = _tls(guarded)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    sock.settimeout(5)
    assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK")
    # Idle for longer than the read timeout: a kept-alive connection may wait (120 s).
    time.sleep(READ_TIMEOUT * 1.5)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK")
    sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # and then nothing more
    assert _seconds_until_closed(sock) < READ_TIMEOUT + 2


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_body_that_trickles_in_is_a_400_at_the_read_timeout(
    guarded: Webhook, framing: str
) -> None:
    body = _body(admission_review(objects.deployment()))
    if framing == "length":
        head = f"Content-Length: {len(body)}\r\n\r\n".encode()
        start = body[:20]
    else:
        head = b"Transfer-Encoding: chunked\r\n\r\n"
        start = b"5\r\n" + body[:5] + b"\r\n"
    sock = _tls(guarded)
    with sock:
        sock.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n" + head + start)
        elapsed, answer = _answer(sock, b"")
    assert READ_TIMEOUT * 0.8 < elapsed < READ_TIMEOUT + 2
    head_part, _, payload = answer.partition(b"\r\n\r\n")
    assert head_part.startswith(b"HTTP/1.1 400 ")
    assert b"Connection: close" in head_part
    message = json.loads(payload)["message"]
    assert message == f"the request body did not arrive within {READ_TIMEOUT:g} s (--read-timeout)"
    assert guarded.metrics().value("gpulint_webhook_slow_requests_total", part="body") >= 1


@pytest.mark.slow
def test_silent_connections_and_stalled_handshakes_are_closed(guarded: Webhook) -> None:
    raw = socket.create_connection(("127.0.0.1", guarded.port), timeout=10)
    assert _seconds_until_closed(raw) < READ_TIMEOUT + 2  # no TLS handshake at all
    assert _seconds_until_closed(_tls(guarded)) < READ_TIMEOUT + 2  # TLS, then nothing


def test_slow_clients_do_not_hold_up_reviews(guarded: Webhook) -> None:
    slow = [_tls(guarded) for _ in range(2)]
    for sock in slow:
        sock.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 999\r\n\r\n{")
    started = time.monotonic()
    response = guarded.review(admission_review(objects.isvc_with_mode_field()))
    assert response["allowed"] is False
    assert time.monotonic() - started < 1.0
    for sock in slow:
        sock.close()


# --- too many connections, no file descriptors --------------------------------------------


def _is_closed(sock: ssl.SSLSocket, wait: float = 2.0) -> bool:
    sock.settimeout(wait)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except (ConnectionError, ssl.SSLError, OSError):
        return True


@pytest.mark.slow
def test_a_connection_beyond_the_cap_takes_the_place_of_the_longest_idle(
    guarded: Webhook,
) -> None:
    time.sleep(READ_TIMEOUT + 0.5)  # earlier tests' connections are gone
    before = guarded.metrics().value("gpulint_webhook_evicted_connections_total")
    held = []
    for _ in range(4):
        held.append(_tls(guarded))
        time.sleep(0.05)  # an order of idleness
    try:
        # the fifth is served; the first, idle the longest, is closed for it
        assert guarded.review(admission_review(objects.deployment()))["allowed"] is True
        # (within the read timeout, after which silent connections close anyway)
        assert not _is_closed(held[3], wait=0.05)
        assert _is_closed(held[0], wait=0.05)
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    assert guarded.metrics().value("gpulint_webhook_evicted_connections_total") >= before + 1
    assert any(r["event"] == "idle-connection-closed" for r in guarded.log_records())


@pytest.mark.slow
def test_connections_beyond_the_cap_are_closed_when_none_is_idle(guarded: Webhook) -> None:
    time.sleep(READ_TIMEOUT + 0.5)
    before = guarded.metrics().value("gpulint_webhook_refused_connections_total")
    review = _body(admission_review(objects.slow_adapter_configmap()))
    busy = [_tls(guarded) for _ in range(4)]
    try:
        for sock in busy:  # each with a whole review that takes until its deadline to judge
            sock.sendall(
                b"POST /validate HTTP/1.1\r\nHost: localhost\r\n"
                + f"Content-Length: {len(review)}\r\n\r\n".encode()
                + review
            )
        time.sleep(0.3)
        raw = socket.create_connection(("127.0.0.1", guarded.port), timeout=5)
        with pytest.raises((ConnectionError, ssl.SSLError)):
            guarded.certificates.client_context().wrap_socket(raw, server_hostname="localhost")
        raw.close()
    finally:
        for sock in busy:
            sock.close()
    time.sleep(0.5)
    assert guarded.get("/healthz") == (200, {"ok": True})
    assert guarded.metrics().value("gpulint_webhook_refused_connections_total") == before + 1
    (record,) = [r for r in guarded.log_records() if r["event"] == "connection-limit-reached"]
    assert "4 connections are open (--max-connections) and none is idle" in record["message"]


@pytest.mark.slow
def test_connections_waiting_on_a_body_make_room_for_a_new_one(
    certificates: Certificates, tmp_path: Path
) -> None:
    """Requests whose body stalls hold no connection the API server needs: at the cap, the
    one that has waited longest on its body is closed for a new one. (A deadline and read
    timeout of 10 s keep the stalled bodies from being cut while the test runs.)"""
    args = ["--no-cluster", "--max-connections=4", "--deadline=10", "--read-timeout=10"]
    with running(certificates, tmp_path / "serve.log", args) as hook:
        waiting = []
        for _ in range(4):
            sock = _tls(hook)
            sock.sendall(
                b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99\r\n\r\n{"
            )
            waiting.append(sock)
            time.sleep(0.05)  # an order of waiting
        try:
            response = hook.review(admission_review(objects.half_gpu_deployment()))
            assert response["allowed"] is False
            assert _is_closed(waiting[0], wait=0.05)
            assert not _is_closed(waiting[3], wait=0.05)
        finally:
            for sock in waiting:
                sock.close()
        time.sleep(0.2)
        assert hook.metrics().value("gpulint_webhook_evicted_connections_total") >= 1
        records = hook.log_records()
    (record,) = [r for r in records if r["event"] == "waiting-connection-closed"]
    assert "whose request waited longest on its body" in record["message"]


_LIMITED = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (60, 60))\n"
    "from gpulint.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@pytest.mark.slow
def test_running_out_of_file_descriptors_is_logged_and_counted(
    certificates: Certificates, tmp_path: Path
) -> None:
    program = (sys.executable, "-c", _LIMITED)
    with running(
        certificates, tmp_path / "serve.log", ["--no-cluster", "--read-timeout=2"], program=program
    ) as hook:
        clients = []
        with contextlib.suppress(OSError):
            for _ in range(80):
                clients.append(socket.create_connection(("127.0.0.1", hook.port), timeout=2))
        time.sleep(1.0)
        for client in clients:
            client.close()
        time.sleep(2.5)  # the server's side closes with the handshake timeout
        metrics = hook.metrics()
        assert metrics.value("gpulint_webhook_accept_errors_total", reason="file-descriptors") >= 1
        records = hook.log_records()
    assert any(r["event"] == "file-descriptor-limit" for r in records)
    (record,) = [r for r in records if r["event"] == "out-of-file-descriptors"]
    assert record["message"].startswith("cannot accept connections: Too many open files (EMFILE)")
