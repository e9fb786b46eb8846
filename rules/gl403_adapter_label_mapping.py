"""A prometheus-adapter rule maps pods and namespaces through labels its series do not carry.

## What it checks
The ``resources`` of each rule, against what the rule's own ``seriesQuery`` says and against
how dcgm-exporter is scraped:

* the ``seriesQuery`` keeps only series with ``exported_pod`` (or ``exported_namespace``)
  while ``overrides`` map plain ``pod`` (``namespace``): ``exported_*`` labels exist only
  when Prometheus renamed the exporter's labels, and then ``pod`` names the exporter's pod;
* an override on a label the ``seriesQuery`` requires to be empty;
* a custom rule that maps pods (or another namespaced resource) but no label to namespaces,
  or maps nothing at all;
* a rule on dcgm-exporter series (``DCGM_FI_*``) that maps ``pod``/``namespace`` while a
  ServiceMonitor, PodMonitor or chart values in the input scrape dcgm-exporter with
  ``honorLabels: false`` (the default), or maps ``exported_pod``/``exported_namespace`` while
  the scrape has ``honorLabels: true`` (or is GKE managed Prometheus);
* the chart's default rules (``rules.default: true``) serving a ``DCGM_FI_*`` metric an HPA
  reads, under ``honorLabels: false``: they map every series through ``pod``/``namespace``.

A rule is judged for the objects the input's HPAs ask it about: a pod mapping matters to a
Pods metric, not to an Object metric on a Service. With no HPA of the input reading it, every
resource it maps is judged.

A scrape whose relabelings rewrite pod or namespace labels is not judged.

## Why is this bad?
The adapter associates a series with a pod through the label ``overrides`` name, and builds
``<<.LabelMatchers>>`` from it (``exported_pod=~"a|b"``, ``namespace="ml"``). With
``honorLabels: false`` Prometheus keeps dcgm-exporter's own ``pod``/``namespace`` as
``exported_pod``/``exported_namespace`` and sets ``pod``/``namespace`` to the exporter's pod:
a rule on ``pod`` attaches GPU values to the dcgm-exporter pod, and the HPA gets ``no metrics
returned from custom metrics API`` (NVIDIA/dcgm-exporter#42, prometheus-adapter#644). The
other way round, ``exported_pod`` does not exist and the metric is never discovered. A
namespaced query without a namespace label fails with ``unable to convert resource
namespaces into label``.

## Example
```yaml
# dcgm-exporter ServiceMonitor without honorLabels (false), and:
rules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
```

## Use instead
```yaml
rules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
  resources:
    overrides:
      exported_namespace: {resource: namespace}
      exported_pod: {resource: pod}
```
or set ``honorLabels: true`` on the dcgm-exporter ServiceMonitor and keep ``pod``/``namespace``.

## References
- prometheus.io configuration docs, ``honor_labels``; prometheus-operator
  pkg/prometheus/promcfg.go (the target labels ``namespace``, ``pod``, ``container``).
- NVIDIA/dcgm-exporter deployment/values.yaml: ``serviceMonitor.honorLabels: false``.
- kubernetes-sigs/prometheus-adapter pkg/naming/resource_converter.go and metrics_query.go.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from gpulint.ruleapi import (
    CUSTOM,
    AdapterRule,
    Context,
    DcgmScrape,
    Exporter,
    Finding,
    Inventory,
    Related,
    Severity,
    abbreviated,
    as_dict,
    capitalized,
    edits,
    is_dcgm_field,
    lookup,
    metric_names_in_query,
    related,
    singular,
)

ID = "GL403"
NAME = "adapter-label-mapping"
SEVERITY = Severity.ERROR
SCOPE = "adapter-rule"
FIXES = ("safe",)
STAGES = ("adapter-rule",)
# The live checks see what this mapping does: series that name the exporter (GL802), HPAs
# served by the rule that get no data (GL804).
EXPLAINS = ("GL802", "GL804")

EXPORTED = {"pod": "exported_pod", "namespace": "exported_namespace"}
RESOURCE_OF = {"pod": "pods", "namespace": "namespaces"}
_CLUSTER_SCOPED = {"namespaces", "nodes", "persistentvolumes"}

FIX_EXPORTED = """\
seriesQuery: '{series}{{exported_namespace!="",exported_pod!=""}}'
resources:
  overrides:
    exported_namespace: {{resource: namespace}}
    exported_pod: {{resource: pod}}"""
FIX_PLAIN = """\
seriesQuery: '{series}{{namespace!="",pod!=""}}'
resources:
  overrides:
    namespace: {{resource: namespace}}
    pod: {{resource: pod}}"""


def check(rule: AdapterRule, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if rule.generated:
        yield from _default_rules(rule, inventory, ctx)
        return
    asked = _asked(rule, inventory)
    yield from _contradictions(rule, asked, ctx)
    yield from _namespace_mapping(rule, asked, ctx)
    yield from _against_scrape(rule, asked, inventory, ctx)


def _asked(rule: AdapterRule, inventory: Inventory) -> set[str] | None:
    """The resources the input's HPAs ask this rule about (``pods`` for a Pods metric, the
    described object's for an Object one); None when no HPA of the input reads it, and then
    every resource the rule maps is judged."""
    resources = set(inventory.asked_of(rule))
    if not resources or None in resources:
        return None
    return {r for r in resources if r is not None}


def _judged(resource: str, asked: set[str] | None) -> bool:
    """Namespaces always matter (every namespaced object is looked up in one)."""
    return asked is None or resource == "namespaces" or resource in asked


def _finding(
    ctx: Context,
    rule: AdapterRule,
    sub: tuple[str | int, ...],
    problem: str,
    detail: str,
    fix: str,
    links: Sequence[Related] = (),
    plan: edits.FixPlan | None = None,
) -> Finding:
    return ctx.finding(
        rule.document,
        rule.path_for(*sub),
        f"{_subject(rule)} {problem}. {detail}.",
        fix,
        obj=rule.config.ref,
        related=links,
        plan=plan,
    )


def _subject(rule: AdapterRule) -> str:
    """The rule as a headline's subject, cut when its config's name is very long."""
    return capitalized(abbreviated(rule.describe(), 72))


_BARE_LABEL = re.compile(r"\b(?:exported_)?(?:pod|namespace)\b")


def _relabel(
    rule: AdapterRule, renames: dict[str, str], written: str
) -> tuple[str, edits.FixPlan | None]:
    """The fix that renames the overrides' keys (``pod`` -> ``exported_pod``) and the
    seriesQuery's matchers on them with them, written out as it edits; safe, because the
    metricsQuery reaches the labels through ``<<.LabelMatchers>>`` and ``<<.GroupBy>>``,
    which the adapter renders from the overrides. ``written`` (and no plan) when the
    metricsQuery names the labels itself or a new key is already there: by hand."""
    overrides = rule.resources.overrides
    if (
        rule.generated
        or any(new in overrides for new in renames.values())
        or _BARE_LABEL.search(re.sub(r"<<[^>]*>>", "", rule.metrics_query or ""))
    ):
        return written, None
    ops: list[edits.Op] = [
        edits.Rename(rule.document, rule.path_for("resources", "overrides", old), new)
        for old, new in renames.items()
    ]
    lines = []
    query = rule.data.get("seriesQuery")
    if isinstance(query, str):
        renamed = query
        for old, new in renames.items():
            renamed = re.sub(rf"\b{old}\b", new, renamed)
        if renamed != query:
            quoted = "'" + renamed.replace("'", "''") + "'"
            ops.append(edits.Replace(rule.document, rule.path_for("seriesQuery"), quoted))
            lines.append(f"seriesQuery: {quoted}")
    lines += ["resources:", "  overrides:"]
    written_overrides = as_dict(as_dict(rule.data.get("resources")).get("overrides"))
    for old, new in renames.items():
        resource = as_dict(written_overrides.get(old)).get("resource", overrides[old])
        lines.append(f"    {new}: {{resource: {resource}}}   # instead of {old}")
    tail = written.split("\n# or ", 1)
    text = "\n".join(lines) + (f"\n# or {tail[1]}" if len(tail) == 2 else "")
    return text, edits.safe(*ops)


# --- what the rule's own seriesQuery says ----------------------------------------------------


def _required_labels(rule: AdapterRule) -> tuple[set[str], set[str]]:
    """(labels the seriesQuery requires to be set, labels it requires to be empty)."""
    selector = rule.selector
    if selector is None:
        return set(), set()
    present, empty = set(), set()
    for matcher in selector.label_matchers():
        if not matcher.matches(""):
            present.add(matcher.label)
        elif matcher.op in ("=", "=~") and matcher.value in ("", "^$"):
            empty.add(matcher.label)
    return present, empty


def _contradictions(rule: AdapterRule, asked: set[str] | None, ctx: Context) -> Iterator[Finding]:
    overrides = rule.resources.overrides
    present, empty = _required_labels(rule)
    for plain, exported in EXPORTED.items():
        resource = RESOURCE_OF[plain]
        if not _judged(resource, asked):
            continue
        if exported in present and overrides.get(plain) == resource and exported not in overrides:
            fix, plan = _relabel(
                rule,
                {plain: exported},
                f"overrides:\n  {exported}: {{resource: {plain}}}   # instead of {plain}",
            )
            yield _finding(
                ctx,
                rule,
                ("resources", "overrides", plain),
                f"maps the exporter's `{plain}` label to {resource}",
                f"Its seriesQuery keeps only series with `{exported}`, which exist only when "
                f"Prometheus renamed the exporter's own `{plain}` label (honorLabels: false); "
                f"on those series `{plain}` is the scraped exporter's {plain}, yet the overrides "
                f"map `{plain}` to {resource}, so values attach to the exporter, not to the "
                "workload",
                fix,
                plan=plan,
            )
    for label, resource in overrides.items():
        if label in empty and _judged(resource, asked):
            yield _finding(
                ctx,
                rule,
                ("resources", "overrides", label),
                f"maps `{abbreviated(label, 32)}` to {resource} on series without it",
                f"The overrides map `{label}` to {resource}, but its seriesQuery keeps only "
                f"series where `{label}` is empty, so no series names a {singular(resource)} "
                "and the adapter exposes nothing for it",
                f"remove the `{label}` matcher from seriesQuery, or map the label that holds "
                f"the {singular(resource)}",
            )


def _namespace_mapping(
    rule: AdapterRule, asked: set[str] | None, ctx: Context
) -> Iterator[Finding]:
    if rule.kind != CUSTOM:
        return
    resources = rule.resources
    if resources.template is not None:
        return
    written = rule.data.get("resources")
    unreadable = not isinstance(written, dict) or not resources.overrides
    if written is not None and unreadable and as_dict(written).get("overrides") is not None:
        return  # overrides are there, but not in a shape the adapter reads: GL405 says so
    if written is not None and not isinstance(written, dict):
        return
    if not resources.overrides:
        yield _finding(
            ctx,
            rule,
            ("resources",) if "resources" in rule.data else (),
            "maps no label to any Kubernetes resource",
            "It has no overrides and no template, so the adapter attaches its series to no "
            "object and exposes nothing",
            "resources:\n  overrides:\n    namespace: {resource: namespace}\n"
            "    pod: {resource: pod}",
        )
        return
    namespaced = sorted(
        r for r in set(resources.overrides.values()) - _CLUSTER_SCOPED if _judged(r, asked)
    )
    if namespaced and resources.label_for("namespaces") is None:
        label = next(k for k, v in resources.overrides.items() if v == namespaced[0])
        yield _finding(
            ctx,
            rule,
            ("resources", "overrides"),
            "maps no label to namespaces",
            f"It maps `{label}` to {namespaced[0]}, and {namespaced[0]} live in a namespace, "
            "so every query needs the namespace label and fails "
            '("unable to convert resource namespaces into label: no generic resource label '
            'form specified for this metric")',
            "overrides:\n  namespace: {resource: namespace}   # or exported_namespace",
        )


# --- against how dcgm-exporter is scraped ----------------------------------------------------


def _dcgm_series(rule: AdapterRule) -> list[str]:
    """dcgm-exporter series the rule reads (spelled out, or the prefix of a pattern)."""
    found: list[str] = []
    names = rule.series_names() or []
    query = rule.metrics_query or ""
    for name in [*names, *metric_names_in_query(query)]:
        metric = lookup(name)
        dcgm = (metric is not None and metric.exporter is Exporter.DCGM) or is_dcgm_field(name)
        if dcgm and name not in found:
            found.append(name)
    if not found and rule.selector is not None:
        for matcher in rule.selector.name_matchers():
            if matcher.op == "=~" and matcher.value.lstrip("^").startswith("DCGM_"):
                found.append(matcher.value)
    return found


def _scrape_mode(inventory: Inventory, rule: AdapterRule) -> tuple[bool, list[DcgmScrape]] | None:
    """(honorLabels, the scrapes) when the dcgm-exporter scrapes nearest to the rule's file
    agree; None otherwise."""
    scrapes = inventory.dcgm_scrapes_near(rule.document)
    if not scrapes or any(s.relabels_pod_labels for s in scrapes):
        return None
    modes = {s.honor_labels for s in scrapes}
    if len(modes) != 1:
        return None
    return modes.pop(), scrapes


def _scrape_text(scrape: DcgmScrape) -> str:
    if scrape.honor_labels:
        if scrape.explicit:
            return f"{scrape.description} scrapes dcgm-exporter with honorLabels: true"
        return f"{scrape.description} (GKE managed Prometheus) keeps dcgm-exporter's own labels"
    how = "honorLabels: false" if scrape.explicit else "no honorLabels (false by default)"
    return f"{scrape.description} scrapes dcgm-exporter with {how}"


def _against_scrape(
    rule: AdapterRule, asked: set[str] | None, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    mode = _scrape_mode(inventory, rule)
    if mode is None:
        return
    honor, scrapes = mode
    series = _dcgm_series(rule)
    if not series:
        return
    links = [related(s.document, s.path, "dcgm-exporter scrape") for s in scrapes]
    judge = _kept_labels_mapped if honor else _exporter_labels_mapped
    found = judge(rule, asked, series, _scrape_text(scrapes[0]), links, ctx)
    if found is not None:
        yield found


def _exporter_labels_mapped(
    rule: AdapterRule,
    asked: set[str] | None,
    series: list[str],
    scrape: str,
    links: list[Related],
    ctx: Context,
) -> Finding | None:
    """honorLabels false: ``pod`` and ``namespace`` name the dcgm-exporter pod."""
    overrides = rule.resources.overrides
    wrong = [
        p
        for p in ("pod", "namespace")
        if overrides.get(p) == RESOURCE_OF[p] and _judged(RESOURCE_OF[p], asked)
    ]
    if not wrong:
        return None
    labels = " and ".join(f"`{p}`" for p in wrong)
    fix, plan = _relabel(
        rule,
        {p: EXPORTED[p] for p in wrong},
        FIX_EXPORTED.format(series=_base(series))
        + "\n# or set honorLabels: true on the dcgm-exporter scrape and keep pod/namespace",
    )
    return _finding(
        ctx,
        rule,
        ("resources", "overrides", wrong[0]),
        f"maps {labels}, which {'name' if len(wrong) > 1 else 'names'} the dcgm-exporter pod",
        f"It maps {labels} for the dcgm-exporter series {_shown(series)}, but "
        f"{scrape}: Prometheus keeps the workload's pod and namespace "
        "in exported_pod and "
        f"exported_namespace and sets {labels} to the dcgm-exporter pod, so GPU values "
        "attach to the exporter and the HPA gets no metrics for its own pods",
        fix,
        links,
        plan,
    )


def _kept_labels_mapped(
    rule: AdapterRule,
    asked: set[str] | None,
    series: list[str],
    scrape: str,
    links: list[Related],
    ctx: Context,
) -> Finding | None:
    """honorLabels true: the series carry ``pod`` and ``namespace``, no ``exported_*``."""
    overrides = rule.resources.overrides
    wrong = [
        p
        for p in ("pod", "namespace")
        if overrides.get(EXPORTED[p]) == RESOURCE_OF[p] and _judged(RESOURCE_OF[p], asked)
    ]
    if not wrong:
        return None
    labels = " and ".join(f"`{EXPORTED[p]}`" for p in wrong)
    fix, plan = _relabel(
        rule, {EXPORTED[p]: p for p in wrong}, FIX_PLAIN.format(series=_base(series))
    )
    return _finding(
        ctx,
        rule,
        ("resources", "overrides", EXPORTED[wrong[0]]),
        f"maps {labels}, which the dcgm-exporter series lack",
        f"It maps {labels} for the dcgm-exporter series {_shown(series)}, but "
        f"{scrape}, so the series carry `pod` and `namespace` and no "
        "exported_* label: the adapter never discovers the metric",
        fix,
        links,
        plan,
    )


def _shown(series: list[str]) -> str:
    return series[0] if len(series) == 1 else ", ".join(series)


def _base(series: list[str]) -> str:
    """The series to write in a fix (a selector that is no plain name: the usual one)."""
    return series[0] if series[0].isidentifier() else "DCGM_FI_DEV_GPU_UTIL"


def _default_rules(rule: AdapterRule, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    """The chart's default rules map every series through ``pod``/``namespace``."""
    mode = _scrape_mode(inventory, rule)
    if mode is None or mode[0]:
        return
    scrapes = mode[1]
    readers: list[tuple[str, str]] = []
    for hpa in inventory.hpas:
        for metric in hpa.metrics:
            name = metric.name
            if metric.type not in ("Pods", "Object") or not name:
                continue
            known = lookup(name)
            if not (is_dcgm_field(name) or (known and known.exporter is Exporter.DCGM)):
                continue
            serving = inventory.rules_exposing(name, CUSTOM, near=hpa.manifest)
            if rule in serving and all(r.generated for r in serving):
                readers.append((hpa.name, name))
    if not readers:
        return
    names = sorted({name for _, name in readers})
    hpas = ", ".join(sorted({h for h, _ in readers}))
    links = [related(s.document, s.path, "dcgm-exporter scrape") for s in scrapes]
    yield ctx.finding(
        rule.document,
        rule.path,
        f"{capitalized(rule.describe())} map dcgm-exporter series to the exporter's pod. They "
        f"serve {', '.join(names)} (read by HPA {hpas}) through the series' `pod` and "
        f"`namespace` labels, but {_scrape_text(scrapes[0])}: those labels name the "
        "dcgm-exporter pod, so the HPA gets no metrics for its own pods.",
        "rules:\n  custom:\n"
        + "\n".join(
            f'  - seriesQuery: \'{n}{{exported_namespace!="",exported_pod!=""}}\'\n'
            "    resources:\n      overrides:\n"
            "        exported_namespace: {resource: namespace}\n"
            "        exported_pod: {resource: pod}\n"
            "    metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'"
            for n in names
        )
        + "\n# listed after the default rules, these take precedence for the same name",
        obj=rule.config.ref,
        related=links,
    )
