"""The query the adapter sends for an HPA's own pods returns nothing from Prometheus.

## What it checks
With ``--prometheus``, for each HPA metric (Pods, Object, External) that an adapter rule in
the input serves, gpulint renders the rule's metricsQuery as the adapter renders it for that
HPA: the HPA's namespace, its target's pods (``<deployment>-<hash>-<id>``,
``<statefulset>-<n>``; the real pod names when the series show them) and its metric selector,
and runs it. When the answer holds no value for those pods it says why: the pods appear under
another label (``exported_pod``), in another namespace, only in other metrics (MIG instances
report no ``DCGM_FI_DEV_GPU_UTIL``), or in no series at all (the exporter does not map their
GPUs).

## Why is this bad?
The adapter exposes the metric, so ``kubectl get --raw`` lists it, yet the HPA reports
``FailedGetPodsMetric`` ("unable to get metric ...: no metrics returned from custom metrics
API") and never scales. This is the failure the adapter's own listing cannot show.

## Example
```yaml
# adapter rule maps pod/namespace; Prometheus scrapes dcgm-exporter with honor_labels: false
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: triton, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: triton}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "60"}
```

## Use instead
Map the labels that hold the workload's pod in the adapter rule:
```yaml
  resources:
    overrides:
      exported_namespace: {resource: namespace}
      exported_pod: {resource: pod}
```

## References
- prometheus-adapter pkg/naming/metrics_query.go (how LabelMatchers are built).
- Kubernetes HPA controller: FailedGetPodsMetric.
- NVIDIA/dcgm-exporter#216 and NVIDIA/DCGM#80 (no GPU_UTIL on MIG instances); #138 (pods
  without an nvidia.com/gpu limit get no pod labels).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA,
    Context,
    Finding,
    HpaEvidence,
    Inventory,
    LiveSnapshot,
    Severity,
    Sighting,
    capitalized,
    code,
    listing,
    related,
    rule_where,
)

ID = "GL804"
NAME = "live-hpa-no-data"
SEVERITY = Severity.ERROR
SCOPE = "hpa"
REQUIRES = "live"  # runs only with --prometheus
STAGES = ("metrics-api",)

# What MIG instances report in place of DCGM_FI_DEV_GPU_UTIL (NVIDIA/DCGM#80).
STAND_IN = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
_EVENT = {"Pods": "FailedGetPodsMetric", "Object": "FailedGetObjectMetric"}


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    live: LiveSnapshot | None = inventory.live
    if live is None:
        return
    for evidence in live.for_hpa(hpa, inventory):
        if evidence.skipped is not None or evidence.usable:
            continue
        metric = evidence.metric
        event = _EVENT.get(metric.type, "FailedGetExternalMetric")
        asked = _asked_for(evidence)
        reason, fix = _why(evidence)
        rendered = f" (rendered: {code(evidence.rendered)})" if evidence.rendered else ""
        yield ctx.finding(
            hpa.manifest,
            metric.name_path,
            f"HPA {hpa.name} gets no value for {metric.name}: the query the adapter sends "
            f"for it returns nothing. {capitalized(rule_where(evidence.rule))} serves it from "
            f"{evidence.series_name}, and its query for {asked} answers nothing, so the HPA "
            f"reports {event} and does not scale: {reason}{rendered}",
            fix,
            related=[
                related(
                    evidence.rule.document,
                    (*evidence.rule.path, "metricsQuery"),
                    "adapter rule that serves the metric",
                )
            ],
        )


def _asked_for(evidence: HpaEvidence) -> str:
    namespace = f"namespace {evidence.namespace}"
    if evidence.metric.type == "Pods":
        if evidence.objects:
            return f"{namespace} and the pods of {evidence.target} ({listing(evidence.objects)})"
        return f"{namespace} and the pods of {evidence.target} ({evidence.pod_names})"
    if evidence.metric.type == "Object":
        return f"{namespace} and {listing(evidence.objects)}"
    return namespace


def _why(evidence: HpaEvidence) -> tuple[str, str]:
    label = evidence.object_label or "pod"
    if evidence.error is not None:
        return f"Prometheus rejects it ({evidence.error})", (
            "# fix the rule's metricsQuery (see GL803 on the adapter rule)"
        )
    if evidence.samples:
        return (
            f"it returns {len(evidence.samples)} series, none with {label} naming one of the "
            f"pods (the metricsQuery drops <<.GroupBy>>; see GL803)",
            "metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'",
        )
    if evidence.metric.type != "Pods":
        return (
            "no series of the metric carries these labels",
            "# compare the rendered query with the series: "
            f"curl -s '<prometheus>/api/v1/series?match[]={evidence.series_name}'",
        )
    return _where_the_pods_are(evidence, label)


def _where_the_pods_are(evidence: HpaEvidence, label: str) -> tuple[str, str]:
    """A Pods metric without data for the HPA's pods: where Prometheus sees them, if at all."""
    sightings = [s for s in evidence.sightings if s.namespace == evidence.namespace]
    in_metric = [s for s in sightings if s.metric == evidence.series_name]
    elsewhere = sorted(
        {s.namespace for s in evidence.sightings if s.namespace} - {evidence.namespace or ""}
    )
    if in_metric:
        return _in_the_metric(evidence, label, in_metric)
    if sightings:
        return _in_other_metrics(evidence, sightings)
    if elsewhere:
        return (
            f"pods named {evidence.pod_names} appear in namespace {listing(elsewhere)}, not in "
            f"{evidence.namespace}",
            f"metadata:\n  namespace: {elsewhere[0]}   # the HPA must live with its pods",
        )
    return (
        f"no series carries a pod named {evidence.pod_names} in any pod label: dcgm-exporter "
        "maps a GPU to a pod only when the container has an nvidia.com/gpu (or "
        "nvidia.com/mig-*) limit and Kubernetes mapping is on; pods that see GPUs through "
        "NVIDIA_VISIBLE_DEVICES get no pod labels",
        "resources:\n  limits:\n    nvidia.com/gpu: 1   # in the GPU container of "
        f"{evidence.target}",
    )


