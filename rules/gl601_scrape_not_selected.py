"""No Prometheus of the unit selects dcgm-exporter's ServiceMonitor or PodMonitor.

## What it checks
Every dcgm-exporter monitor of the unit: ServiceMonitors and PodMonitors written out (their
name, labels or selector say dcgm), and the ServiceMonitor that gpu-operator values
(``dcgmExporter.serviceMonitor.enabled: true``, or its ClusterPolicy) or dcgm-exporter chart
values make, with the labels those charts give it. Against every Prometheus of the unit:

* a Prometheus Operator ``Prometheus`` object: its ``serviceMonitorSelector``
  (``podMonitorSelector``) must match the monitor's labels, a missing (null) selector matches
  nothing, and its namespace selector (missing: its own namespace only) must match the
  monitor's namespace;
* kube-prometheus-stack values: with ``prometheus.prometheusSpec.serviceMonitorSelector`` left
  empty and ``serviceMonitorSelectorNilUsesHelmValues`` true (the default) the chart selects
  only monitors labelled ``release: <its release name>``. The release name is known when a
  Flux HelmRelease, an Argo CD Application or a helmfile installs the values; when it is not,
  a monitor without any ``release`` label is still certainly left out.

A finding when at least one Prometheus is in the unit and none selects the monitor. Selectors
that depend on what gpulint does not know (a namespace's labels, a templated value) are not
judged.

## Why is this bad?
Prometheus Operator only turns selected monitors into scrape jobs. An unselected
dcgm-exporter monitor is silently ignored: no ``DCGM_FI_*`` series exists, the adapter's
rules discover nothing, and the HPA reports ``unable to get metric ...: no metrics returned
from custom metrics API`` (or "the server could not find the metric"). The classic case is
copying half of a guide: gpu-operator's ``additionalLabels: {release: ...}`` without the
stack's ``serviceMonitorSelectorNilUsesHelmValues: false``, or the reverse with a release
name that differs.

## Example
```yaml
# kube-prometheus-stack values (release kps): the default selector, release=kps
prometheus:
  prometheusSpec: {}
---
# gpu-operator values
dcgmExporter:
  serviceMonitor:
    enabled: true          # labels: app=nvidia-dcgm-exporter only
```

## Use instead
```yaml
dcgmExporter:
  serviceMonitor:
    enabled: true
    additionalLabels:
      release: kps
# or in the kube-prometheus-stack values:
prometheus:
  prometheusSpec:
    serviceMonitorSelectorNilUsesHelmValues: false
```

## References
- prometheus-operator pkg/apis/monitoring/v1/prometheus_types.go: serviceMonitorSelector
  (empty: all, null: none), serviceMonitorNamespaceSelector (null: own namespace).
- prometheus-community/helm-charts charts/kube-prometheus-stack
  templates/prometheus/prometheus.yaml and values.yaml
  (``serviceMonitorSelectorNilUsesHelmValues: true``).
- NVIDIA/gpu-operator assets/state-dcgm-exporter/0500_service_monitor.yaml and
  controllers/object_controls.go (``additionalLabels``); NVIDIA/dcgm-exporter
  deployment/templates/service-monitor.yaml.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Monitor, Severity, selection_problem

ID = "GL601"
NAME = "scrape-not-selected"
SEVERITY = Severity.ERROR
SCOPE = "monitor"
STAGES = ("scrape",)


def check(monitor: Monitor, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    problem = selection_problem(monitor, inventory)
    if problem is not None:
        yield ctx.finding(
            problem.document, problem.path, problem.message, problem.fix, related=problem.related
        )
