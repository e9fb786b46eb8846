"""An HPA reads a custom or external metric that no prometheus-adapter rule exposes.

## What it checks
Each ``Pods``, ``Object`` and ``External`` metric of an HPA, when prometheus-adapter configs
are part of the input; and the metric of a Knative Service on the HPA class
(``autoscaling.knative.dev/class: hpa.autoscaling.knative.dev``), which Knative's serving-hpa
turns into a Pods metric of that name in the HPA it makes for each revision, whenever it is not
``cpu``, ``memory``, ``concurrency`` or ``rps`` and a numeric
``autoscaling.knative.dev/target`` is set (serving's
``pkg/reconciler/autoscaling/hpa/resources/hpa.go``). gpulint derives the names each rule
exposes exactly as the adapter does: a rule without ``name`` exposes each series under its own
name; ``name.matches`` (default ``.*``) with ``as`` (default ``$0``, or ``$1`` with one capture
group) renames it. Pods and Object metrics are looked up in the custom rules (``rules``,
``rules.custom``), External metrics in the external rules. A metric is also reported when the
only rules that expose it map no label to the resource the HPA asks about (a Pods metric from a
rule that maps only namespaces), or when it is exposed on the other metrics API only.

With the chart's default rules (``rules.default: true``) every series with a ``namespace``
label is exposed under its own name; then a name is reported when those rules cannot
produce it; when a rule of the input serves a GPU series under its own name for lack of a
``name`` block and only the default rules could give the HPA its name (the pods would have
to export a series called ``gpu_utilization`` themselves: only NVIDIA NIM's do); and, as a
warning, when it is a GPU device metric's name (``gpu_util``, ``gpu_memory_used``) that no
exporter gpulint knows writes. Application metrics with GPU in their name
(``gpu_cache_usage_perc``) may be any pod's own and are not judged so.

Not judged: HPAs made by KEDA, HPAs Knative made for a revision of a Knative Service in the
input (the Service's metric is judged, where it is written), Knative Services made by KServe
(the InferenceService is the object written), Knative Services handed to Knative's
autoscaler-keda extension (its ``autoscaling.knative.dev/prometheus-query`` and sibling
annotations: KEDA queries Prometheus itself), names of other adapters (``a|b|c``, the
Stackdriver adapter's form), External metrics when no config has external rules and no custom
rule has the name either, and configs whose rules live elsewhere (``rules.existing``).

## Why is this bad?
The HPA asks the metrics API for the name it was given and the adapter answers only for the
names its rules produced: the HPA event reads ``unable to get metric gpu_utilization ... the
server could not find the metric gpu_utilization for pods`` and the workload never scales.
The usual causes are a rule without ``name`` (the API name is then ``DCGM_FI_DEV_GPU_UTIL``,
not the friendly name the HPA uses), a typo, or an External metric with capitals: the HPA's
client lowercases External names (kubernetes/kubernetes#72996) and the adapter compares them
exactly.

## Example
```yaml
rules:
  custom:
  - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'
    resources:
      overrides:
        exported_namespace: {resource: namespace}
        exported_pod: {resource: pod}
    metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
---
# HPA
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}      # the rule exposes DCGM_FI_DEV_GPU_UTIL
      target: {type: AverageValue, averageValue: "60"}
```

## Use instead
```yaml
    name:
      matches: "^DCGM_FI_DEV_GPU_UTIL$"
      as: "gpu_utilization"
```
or name the metric ``DCGM_FI_DEV_GPU_UTIL`` in the HPA. For a new setup, consider a KEDA
ScaledObject with a ``prometheus`` trigger instead: it queries Prometheus itself, with no
adapter rule to keep in step, and prometheus-adapter's maintainers propose deprecating the
adapter in its favour (kubernetes-sigs/prometheus-adapter#701, a field-by-field migration in
#703; its last release is v0.12.0, 2024).

## References
- kubernetes-sigs/prometheus-adapter#701 (open: deprecation in favour of KEDA proposed).
- kubernetes-sigs/prometheus-adapter pkg/naming/metric_namer.go (``matches``/``as``
  defaults) and docs/config.md ("Naming").
- prometheus-community/helm-charts charts/prometheus-adapter templates/configmap.yaml (the
  default rules).
- kubernetes/kubernetes#72996, kubernetes-sigs/custom-metrics-apiserver#95 (External names
  are lowercased by the HPA's client).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from gpulint.ruleapi import (
    CUSTOM,
    EXTERNAL,
    HPA,
    METRIC_ANNOTATION,
    REPLICA_GAUGES,
    SERIES_NAME,
    AdapterConfig,
    AdapterMetric,
    AdapterRule,
    Context,
    Finding,
    GeneratedHPA,
    Inventory,
    KindView,
    Related,
    Severity,
    abbreviated,
    canonical_resource,
    capitalized,
    edits,
    exporter_of_series,
    generated_by,
    names_a_gpu,
    requested_metric_name,
    yaml_text,
)

ID = "GL401"
NAME = "adapter-metric-not-exposed"
SEVERITY = Severity.ERROR
SCOPE = "metrics-reader"
FIXES = ("unsafe",)
STAGES = ("adapter-rule",)
# HPA and metric names in a headline are cut at this many characters.
NAME_CHARS = 32

# A GPU device metric as people rename it (gpu_util, avg_gpu_utilization_percent,
# gpu_memory_used): what dcgm-exporter measures, not what an application counts.
_DEVICE_METRIC = re.compile(
    r"(?i)^(?:(?:avg|mean|max|min|total)_)?(?:nvidia_)?gpu_?"
    r"(?:util|usage|duty|busy|load|mem|memory|fb|framebuffer|power|temp|sm_|tensor|dram)"
)

# KEDA names its External metrics s<trigger index>-<scaler>-... (keda: pkg/scalers).
_KEDA_METRIC = re.compile(r"^s\d+-")


def check(hpa: KindView, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    # In a repository with one directory per cluster, the config next to the HPA is its own.
    configs = inventory.adapter_configs_near(hpa.manifest)
    if not configs or _made_by_keda(hpa):
        return
    if not isinstance(hpa, HPA) and hpa.generator() is not None:
        return  # a Knative Service KServe made: its InferenceService is the object written
    if _made_for_a_service_judged(hpa, inventory):
        return
    if any(not _complete(config, inventory) for config in configs):
        return
    for metric in hpa.adapter_reads():
        name = metric.name
        if not name or "|" in name or _KEDA_METRIC.match(name):
            continue
        yield from _check_metric(hpa, metric, name, configs, ctx)


def _check_metric(
    hpa: KindView, metric: AdapterMetric, name: str, configs: list[AdapterConfig], ctx: Context
) -> Iterator[Finding]:
    api = metric.api
    other_api = CUSTOM if api == EXTERNAL else EXTERNAL
    rules = [r for c in configs for r in c.rules_for_api(api)]
    wanted = requested_metric_name(name, api)
    exposing = [r for r in rules if r.could_expose(wanted)]
    # The headline's subject: names cut so that it stays one short line (the detail and the
    # fix name them whole).
    head = f"{_reader(hpa)} reads {metric.type} metric {abbreviated(name, NAME_CHARS)}"
    if exposing and all(r.generated for r in exposing):
        only_defaults = _only_default_rules(hpa, metric, name, wanted, rules, exposing, head, ctx)
        if only_defaults is not None:
            yield only_defaults
            return
    if exposing:
        if api == CUSTOM:
            yield from _check_resource(hpa, metric, name, exposing, head, ctx)
        return
    wanted_there = requested_metric_name(name, other_api)
    elsewhere = [
        r for c in configs for r in c.rules_for_api(other_api) if r.could_expose(wanted_there)
    ]
    if isinstance(hpa, GeneratedHPA) and not hpa.metric_names_written and (elsewhere or rules):
        yield _controller_named(hpa, metric, name, elsewhere, configs, head, ctx)
        return
    if elsewhere:
        yield _wrong_api(hpa, metric, name, elsewhere, head, ctx)
        return
    if not rules:
        return  # another adapter serves this API (only one can)
    yield _not_exposed(hpa, metric, name, wanted, rules, head, ctx)


def _not_exposed(
    hpa: KindView,
    metric: AdapterMetric,
    name: str,
    wanted: str,
    rules: list[AdapterRule],
    head: str,
    ctx: Context,
) -> Finding:
    api = metric.api
    exposed: dict[str, AdapterRule] = {}
    for rule in rules:
        for exposed_name in rule.exposed_names() or []:
            exposed.setdefault(exposed_name, rule)
    parts = _why_not(api, name, wanted, rules)
    nearest = _nearest(hpa, metric, wanted, rules, exposed)
    parts += nearest.said
    fix_lines = list(nearest.fix)
    if not fix_lines and any(r.generated for r in rules) and not SERIES_NAME.match(wanted):
        fix_lines.append(
            _name_fix(hpa, re.sub(r"[^a-zA-Z0-9_:]", "_", wanted))
            + "   # the series' name, as the default rules expose it"
        )
    if not fix_lines:
        fix_lines.append(_new_rule_fix(api, wanted))
    if api == CUSTOM:
        resource = _resource_asked(metric) or "the object"
        symptom = f'"the server could not find the metric {wanted} for {resource}"'
    else:
        symptom = f'"unable to get external metric ...{wanted}"'
    message = (
        f"{head}, which no adapter rule exposes. "
        + "; ".join(parts)
        + f". The HPA reports {symptom} and does not scale on it."
        + nearest.question
    )
    return ctx.finding(
        hpa.manifest,
        metric.name_path,
        message,
        "\n".join(fix_lines),
        related=list(nearest.links),
        plan=nearest.plan,
    )


def _why_not(api: str, name: str, wanted: str, rules: list[AdapterRule]) -> list[str]:
    """What no rule exposes, and why the chart's default rules cannot either."""
    api_text = "external rule" if api == EXTERNAL else "custom rule"
    parts = [f"No prometheus-adapter {api_text} in the input exposes {wanted}"]
    if api == EXTERNAL and wanted != name:
        parts[0] = (
            f"The HPA asks for {name} as {wanted} (its client lowercases External names), but "
            f"no prometheus-adapter external rule in the input exposes {wanted}"
        )
    if any(r.generated for r in rules):
        reason = (
            "it is not a possible Prometheus series name"
            if not SERIES_NAME.match(wanted)
            else "their series filters exclude it"
        )
        parts.append(
            "the chart's default rules, which expose every series with a namespace label "
            f"under its own name, cannot produce it either ({reason})"
        )
    return parts


