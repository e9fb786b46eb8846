"""A dcgm-exporter monitor's endpoints, selector or Service do not lead to the exporter's port.

## What it checks
For every dcgm-exporter ServiceMonitor or PodMonitor written out in the unit:

* an endpoint without ``port`` or ``targetPort`` (PodMonitor: ``port``, ``portNumber``,
  ``targetPort``), such as ``endpoints: [{port: metrics}, {interval: 15s}]``;
* a ``port`` name that none of the Services it selects has (or, for a PodMonitor, no container
  port of the exporter has);
* a selector that matches no Service of the unit while the unit has dcgm-exporter's Service or
  DaemonSet where the monitor looks (a PodMonitor: no exporter pod);
* a Service it selects whose ``spec.selector`` matches no exporter pod of the unit;
* a Service port whose ``targetPort`` (by number, or by name) is not a container port of the
  exporter behind it.

Services and DaemonSets that gpu-operator or the dcgm-exporter chart make count as in the
unit (gpu-operator: Service ``nvidia-dcgm-exporter``, port ``gpu-metrics`` 9400, pods
``app: nvidia-dcgm-exporter`` with container port ``metrics`` 9400).

## Why is this bad?
Prometheus Operator filters the Services' endpoints by the named port; a name that does not
exist leaves the job without targets, and a Service that selects no pod has no endpoints.
An endpoint without any port keeps every port of every endpoint, as a job of its own: next to
an endpoint that names the port, dcgm-exporter is scraped twice and every GPU series exists
twice (``sum`` over them doubles). A wrong ``targetPort`` makes every scrape fail with
"connection refused". Either way the adapter has no (or wrong) GPU series.

## Example
```yaml
spec:
  selector:
    matchLabels: {app: nvidia-dcgm-exporter}
  endpoints:
  - port: metrics      # gpu-operator's Service names it gpu-metrics
  - interval: 15s      # no port: every port, a second time
```

## Use instead
```yaml
spec:
  selector:
    matchLabels: {app: nvidia-dcgm-exporter}
  endpoints:
  - port: gpu-metrics
    interval: 15s
```

## References
- prometheus-operator pkg/prometheus/promcfg.go (the ``keep`` relabeling on
  ``__meta_kubernetes_endpoint_port_name`` only when ``port`` is set; one job
  ``serviceMonitor/<ns>/<name>/<index>`` per endpoint), pkg/apis/monitoring/v1/types.go
  ``Endpoint``.
- NVIDIA/gpu-operator assets/state-dcgm-exporter/0400_service.yaml, 0800_daemonset.yaml.
- Kubernetes core/v1 ``ServicePort.targetPort`` (a number or a container port name).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Monitor, Severity, endpoint_problems

ID = "GL602"
NAME = "scrape-endpoint-mismatch"
SEVERITY = Severity.ERROR
SCOPE = "monitor"
STAGES = ("service", "scrape")


def check(monitor: Monitor, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    for problem in endpoint_problems(monitor, inventory):
        yield ctx.finding(
            problem.document, problem.path, problem.message, problem.fix, related=problem.related
        )
