"""Small wording helpers the live rules share, so their messages read alike."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from gpulint.adapter import EXTERNAL, AdapterRule
from gpulint.live.options import format_duration


def rule_label(rule: AdapterRule) -> str:
    """``adapter rule rules.custom[0]``: the rule's place in its configuration."""
    relative = rule.path[len(rule.config.base) :]
    where = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in relative).lstrip(".")
    kind = "external rule" if rule.kind == EXTERNAL else "adapter rule"
    owner = rule.config.owner
    inside = f" of ConfigMap {owner.name}" if owner is not None else ""
    return f"{kind} {where}{inside}"


def rule_where(rule: AdapterRule) -> str:
    """``adapter rule rules[0] (adapter.yaml:5)``: for findings placed elsewhere."""
    location = rule.document.location((*rule.path, "seriesQuery"))
    return f"{rule_label(rule)} ({location.file}:{location.line})"


def ago(then: float, now: float) -> str:
    """``2d1h ago (2024-05-01 12:00 UTC)``."""
    moment = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(then))
    return f"{format_duration(now - then)} ago ({moment})"


def listing(values: Iterable[str], limit: int = 3) -> str:
    """``a, b, c and 4 more``."""
    items = list(values)
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])} and {len(items) - limit} more"


def code(text: str, limit: int = 400) -> str:
    """A query quoted for a message, shortened in the middle when very long."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit // 2] + " ... " + flat[-limit // 4 :]
    return f"`{flat}`"


def number(value: float) -> str:
    """``0.4``, ``84``, ``1.5e+09``: as short as a reader needs."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.3g}"


def stats(values: Sequence[float]) -> str:
    return "min {} / median {} / max {}".format(*(number(v) for v in values))