class _Nearest(NamedTuple):
    """What the rules expose that comes closest to the name asked for, and the fix it gives."""

    said: list[str]
    fix: list[str]
    plan: edits.FixPlan | None = None
    links: tuple[Related, ...] = ()
    question: str = ""


def _nearest(
    hpa: KindView,
    metric: AdapterMetric,
    wanted: str,
    rules: list[AdapterRule],
    exposed: dict[str, AdapterRule],
) -> _Nearest:
    import difflib  # only for a metric no rule exposes: difflib costs start-up

    case_twin = next((n for n in exposed if n.lower() == wanted.lower() and n != wanted), None)
    nearest = difflib.get_close_matches(wanted, list(exposed), n=1, cutoff=0.6)
    if case_twin is not None:
        rule = exposed[case_twin]
        if metric.api == EXTERNAL:
            series = (rule.series_for(case_twin) or [case_twin])[0]
            return _Nearest(
                [
                    f"{rule.describe()} exposes {case_twin}, and prometheus-adapter compares "
                    "External names exactly: an External name with capitals can never be read "
                    "by an HPA"
                ],
                _rename_fix(rule, series, wanted),
                _rename_plan(rule, series, wanted),
                (rule.related(),),
            )
        return _Nearest(
            [f"{rule.describe()} exposes {case_twin}: metric names are case-sensitive"],
            [_name_fix(hpa, case_twin)],
            _ask_for(hpa, metric, case_twin),
            (rule.related(),),
        )
    if nearest:
        rule = exposed[nearest[0]]
        return _Nearest(
            [],
            [_name_fix(hpa, nearest[0])],
            _ask_for(hpa, metric, nearest[0]),
            (rule.related(),),
            f" Did you mean {nearest[0]}, which {rule.describe()} exposes?",
        )
    if not exposed:
        return _Nearest([], [])
    unnamed = [r for r in rules if not r.generated and not r.name_block and r.exposed_names()]
    if unnamed:
        rule = unnamed[0]
        own = ", ".join((rule.exposed_names() or [])[:3])
        series = (rule.series_names() or [own])[0]
        return _Nearest(
            [
                f"{rule.describe()} has no `name` block, so it exposes its series under their "
                f"own name: {own}"
            ],
            [*_rename_fix(rule, series, wanted), f"{_or_in(hpa)}\n{_name_fix(hpa, series)}"],
            _rename_plan(rule, series, wanted),
            (rule.related(),),
        )
    shown = sorted(exposed)[:5]
    more = " ..." if len(exposed) > 5 else ""
    return _Nearest(["the rules expose " + ", ".join(shown) + more], [_name_fix(hpa, shown[0])])