def _in_the_metric(evidence: HpaEvidence, label: str, in_metric: list[Sighting]) -> tuple[str, str]:
    """The metric has the pods: under another label than the rule maps, or filtered out."""
    labels = sorted({s.pod_label for s in in_metric} - {label})
    if labels:
        pod_label = labels[0]
        namespace_label = next(s.namespace_label for s in in_metric if s.pod_label == pod_label)
        namespace_part = (
            f"    {namespace_label}: {{resource: namespace}}\n" if namespace_label else ""
        )
        return (
            f"the pods appear in {evidence.series_name} under the label {pod_label} "
            f"(namespace in {namespace_label or 'no label'}), while the rule maps pods "
            f"through {label}",
            "resources:\n  overrides:\n" + namespace_part + f"    {pod_label}: {{resource: pod}}",
        )
    return (
        f"{evidence.series_name} carries the pods under {label}, but the metricsQuery's "
        "other matchers or functions filter them out",
        "metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'",
    )


def _in_other_metrics(evidence: HpaEvidence, sightings: list[Sighting]) -> tuple[str, str]:
    """Other metrics have the pods (MIG instances do not report every DCGM field)."""
    metrics = sorted({s.metric for s in sightings})
    mig = sorted({s.mig_profile for s in sightings if s.mig_profile})
    if mig:
        stand_in = STAND_IN if STAND_IN in metrics else metrics[0]
        others = [m for m in metrics if m != stand_in]
        return (
            f"the pods run on MIG instances ({', '.join(mig)}), for which dcgm-exporter "
            f"does not report {evidence.series_name}; they do report {stand_in} (and "
            f"{listing(others)})",
            f"# serve the HPA from a metric MIG instances report (a ratio, 0-1):\n"
            f"seriesQuery: '{stand_in}{{exported_pod!=\"\"}}'   # match your pod label\n"
            f'# and set the HPA target on that scale, e.g. averageValue: "600m"',
        )
    return (
        f"the pods appear only in other metrics ({listing(metrics)}), not in "
        f"{evidence.series_name}",
        f"# serve the HPA from a metric the pods report, e.g. seriesQuery: '{metrics[0]}'",
    )
