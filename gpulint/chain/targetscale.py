"""The scale of an HPA metric (a 0-100 percentage, a 0-1 ratio) and whether a target is off it.

GL107 reports a target on the wrong scale from the input alone; GL805 compares targets with
the values Prometheus returns. Both ask the same question about one line, so it is answered
here once: where GL107 reports the target, GL805 stays silent (one defect, one finding).
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from typing import TYPE_CHECKING

from gpulint.chain.gpusum import gpus_summed
from gpulint.metrics import names as gpumetrics
from gpulint.metrics.names import Scale

if TYPE_CHECKING:
    from gpulint.chain.adapter import AdapterRule
    from gpulint.inventory import Inventory
    from gpulint.kinds.hpa import HPA, HpaMetric

# Arithmetic outside quoted strings in a metricsQuery changes the scale of the series.
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_ARITHMETIC = re.compile(r"[*/]")


def metric_scale(metric: HpaMetric, inventory: Inventory, hpa: HPA) -> tuple[Scale, str] | None:
    """The scale of the metric and the name it was judged by; None when unknown."""
    name = metric.name
    if name is None:
        return None
    aliases = inventory.settings.metric_aliases
    known = gpumetrics.lookup(name, aliases)
    if known is not None:
        return (known.scale, name) if known.scale in (Scale.PERCENT, Scale.RATIO) else None
    judged: list[tuple[Scale, str]] = []
    for rule in inventory.rules_exposing(name, metric.api, near=hpa.manifest):
        scaled = _rule_scales(rule, name, tuple(sorted(aliases.items())))
        if scaled is None:
            return None  # the query rescales the series
        judged.extend(scaled)
    scales = {scale for scale, _ in judged}
    if len(scales) > 1:
        return None
    if judged:
        scale, series = judged[0]
        return (scale, series) if scale in (Scale.PERCENT, Scale.RATIO) else None
    by_name = gpumetrics.scale_of(name, aliases)
    return (by_name, name) if by_name in (Scale.PERCENT, Scale.RATIO) else None


@functools.lru_cache(maxsize=4096)
def _rule_scales(
    rule: AdapterRule, name: str, aliases: tuple[tuple[str, str], ...]
) -> tuple[tuple[Scale, str], ...] | None:
    """The scales of the series a rule serves as ``name``; None when its query rescales them.
    The same for every HPA reading the rule: computed once."""
    if _ARITHMETIC.search(_QUOTED.sub("", rule.metrics_query or "")):
        return None
    found = []
    for series in rule.series_names() or []:
        exposed = rule.name_for_series(series)
        if exposed is None or exposed.lower() != name.lower():
            continue
        scale = gpumetrics.scale_of(series, dict(aliases))
        if scale is not None:
            found.append((scale, series))
    return tuple(found)


def off_scale(
    hpa: HPA,
    metric: HpaMetric,
    field: str,
    value: Decimal,
    inventory: Inventory,
    judged: tuple[Scale, str] | None = None,
) -> bool:
    """Whether GL107 reports this target as on the wrong scale: below 1 on a percentage, or
    above the range of a ratio (1, or the GPUs an adapter sum adds up per pod). ``judged`` is
    ``metric_scale``'s answer when the caller has it already (it is asked for when None)."""
    if judged is None:
        judged = metric_scale(metric, inventory, hpa)
    if judged is None:
        return False
    if judged[0] is Scale.PERCENT:
        return value < 1
    if metric.type == "External" and field == "value":
        return False
    return value > gpus_summed(hpa, metric, inventory)
