"""The state every live check shares (the inventory, the options, the API, the snapshot, the
adapter's discovery window) and the lookups they all ask: which metric names exist, which
have a current sample, and when names were last seen."""

from __future__ import annotations

import math
import re
import threading

from gpulint.inventory import Inventory
from gpulint.live.adapterquery import (
    go_quote,
)
from gpulint.live.answers import samples_of
from gpulint.live.client import PrometheusAPI, QueryRejected
from gpulint.live.options import LiveOptions
from gpulint.live.snapshot import (
    LiveSnapshot,
)


class Lookups:
    """A unit's live check: what it reads and writes, and the lookups every check asks."""

    def __init__(
        self,
        inventory: Inventory,
        options: LiveOptions,
        api: PrometheusAPI,
        snapshot: LiveSnapshot,
    ) -> None:
        self.inventory = inventory
        self.options = options
        self.api = api
        self.snapshot = snapshot
        self.now = snapshot.evaluated_at
        self.start = self.now - options.max_age
        self._names: list[str] | None = None
        self._names_lock = threading.Lock()

    def present_names(self) -> list[str]:
        """Metric names with series in the adapter's window (one call, shared)."""
        with self._names_lock:
            if self._names is None:
                self._names = self.api.label_values("__name__", self.start, self.now)
            return self._names

    def current_names(self, names: list[str]) -> set[str]:
        """The names among ``names`` that have a sample now (not stale, not gone)."""
        if not names:
            return set()
        pattern = "|".join(re.escape(n) for n in names)
        try:
            data = self.api.query(f'count by (__name__) ({{__name__=~"{pattern}"}})', self.now)
        except QueryRejected:
            return set(names)
        return {s.label("__name__") for s in samples_of(data)}

    def last_seen(self, names: list[str], selector: str | None, window: float) -> dict[str, float]:
        """When each name (or ``selector``) last had a sample within ``window``, to a step.

        ``count_over_time(x[step])`` ignores staleness markers, so a subquery of it finds the
        last step with a sample even when the series went stale one scrape later;
        ``timestamp()`` of a function's result is the step's time.
        """
        step = int(max(15, window / 360))
        parts = []
        keyed = [(name, f"{{__name__={go_quote(name)}}}") for name in names]
        if selector is not None:
            keyed.append((selector, selector))
        for key, expression in keyed:
            inner = f"timestamp(count_over_time({expression}[{step}s]))"
            parts.append(
                f"label_replace(max(max_over_time({inner}[{int(window)}s:{step}s])), "
                f'"gpulint_name", {go_quote(key)}, "", "")'
            )
        if not parts:
            return {}
        try:
            data = self.api.query(" or ".join(parts), self.now)
        except QueryRejected:
            return {}
        found: dict[str, float] = {}
        expressions = dict(keyed)
        for sample in samples_of(data):
            key = sample.label("gpulint_name")
            if key in expressions and math.isfinite(sample.value):
                exact = self._last_sample(expressions[key], step, sample.value)
                found[key] = sample.value if exact is None else exact
        for key in names:
            if key not in found:
                # Samples newer than the last whole step: the subquery's steps end before them.
                recent = self._last_sample(expressions[key], step, self.now)
                if recent is not None:
                    found[key] = recent
        return found

    def _last_sample(self, expression: str, step: int, around: float) -> float | None:
        """The exact time of the last raw sample in the step that ends at ``around``."""
        try:
            data = self.api.query(f"{expression}[{step}s]", around)
        except QueryRejected:
            return None
        times = [
            float(point[0])
            for item in data.get("result", [])
            if isinstance(item, dict)
            for point in item.get("values") or []
            if isinstance(point, list) and point
        ]
        return max(times, default=None)
