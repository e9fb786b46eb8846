"""The Prometheus HTTP API, through prometheus-api-client, within one deadline.

Only the documented, stable endpoints are used (``/api/v1/series``, ``/api/v1/query``,
``/api/v1/labels``, ``/api/v1/label/<name>/values`` with ``match[]``, ``start``, ``end``), so
Thanos Query, Mimir, Cortex and VictoriaMetrics answer as Prometheus does.

``PrometheusConnect`` provides the session, the base URL and the headers. Its helpers raise
one exception type for every non-200 answer with the body folded into the message, read
bodies of any size, and retry 5xx answers with back-off; the live check needs the error text
of a rejected query (GL803), a bound on time and size, and no retries inside its single
timeout, so requests go through the connector's own session.

This module imports requests; only the collector imports it, and only with ``--prometheus``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any
from urllib.parse import urlencode

import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from gpulint.live.snapshot import BAD_ANSWER, HTTP_ERROR, TIMEOUT, UNREACHABLE

# An answer larger than this is not a Prometheus answering a seriesQuery gpulint can use.
MAX_ANSWER_BYTES = 256 * 1024 * 1024
# Above this many characters of query string, send the parameters as a form (POST), which
# every Prometheus-compatible API accepts for these endpoints.
_MAX_GET_QUERY = 6000
_CHUNK = 1 << 16


class PrometheusError(Exception):
    """Prometheus cannot be reached, or answers with something that is not its API (GL809).

    ``reason`` sorts the failure (``snapshot.FAILURE_REASONS``) for the webhook's metrics.
    """

    def __init__(self, message: str, reason: str = BAD_ANSWER) -> None:
        super().__init__(message)
        self.reason = reason


class QueryRejected(Exception):
    """Prometheus refused a PromQL query: bad syntax or an execution error (GL803)."""


class Deadline:
    """One time budget for the whole live check."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0