def _only_default_rules(
    hpa: KindView,
    metric: AdapterMetric,
    name: str,
    wanted: str,
    rules: list[AdapterRule],
    defaults: list[AdapterRule],
    head: str,
    ctx: Context,
) -> Finding | None:
    """A GPU metric name that only the chart's default rules could expose, under a series of
    that very name: an error when a rule of the input plainly means to serve it from a GPU
    series (it lacks the ``name`` block), a warning when the name is a GPU device metric's
    that no exporter gpulint knows writes (``gpu_util``: dcgm-exporter's is
    ``DCGM_FI_DEV_GPU_UTIL``). Application metrics (``gpu_cache_usage_perc``) may be any
    pod's own and are left alone."""
    if not names_a_gpu(wanted):
        return None
    candidates = _default_series(defaults, wanted)
    if candidates is None:
        return None  # only Prometheus can tell
    exporters = sorted({e for c in candidates if (e := exporter_of_series(c)) is not None})
    unnamed = _unnamed_gpu_rules(rules)
    if not unnamed and (exporters or not _DEVICE_METRIC.match(wanted)):
        return None  # the pods may well export it (NVIDIA NIM's gpu_utilization)
    named = wanted if wanted in candidates or not candidates else candidates[0]
    parts = [
        f"Only the prometheus-adapter chart's default rules could expose {wanted}, from a "
        f"series named {named}"
    ]
    severity = None if unnamed else Severity.WARNING
    if exporters:
        parts.append(
            f"only {' and '.join(exporters)} writes such a series, from its own pods, and "
            "nothing says these pods do"
        )
    else:
        parts.append("no GPU exporter gpulint knows writes a series of that name")
    fix_lines: list[str] = []
    links: list[Related] = []
    if unnamed:
        rule = unnamed[0]
        own = (rule.series_names() or [""])[0]
        parts.append(
            f"{rule.describe()} has no `name` block, so it exposes {own} under its own name, "
            f"not as {wanted}"
        )
        fix_lines += _rename_fix(rule, own, wanted)
        fix_lines.append(f"{_or_in(hpa)}\n{_name_fix(hpa, own)}")
        links.append(rule.related())
    else:
        fix_lines.append(_new_rule_fix(metric.api, wanted))
    message = (
        f"{head}, which only default rules could expose. "
        + "; ".join(parts)
        + f'. The HPA reports "the server could not find the metric {wanted}" and does not scale.'
    )
    return ctx.finding(
        hpa.manifest,
        metric.name_path,
        message,
        "\n".join(fix_lines),
        related=links,
        severity=severity,
    )


