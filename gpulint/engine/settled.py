"""Offline findings settled by what a front door observed: one finding per defect.

A rule judged from the input alone sometimes has to hedge: GL107 sees ``averageValue: "60"``
on ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, a 0-1 ratio, and can only say the target is never
reached *unless* the adapter's query adds several series up per pod. With ``--prometheus``
the live rule that reads the values (GL805) answers that question. Reporting both would say
one thing twice, once without the answer; dropping the live finding would keep the hedge.

So a rule that needs collected data declares the offline rules it settles (``SETTLES``, read
by ``gpulint.engine.registry``), and when it reports a finding at the very place where one
of those rules reported one (the same file, line and column: the same target), the two
become one finding. It keeps what the offline finding is (its rule, so that suppressions and
baselines written for it still hold, its place, and its fix when ``--fix`` can apply it; a
prose-only fix gives way to the live one, written from what was observed) and takes what the
observation adds: the live rule's message, which states what was observed
(the values, their span of history) instead of the hedge, the more severe of the two
severities (a live verdict that the data proves the target is never reached is an error),
and the objects the live finding names. ``settled_by`` names the rule that settled it, and
``input_severity`` keeps the severity the input alone gave it: the webhook refuses no request
on what Prometheus saw (``gpulint.webhook.evaluator``).

GL801 and GL811 settle GL402 alike: a legacy GPU name in a seriesQuery or a KEDA query that
Prometheus finds nothing for is GL402's finding, with what Prometheus holds instead.

The live rule decides which of its findings settle: it reports at an offline finding's place
only when its data answers the offline finding's question; otherwise it reports nothing
there and the offline finding stands as it is. A live finding with no offline finding at its
place (the offline rule was not selected, or could not tell the metric's scale) is reported
as itself.
"""

from __future__ import annotations

from typing import TypeVar

from gpulint.core.model import Finding
from gpulint.engine.registry import settled_by

_Extra = TypeVar("_Extra")

# A finding's place within one run over one inventory.
_Place = tuple[str, str, int, int]


def _place(rule: str, finding: Finding) -> _Place:
    where = finding.location
    return (rule, where.file, where.line, where.column)


def merge_settled(raw: list[tuple[Finding, _Extra]]) -> list[tuple[Finding, _Extra]]:
    """``raw`` (findings with what the runner keeps beside each), with every offline finding
    that a live finding at its place settles replaced by the two as one, and that live
    finding left out. The order of the rest is kept."""
    settling = {rule for rules in settled_by().values() for rule in rules}
    if not any(finding.rule in settling for finding, _ in raw):
        return raw
    by = settled_by()
    offline: dict[_Place, int] = {}
    for index, (finding, _) in enumerate(raw):
        if finding.rule in by:
            offline.setdefault(_place(finding.rule, finding), index)
    merged = list(raw)
    dropped: set[int] = set()
    for index, (finding, _) in enumerate(raw):
        if finding.rule not in settling:
            continue
        for rule in sorted(r for r, rules in by.items() if finding.rule in rules):
            target = offline.get(_place(rule, finding))
            if target is None:
                continue
            settled, extra = merged[target]
            merged[target] = (_settle(settled, finding), extra)
            dropped.add(index)
            break
    return [entry for index, entry in enumerate(merged) if index not in dropped]


def _settle(offline: Finding, live: Finding) -> Finding:
    """The offline finding with what the live finding observed."""
    related = offline.related + tuple(r for r in live.related if r not in offline.related)
    # The offline fix when --fix can apply it; else the live one, written from what was seen
    # (GL801 suggests the series Prometheus holds, with the labels they carry).
    fix, plan = offline.fix, offline.plan
    if plan is None and live.fix:
        fix, plan = live.fix, live.plan
    return offline._replace(
        message=live.message,
        fix=fix,
        plan=plan,
        severity=max(offline.severity, live.severity),
        related=related,
        settled_by=live.rule,
        input_severity=offline.severity,
    )
