"""Reading what Prometheus answered: the samples of an instant query, a point's number, and
the errors that mean an answer is not the Prometheus API."""

from __future__ import annotations

import math
from typing import Any

from gpulint.live.snapshot import (
    Sample,
)

# Valid JSON in a shape no Prometheus-compatible API sends.
NOT_THE_API = (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError)


def point_value(point: Any) -> float:
    if isinstance(point, list | tuple) and len(point) == 2:
        try:
            return float(point[1])
        except (TypeError, ValueError):
            return math.nan
    return math.nan


def point_time(point: Any) -> float:
    """The unix time of a ``[time, "value"]`` point of a range answer (NaN when unreadable)."""
    if isinstance(point, list | tuple) and len(point) == 2:
        try:
            return float(point[0])
        except (TypeError, ValueError):
            return math.nan
    return math.nan


def history_span(first: float, now: float, window: float, step: float) -> float:
    """Seconds of the look-back window a subquery's history covers, ``first`` being the time
    of its earliest finite point (NaN: none). A point stands for the step that ends at it, so
    a history from the window's start covers the whole window."""
    if not math.isfinite(first):
        return 0.0
    return max(0.0, min(window, now - first + step))


def samples_of(data: dict[str, Any]) -> list[Sample]:
    """The series of an instant query's answer (vector, scalar or matrix)."""
    result = data.get("result")
    kind = data.get("resultType")
    if kind in ("scalar", "string"):
        return [Sample((), point_value(result))] if isinstance(result, list) else []
    found = []
    for item in result if isinstance(result, list) else []:
        if not isinstance(item, dict):
            continue
        metric = item.get("metric")
        labels = tuple(
            sorted(
                (str(k), str(v)) for k, v in (metric.items() if isinstance(metric, dict) else [])
            )
        )
        if "value" in item:
            found.append(Sample(labels, point_value(item.get("value"))))
        else:
            for point in item.get("values") or []:
                found.append(Sample(labels, point_value(point)))
    return found


def shown_error(error: BaseException) -> str:
    shown = repr(error)
    return shown if len(shown) <= 300 else shown[:297] + "..."