def _default_series(defaults: list[AdapterRule], wanted: str) -> list[str] | None:
    """The series the chart's default rules would expose as ``wanted``; None when a rule
    cannot say without Prometheus."""
    candidates: list[str] = []
    for rule in defaults:
        series = rule.series_for(wanted)
        if series is None:
            return None
        candidates += series
    return candidates


def _unnamed_gpu_rules(rules: list[AdapterRule]) -> list[AdapterRule]:
    """The input's rules that read a GPU series but have no ``name`` block."""
    return [
        r
        for r in rules
        if not r.generated
        and not r.name_block
        and any(names_a_gpu(n) for n in r.series_names() or [])
    ]


def _check_resource(
    hpa: KindView,
    metric: AdapterMetric,
    name: str,
    exposing: list[AdapterRule],
    head: str,
    ctx: Context,
) -> Iterator[Finding]:
    resource = _resource_asked(metric)
    if resource is None:
        return
    if any(r.resources.label_for(resource) is not None for r in exposing):
        return
    rule = exposing[0]
    mapped = sorted(set(rule.resources.overrides.values()))
    if mapped:
        maps = f"maps labels only to {', '.join(mapped)}; the adapter registers the metric for "
        maps += "those resources only"
    else:
        maps = "maps no label to any resource, so the adapter registers the metric for none"
    yield ctx.finding(
        hpa.manifest,
        metric.name_path,
        f"{head}, but its rule maps no label to {abbreviated(resource, NAME_CHARS)}. "
        f"{capitalized(rule.describe())}, which exposes it, {maps}, and the HPA reports "
        f'"the server could not find the metric {name} for {resource}".',
        _mapping_fix(resource),
        related=[rule.related()],
    )


