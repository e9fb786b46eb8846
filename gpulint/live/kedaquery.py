"""How KEDA's prometheus scaler asks Prometheus, and what it makes of the answer.

Facts from kedacore/keda v2.20 (commit 8b4f083), pkg/scalers/prometheus_scaler.go
``ExecutePromQuery`` and ``GetMetricsAndActivity``, and its tests
(pkg/scalers/prometheus_scaler_test.go ``testPromQueryResult``):

* the request is ``GET <serverAddress>/api/v1/query?query=<query>&time=<now>``, then
  ``&namespace=<namespace>`` when the trigger sets one (Thanos Querier, prom-label-proxy),
  then each ``queryParameters`` pair; ``customHeaders`` become request headers; the
  TriggerAuthentication's bearer, basic or custom auth sets ``Authorization``;
* the client waits the trigger's ``timeout``, else ``KEDA_HTTP_DEFAULT_TIMEOUT`` (3000 ms,
  cmd/operator/main.go); ``unsafeSsl: "true"`` skips certificate verification;
* a status outside 2xx fails the poll ("prometheus query api returned error. status: N");
* the body is decoded as ``{"data": {"result": [{"metric": ..., "value": [t, "v"]}]}}``: the
  ``[t, "v"]`` of a scalar or string result does not decode into that list and the poll fails;
* no element: 0 when ``ignoreNullValues`` (default true), else the poll fails ("prometheus
  metrics 'prometheus' target may be lost, the result is empty");
* more than one element: the poll fails ("prometheus query <query> returned multiple
  elements"), whatever ``ignoreNullValues`` says;
* one element without a value (a range vector's series carries ``values``): as no element
  ("the value list is empty");
* NaN or an infinity: 0 when ``ignoreNullValues``, else the poll fails ("prometheus query
  returns NaN");
* the trigger is active when the value is above ``activationThreshold`` (strictly); the HPA
  KEDA makes reads the value as External metric ``s<index>-prometheus`` against
  ``threshold`` (an AverageValue target unless ``metricType: Value``).

A failing poll gives the HPA no value for the trigger (FailedGetExternalMetric), unless
``spec.fallback`` is set, which then holds ``fallback.replicas`` after ``failureThreshold``
failures (pkg/fallback/fallback.go).

Nothing here talks to the network.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from gpulint.kinds.triggers import PrometheusTrigger
from gpulint.live.snapshot import NAMESPACE_LABELS, POD_LABELS, Answer, Reading, Sample

# Elements of an answer kept for messages, and looked at for the labels that set them apart.
MAX_SHOWN = 3
_MAX_COMPARED = 50
# Headers a trigger may not set through gpulint: they describe the connection, not the query.
_CONNECTION_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "proxy-authorization",
        "proxy-connection",
    }
)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_MAX_VALUE_CHARS = 8192
_DEFAULT_PORTS = {"http": 80, "https": 443}


def read_answer(data: dict[str, Any]) -> Reading:
    """KEDA's reading of ``/api/v1/query``'s ``data`` (any shape: it may be hostile)."""
    result_type = str(data.get("resultType") or "")[:40]
    result = data.get("result")
    if not isinstance(result, list):
        return Reading(Answer.UNDECODABLE, result_type, 0, detail="data.result is no list")
    if result_type in ("scalar", "string") or any(not isinstance(e, dict) for e in result[:1]):
        return Reading(
            Answer.UNDECODABLE,
            result_type,
            len(result),
            detail=f"a {result_type or 'non-vector'} result is [time, value], not a list of series",
        )
    count = len(result)
    shown = tuple(_sample(e) for e in result[:MAX_SHOWN] if isinstance(e, dict))
    if count == 0:
        return Reading(Answer.EMPTY, result_type, 0)
    if count > 1:
        compared = [_sample(e) for e in result[:_MAX_COMPARED] if isinstance(e, dict)]
        return Reading(Answer.MULTIPLE, result_type, count, shown=shown, varying=_varying(compared))
    element = result[0]
    point = element.get("value")
    if not isinstance(point, list) or not point:
        return Reading(Answer.NO_VALUE, result_type, 1, shown=shown)
    if len(point) < 2 or not isinstance(point[1], str):
        return Reading(
            Answer.UNDECODABLE, result_type, 1, shown=shown, detail="the value is no string"
        )
    value = _go_float(point[1])
    if value is None:
        return Reading(
            Answer.UNDECODABLE,
            result_type,
            1,
            shown=shown,
            detail=f"{point[1][:40]!r} is no number",
        )
    kind = Answer.VALUE if math.isfinite(value) else Answer.NOT_FINITE
    return Reading(kind, result_type, 1, value, shown)


def _go_float(text: str) -> float | None:
    """strconv.ParseFloat for what Prometheus writes (``0.5``, ``1e+06``, ``NaN``, ``+Inf``)."""
    if len(text) > 64 or not text.isascii() or text.strip() != text or "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _sample(element: dict[str, Any]) -> Sample:
    metric = element.get("metric")
    labels = tuple(
        sorted(
            (str(k)[:200], str(v)[:200])
            for k, v in (metric.items() if isinstance(metric, dict) else [])
        )[:64]
    )
    point = element.get("value")
    value: float | None = None
    if isinstance(point, list) and len(point) == 2 and isinstance(point[1], str):
        value = _go_float(point[1])
    return Sample(labels, math.nan if value is None else value)


def _varying(samples: list[Sample]) -> tuple[str, ...]:
    """Labels not alike in every sample: what sets the series apart, those that name pods
    and namespaces first."""
    names = sorted({key for s in samples for key, _ in s.labels})
    varying = [n for n in names if len({s.label(n) for s in samples}) > 1]
    naming = [n for n in varying if n in POD_LABELS or n in NAMESPACE_LABELS]
    return (*naming, *(n for n in varying if n not in naming))


# --- the request ----------------------------------------------------------------------------


@dataclass
class TriggerRequest:
    """What gpulint sends along with a trigger's query, as KEDA does."""

    params: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)  # what was not sent, and why


def request_for(trigger: PrometheusTrigger) -> TriggerRequest:
    """``namespace`` and ``queryParameters`` as query parameters, ``customHeaders`` as
    headers. A parameter named ``query`` or ``time`` is left out: KEDA sends its own first and
    Prometheus reads the first of a repeated parameter. Headers that describe the connection
    or that no HTTP client may send are left out too, and named in ``dropped``."""
    request = TriggerRequest()
    if trigger.namespace:
        request.params.append(("namespace", trigger.namespace))
    for key, value in trigger.query_parameters or []:
        if key in ("query", "time"):
            request.dropped.append(f"queryParameters {key} (KEDA's own {key} comes first)")
        else:
            request.params.append((key, value))
    for name, value in trigger.custom_headers or []:
        if not _TOKEN.fullmatch(name) or name.lower() in _CONNECTION_HEADERS:
            request.dropped.append(f"customHeaders {name[:60]!r}")
        elif _CONTROL.search(value) or len(value) > _MAX_VALUE_CHARS:
            request.dropped.append(f"customHeaders {name} (its value holds control characters)")
        else:
            request.headers[name] = value
    return request


def same_server(url: str, address: str | None) -> bool:
    """Is ``address`` (a trigger's serverAddress) the Prometheus at ``url`` (--prometheus)?
    Compared by scheme, host, port and path, as written: two names of one server differ."""
    if not address:
        return False
    return _place(url) == _place(address)


def _place(url: str) -> tuple[str, str, int | None, str]:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1
    path = parts.path.rstrip("/")
    if path.endswith("/api/v1"):
        path = path[: -len("/api/v1")]
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme), path
