"""A query or metric names a serving metric its project removed or renamed.

## What it checks
The series names an autoscaler reads: a KEDA ScaledObject's prometheus trigger queries
(including ``{__name__=~"..."}``), an HPA's ``Pods``/``Object``/``External`` metric names
(GKE's ``prometheus.googleapis.com|<name>|gauge`` form included) and the ``seriesQuery`` of
the prometheus-adapter rules that serve them, against the
catalog of renamed serving metrics (``gpulint.metrics.serving``), each with the release that
changed it and the name to use instead:

* vLLM removed ``vllm:gpu_cache_usage_perc``, ``vllm:gpu_prefix_cache_queries`` and
  ``vllm:gpu_prefix_cache_hits`` in 0.12 (deprecated in 0.10): use ``vllm:kv_cache_usage_perc``,
  ``vllm:prefix_cache_queries``, ``vllm:prefix_cache_hits``; the V0 metrics
  ``vllm:num_requests_swapped``, ``vllm:cpu_cache_usage_perc`` and
  ``vllm:gpu_prefix_cache_hit_rate`` earlier still;
* the llm-d endpoint picker writes its metrics under ``llm_d_epp_*`` and keeps the old
  ``inference_objective_*`` and ``inference_extension_*`` names only as deprecated duplicates
  (EPP 0.9).

## Why is this bad?
A removed series has no samples on the releases that removed it: the adapter serves nothing,
the KEDA query reads 0 (``ignoreNullValues``), and the workload stops scaling on it after an
upgrade of the model server, with no error anywhere. A deprecated name works until the next
release removes it.

## Example
```yaml
query: avg(vllm:gpu_cache_usage_perc{model_name="llama"})
```

## Use instead
```yaml
query: avg(vllm:kv_cache_usage_perc{model_name="llama"})
```

## References
- vllm-project/vllm#18354 (deprecated ``gpu_`` metrics, vLLM 0.10), #29330 (removed),
  #14136 and #15458 (V0 metrics); vLLM's metrics docs: deprecated in X.Y, hidden in X.Y+1,
  removed in X.Y+2.
- llm-d/llm-d-router metrics tests ("Deprecated: Use llm_d_epp_request_total"); llm-d/llm-d
  #1850 and #1880 (the guides moved to ``llm_d_epp_*``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA,
    AdapterRule,
    Context,
    Document,
    Finding,
    Inventory,
    Path,
    Rename,
    ScaledObject,
    Severity,
    abbreviated,
    as_dict,
    canonical_metric_name,
    capitalized,
    edits,
    family_hint,
    is_generated,
    metric_names_in_query,
    renamed,
    selectors_in_query,
)

ID = "GL410"
NAME = "serving-metric-renamed"
SEVERITY = Severity.WARNING
SCOPE = "autoscaler"
FIXES = ("unsafe",)


def check(view: HPA | ScaledObject, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if is_generated(view.manifest):
        return
    if isinstance(view, ScaledObject):
        for trigger in view.prometheus_triggers:
            if trigger.query:
                yield from _names(
                    trigger.manifest, trigger.query_path, trigger.query, "its query", ctx
                )
        return
    for metric in view.metrics:
        if not metric.is_custom or not metric.name:
            continue
        found = renamed(canonical_metric_name(metric.name))
        if found is not None:
            yield _finding(view.manifest, metric.name_path, found, "the metric", metric.name, ctx)
        # The adapter rules that serve it (one finding per rule: the runner keeps one of each).
        for rule in inventory.rules_exposing(metric.name, metric.api, view.manifest):
            if rule.series_query:
                path = (*rule.path, "seriesQuery")
                yield from _names(
                    rule.document, path, rule.series_query, "its seriesQuery", ctx, rule
                )


def _names(
    document: Document,
    path: Path,
    query: str,
    where: str,
    ctx: Context,
    rule: AdapterRule | None = None,
) -> Iterator[Finding]:
    names = list(metric_names_in_query(query))
    for selector in selectors_in_query(query):
        names += selector.literal_names() or []
    seen: set[str] = set()
    for name in names:
        found = renamed(canonical_metric_name(name))
        if found is not None and found.name not in seen:
            seen.add(found.name)
            yield _finding(document, path, found, where, query, ctx, rule)


def _finding(
    document: Document,
    path: Path,
    found: Rename,
    where: str,
    written: str,
    ctx: Context,
    rule: AdapterRule | None = None,
) -> Finding:
    name = abbreviated(found.name)
    if found.removed_in:
        what = (
            f"The {found.project} metric {name} was removed in {found.project} "
            f"{found.removed_in} (deprecated in {found.deprecated_in}). {capitalized(where)} "
            "finds no series "
            f"on {found.project} {found.removed_in} and later, so nothing scales on it after "
            "that upgrade"
        )
    else:
        what = (
            f"The {found.project} metric {name} is deprecated since {found.project} "
            f"{found.deprecated_in}. It is written beside its new name until a release drops it"
        )
    instead = found.instead()
    hint = family_hint(found)
    if hint:
        instead += f" ({hint})"
    key = str(path[-1])
    replacement = found.replacement
    if key == "seriesQuery":
        fix, plan = _adapter_rule_fix(rule, found)
    elif replacement and " " not in replacement and "\n" not in written:
        text = written.replace(found.name, replacement)
        plan = edits.unsafe(edits.Replace(document, path, _quoted(text)))
        fix = f"{key}: {_quoted(text)}"
    else:
        plan = None
        fix = f"# {found.name}: {instead}"
    return ctx.finding(document, path, f"{what}; {instead}.", fix, plan=plan)


def _adapter_rule_fix(rule: AdapterRule | None, found: Rename) -> tuple[str, edits.FixPlan | None]:
    """The series renamed wherever the adapter rule names it: its seriesQuery, and its
    name.matches and metricsQuery when they spell the name out."""
    replacement = found.replacement
    by_hand = (
        "# in seriesQuery, and in name.matches and metricsQuery where they name it:\n"
        f"# {found.name} -> {replacement or found.instead()}"
    )
    if rule is None or rule.generated or not replacement or " " in replacement:
        return by_hand, None
    # the name alone, not as part of a longer one (vllm:gpu_cache_usage_perc_max)
    alone = re.compile(rf"(?<![\w:]){re.escape(found.name)}(?![\w:])")
    lines, ops = [], []
    for sub in (("seriesQuery",), ("name", "matches"), ("metricsQuery",)):
        block = rule.data if len(sub) == 1 else as_dict(rule.data.get(sub[0]))
        text = block.get(sub[-1])
        if not isinstance(text, str) or "\n" in text or not alone.search(text):
            continue
        new = _quoted(alone.sub(replacement, text))
        ops.append(edits.Replace(rule.document, rule.path_for(*sub), new))
        if len(sub) == 1:
            lines.append(f"{sub[0]}: {new}")
        else:  # the whole name block, so that pasting it keeps its as:
            written_as = block.get("as")
            keep = f", as: {_quoted(written_as)}" if isinstance(written_as, str) else ""
            lines.append(f"name: {{matches: {new}{keep}}}")
    if not ops:
        return by_hand, None
    return "\n".join(lines), edits.unsafe(*ops)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