def _controller_named(
    hpa: GeneratedHPA,
    metric: AdapterMetric,
    name: str,
    elsewhere: list[AdapterRule],
    configs: list[AdapterConfig],
    head: str,
    ctx: Context,
) -> Finding:
    """A metric whose name the controller that makes the HPA writes (KServe's
    ``wva_desired_replicas``): only a rule that serves it under that name helps."""
    api = metric.api
    where = "external" if api == EXTERNAL else "custom"
    said = (
        f" {capitalized(elsewhere[0].describe())} exposes it on the "
        f"{'custom' if api == EXTERNAL else 'external'} metrics API instead."
        if elsewhere
        else ""
    )
    rule: dict[str, object]
    if name in REPLICA_GAUGES:
        # The rule of WVA's own adapter values (llm-d-workload-variant-autoscaler
        # config/samples/prometheus-adapter-values.yaml).
        rule = {
            "seriesQuery": f'{name}{{variant_name!="",exported_namespace!=""}}',
            "resources": {
                "overrides": {
                    "exported_namespace": {"resource": "namespace"},
                    "variant_name": {"resource": "deployment"},
                }
            },
            "metricsQuery": f"{name}{{<<.LabelMatchers>>}}",
        }
    else:
        rule = {
            "seriesQuery": f'{name}{{namespace!=""}}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
            "metricsQuery": f"{name}{{<<.LabelMatchers>>}}",
        }
    config = configs[0]
    key = (
        ("external" if api == EXTERNAL else "custom")
        if config.form == config.HELM_VALUES
        else ("externalRules" if api == EXTERNAL else "rules")
    )
    parent = (*config.base, "rules") if config.form == config.HELM_VALUES else config.base
    written = config.document.get((*parent, key))
    if isinstance(written, list):
        op: edits.Op = edits.Extend(config.document, (*parent, key), (rule,))
    else:
        op = edits.Insert(config.document, parent, ((key, [rule]),))
    shown = yaml_text({key: [rule]}).rstrip("\n")
    return ctx.finding(
        hpa.manifest,
        metric.name_path,
        f"{head}, which no rule of the adapter exposes on the {where} metrics API.{said} "
        f"{hpa.made_by}'s controller names the metric, so the adapter must serve it under "
        f'that name: until then the HPA reports "the server could not find the metric '
        f'{name}" and does not scale.',
        f"# in {config.describe_short()}, under "
        f"{'.'.join(str(s) for s in parent) or 'the top level'}:\n{shown}",
        plan=edits.unsafe(op),
        fix_at_path=False,
    )