class PrometheusAPI:
    def __init__(self, url: str, headers: dict[str, str], deadline: Deadline) -> None:
        self.url = url
        self.deadline = deadline
        self.connect = PrometheusConnect(
            url=url,
            headers=dict(headers) or None,
            retry=Retry(total=0, raise_on_status=False),
        )
        self.requests = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        self.connect.close()

    # --- endpoints -------------------------------------------------------------------------

    def series(self, matches: list[str], start: float, end: float) -> list[dict[str, str]]:
        data = self._call(
            "/api/v1/series", [*(("match[]", m) for m in matches), *_range(start, end)]
        )
        if not isinstance(data, list):
            raise PrometheusError("/api/v1/series answered without a list of series")
        return [s for s in data if isinstance(s, dict)]

    def label_values(
        self, label: str, start: float, end: float, matches: list[str] | None = None
    ) -> list[str]:
        params = [*(("match[]", m) for m in matches or []), *_range(start, end)]
        data = self._call(f"/api/v1/label/{label}/values", params)
        if not isinstance(data, list):
            raise PrometheusError(f"/api/v1/label/{label}/values answered without a list")
        return [v for v in data if isinstance(v, str)]

    def label_names(self, start: float, end: float, matches: list[str] | None = None) -> list[str]:
        params = [*(("match[]", m) for m in matches or []), *_range(start, end)]
        data = self._call("/api/v1/labels", params)
        if not isinstance(data, list):
            raise PrometheusError("/api/v1/labels answered without a list")
        return [v for v in data if isinstance(v, str)]

    def query(self, promql: str, at: float) -> dict[str, Any]:
        """An instant query; raises QueryRejected when Prometheus refuses the PromQL."""
        data = self._call("/api/v1/query", [("query", promql), ("time", _stamp(at))])
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise PrometheusError("/api/v1/query answered without a result")
        return data

    # --- transport ---------------------------------------------------------------------------

    def _call(self, path: str, params: list[tuple[str, str]]) -> Any:
        remaining = self.deadline.remaining()
        if remaining <= 0:
            raise PrometheusError(
                f"no answer within the {self.deadline.seconds:g} s timeout", TIMEOUT
            )
        with self._lock:
            self.requests += 1
        url = self.url + path
        encoded = urlencode(params)
        session = self.connect._session
        try:
            if len(encoded) > _MAX_GET_QUERY:
                response = session.post(
                    url,
                    data=encoded,
                    headers={
                        **(self.connect.headers or {}),
                        "Content-Type": "application/x-www-form-urlencoded",
                    },
                    timeout=remaining,
                    stream=True,
                )
            else:
                response = session.get(
                    url,
                    params=encoded,
                    headers=self.connect.headers,
                    timeout=remaining,
                    stream=True,
                )
            with response:
                body = self._read(response, path)
        except requests.exceptions.Timeout:
            raise PrometheusError(
                f"no answer within the {self.deadline.seconds:g} s timeout ({path})", TIMEOUT
            ) from None
        except requests.exceptions.ConnectionError as error:
            raise PrometheusError(f"cannot connect: {_reason(error)}", UNREACHABLE) from None
        except requests.exceptions.RequestException as error:
            raise PrometheusError(f"request failed: {_reason(error)}", UNREACHABLE) from None
        return _unwrap(path, response.status_code, body)

    def _read(self, response: requests.Response, path: str) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_content(_CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                raise PrometheusError(
                    f"{path} answered more than {MAX_ANSWER_BYTES >> 20} MiB; narrow the "
                    "seriesQuery"
                )
            if self.deadline.expired:
                raise PrometheusError(
                    f"no complete answer within the {self.deadline.seconds:g} s timeout ({path})",
                    TIMEOUT,
                )
        return b"".join(chunks)


def _unwrap(path: str, status: int, body: bytes) -> Any:
    """The ``data`` of a Prometheus API envelope, or the right exception."""
    try:
        envelope = json.loads(body)
    except ValueError:
        snippet = body[:120].decode("utf-8", "replace").strip()
        raise PrometheusError(
            f"{path} answered HTTP {status} with a body that is not JSON"
            + (f" ({snippet!r})" if snippet else ""),
            _status_reason(status),
        ) from None
    if not isinstance(envelope, dict):
        raise PrometheusError(
            f"{path} answered HTTP {status} with JSON that is not an API answer",
            _status_reason(status),
        )
    if status == 200 and envelope.get("status") == "success" and "data" in envelope:
        return envelope["data"]
    error = envelope.get("error")
    error_type = envelope.get("errorType")
    text = f"{error_type}: {error}" if error_type and error else str(error or f"HTTP {status}")
    # 400 bad_data and 422 execution: the query is at fault, not the server.
    if path == "/api/v1/query" and status in (400, 422):
        raise QueryRejected(str(error or text))
    raise PrometheusError(f"{path} answered HTTP {status}: {text}", _status_reason(status))


def _status_reason(status: int) -> str:
    """An error status (a proxy's 502, a 401) is the server's refusal; anything else that is
    not the API is a bad answer."""
    return HTTP_ERROR if status >= 400 else BAD_ANSWER


def _range(start: float, end: float) -> list[tuple[str, str]]:
    return [("start", _stamp(start)), ("end", _stamp(end))]


def _stamp(value: float) -> str:
    return f"{value:.3f}"


def _reason(error: Exception) -> str:
    """The innermost reason of a requests/urllib3 error ("Connection refused")."""
    text = str(error)
    found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", text)
    if found:
        return found.group(1).strip()
    found = re.search(r"Failed to resolve '([^']+)'", text)
    if found:
        return f"cannot resolve host {found.group(1)}"
    found = re.search(
        r"(Connection (?:refused|reset|aborted)[^'\")]*|RemoteDisconnected[^'\")]*)", text
    )
    if found:
        return found.group(1).strip(" .:")
    return f"{type(error).__name__}: {text[:200]}"
