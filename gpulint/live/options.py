"""What the user asked of the live check: where Prometheus is, how long to wait, how far back.

Pure values and parsers (no network): the CLI builds ``LiveOptions`` from ``--prometheus``,
``--prometheus-header``, ``--prometheus-timeout``, ``--require-prometheus``, ``--lookback`` and
``--min-history``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulint.live.window import DEFAULT_LOOKBACK_TEXT, DEFAULT_MIN_HISTORY

# prometheus-adapter discovers series seen within --metrics-max-age, which defaults to
# --metrics-relist-interval, 10m (prometheus-adapter cmd/adapter/adapter.go).
ADAPTER_MAX_AGE = 600.0
DEFAULT_TIMEOUT = 30.0
# Requests in flight at once: enough to hide latency, few enough not to load a shared Prometheus.
DEFAULT_CONCURRENCY = 4

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_UNITS["y"] = 365 * 86400.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")


class OptionError(ValueError):
    """A live-check option the user got wrong (the CLI exits with 2)."""


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration (``24h``, ``1h30m``, ``3d``) or a number of seconds."""
    value = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        seconds = float(value)
    else:
        position, seconds = 0, 0.0
        for match in _DURATION.finditer(value):
            if match.start() != position:
                break
            seconds += float(match.group(1)) * _UNITS[match.group(2)]
            position = match.end()
        if position != len(value) or not value:
            raise OptionError(
                f"{text!r} is not a duration (write it as Prometheus does: 30m, 24h, 3d, 1h30m)"
            )
    if seconds <= 0:
        raise OptionError(f"{text!r} must be longer than zero")
    return seconds


def written_duration(text: str) -> str:
    """A duration as the user wrote it, for messages (``24h`` stays ``24h``, not ``1d``);
    a bare number of seconds gets its unit (``90`` -> ``90s``)."""
    value = text.strip()
    return f"{value}s" if re.fullmatch(r"\d+(?:\.\d+)?", value) else value


def history_step(window: float) -> int:
    """Seconds between the points of a look-back subquery: enough points for a minimum, a
    median and a maximum (240 over the window), each step being a full query, and no finer
    than a common scrape interval."""
    return int(max(15, window / 240))


def parse_fraction(text: str) -> float:
    """``90%`` or ``0.9`` -> 0.9: a share of the look-back window, from 0 to 1."""
    value = text.strip()
    percent = value.endswith("%")
    number = value[:-1].strip() if percent else value
    if not re.fullmatch(r"\d+(?:\.\d+)?", number):
        raise OptionError(
            f"--min-history {text!r} is not a share of the look-back window "
            "(write 90% or 0.9; 0 judges on any history)"
        )
    fraction = float(number) / (100 if percent else 1)
    if fraction > 1:
        raise OptionError(f"--min-history {text!r} is more than the whole look-back window")
    return fraction


def format_duration(seconds: float) -> str:
    """``93784`` -> ``1d2h``: the largest unit and the next one, a user reads it at a glance."""
    remaining = round(max(seconds, 0.0))
    units = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
    for index, (unit, size) in enumerate(units):
        if remaining >= size or unit == "s":
            text = f"{remaining // size}{unit}"
            if index + 1 < len(units):
                next_unit, next_size = units[index + 1]
                rest = (remaining % size) // next_size
                if rest:
                    text += f"{rest}{next_unit}"
            return text
    return "0s"


def parse_header(text: str) -> tuple[str, str]:
    """``Authorization=Bearer abc`` -> (``Authorization``, ``Bearer abc``)."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
        raise OptionError(
            f"--prometheus-header {text!r}: write NAME=VALUE, e.g. 'Authorization=Bearer <token>'"
            " or 'X-Scope-OrgID=tenant-1'"
        )
    return name, value.strip()


def parse_url(text: str) -> str:
    """The base URL of the Prometheus HTTP API, without a trailing slash."""
    url = text.strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+", url):
        raise OptionError(
            f"--prometheus {text!r} is not an http(s) URL (e.g. http://localhost:9090, "
            "or http://thanos-query:10902, or https://mimir.example/prometheus)"
        )
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    return url


DEFAULT_LOOKBACK = parse_duration(DEFAULT_LOOKBACK_TEXT)
DEFAULT_WINDOW = written_duration(DEFAULT_LOOKBACK_TEXT)


def window_text(lookback: float, written: str | None) -> str:
    """The look-back window as messages say it: as the user wrote ``--lookback``, as the
    default is documented (``24h``), else from its seconds."""
    if written:
        return written
    return DEFAULT_WINDOW if lookback == DEFAULT_LOOKBACK else format_duration(lookback)


@dataclass(frozen=True)
class LiveOptions:
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    required: bool = False
    lookback: float = DEFAULT_LOOKBACK
    concurrency: int = DEFAULT_CONCURRENCY
    max_age: float = ADAPTER_MAX_AGE
    min_history: float = DEFAULT_MIN_HISTORY
    # --lookback as the user wrote it (``written_duration``); None: said from ``lookback``.
    lookback_text: str | None = None

    @property
    def window(self) -> str:
        """The look-back window as messages say it."""
        return window_text(self.lookback, self.lookback_text)
