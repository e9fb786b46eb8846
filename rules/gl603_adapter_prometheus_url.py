"""The adapter's Prometheus URL names a Service the unit does not create, or a wrong port.

## What it checks
The URL prometheus-adapter queries: its chart values (``prometheus.url`` with
``prometheus.port``, 9090 by default, and ``prometheus.path``, put together as the chart does)
or a Deployment's ``--prometheus-url`` argument; and the ``serverAddress`` of KEDA
``prometheus`` triggers, which KEDA queries the same way. When the host is an in-cluster
Service name (``<service>.<namespace>.svc[.cluster.local]``, ``<service>.<namespace>``,
``<service>``), it is compared with the Prometheus Services the unit defines:
kube-prometheus-stack's ``<fullname>-prometheus`` (named as the chart names it from the release
name, ``nameOverride`` and ``fullnameOverride``), ``prometheus-operated`` of every Prometheus
object and of the stack, and Services written out whose name says Prometheus or Thanos Query.
It reports:

* a URL no HTTP client can use (two ports: ``prometheus.url`` with a port plus the chart's
  ``prometheus.port``; no scheme);
* a Service the unit does not create, when the unit does create a Prometheus Service;
* a name no release of kube-prometheus-stack can give (``<release>-kube-prom-prometheus`` for
  a release whose name is not 16 characters long);
* a port that Service does not expose (``http://`` without a port dials 80);
* a namespace other than the one the Service is in.

Hosts outside the cluster (other domains, IP addresses) and templated values are not judged.
In cluster mode GL904 checks the URL against the cluster instead.

## Why is this bad?
The adapter lists series at start-up and on every relist; when it cannot reach Prometheus it
logs "unable to update list of all metrics ... no such host" (or "connection refused") and
serves nothing: ``kubectl get --raw /apis/custom.metrics.k8s.io/v1beta1`` shows
``"resources":[]`` and every HPA on a custom metric fails. kube-prometheus-stack's Service name
depends on the release name: a guide's ``<release>-kube-prom-prometheus`` is right only for
16-character release names (the fullname is cut at 26 characters), so copying it gives an
adapter that never reaches Prometheus.

## Example
```yaml
# kube-prometheus-stack installed as release kps in namespace monitoring
prometheus:
  url: http://kps-kube-prom-prometheus.monitoring.svc
  port: 9090
```

## Use instead
```yaml
prometheus:
  url: http://kps-kube-prometheus-stack-prometheus.monitoring.svc
  port: 9090
```

## References
- prometheus-community/helm-charts charts/kube-prometheus-stack templates/_helpers.tpl
  (``kube-prometheus-stack.fullname``: ``trunc 26``), templates/prometheus/service.yaml.
- charts/prometheus-adapter templates/deployment.yaml (``--prometheus-url`` from ``url``,
  ``port``, ``path``), values.yaml (``port: 9090``).
- prometheus-operator pkg/prometheus/server/operator.go: the governing Service
  ``prometheus-operated`` (port 9090).
- Kubernetes docs, "DNS for Services and Pods".
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, PrometheusUrl, Severity, url_problem

ID = "GL603"
NAME = "adapter-prometheus-url"
SEVERITY = Severity.ERROR
SCOPE = "prometheus-url"
STAGES = ("prometheus",)


def check(url: PrometheusUrl, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if inventory.cluster is not None:
        return  # cluster mode: GL904 asks the API server
    problem = url_problem(url, inventory)
    if problem is not None:
        yield ctx.finding(
            problem.document, problem.path, problem.message, problem.fix, related=problem.related
        )
