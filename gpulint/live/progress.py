"""What the live check waits for, said on stderr while it waits.

A Prometheus that accepts the connection and never answers keeps the live check waiting for
the whole ``--prometheus-timeout`` (30 s by default). So that a user does not take that for a
hang, ``--progress`` says, once a request has taken longer than ``DELAY``, which request it
waits for, on which server, and for how long of the timeout:

    gpulint: waiting 12s of the 30s timeout for http://prom:9090/api/v1/query `up`

Only on stderr: stdout holds the report and may be piped into a file or ``jq``. By default
(``auto``) only when stderr is a terminal, where the line is rewritten in place and erased
when the check ends; with ``always`` it is written to a file or pipe too (CI logs), as a new
line every ``EVERY`` seconds; ``never`` turns it off. A fast check prints nothing.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import TextIO

from gpulint.report.escape import escape_controls

DELAY = 2.0  # seconds a request may take before the wait is said
EVERY_TERMINAL = 1.0  # a terminal's line is rewritten this often
EVERY = 5.0  # a log gets a new line this often
_SHOWN_QUERY = 60


class Waiting:
    """The requests in flight (the live check sends several at once), thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._requests: dict[int, tuple[str, float]] = {}

    def begin(self, what: str) -> int:
        token = next(self._ids)
        with self._lock:
            self._requests[token] = (what, time.monotonic())
        return token

    def end(self, token: int) -> None:
        with self._lock:
            self._requests.pop(token, None)

    def longest(self) -> tuple[str, float] | None:
        """(what, seconds so far) of the request waited for longest, None when none is."""
        with self._lock:
            if not self._requests:
                return None
            what, started = min(self._requests.values(), key=lambda item: item[1])
        return what, time.monotonic() - started


def describe(url: str, path: str, params: list[tuple[str, str]]) -> str:
    """``http://prom:9090/api/v1/query `up``` : the request as a user recognises it."""
    query = next((value for name, value in params if name in ("query", "match[]")), "")
    flat = " ".join(query.split())
    if len(flat) > _SHOWN_QUERY:
        flat = flat[: _SHOWN_QUERY - 3] + "..."
    # The URL and the query are the user's: no terminal escape of theirs reaches the terminal.
    return escape_controls(f"{url}{path}" + (f" `{flat}`" if flat else ""))


class Progress:
    """A background thread that says on ``stream`` what ``waiting`` has waited for longest.

    ``stream`` is written as is (the carriage returns that rewrite the line on a terminal
    must reach it): what is shown of the request is escaped where it is described."""

    def __init__(self, stream: TextIO, timeout: float, terminal: bool) -> None:
        self.waiting = Waiting()
        self._stream = stream
        self._timeout = timeout
        self._terminal = terminal
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = 0  # characters of the line on the terminal, to erase

    def __enter__(self) -> Progress:
        self._thread = threading.Thread(target=self._run, name="gpulint-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")

    def _run(self) -> None:
        every = EVERY_TERMINAL if self._terminal else EVERY
        last = -every
        while not self._stop.wait(0.2):
            found = self.waiting.longest()
            if found is None or found[1] < DELAY:
                continue
            now = time.monotonic()
            if now - last < every:
                continue
            last = now
            what, seconds = found
            line = f"gpulint: waiting {seconds:.0f}s of the {self._timeout:g}s timeout for {what}"
            if self._terminal:
                padding = " " * max(0, self._shown - len(line))
                self._write("\r" + line + padding)
                self._shown = len(line)
            else:
                self._write(line + "\n")

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            # A closed or broken stderr ends the progress, never the check.
            self._stop.set()
