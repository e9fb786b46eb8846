"""The Prometheus HTTP API, through prometheus-api-client, within one deadline.

Only the documented, stable endpoints are used (``/api/v1/series``, ``/api/v1/query``,
``/api/v1/labels``, ``/api/v1/label/<name>/values`` with ``match[]``, ``start``, ``end``), so
Thanos Query, Mimir, Cortex and VictoriaMetrics answer as Prometheus does; and
``/api/v1/targets?state=active`` (the scrape targets), which a Prometheus serves and some
query front-ends do not.

``PrometheusConnect`` provides the session, the base URL and the headers. Its helpers raise
one exception type for every non-200 answer with the body folded into the message, read
bodies of any size, and retry 5xx answers with back-off; the live check needs the error text
of a rejected query (GL803), a bound on time and size, and no retries inside its single
timeout, so requests go through the connector's own session.

What a Prometheus (or whatever answers at its URL) can send is bounded:

* redirects are followed only within the origin (scheme, host, port) of ``--prometheus``, so
  the headers given for it (``Authorization``, ``X-Scope-OrgID``) never reach another host;
  a redirect elsewhere is reported;
* an answer is read up to ``MAX_ANSWER_BYTES`` as it streams in (a larger ``Content-Length``
  is refused before reading), into one buffer that is released once decoded; reading one
  costs about four times its size at its peak (the text while it is parsed, then about
  three times in Python values);
* a range query's answer is refused, as it streams in, once it holds more points than its
  caller takes (``max_points``): a point of a matrix costs ten times its bytes once parsed
  (a list, a float and a string: about 190 bytes for ``[1768435200,"50"]``), so that the byte
  limit alone lets 64 MiB become more than a gigabyte;
* JSON nested deeper than ``MAX_DEPTH`` is refused (no Prometheus answer nests more than six).

This module imports requests; only the collector imports it, and only with ``--prometheus``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from itertools import compress
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import requests
from prometheus_api_client import PrometheusConnect
from urllib3.exceptions import MaxRetryError, ReadTimeoutError
from urllib3.util.retry import Retry

from gpulint.live.progress import Waiting, describe
from gpulint.live.snapshot import BAD_ANSWER, HTTP_ERROR, TIMEOUT, UNREACHABLE

# An answer larger than this is not a Prometheus answering a seriesQuery gpulint can use
# (200,000 dcgm-exporter series are 50 MiB), and at four times its size while read, it keeps
# the webhook well inside its 512 MiB memory limit (deploy/deployment.yaml).
MAX_ANSWER_BYTES = 64 * 1024 * 1024
# Prometheus answers nest at most six levels (a matrix: data.result[].values[][]).
MAX_DEPTH = 32
# Same-origin redirects followed for one request (a path prefix added by a proxy, say).
MAX_REDIRECTS = 5
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Above this many characters of query string, send the parameters as a form (POST), which
# every Prometheus-compatible API accepts for these endpoints.
_MAX_GET_QUERY = 6000
_CHUNK = 1 << 16
# Prometheus refuses a range query of more than 11,000 points per series (web/api/v1/api.go:
# "exceeded maximum resolution of 11,000 points per timeseries").
MAX_RANGE_POINTS = 11_000


class PrometheusError(Exception):
    """Prometheus cannot be reached, or answers with something that is not its API (GL809).

    ``reason`` sorts the failure (``snapshot.FAILURE_REASONS``) for the webhook's metrics.
    """

    def __init__(self, message: str, reason: str = BAD_ANSWER) -> None:
        super().__init__(message)
        self.reason = reason


class AnswerTooLarge(PrometheusError):
    """An answer over a bound: more than ``MAX_ANSWER_BYTES``, or more points than the
    caller of ``query_range`` takes; ``bound`` says which, in words."""

    def __init__(self, message: str, bound: str) -> None:
        super().__init__(message)
        self.bound = bound


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

    def within(self, seconds: float) -> Deadline:
        """A budget of ``seconds`` for one request, ending no later than this one."""
        sooner = Deadline(seconds)
        if self.end < sooner.end:
            sooner.seconds, sooner.end = self.seconds, self.end
        return sooner


class PrometheusAPI:
    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        deadline: Deadline,
        waiting: Waiting | None = None,
    ) -> None:
        self.url = url
        self.deadline = deadline
        self.waiting = waiting  # told of each request, for --progress
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

    def active_targets(self) -> list[dict[str, Any]]:
        """``/api/v1/targets?state=active``: the targets Prometheus scrapes (Prometheus HTTP
        API, "Targets": scrapePool, scrapeUrl, labels, health, lastError)."""
        data = self._call("/api/v1/targets", [("state", "active")])
        if not isinstance(data, dict) or not isinstance(data.get("activeTargets"), list):
            raise PrometheusError("/api/v1/targets answered without activeTargets")
        return [t for t in data["activeTargets"] if isinstance(t, dict)]

    def query(
        self,
        promql: str,
        at: float,
        params: list[tuple[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        within: float | None = None,
    ) -> dict[str, Any]:
        """An instant query; raises QueryRejected when Prometheus refuses the PromQL.

        ``params`` go after ``query`` and ``time`` (a KEDA trigger's ``namespace`` and
        ``queryParameters``); ``headers`` are sent too, except those ``--prometheus-header``
        already sets; ``within`` bounds this request to that many seconds."""
        deadline = self.deadline if within is None else self.deadline.within(within)
        data = self._call(
            "/api/v1/query",
            [("query", promql), ("time", _stamp(at)), *(params or [])],
            headers,
            deadline,
        )
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise PrometheusError("/api/v1/query answered without a result")
        return data

    def query_range(
        self,
        promql: str,
        start: float,
        end: float,
        step: float,
        params: list[tuple[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        max_points: int | None = None,
    ) -> list[dict[str, Any]]:
        """A range query's series (``metric``, ``values``); raises QueryRejected when
        Prometheus refuses the PromQL. At most ``MAX_RANGE_POINTS`` points per series: a
        longer range is the caller's to split (Prometheus refuses more itself).

        ``max_points``: the points of all the series together that the caller takes; an
        answer holding more raises AnswerTooLarge as soon as its text shows it, before the
        rest is read or any of it parsed. Every point of a matrix is an array
        (``[<time>, "<value>"]``), so the answer's ``[`` characters, counted as the bytes
        stream in, are at least its points (a ``[`` in a label value only counts against
        the answer)."""
        if not step > 0 or (end - start) / step + 1 > MAX_RANGE_POINTS:
            raise ValueError(f"a range query of more than {MAX_RANGE_POINTS} points per series")
        data = self._call(
            "/api/v1/query_range",
            [
                ("query", promql),
                *_range(start, end),
                ("step", f"{step:g}"),
                *(params or []),
            ],
            headers,
            max_arrays=max_points,
        )
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise PrometheusError("/api/v1/query_range answered without a result")
        if data.get("resultType") != "matrix":
            raise PrometheusError(
                f"/api/v1/query_range answered a {str(data.get('resultType'))[:40]}, not a matrix"
            )
        return [series for series in data["result"] if isinstance(series, dict)]

    # --- transport ---------------------------------------------------------------------------

    def _call(
        self,
        path: str,
        params: list[tuple[str, str]],
        extra: dict[str, str] | None = None,
        deadline: Deadline | None = None,
        max_arrays: int | None = None,
    ) -> Any:
        deadline = deadline or self.deadline
        if deadline.remaining() <= 0:
            raise PrometheusError(f"no answer within the {deadline.seconds:g} s timeout", TIMEOUT)
        with self._lock:
            self.requests += 1
        encoded = urlencode(params)
        token = (
            None if self.waiting is None else self.waiting.begin(describe(self.url, path, params))
        )
        try:
            status, body = self._send(path, encoded, extra or {}, deadline, max_arrays)
        except requests.exceptions.Timeout:
            raise PrometheusError(
                f"no answer within the {deadline.seconds:g} s timeout ({path})", TIMEOUT
            ) from None
        except requests.exceptions.ConnectionError as error:
            if _read_timed_out(error):
                raise PrometheusError(
                    f"no answer within the {deadline.seconds:g} s timeout ({path})", TIMEOUT
                ) from None
            raise PrometheusError(f"cannot connect: {_reason(error)}", UNREACHABLE) from None
        except requests.exceptions.RequestException as error:
            raise PrometheusError(f"request failed: {_reason(error)}", UNREACHABLE) from None
        finally:
            if token is not None and self.waiting is not None:
                self.waiting.end(token)
        return _unwrap(path, status, body)

    def _send(
        self,
        path: str,
        encoded: str,
        extra: dict[str, str],
        deadline: Deadline,
        max_arrays: int | None = None,
    ) -> tuple[int, str]:
        """Send one request, following redirects within the origin; (status, body text)."""
        url = self.url + path
        headers = dict(self.connect.headers or {})
        given = {name.lower() for name in headers}
        headers.update((k, v) for k, v in extra.items() if k.lower() not in given)
        method = "GET"
        query: str | None = encoded
        data: str | None = None
        if len(encoded) > _MAX_GET_QUERY:
            method, query, data = "POST", None, encoded
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        session = self.connect._session
        for _ in range(MAX_REDIRECTS + 1):
            response = session.request(
                method,
                url,
                params=query,
                data=data,
                headers=headers,
                timeout=max(deadline.remaining(), 0.001),
                stream=True,
                allow_redirects=False,
            )
            with response:
                if not response.is_redirect:
                    body = self._read(response, path, deadline, max_arrays)
                    return response.status_code, body
                status = response.status_code
                target = urljoin(response.url, response.headers["location"])
            if _origin(target) != _origin(self.url):
                raise PrometheusError(
                    f"{path} answered HTTP {status}, a redirect to {_shown_origin(target)}; "
                    f"gpulint follows redirects only within {_shown_origin(self.url)}, so that "
                    "its headers go nowhere else: give --prometheus the URL that answers",
                    HTTP_ERROR,
                )
            if method == "POST" and status not in (307, 308):
                raise PrometheusError(
                    f"{path} answered HTTP {status}, a redirect that drops the query sent as a "
                    "form: give --prometheus the URL that answers",
                    HTTP_ERROR,
                )
            url, query = target, None  # the new location carries its own query string
        raise PrometheusError(f"{path}: more than {MAX_REDIRECTS} redirects", HTTP_ERROR)

    def _read(
        self,
        response: requests.Response,
        path: str,
        deadline: Deadline,
        max_arrays: int | None = None,
    ) -> str:
        """The body's text, read within the byte limit, the deadline and, when given, at
        most ``max_arrays`` JSON arrays (counted by their ``[``)."""
        too_large = AnswerTooLarge(
            f"{path} answered more than {MAX_ANSWER_BYTES >> 20} MiB; narrow the seriesQuery",
            f"{MAX_ANSWER_BYTES >> 20} MiB",
        )
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and (len(declared) > 18 or int(declared) > MAX_ANSWER_BYTES):
            raise too_large
        body = bytearray()
        arrays = 0
        for chunk in response.iter_content(_CHUNK):
            body += chunk
            if len(body) > MAX_ANSWER_BYTES:
                raise too_large
            if max_arrays is not None:
                arrays += chunk.count(b"[")
                if arrays > max_arrays:
                    bound = f"{max_arrays:,} points in all its series"
                    raise AnswerTooLarge(f"{path} answered more than {bound}", bound)
            if deadline.expired:
                raise PrometheusError(
                    f"no complete answer within the {deadline.seconds:g} s timeout ({path})",
                    TIMEOUT,
                )
        # A character of four bytes in UTF-8 takes four in a Python string (and makes every
        # character of it take four): count the text's size as decoded.
        if len(body) * _char_width(body) > MAX_ANSWER_BYTES:
            raise too_large
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError as error:
            raise PrometheusError(
                f"{path} answered HTTP {response.status_code} with a body that is not UTF-8 "
                f"(byte {error.start})",
                _status_reason(response.status_code),
            ) from None


def _read_timed_out(error: requests.exceptions.ConnectionError) -> bool:
    """A connection that was made, then no answer in time: with retries off, urllib3 wraps
    the read timeout in MaxRetryError, which requests raises as a ConnectionError."""
    wrapped = error.args[0] if error.args else None
    return isinstance(wrapped, MaxRetryError) and isinstance(wrapped.reason, ReadTimeoutError)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port that is not a number
        return scheme, parts.netloc.lower(), -1
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)


def _shown_origin(url: str) -> str:
    scheme, host, port = _origin(url)
    shown = f"{scheme}://{host}" + (f":{port}" if port not in (None, -1) else "")
    return shown if len(shown) <= 120 else shown[:117] + "..."


_WIDE = re.compile(rb"[\xf0-\xf4]")  # lead bytes of 4-byte UTF-8 sequences
_MEDIUM = re.compile(rb"[\xc4-\xef]")  # of characters above U+00FF


def _char_width(body: bytearray) -> int:
    """Bytes per character of ``body`` decoded into a Python string (1, 2 or 4)."""
    if body.isascii():
        return 1
    if _WIDE.search(body):
        return 4
    return 2 if _MEDIUM.search(body) else 1


_CONTAINERS = frozenset({dict, list})


def _deeper_than(value: Any, limit: int) -> bool:
    """Does ``value`` nest dicts and lists more than ``limit`` levels? One level at a time,
    never recursing; the children are picked out at C speed."""
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for node in level:
            items = node.values() if type(node) is dict else node
            below.extend(compress(items, map(_CONTAINERS.__contains__, map(type, items))))
        level = below
    return False


def _unwrap(path: str, status: int, body: str) -> Any:
    """The ``data`` of a Prometheus API envelope, or the right exception."""
    try:
        envelope = json.loads(body)
    except RecursionError:
        raise PrometheusError(
            f"{path} answered HTTP {status} with JSON nested deeper than {MAX_DEPTH} levels, "
            "which no Prometheus answer is",
            _status_reason(status),
        ) from None
    except ValueError:
        snippet = body[:120].strip()
        raise PrometheusError(
            f"{path} answered HTTP {status} with a body that is not JSON"
            + (f" ({snippet!r})" if snippet else ""),
            _status_reason(status),
        ) from None
    if _deeper_than(envelope, MAX_DEPTH):
        raise PrometheusError(
            f"{path} answered HTTP {status} with JSON nested deeper than {MAX_DEPTH} levels, "
            "which no Prometheus answer is",
            _status_reason(status),
        )
    if not isinstance(envelope, dict):
        raise PrometheusError(
            f"{path} answered HTTP {status} with JSON that is not an API answer",
            _status_reason(status),
        )
    if status == 200 and envelope.get("status") == "success" and "data" in envelope:
        return envelope["data"]
    error = _clip(str(envelope.get("error") or ""))
    error_type = _clip(str(envelope.get("errorType") or ""))
    text = f"{error_type}: {error}" if error_type and error else error or f"HTTP {status}"
    # 400 bad_data and 422 execution: the query is at fault, not the server.
    if path == "/api/v1/query" and status in (400, 422):
        raise QueryRejected(error or text)
    raise PrometheusError(f"{path} answered HTTP {status}: {text}", _status_reason(status))


def _clip(text: str, limit: int = 500) -> str:
    """An error text from the answer, short enough for a finding's message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
