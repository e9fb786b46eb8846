"""Small wording helpers the live rules share, so their messages read alike."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from gpulint.chain.adapter import EXTERNAL, AdapterRule
from gpulint.live.kedaquery import request_for, same_server
from gpulint.live.options import format_duration, history_step
from gpulint.live.snapshot import (
    NAMESPACE_LABELS,
    POD_LABELS,
    Checked,
    LiveSnapshot,
    SeriesSummary,
    TriggerEvidence,
)


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


def labels_carried(series: SeriesSummary) -> str:
    """The labels a user needs to see: those that name pods and namespaces, else all."""
    labels = sorted(label for label in series.label_counts if not label.startswith("__"))
    naming = [label for label in labels if label in POD_LABELS or label in NAMESPACE_LABELS]
    if naming:
        return f"{' and '.join(naming)}, no other pod or namespace label"
    return listing(labels, 8)


def number(value: float) -> str:
    """``0.4``, ``84``, ``1.5e+09``: as short as a reader needs."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.3g}"


def stats(values: Sequence[float]) -> str:
    return "min {} / median {} / max {}".format(*(number(v) for v in values))


def sent_to(evidence: TriggerEvidence) -> str:
    """`` (answered by <url> from --prometheus, not by the trigger's serverAddress
    <address>)`` when KEDA asks another address, and what of the request was not sent."""
    parts = []
    address = evidence.trigger.server_address
    if not same_server(evidence.url, address):
        parts.append(
            f" (answered by {evidence.url} from --prometheus, not by the trigger's "
            f"serverAddress {_clipped(address or '')})"
        )
    if evidence.dropped:
        parts.append(f"; not sent: {listing(evidence.dropped)}")
    return "".join(parts)


def target_of(evidence: TriggerEvidence) -> str:
    """``Deployment llm``: what the trigger's owner scales (``TriggerOwner.describe_target``)."""
    return evidence.trigger.scaled_object.describe_target()


def _clipped(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def failing_poll(evidence: TriggerEvidence) -> str:
    """What a failing poll does, as the trigger's owner says (a ScaledObject's HPA gets no
    value, a ScaledJob skips the trigger): ``TriggerOwner.on_failing_poll``."""
    return evidence.trigger.scaled_object.on_failing_poll()


def curl_for(evidence: TriggerEvidence) -> str:
    """The instant query KEDA sends for a trigger, as a curl command a user can run."""
    trigger = evidence.trigger
    request = request_for(trigger)
    parts = [f"curl -sG '{evidence.url}/api/v1/query'"]
    query = " ".join((trigger.query or "").split())
    for key, value in [("query", query), *request.params]:
        parts.append(f"--data-urlencode {_shell_quoted(f'{key}={value}')}")
    for name, value in request.headers.items():
        parts.append(f"-H {_shell_quoted(f'{name}: {value}')}")
    return " ".join(parts)


def _shell_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def seen_over(span: float, live: LiveSnapshot) -> str:
    """Over what the values were observed: ``over the last 24h`` when the history covers the
    look-back window, else the span it does cover, so a reader weighs the verdict."""
    window = live.window
    # The history is read in steps: a span within one step of the window is all of it.
    if span >= live.lookback - history_step(live.lookback):
        return f"over the last {window}"
    if span <= 0:
        return f"over {_held(span, live)} of the last {window}, all that Prometheus holds"
    return f"over the {format_duration(span)} of the last {window} that Prometheus holds"


def _held(span: float, live: LiveSnapshot) -> str:
    """How much of the window the history covers: ``3h12m``, or ``less than 6m`` when no point
    of the subquery (one each step) found a value."""
    if span <= 0:
        return f"less than {format_duration(history_step(live.lookback))}"
    return format_duration(span)


def enough_history(span: float, live: LiveSnapshot) -> bool:
    """Does the history cover the share of the look-back window (``--min-history``) that a
    verdict on the whole window (never reached, always exceeded) needs?"""
    return span >= live.min_history * live.lookback


def short_history(span: float, live: LiveSnapshot) -> tuple[str, str]:
    """(why there is no verdict yet, what to do): for a range verdict on too little history."""
    needed = format_duration(live.min_history * live.lookback)
    window = live.window
    share = f"{live.min_history * 100:g}%"
    why = (
        f"that is too little history to judge: such a verdict needs {needed} of the last "
        f"{window} (--min-history {share}), as normal load may not have peaked or dropped yet"
    )
    fix = (
        f"# nothing to change yet: run again once Prometheus holds {needed} of the query's "
        "history, or shorten --lookback to the span it holds"
    )
    return why, fix


def checked_note(checked: Checked, url: str, window: str, units: int = 1) -> str:
    """What a live check asked Prometheus about, over every unit of a run: ``live check: 2
    adapter rules, 3 HPA metrics and 1 KEDA prometheus trigger checked against URL
    (look-back 24h)``, each counted once however many units hold it."""
    if not checked:
        return (
            f"live check: no prometheus-adapter rule or KEDA prometheus trigger in the input: "
            f"nothing to check against {url}"
        )
    counts = []
    if checked.rules:
        rules, metrics = len(checked.rules), len(checked.hpa_metrics)
        counts.append(f"{rules} adapter rule{'s' * (rules != 1)}")
        counts.append(f"{metrics} HPA metric{'s' * (metrics != 1)} they serve")
    if checked.triggers:
        triggers = len(checked.triggers)
        counts.append(f"{triggers} KEDA prometheus trigger{'s' * (triggers != 1)}")
    listed = counts[0] if len(counts) == 1 else ", ".join(counts[:-1]) + " and " + counts[-1]
    where = f" in {units} units" if units > 1 else ""
    return f"live check: {listed} checked against {url}{where} (look-back {window})"
