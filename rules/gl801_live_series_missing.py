"""An adapter rule's seriesQuery matches no series in Prometheus.

## What it checks
With ``--prometheus``, every prometheus-adapter rule's ``seriesQuery`` is sent to
``/api/v1/series`` over the window the adapter discovers series in (its
``--metrics-max-age``, 10 minutes by default). When nothing comes back, gpulint says why, in
this order:

1. the metric exists under another exporter's name (``nvidia_gpu_duty_cycle``,
   ``dcgm_gpu_utilization``, ``container_accelerator_duty_cycle``,
   ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` ...), with the unit conversion;
2. the name was never seen within the look-back window (``--lookback``, default 24h);
3. it disappeared: when it was last seen;
4. the metric exists but a label matcher of the seriesQuery excludes every series (the
   matcher is named).

Only user-written rules are checked; the chart's generic default rules are not.

GL402 reports a legacy or misspelt GPU series name from the input alone, and can only say
that clusters running today's exporter have no such series. Where this rule finds that the
seriesQuery matches nothing, its finding settles GL402's on the same line (``SETTLES``,
``gpulint.engine.settled``): one finding, GL402's, with this rule's message (what Prometheus
holds instead), its fix and the more severe of the two severities; JSON and SARIF name
GL801 in ``settledBy``.
A suggested series is written with the labels its series carry: when Prometheus scraped its
exporter with ``honor_labels: false`` (the series carry ``exported_pod``), the fix matches and
maps ``exported_namespace``/``exported_pod``, so that pasting it does not draw GL802.

## Why is this bad?
The adapter exposes nothing for a rule whose seriesQuery finds no series, so every HPA that
asks for its metric fails with "the server could not find the metric ... for pods", and
``kubectl get --raw /apis/custom.metrics.k8s.io/v1beta1`` lists no such metric. The usual
causes are an exporter other than the one the guide assumed, a renamed metric after an
exporter upgrade, and a ``exported_pod!=""`` matcher on a Prometheus that keeps the exporter's
``pod`` label.

## Example
```yaml
rules:
- seriesQuery: 'container_accelerator_duty_cycle{namespace!="",pod!=""}'  # kubelet dropped it
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
```

## Use instead
```yaml
rules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
  resources:
    overrides:
      exported_namespace: {resource: namespace}
      exported_pod: {resource: pod}
  metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
```

## References
- prometheus-adapter docs/config.md (discovery) and cmd/adapter/adapter.go
  (``--metrics-relist-interval``, ``--metrics-max-age``).
- NVIDIA dcgm-exporter etc/default-counters.csv; kubelet accelerator metrics removed in 1.28.
- Prometheus HTTP API: ``/api/v1/series``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from gpulint.ruleapi import (
    EXTERNAL,
    AdapterRule,
    Context,
    Finding,
    Inventory,
    LiveSnapshot,
    Matcher,
    MissingSeries,
    Related,
    Selector,
    SeriesSummary,
    Severity,
    ago,
    exporter_pods,
    format_duration,
    labels_carried,
    listing,
    mention,
    mentions,
    related,
    rule_label,
)

ID = "GL801"
NAME = "live-series-missing"
SEVERITY = Severity.ERROR
SCOPE = "adapter-rule"
REQUIRES = "live"  # runs only with --prometheus
SETTLES = ("GL402",)
STAGES = ("adapter-rule",)


def check(rule: AdapterRule, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    live: LiveSnapshot | None = inventory.live
    evidence = live.for_rule(rule) if live is not None else None
    if live is None or evidence is None or evidence.missing is None:
        return
    query = (rule.series_query or "").strip()
    selector = rule.selector
    missing = evidence.missing
    head = (
        f"seriesQuery `{query}` of {rule_label(rule)} matches no series in Prometheus "
        f"(last {format_duration(live.max_age)}, the window the adapter discovers series in)"
    )
    reason, fix = _explain(query, missing, live, rule)
    if selector is not None and not reason:
        reason = "nothing in Prometheus matches it"
    yield ctx.finding(
        rule.document,
        (*rule.path, "seriesQuery"),
        f"{head}: {reason}; the adapter exposes nothing for it",
        fix,
        related=_hpas_asking(rule, inventory),
    )


def _explain(
    query: str, missing: MissingSeries, live: LiveSnapshot, rule: AdapterRule
) -> tuple[str, str]:
    """Why the query finds nothing, and the fix: its label matchers exclude the series that
    exist, the labels it asks for exist nowhere, or the metric is absent (renamed, gone)."""
    selector = rule.selector
    if selector is None:
        return "", ""
    names = selector.literal_names() or []
    shown = " or ".join(names) if names else "a series of these names"
    name_only = missing.name_only
    if name_only is not None and name_only.count:
        return _excluded(query, selector, names, shown, name_only)
    if missing.absent_labels:
        labels = ", ".join(missing.absent_labels)
        return (
            f"no series in Prometheus carries the label{'s' * (len(missing.absent_labels) > 1)} "
            f"{labels}",
            f"# write the seriesQuery with labels the series carry; list them with\n"
            f"curl -s '{live.url}/api/v1/labels'",
        )
    return _absent(query, selector, names, shown, missing, live, rule)


def _excluded(
    query: str, selector: Selector, names: list[str], shown: str, name_only: SeriesSummary
) -> tuple[str, str]:
    """The metric exists; the label matchers exclude it."""
    matchers = selector.label_matchers()
    total = name_only.count
    excluding = [m for m in matchers if name_only.rejected.get(str(m), 0) == total]
    kept = [_replacement(m, name_only) for m in matchers]
    carried = labels_carried(name_only)
    if excluding:
        which = " and ".join(f"`{m}`" for m in excluding)
        verb = "excludes" if len(excluding) == 1 else "each exclude"
        reason = (
            f"{shown} has {total} series, but the matcher {which} {verb} every one of "
            f"them (the series carry {carried})"
        )
    else:
        which = ", ".join(f"`{m}` drops {name_only.rejected.get(str(m), 0)}" for m in matchers)
        reason = (
            f"{shown} has {total} series, but the matchers together exclude all of them "
            f"({which}; the series carry {carried})"
        )
    suggestion = _selector_text(
        names, selector.metric, [str(m) for m in kept if m is not None], query
    )
    fix = f"seriesQuery: '{suggestion}'"
    exporters = exporter_pods(name_only)
    if exporters and any(m.label.startswith("exported_") for m in excluding):
        shown_pods = listing(sorted(set(exporters.values())))
        # Not the rule's fault: the exporter labels no workload pod, so no matcher helps.
        return reason, (
            f"# keep this seriesQuery and the exported_* mapping: pod on these series is the "
            f"exporter's own ({shown_pods}), and no pod holding a GPU is labelled\n"
            "# run dcgm-exporter with Kubernetes mapping (DCGM_EXPORTER_KUBERNETES=true) and "
            "give GPU containers an nvidia.com/gpu limit"
        )
    for matcher in excluding:
        plain = matcher.label.removeprefix("exported_")
        if plain != matcher.label and name_only.carries(plain):
            fix += (
                f"\n# the series carry {plain}, not {matcher.label}: map the labels they "
                "carry in resources.overrides (GL802 then checks what they name)"
            )
    return reason, fix


def _absent(
    query: str,
    selector: Selector,
    names: list[str],
    shown: str,
    missing: MissingSeries,
    live: LiveSnapshot,
    rule: AdapterRule,
) -> tuple[str, str]:
    """No series of the metric now: one of another name measures it, or it was last seen."""
    parts: list[str] = []
    fix = ""
    if missing.alternatives:
        best = missing.alternatives[0]
        others = [a.name for a in missing.alternatives[1:]]
        if best.reason == "case":
            parts.append(f"the metric exists as {best.name} (names are case-sensitive)")
        elif best.reason == "typo":
            parts.append(f"no metric is named {shown}; did you mean {best.name}?")
        else:
            parts.append(
                f"no metric is named {shown} here, but the same measurement exists as "
                f"{best.name} from {best.source} ({best.conversion})"
            )
        if others:
            parts.append(f"also present: {listing(others)}")
        matchers = selector.label_matchers()
        moved = _workload_labels_moved(missing)
        if moved:
            matchers = [_exported(m) for m in matchers]
        label_part = ",".join(str(m) for m in matchers)
        fix = (
            f"seriesQuery: '{best.name}{{{label_part}}}'"
            if label_part
            else (f"seriesQuery: '{best.name}'")
        )
        read = rule.metrics_query or ""
        if any(mentions(read, name) for name in names):
            # the metricsQuery names the series itself (not <<.Series>>): it changes too
            for name in names:
                read = mention(name).sub(best.name, read)
            fix += f"\nmetricsQuery: {_quoted(read)}"
        if best.reason == "family" and not best.conversion.startswith("same scale"):
            fix += f"\n# {best.conversion}"
        if moved:
            fix += (
                f"\n# {best.name} carries the workload's pod in exported_pod "
                "(scraped with honor_labels: false):\nresources:\n  overrides:\n"
                "    exported_namespace: {resource: namespace}\n"
                "    exported_pod: {resource: pod}"
            )
    seen = {name: t for name, t in missing.last_seen.items()}
    lookback = live.window
    if seen:
        latest = max(seen.values())
        which = listing(sorted(seen)) if names else f"a series matching {query}"
        parts.append(
            f"{which} was last seen {ago(latest, live.evaluated_at)}: the exporter that "
            "wrote it stopped, was renamed, or is no longer scraped"
        )
    elif not missing.alternatives:
        parts.append(
            f"{shown} was never seen in the last {lookback} (--lookback): no target this "
            "Prometheus scrapes exports it"
        )
    if not fix:
        fix = (
            "# find the name your exporter uses, then write it in seriesQuery:\n"
            f"curl -s '{live.url}/api/v1/label/__name__/values' | tr ',' '\\n' | grep -i gpu"
        )
    return "; ".join(parts), fix


def _workload_labels_moved(missing: MissingSeries) -> bool:
    """Whether the series of the metric suggested instead carry the workload's pod in
    ``exported_pod``: Prometheus scraped their exporter with honor_labels: false, so ``pod``
    names the exporter's own pod, and a suggestion that kept ``pod`` would map it (GL802's
    finding on the next run)."""
    series = missing.alternative_series
    return series is not None and series.carries("exported_pod")


def _quoted(text: str) -> str:
    """``text`` as a YAML scalar: single-quoted, or JSON-quoted when that cannot hold it."""
    return f"'{text}'" if "'" not in text and "\n" not in text else json.dumps(text)


def _exported(matcher: Matcher) -> Matcher:
    """A pod or namespace matcher moved to the label honor_labels: false writes it in."""
    if matcher.label in ("pod", "namespace"):
        return Matcher(f"exported_{matcher.label}", matcher.op, matcher.value)
    return matcher


def _replacement(matcher: Matcher, series: SeriesSummary) -> Matcher | None:
    """What to write instead of a matcher that excludes every series: the same test on the
    label the series carry (``exported_pod`` -> ``pod``), or nothing: not ``pod`` when it names
    the exporter (the series have no workload pod to map)."""
    if series.rejected.get(str(matcher), 0) < series.count:
        return matcher
    plain = matcher.label.removeprefix("exported_")
    if plain != matcher.label and series.carries(plain) and not exporter_pods(series):
        return Matcher(plain, matcher.op, matcher.value)
    return None


def _selector_text(names: list[str], metric: str | None, matchers: list[str], query: str) -> str:
    if metric:
        return f"{metric}{{{','.join(matchers)}}}" if matchers else metric
    if len(names) == 1:
        return f"{names[0]}{{{','.join(matchers)}}}" if matchers else names[0]
    return query


def _hpas_asking(rule: AdapterRule, inventory: Inventory) -> list[Related]:
    """HPAs whose metric this rule would serve if it found series."""
    found = []
    for hpa in inventory.hpas:
        for metric in hpa.metrics:
            if not metric.is_custom or not metric.name:
                continue
            if (metric.type == "External") != (rule.kind == EXTERNAL):
                continue
            wanted = metric.name.lower() if metric.type == "External" else metric.name
            if rule.could_expose(wanted):
                found.append(related(hpa.manifest, metric.name_path, "asks for its metric"))
    return found