def _wrong_api(
    hpa: KindView,
    metric: AdapterMetric,
    name: str,
    rules: list[AdapterRule],
    head: str,
    ctx: Context,
) -> Finding:
    rule = rules[0]
    if metric.api == EXTERNAL:
        served = "custom"
        detail = (
            f"{capitalized(rule.describe())} exposes it on the custom metrics API "
            "(custom.metrics.k8s.io), not on the external one"
        )
        if rule.resources.label_for("pods") is not None:
            read_as = (
                "a Pods metric:\n- type: Pods\n  pods:\n    metric:\n"
                f"      name: {name}\n    target:\n      type: AverageValue\n"
                '      averageValue: "<per-pod value>"'
            )
        else:
            read_as = (
                "an Object metric:\n- type: Object\n  object:\n    metric:\n"
                f"      name: {name}\n    describedObject:\n      apiVersion: v1\n"
                "      kind: Service\n      name: <service>"
            )
        fix = (
            "move the rule to externalRules (rules.external in chart values), or read it as "
            + read_as
        )
    else:
        served = "external"
        detail = (
            f"{capitalized(rule.describe())} exposes it on the external metrics API "
            "(external.metrics.k8s.io), not on the custom one"
        )
        fix = (
            "read it as an External metric:\n- type: External\n  external:\n"
            f"    metric:\n      name: {name.lower()}"
            "\n# or move the rule to rules (rules.custom in chart values)"
        )
        if not isinstance(hpa, HPA):
            # Knative's HPA class writes a Pods metric, never an External one (hpa.go)
            fix = "move the rule to rules (rules.custom in chart values)"
    return ctx.finding(
        hpa.manifest,
        metric.name_path,
        f"{head}, but its rule is on the {served} metrics API. {detail}; the HPA never finds "
        "it there.",
        fix,
        related=[rule.related()],
    )


# --- helpers ---------------------------------------------------------------------------------


def _reader(view: KindView) -> str:
    """Who reads the metric, for the headline: the HPA, or the HPA Knative makes."""
    name = abbreviated(view.name, NAME_CHARS)
    if isinstance(view, GeneratedHPA):
        return f"HPA {name}"  # placed in the object that makes it
    if isinstance(view, HPA):
        return f"HPA {name}"
    return f"The HPA Knative makes for each revision of Knative {view.manifest.kind} {name}"


def _name_fix(view: KindView, name: str) -> str:
    """The metric name written where the reader names it: the HPA's ``metric.name``, a
    Knative Service's metric annotation, the key of the settings an HPA is made from."""
    if isinstance(view, GeneratedHPA) and view.metric_name_key is not None:
        return f"{view.metric_name_key}: {name}"
    if isinstance(view, HPA):
        return f"metric:\n  name: {name}"
    return f"{METRIC_ANNOTATION}: {name}"


def _or_in(view: KindView) -> str:
    if isinstance(view, GeneratedHPA):
        return f"# or in {view.made_by}:"
    return (
        "# or in the HPA:"
        if isinstance(view, HPA)
        else f"# or on Knative {view.manifest.kind} {view.name}:"
    )


