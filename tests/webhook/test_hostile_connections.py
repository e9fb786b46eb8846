"""Many connections and many large bodies against ``gpulint serve`` over TLS: 1,000 idle
connections from one client do not keep another from being answered, 150 slow 6 MiB bodies
do not take the process's memory, and connections that announce bodies and send none, from
two clients up to the connection cap, never make a review fail open (``webhook.connections``,
``webhook.bodies``)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import socket
import ssl
import threading
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

        def slow_body() -> ssl.SSLSocket | None:
            sock = None
            with contextlib.suppress(ssl.SSLWantWriteError, BlockingIOError, OSError):
                sock = _tls_from(served, ATTACKER)
                sock.setblocking(False)
                sock.sendall(head)
                for _ in range(5):  # 5 MiB of the 6, as fast as the server takes them
                    sock.sendall(chunk)
            return sock

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            slow = [s for s in pool.map(lambda _: slow_body(), range(150)) if s is not None]
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


class _Attacker(threading.Thread):
    """Keeps ``count`` TLS connections from ``source`` open, each having sent ``opening`` and
    nothing more, and opens a new one as soon as the server closes one; stops at ``stop``."""

    def __init__(
        self, hook: Webhook, source: str, count: int, opening: bytes, stop: threading.Event
    ) -> None:
        super().__init__(daemon=True)
        self.hook, self.source, self.count, self.opening, self.stop = (
            hook,
            source,
            count,
            opening,
            stop,
        )
        self.opened = 0

    def _open(self) -> ssl.SSLSocket | None:
        try:
            sock = _tls_from(self.hook, self.source)
            sock.sendall(self.opening)
        except OSError:
            return None
        sock.setblocking(False)
        self.opened += 1
        return sock

    def run(self) -> None:
        socks: list[ssl.SSLSocket | None] = [None] * self.count
        try:
            while not self.stop.is_set():
                for index, sock in enumerate(socks):
                    if sock is not None:
                        try:
                            if sock.recv(65536) != b"":
                                continue  # an answer: the close follows
                        except (ssl.SSLWantReadError, BlockingIOError):
                            continue  # still open
                        except OSError:
                            pass
                        sock.close()
                    if self.stop.is_set():
                        break
                    socks[index] = self._open()
                self.stop.wait(0.02)
        finally:
            for sock in socks:
                if sock is not None:
                    sock.close()


def test_reviews_of_a_denied_object_are_denied_under_the_body_pool_attack(
    certificates: Certificates, tmp_path: Path
) -> None:
    """Idle connections that announce 5.3 MiB bodies and send none, reopened as they are
    closed, from one client, and connections that announce a body and send none up to
    the connection cap from another, while a Deployment that must be refused is reviewed
    every 0.2 s on a new connection each time: every review is refused."""
    # Six of these fill the default 32 MiB pool but for 2 bytes.
    size = 32 * 1024 * 1024 // 6
    # The defaults (6 MiB bodies, a 32 MiB pool, a 2 s deadline), with a connection cap low
    # enough for the test to fill: each attacker at its per-client cap, the two at the cap.
    args = ["--no-cluster", "--max-connections=40", "--max-client-connections=20"]
    opening = f"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode()
    with running(certificates, tmp_path / "serve.log", args) as served:
        stop = threading.Event()
        attackers = [
            _Attacker(served, ATTACKER, 20, opening, stop),
            _Attacker(served, "127.0.0.3", 20, opening.replace(str(size).encode(), b"2000"), stop),
        ]
        for attacker in attackers:
            attacker.start()
        verdicts = []
        try:
            time.sleep(1.2)  # every attacking connection open, the first ones closed
            for index in range(10):
                review = admission_review(objects.half_gpu_deployment(), uid=f"r{index}")
                status, answer = served.post_raw(json.dumps(review).encode())
                verdicts.append((status, answer.get("response", {}).get("allowed")))
                time.sleep(0.2)
        finally:
            stop.set()
            for attacker in attackers:
                attacker.join(10)
        assert verdicts == [(200, False)] * 10, verdicts
        metrics = served.metrics()
    # the attack was under way: connections were closed for their silence and reopened
    assert all(attacker.opened > attacker.count for attacker in attackers)
    assert metrics.value("gpulint_webhook_possible_fail_open_total", reason="no-body") > 10
    assert metrics.value("gpulint_webhook_fail_open_total") == 0
    assert metrics.value("gpulint_webhook_possible_fail_open_total", reason="busy") == 0
