"""An adapter rule maps pods through labels the live series lack, or that name the exporter.

## What it checks
For each adapter rule whose seriesQuery finds series in Prometheus:

* every label named in ``resources.overrides`` (and the label ``resources.template`` gives
  pods and namespaces) must be carried by the series;
* for GPU series, ``pod``/``namespace`` must name the workload: they do not when the series
  also carry ``exported_pod``/``exported_namespace`` (Prometheus renamed the exporter's labels
  because the scrape runs with ``honor_labels: false``), or when every GPU on a node reports
  the same ``pod``, and that pod is the exporter's (an exporter that writes no pod labels).

The finding says which label to map instead.

## Why is this bad?
The adapter answers an HPA by matching the pod label of each series against the HPA's pods.
A label the series do not carry matches nothing ("the server could not find the metric ...
for pods"); a ``pod`` that holds ``nvidia-dcgm-exporter-xxxxx`` maps all GPU load of a node
onto the exporter's own pod, and the HPA's pods get "no metrics returned from custom metrics
API". kube-prometheus-stack ServiceMonitors scrape dcgm-exporter with ``honorLabels: false``
by default, so this is the common case.

## Example
```yaml
rules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}   # gpu-operator: the exporter's namespace
      pod: {resource: pod}               # nvidia-dcgm-exporter-7xk2p: the exporter's pod
  metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
```

## Use instead
```yaml
  resources:
    overrides:
      exported_namespace: {resource: namespace}
      exported_pod: {resource: pod}
```
(or scrape dcgm-exporter with ``honorLabels: true`` and keep ``pod``/``namespace``).

## References
- Prometheus configuration docs, ``honor_labels``; prometheus-operator promcfg.go (target
  labels ``namespace``, ``pod``, ``container``).
- NVIDIA dcgm-exporter deployment/values.yaml (``serviceMonitor.honorLabels: false``) and
  NVIDIA/dcgm-exporter#85 ("exported_pod label is made by the prometheus").
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    NAMESPACE_LABELS,
    POD_LABELS,
    AdapterRule,
    Context,
    Finding,
    Inventory,
    LiveSnapshot,
    Path,
    SeriesSummary,
    Severity,
    canonical_resource,
    exporter_pods,
    listing,
    looks_like_gpu_metric,
    render_resource_template,
    rule_label,
)

ID = "GL802"
NAME = "live-label-mapping"
SEVERITY = Severity.ERROR
SCOPE = "adapter-rule"
REQUIRES = "live"  # runs only with --prometheus
STAGES = ("adapter-rule",)
# A rule that maps a label naming no workload pod leaves the HPAs it serves without data.
EXPLAINS = ("GL804",)

_KIND = {"pods": "pod", "namespaces": "namespace"}


def check(rule: AdapterRule, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    live: LiveSnapshot | None = inventory.live
    evidence = live.for_rule(rule) if live is not None else None
    if evidence is None or evidence.series.count == 0:
        return
    series = evidence.series
    query = (rule.series_query or "").strip()
    gpu = any(looks_like_gpu_metric(name) for name in series.names)
    exporter_pods_seen = exporter_pods(series) if gpu and not series.carries("exported_pod") else {}
    for label, resource, path in _mapped_labels(rule):
        what = f"resources maps {label} to {resource}"
        if not series.carries(label):
            instead = _instead(series, resource)
            carried = _carried_for(series, resource)
            message = (
                f"{rule_label(rule)}: {what}, but its series carry no {label}. None of the "
                f"{series.count} series of `{query}` does (they carry {carried})"
            )
            if instead:
                message += f"; the {_KIND.get(resource, resource)} is in {instead}"
            yield ctx.finding(rule.document, path, message, _fix(label, instead, resource))
            continue
        if not gpu or resource not in _KIND or label not in ("pod", "namespace"):
            continue
        exported = f"exported_{label}"
        if series.carries(exported):
            share = series.label_counts[exported]
            examples = listing(series.top_values(label))
            yield ctx.finding(
                rule.document,
                path,
                f"{rule_label(rule)}: {what}, but on these GPU series {label} names the "
                f"exporter's own {label} ({examples}). Of the {series.count} series, {share} "
                f"also carry {exported}: Prometheus scraped the exporter with honor_labels: "
                f"false and moved the workload's {label} to {exported}; map {exported} "
                "instead",
                _fix(label, exported, resource),
            )
        elif exporter_pods_seen:
            nodes = listing(f"{node}: {pod}" for node, pod in sorted(exporter_pods_seen.items()))
            yield ctx.finding(
                rule.document,
                path,
                f"{rule_label(rule)}: {what}, but on these GPU series {label} names the "
                f"exporter, not a workload. Every GPU on a node carries the same pod, the "
                f"exporter's ({nodes}): the exporter writes no pod labels of its own",
                "# the series carry no workload pod: run dcgm-exporter with Kubernetes mapping\n"
                "# (DCGM_EXPORTER_KUBERNETES=true, the Helm chart's default) and give GPU\n"
                "# containers an nvidia.com/gpu limit; then map the label it writes:\n"
                "resources:\n"
                "  overrides:\n"
                "    exported_namespace: {resource: namespace}   # pod/namespace with "
                "honorLabels: true\n"
                "    exported_pod: {resource: pod}",
            )


def _mapped_labels(rule: AdapterRule) -> list[tuple[str, str, Path]]:
    """(label, canonical resource, where it is written) for overrides and the template."""
    base = rule.path
    found: list[tuple[str, str, Path]] = []
    resources = rule.resources
    for label, resource in resources.overrides.items():
        found.append((label, resource, (*base, "resources", "overrides", label)))
    if resources.template:
        for resource in ("pods", "namespaces"):
            if resource in resources.overrides.values():
                continue
            rendered = render_resource_template(resources.template, resource)
            if rendered:
                found.append((rendered, resource, (*base, "resources", "template")))
    return found


def _instead(series: SeriesSummary, resource: str) -> str | None:
    """The label these series carry for ``resource`` that names the workload's object."""
    canonical = canonical_resource(resource)
    if canonical == "pods":
        candidates = ("exported_pod", *POD_LABELS)
    elif canonical == "namespaces":
        candidates = ("exported_namespace", *NAMESPACE_LABELS)
    else:
        return None
    for label in candidates:
        if series.carries(label):
            return label
    return None


def _carried_for(series: SeriesSummary, resource: str) -> str:
    """The labels of these series that could name ``resource`` (else all of them)."""
    canonical = canonical_resource(resource)
    family = {"pods": POD_LABELS, "namespaces": NAMESPACE_LABELS}.get(canonical, ())
    labels = sorted(label for label in series.label_counts if not label.startswith("__"))
    naming = [label for label in labels if label in family]
    return ", ".join(naming) if naming else listing(labels, 10)


def _fix(label: str, instead: str | None, resource: str) -> str:
    kind = _KIND.get(resource, resource)
    if instead is None:
        return (
            f"# no label of these series names a {kind}: map only labels the series carry\n"
            f"# (curl -s '<prometheus>/api/v1/series?match[]=<seriesQuery>' lists them)"
        )
    return f"resources:\n  overrides:\n    {instead}: {{resource: {kind}}}   # instead of {label}"
