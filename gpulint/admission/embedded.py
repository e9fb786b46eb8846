"""YAML someone else wrote, parsed in a separate process with hard limits.

An adapter ConfigMap's ``config.yaml`` is YAML inside a string: whoever can create a ConfigMap
chooses it. Parsing is linear in its size, but a front door that answers a cluster (the
admission webhook, its list/watch caches) must not let one object stall everything else,
whatever the parser's worst case turns out to be. ``EmbeddedWorker`` parses in a child
process: at most ``max_bytes`` of text, within ``timeout`` seconds, under a memory limit.
A parse that runs over is killed, the child replaced, and the caller told (``ParseLimit``):
the config is then ignored with a warning, and the answer still comes within its deadline.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from gpulint.input.yamlparse import ParsedDocument, YamlError, parse_documents

MAX_BYTES = 1 << 20  # a ConfigMap holds at most 1 MiB
TIMEOUT = 1.0
MEMORY_LIMIT = 512 << 20  # the child's address space


class ParseLimit(Exception):
    """The text was not parsed: too large, too slow or too big in memory."""


def _serve(connection: Connection, memory_limit: int) -> None:  # the child process
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    except (ImportError, ValueError, OSError):
        pass
    while True:
        try:
            task = connection.recv()
        except (EOFError, OSError):
            return
        text, line, column = task
        try:
            documents = list(parse_documents(text, line_offset=line, column_offset=column))
            answer: tuple[Any, ...] = ("ok", documents)
        except YamlError as error:
            answer = ("yaml", error.message, error.line, error.column)
        except MemoryError:
            answer = ("limit", "over the memory limit")
        try:
            connection.send(answer)
        except (OSError, ValueError, MemoryError):
            return


class EmbeddedWorker:
    """A child process that parses one text at a time; thread-safe."""

    def __init__(
        self,
        max_bytes: int = MAX_BYTES,
        timeout: float = TIMEOUT,
        memory_limit: int = MEMORY_LIMIT,
    ) -> None:
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.memory_limit = memory_limit
        self._lock = threading.Lock()
        self._context = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._connection: Connection | None = None
        self.killed = 0  # parses that ran over and were stopped

    def start(self) -> None:
        """Start the child now (it takes a moment), rather than on the first parse."""
        with self._lock:
            self._ensure()

    def _ensure(self) -> Connection:
        if self._process is None or not self._process.is_alive() or self._connection is None:
            self._stop_child()
            parent, child = self._context.Pipe()
            process = self._context.Process(
                target=_serve, args=(child, self.memory_limit), name="gpulint-embedded", daemon=True
            )
            process.start()
            child.close()
            self._process, self._connection = process, parent
        return self._connection

    def _stop_child(self) -> None:
        if self._connection is not None:
            self._connection.close()
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(1.0)
        self._process, self._connection = None, None

    def stop(self) -> None:
        with self._lock:
            self._stop_child()

    def parse(
        self, text: str, line: int = 0, column: int = 0, timeout: float | None = None
    ) -> list[ParsedDocument]:
        """The documents of ``text`` (positions shifted as ``parse_documents`` does). Raises
        YamlError for text that is not YAML, ParseLimit when a limit stops the parse."""
        if len(text) > self.max_bytes:
            raise ParseLimit(f"{len(text):,} characters, over the limit of {self.max_bytes:,}")
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        started = time.monotonic()
        if not self._lock.acquire(timeout=max(limit, 0.0)):
            raise ParseLimit(f"another parse held the worker for {limit:g} s")
        try:
            remaining = limit - (time.monotonic() - started)
            connection = self._ensure()
            try:
                connection.send((text, line, column))
                ready = connection.poll(max(remaining, 0.0))
                answer = connection.recv() if ready else None
            except (EOFError, OSError):
                self._stop_child()
                raise ParseLimit("the parser stopped (over its memory limit?)") from None
            if answer is None:
                self.killed += 1
                self._stop_child()
                raise ParseLimit(f"not parsed within {limit:g} s")
        finally:
            self._lock.release()
        if answer[0] == "ok":
            documents: list[ParsedDocument] = answer[1]
            return documents
        if answer[0] == "yaml":
            raise YamlError(answer[1], answer[2], answer[3])
        raise ParseLimit(str(answer[1]))

    def parser(
        self, deadline: float | None, skipped: list[str]
    ) -> Callable[[str, int, int], list[ParsedDocument]]:
        """A ``classify.EmbeddedParser`` that parses here, within ``deadline`` (a
        ``time.monotonic()`` value); a text a limit stopped is read as empty, and why is
        appended to ``skipped``."""

        def parse(text: str, line: int, column: int) -> list[ParsedDocument]:
            timeout = None if deadline is None else deadline - time.monotonic()
            try:
                return self.parse(text, line, column, timeout)
            except ParseLimit as limit:
                skipped.append(str(limit))
                return []

        return parse
