"""Structured logs: one JSON object per line on standard output.

A decision line names the object (kind, namespace, name), the operation, the verdict, the
rule IDs and the time taken; never the object's contents, the user, or any token. An internal
error is logged by its exception type and where it was raised, not by its message, which may
quote values from the object.

What a request chose (a uid, a kind, a name) is logged at most ``MAX_FIELD_CHARS`` characters
long, with the control characters JSON leaves raw (C1, line separators) escaped as it escapes
the others, so that one request cannot write a megabyte line or act on the terminal of
whoever reads the log.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import traceback
from typing import Any, TextIO

from gpulint.report.escape import json_text_safe

# Characters of one string field at most; Kubernetes names are at most 253.
MAX_FIELD_CHARS = 512
# Items of one list field at most (rule IDs).
MAX_FIELD_ITEMS = 64


class JsonLog:
    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdout
        self._lock = threading.Lock()

    def emit(self, event: str, level: str = "info", **fields: Any) -> None:
        record: dict[str, Any] = {
            "ts": _timestamp(time.time()),
            "level": level,
            "event": event,
        }
        record.update((k, _bounded(v)) for k, v in fields.items() if v is not None)
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        line = json_text_safe(line)
        with self._lock:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                # A closed or full log stream must not turn an answer into an error.
                pass

    def info(self, event: str, **fields: Any) -> None:
        self.emit(event, "info", **fields)

    def warning(self, event: str, **fields: Any) -> None:
        self.emit(event, "warning", **fields)

    def error(self, event: str, **fields: Any) -> None:
        self.emit(event, "error", **fields)


# How often one kind of trouble is logged at most: a request anyone can send (a bad body, a
# busy pool, a full connection table) must not write a line each time it is sent.
LOG_INTERVAL = 60.0


class Throttled:
    """Log a warning the first time one kind of trouble happens (an event and, for events
    with reasons, the reason), then at most once per interval, with the number of times
    (``times``) since the last line: the metrics count every one."""

    def __init__(self, log: JsonLog, event: str, interval: float = LOG_INTERVAL) -> None:
        self.log = log
        self.event = event
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._since: dict[str, int] = {}

    def __call__(self, key: str = "", **fields: Any) -> None:
        now = time.monotonic()
        with self._lock:
            times = self._since.get(key, 0) + 1
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._since[key] = times
                return
            self._last[key], self._since[key] = now, 0
        self.log.warning(self.event, times=times, **fields)


def _bounded(value: Any) -> Any:
    """A field value as logged: strings clipped, lists shortened."""
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, list | tuple):
        items = [_bounded(item) for item in value[:MAX_FIELD_ITEMS]]
        if len(value) > MAX_FIELD_ITEMS:
            items.append(f"... {len(value) - MAX_FIELD_ITEMS} more")
        return items
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_FIELD_CHARS:
        text = f"{text[: MAX_FIELD_CHARS - 40]}... ({len(text):,} characters)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the request's JSON)
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def where_raised(error: BaseException) -> str:
    """``module.py:123 in function`` of the innermost frame, for an error log line."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    path = frame.filename.replace("\\", "/")
    for marker in ("/gpulint/", "/rules/", "/webhook/", "/site-packages/"):
        if marker in path:
            path = marker.strip("/") + "/" + path.rsplit(marker, 1)[1]
            break
    return f"{path}:{frame.lineno} in {frame.name}"


def _timestamp(now: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
    return f"{seconds}.{int(now % 1 * 1000):03d}Z"


class LibraryLogs(logging.Handler):
    """What libraries log (aiohttp's server, the cluster caches) as JSON lines too: the
    logger's name as the event, the first line of the message, and for an exception its
    type and where it was raised instead of the traceback."""

    def __init__(self, log: JsonLog) -> None:
        super().__init__(logging.INFO)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage().strip().splitlines()
            fields: dict[str, Any] = {"message": message[0] if message else ""}
            if record.exc_info and record.exc_info[1] is not None:
                error = record.exc_info[1]
                fields["error"] = type(error).__name__
                fields["at"] = where_raised(error)
            level = record.levelname.lower()
            self.log.emit(record.name, "warning" if level == "warn" else level, **fields)
        except Exception:
            self.handleError(record)

    @classmethod
    def install(cls, log: JsonLog) -> None:
        root = logging.getLogger()
        root.handlers = [cls(log)]
        root.setLevel(logging.INFO)
        logging.getLogger("aiohttp.access").disabled = True
