"""``--progress``: a live check waiting on a Prometheus that accepts the connection and never
answers says on stderr what it waits for and for how long; stdout keeps only the report."""

from __future__ import annotations

import os
import pty
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from .conftest import LIVE_FIXTURES
from .harness import ROOT

ADAPTER = LIVE_FIXTURES / "GL804" / "fail_pod_label_of_exporter" / "adapter.yaml"
TIMEOUT = "4"


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A loopback server that accepts every connection and never sends a byte."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


def _command(url: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gpulint",
        "check-adapter",
        "--prometheus",
        url,
        "--prometheus-timeout",
        TIMEOUT,
        *extra,
        str(ADAPTER),
    ]


def _run(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(url, *extra),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=60,
    )


def test_always_says_what_it_waits_for_on_stderr_only(silent_url: str) -> None:
    result = _run(silent_url, "--progress", "always")
    waits = [line for line in result.stderr.splitlines() if line.startswith("gpulint: waiting")]
    assert waits, result.stderr
    # Said after 2 s, then every 5 s, within the 4 s timeout: once.
    assert len(waits) == 1, result.stderr
    assert f"of the {TIMEOUT}s timeout for {silent_url}/api/v1/" in waits[0], waits
    seconds = int(waits[0].split()[2].rstrip("s"))
    assert 2 <= seconds <= int(TIMEOUT), waits
    assert "waiting" not in result.stdout
    assert "GL809" in result.stdout  # the report is whole: no answer within the timeout


def test_auto_is_quiet_when_stderr_is_no_terminal(silent_url: str) -> None:
    result = _run(silent_url)
    assert "waiting" not in result.stderr, result.stderr
    assert "GL809" in result.stdout


def test_auto_rewrites_one_line_on_a_terminal_and_erases_it(silent_url: str) -> None:
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            _command(silent_url),
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
            cwd=ROOT,
            env={**os.environ, "NO_COLOR": "1"},
        )
        os.close(follower)
        stdout, _ = process.communicate(timeout=60)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the process closed the terminal's other end
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
    text = seen.decode()
    assert f"\rgpulint: waiting 2s of the {TIMEOUT}s timeout for {silent_url}/api/v1/" in text
    assert "\n" not in text.split("\rgpulint: waiting", 1)[1].split("\r", 1)[0]
    # Erased at the end: the last write is blanks over the line and a carriage return.
    assert text.endswith(" \r"), repr(text[-80:])
    assert "GL809" in stdout and "waiting" not in stdout


def test_the_request_shown_carries_no_terminal_escape_of_the_user() -> None:
    from gpulint.live.progress import describe

    shown = describe("http://prom:9090", "/api/v1/query", [("query", "up\x1b]0;pwned\x07 + 1")])
    assert "\x1b" not in shown and "\x07" not in shown
    assert shown.startswith("http://prom:9090/api/v1/query `up")
    long = describe("http://prom:9090", "/api/v1/series", [("match[]", "x" * 200)])
    assert long.endswith("...`") and len(long) < 120


def test_a_min_history_that_is_no_share_is_a_usage_error() -> None:
    result = subprocess.run(
        [*_command("http://127.0.0.1:9", "--min-history", "150%")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "--min-history '150%' is more than the whole look-back window" in result.stderr
    assert result.stdout == ""
