"""Many connections and many large bodies against ``gpulint serve`` over TLS: 1,000 idle
connections from one client do not keep another from being answered, and 150 slow 6 MiB
bodies do not take the process's memory (``webhook.connections``)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import objects
from .harness import Certificates, Webhook, admission_review, running

pytestmark = pytest.mark.slow

ATTACKER = "127.0.0.2"  # another address on the loopback: another client


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _tls_from(hook: Webhook, source: str) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", hook.port), timeout=20, source_address=(source, 0))
    return hook.certificates.client_context().wrap_socket(raw, server_hostname="localhost")


@pytest.fixture
def hook(certificates: Certificates, tmp_path: Path) -> Iterator[Webhook]:
    # A read timeout longer than the test, so that no idle connection is closed by it.
    args = ["--no-cluster", "--read-timeout=120"]
    with running(certificates, tmp_path / "serve.log", args) as served:
        yield served


def test_a_thousand_idle_tls_connections_do_not_keep_reviews_out(hook: Webhook) -> None:
    idle: list[ssl.SSLSocket] = []
    try:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(_tls_from, hook, ATTACKER) for _ in range(1_000)]
            for future in futures:
                with contextlib.suppress(OSError):
                    idle.append(future.result())
        assert len(idle) == 1_000  # every handshake was made: the attacker's own made room
        for index in range(20):
            review = admission_review(objects.isvc_with_mode_field(), uid=f"r{index}")
            assert hook.review(review)["allowed"] is False
    finally:
        for sock in idle:
            sock.close()
    metrics = hook.metrics()
    # one client holds --max-client-connections (500) at most: the rest took the places of
    # its own idle ones
    assert metrics.value("gpulint_webhook_evicted_connections_total") >= 500
    assert metrics.value("gpulint_webhook_refused_connections_total") == 0


def test_150_slow_large_bodies_are_read_a_few_at_a_time(
    certificates: Certificates, tmp_path: Path
) -> None:
    size = 6 * 1024 * 1024
    args = ["--no-cluster", "--read-timeout=3"]
    with running(certificates, tmp_path / "serve.log", args) as served:
        before = _rss(served.process.pid)
        head = f"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode()
        chunk = b" " * (1024 * 1024)

        def slow_body() -> ssl.SSLSocket:
            sock = _tls_from(served, ATTACKER)
            sock.setblocking(False)
            with contextlib.suppress(ssl.SSLWantWriteError, BlockingIOError, OSError):
                sock.sendall(head)
                for _ in range(5):  # 5 MiB of the 6, as fast as the server takes them
                    sock.sendall(chunk)
            return sock

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            slow = list(pool.map(lambda _: slow_body(), range(150)))
        try:
            peak = 0
            end = time.monotonic() + 2
            while time.monotonic() < end:
                peak = max(peak, _rss(served.process.pid))
                time.sleep(0.05)
            # a review with a small body still finds room and is answered
            response = served.review(admission_review(objects.isvc_with_mode_field()))
            assert response["allowed"] is False
            peak = max(peak, _rss(served.process.pid))
        finally:
            for sock in slow:
                sock.close()
        # 150 bodies of 6 MiB are 900 MiB (1.7 GB of RSS once read at once). Five are read at
        # a time (--max-buffered-bytes 32 MiB, each body twice while it is joined); the other
        # connections hold what TLS and aiohttp read ahead (about 384 KiB each) and the kernel
        # the rest: the process stays far inside the deployment's 512Mi.
        assert peak - before < 256 * 1024 * 1024, (before, peak)
        used = served.metrics().value("gpulint_webhook_buffered_body_bytes")
        assert used <= 32 * 1024 * 1024


def test_a_body_that_finds_no_room_is_a_429(certificates: Certificates, tmp_path: Path) -> None:
    args = [
        "--no-cluster",
        "--read-timeout=3",
        "--deadline=0.5",
        "--max-body-bytes=4096",
        "--max-buffered-bytes=4096",
    ]
    with running(certificates, tmp_path / "serve.log", args) as served:
        holder = _tls_from(served, ATTACKER)  # reserves the whole pool and sends no body
        holder.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n{")
        time.sleep(0.2)
        status, body, _ = served.request(
            "POST", "/validate", json.dumps(admission_review(objects.deployment())).encode()
        )
        holder.close()
        assert status == 429
        message = json.loads(body)["message"]
        assert "(--max-buffered-bytes)" in message and "within 0.5 s (the --deadline" in message
        assert served.metrics().value("gpulint_webhook_invalid_requests_total", reason="busy") == 1
