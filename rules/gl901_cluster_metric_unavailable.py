"""An HPA's custom or external metric is not served by the cluster's metrics APIs.

## What it checks
With ``--cluster``, for each ``Pods``, ``Object`` and ``External`` metric of each HPA, gpulint
asks the metrics API exactly what the HPA controller asks:

* Pods: ``/apis/custom.metrics.k8s.io/v1beta1/namespaces/<ns>/pods/*/<metric>`` with the
  ``labelSelector`` of the target's pods (and ``metricLabelSelector`` for ``metric.selector``);
* Object: ``/apis/custom.metrics.k8s.io/v1beta1/namespaces/<ns>/<resource>/<name>/<metric>``;
* External: ``/apis/external.metrics.k8s.io/v1beta1/namespaces/<ns>/<metric>`` with the
  metric's ``selector``, the name lowercased as the HPA's client sends it.

It reports a metric when no APIService serves that metrics API, when the APIService is
registered but its server does not answer (503), when the API does not know the metric (404),
or when it knows it but returns no value for the HPA's pods or object. Metrics gpulint could
not ask about (a target that is not in the cluster, credentials that may not read the metrics
API) are listed in the notes, not reported. HPAs that KEDA made are reported too: the fix is
on their ScaledObject.

## Why is this bad?
The HPA gets the same answer: its condition becomes ``ScalingActive=False`` with
``FailedGetPodsMetric`` (or ``FailedGetObjectMetric``/``FailedGetExternalMetric``), the event
reads ``unable to get metric ...: the server could not find the metric`` or ``no metrics
returned from custom metrics API``, and the workload never scales on that metric. Every setup
guide ends with a manual ``kubectl get --raw`` for this; gpulint makes it for every HPA.

## Example
```yaml
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: triton, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: triton}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}   # the adapter exposes DCGM_FI_DEV_GPU_UTIL
      target: {type: AverageValue, averageValue: "60"}
```

## Use instead
Use the name the API serves (``kubectl get --raw /apis/custom.metrics.k8s.io/v1beta1``
lists them), or make the adapter serve the name the HPA asks for:
```yaml
rules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
  resources:
    overrides:
      exported_namespace: {resource: namespace}
      exported_pod: {resource: pod}
  name: {matches: ^DCGM_FI_DEV_GPU_UTIL$, as: gpu_utilization}
  metricsQuery: avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
```

## References
- kubernetes pkg/controller/podautoscaler/metrics/client.go and k8s.io/metrics
  pkg/client/custom_metrics (the requests the HPA controller makes).
- kubernetes-sigs/prometheus-adapter docs/walkthrough.md (checking the API with
  ``kubectl get --raw``).
- Kubernetes HPA docs, "Support for custom metrics" and "Appendix: Horizontal Pod
  Autoscaler status conditions".
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA,
    NO_API,
    NOT_FOUND,
    UNAVAILABLE,
    ClusterSnapshot,
    Context,
    Finding,
    HpaMetric,
    Inventory,
    MetricProbe,
    Severity,
    generated_by,
)

ID = "GL901"
NAME = "cluster-metric-unavailable"
SEVERITY = Severity.ERROR
SCOPE = "hpa"
REQUIRES = "cluster"  # runs only with --cluster
STAGES = ("metrics-api",)
PROBES_CLUSTER = True  # cluster mode asks the metrics APIs for it

_API_GROUP = {"custom": "custom.metrics.k8s.io", "external": "external.metrics.k8s.io"}
_CONDITION_REASON = {
    "Pods": "FailedGetPodsMetric",
    "Object": "FailedGetObjectMetric",
    "External": "FailedGetExternalMetric",
}


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    snapshot: ClusterSnapshot | None = inventory.cluster
    if snapshot is None:
        return
    for metric in hpa.metrics:
        probe = snapshot.probe(hpa.namespace, hpa.name, metric.index)
        if probe is None or not probe.broken:
            continue
        yield ctx.finding(
            hpa.manifest,
            metric.name_path,
            _message(hpa, metric, probe),
            _fix(hpa, metric, probe),
        )


def _scaled_object(hpa: HPA) -> str | None:
    """The ScaledObject an HPA was made for by KEDA, if it was."""
    return generated_by(hpa.manifest, "ScaledObject")


def _message(hpa: HPA, metric: HpaMetric, probe: MetricProbe) -> str:
    group = _API_GROUP[probe.api]
    scaled = _scaled_object(hpa)
    made = f" (made by KEDA for ScaledObject {scaled})" if scaled else ""
    head = f"HPA {hpa.name}{made} reads {metric.type} metric {probe.metric}"
    effect = (
        f"; the HPA controller gets the same answer, sets ScalingActive=False "
        f"({_CONDITION_REASON.get(metric.type, 'FailedGetPodsMetric')}) and never scales on it"
    )
    if probe.outcome == NO_API:
        return f"{head}, but no APIService serves {group} in the cluster{effect}"
    if probe.outcome == UNAVAILABLE:
        return (
            f"{head}, but the APIService for {group} is registered and the server behind it "
            f"does not answer (503){effect}"
        )
    if probe.outcome == NOT_FOUND:
        return f"{head}, but {group} does not know it ({probe.detail}){effect}"
    return (
        f"{head}, but {group} returns no value for {probe.subject}: the metric exists, yet "
        f"none of its series map to them{effect}"
    )


def _fix(hpa: HPA, metric: HpaMetric, probe: MetricProbe) -> str:
    check_cmd = f"kubectl get --raw '{probe.request}'" if probe.request else ""
    group = _API_GROUP[probe.api]
    service = f"v1beta1.{group}"
    if probe.outcome == NO_API:
        serves = (
            "prometheus-adapter registers it"
            if probe.api == "custom"
            else "prometheus-adapter with externalRules, or KEDA, registers it (one of them)"
        )
        return (
            f"# no APIService serves {group}: {serves}\n"
            "helm install prometheus-adapter prometheus-community/prometheus-adapter "
            "--namespace monitoring\n"
            f"kubectl get apiservice {service}"
        )
    if probe.outcome == UNAVAILABLE:
        return (
            "# the APIService is registered but its server does not answer: see why, and "
            "check the adapter's pods and logs\n"
            f"kubectl get apiservice {service} -o jsonpath='{{.status.conditions}}'"
        )
    listing = f"kubectl get --raw /apis/{_API_GROUP[probe.api]}/v1beta1"
    if probe.outcome == NOT_FOUND:
        scaled = _scaled_object(hpa)
        if scaled:
            return (
                f"# KEDA serves {probe.metric} only while ScaledObject {scaled} is ready; "
                "see why it is not:\n"
                f"kubectl describe scaledobject -n {hpa.namespace or 'default'} {scaled}"
            )
        return (
            f"# list the names the API serves and use one of them in the HPA:\n{listing}\n"
            "# or make the adapter expose this name, e.g.:\n"
            + _adapter_rule(probe.metric, probe.api)
        )
    if probe.api == "external":
        return (
            f"# see what the API returns for this selector:\n{check_cmd}\n"
            "# the selector's labels and the HPA's namespace must match labels of the series: "
            "drop labels the series lack, or set resources.namespaced: false on the external "
            "rule when the series carry no namespace"
        )
    return (
        f"# see what the API returns for these {'pods' if metric.type == 'Pods' else 'objects'}:\n"
        f"{check_cmd}\n"
        "# the adapter rule must map the series' pod and namespace labels; for dcgm-exporter "
        "scraped with honorLabels: false those are exported_pod and exported_namespace:\n"
        "resources:\n"
        "  overrides:\n"
        "    exported_namespace: {resource: namespace}\n"
        "    exported_pod: {resource: pod}"
    )


def _adapter_rule(metric: str, api: str) -> str:
    if api == "external":
        return (
            "externalRules:\n"
            f"- seriesQuery: '{metric}'\n"
            "  resources:\n"
            "    overrides:\n"
            "      namespace: {resource: namespace}\n"
            f"  name: {{matches: ^{metric}$, as: {metric.lower()}}}\n"
            "  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>})"
        )
    return (
        "rules:\n"
        '- seriesQuery: \'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}\'\n'
        "  resources:\n"
        "    overrides:\n"
        "      exported_namespace: {resource: namespace}\n"
        "      exported_pod: {resource: pod}\n"
        f"  name: {{matches: ^DCGM_FI_DEV_GPU_UTIL$, as: {metric}}}\n"
        "  metricsQuery: avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"
    )