# Knative names a revision <configuration>-NNNNN, and the PodAutoscaler and HPA after it
# (knative/serving pkg/reconciler/autoscaling/hpa/resources/hpa.go).
_REVISION = re.compile(r"^(?P<configuration>.+)-\d{5}$")


def _made_for_a_service_judged(hpa: KindView, inventory: Inventory) -> bool:
    """An HPA Knative made for a revision (a cluster's) of a Knative Service in the input,
    whose metric is judged on the Service, where it is written."""
    generator = hpa.generator()
    if generator is None or generator.kind != "PodAutoscaler":
        return False
    match = _REVISION.match(generator.name)
    service = inventory.knative_service(hpa.namespace, match["configuration"]) if match else None
    return service is not None and service.reads_metrics_api


def _made_by_keda(hpa: KindView) -> bool:
    return generated_by(hpa.manifest, "ScaledObject") is not None or hpa.name.startswith(
        "keda-hpa-"
    )


def _complete(config: AdapterConfig, inventory: Inventory) -> bool:
    """A config whose rules are somewhere gpulint cannot see cannot be judged, unless the
    ConfigMap it names (Helm ``rules.existing``) is in the input too."""
    if config.complete:
        return True
    return any(
        other.owner is not None and other.owner.name == config.existing_configmap
        for other in inventory.adapter_configs
    )


def _resource_asked(metric: AdapterMetric) -> str | None:
    if metric.type == "Pods":
        return "pods"
    kind = (metric.described_object or {}).get("kind")
    return canonical_resource(kind) if isinstance(kind, str) and kind else None


def _ask_for(hpa: KindView, metric: AdapterMetric, name: str) -> edits.FixPlan | None:
    """The HPA asks for the name the adapter serves (unsafe: gpulint guessed which)."""
    if metric.name_path is None or not SERIES_NAME.match(name):
        return None
    return edits.unsafe(edits.Replace(hpa.manifest, metric.name_path, name))


def _rename_plan(rule: AdapterRule, series: str, wanted: str) -> edits.FixPlan | None:
    """The rule's ``name`` block written to expose ``series`` as ``wanted`` (unsafe: every
    other reader of the old name loses it)."""
    if rule.generated or rule.name_block:
        return None  # an existing name block is rewritten by hand
    pattern = f"^{series}$" if SERIES_NAME.match(series) else series
    block = (("name", {"matches": pattern, "as": wanted}),)
    return edits.unsafe(edits.Insert(rule.document, rule.path_for(), block))


def _rename_fix(rule: AdapterRule, series: str, wanted: str) -> list[str]:
    """A ``name`` block for ``rule`` that exposes ``series`` as ``wanted``."""
    matches = rule.name_block.get("matches")
    if isinstance(matches, str) and matches:
        pattern = matches
    else:
        pattern = f"^{series}$" if SERIES_NAME.match(series) else series
    return [
        f"# in {rule.describe()}:",
        "name:",
        f'  matches: "{pattern}"',
        f'  as: "{wanted}"',
    ]


def _new_rule_fix(api: str, wanted: str) -> str:
    key = "external" if api == EXTERNAL else "custom"
    return (
        f"rules:\n  {key}:\n  - seriesQuery: '<series>{{namespace!=\"\"}}'\n"
        "    resources:\n      overrides:\n        namespace: {resource: namespace}\n"
        + ("" if api == EXTERNAL else "        pod: {resource: pod}\n")
        + f'    name: {{matches: "^<series>$", as: "{wanted}"}}\n'
        + (
            "    metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'"
            if api == EXTERNAL
            else "    metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'"
        )
    )


def _mapping_fix(resource: str) -> str:
    if resource == "pods":
        return (
            "resources:\n  overrides:\n    namespace: {resource: namespace}\n"
            "    pod: {resource: pod}      # exported_* under honorLabels: false"
        )
    return f"resources:\n  overrides:\n    <label holding the {resource}>: {{resource: {resource}}}"
