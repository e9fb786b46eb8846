"""In the cluster, the adapter's Prometheus Service is missing, not ready, or lacks the port.

## What it checks
In cluster mode, the ``--prometheus-url`` of every prometheus-adapter Deployment (and the
``serverAddress`` of KEDA prometheus triggers written as ``<service>.<namespace>...``) is
resolved as cluster DNS resolves it (a bare name in the Deployment's namespace), and the
Service is looked up in what the cluster holds:

* no such Service in that namespace (the Prometheus Services the cluster has are named);
* the Service has no port the URL dials (``http://`` without a port dials 80);
* the Service's EndpointSlices (or Endpoints) list no ready address: Prometheus is not running,
  not ready, or the Service's selector matches none of its pods.

URLs outside the cluster are not judged. The endpoints are read only for the Services the
scrape chain names (``get``/``list`` on ``endpointslices.discovery.k8s.io``, or ``endpoints``).

## Why is this bad?
This is the link behind ``kubectl get --raw /apis/custom.metrics.k8s.io/v1beta1`` answering
``"resources":[]``: the adapter cannot list series, logs "no such host" or "connection
refused" on every relist, and every HPA on a custom or external metric fails. Offline GL603
compares the URL with what the repository defines; the cluster says what actually answers.

## Example
```
--prometheus-url=http://prometheus.monitoring.svc:9090
# the cluster has monitoring/kps-kube-prometheus-stack-prometheus and prometheus-operated
```

## Use instead
```
--prometheus-url=http://kps-kube-prometheus-stack-prometheus.monitoring.svc:9090
```

## References
- Kubernetes docs, "DNS for Services and Pods"; discovery.k8s.io/v1 EndpointSlice
  (``conditions.ready``; the ``kubernetes.io/service-name`` label).
- kubernetes-sigs/prometheus-adapter cmd/adapter/adapter.go (``--prometheus-url``).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    Context,
    EndpointState,
    Finding,
    Inventory,
    ParsedUrl,
    PrometheusUrl,
    ServiceView,
    Severity,
    looks_like_prometheus,
    related,
    url_fix,
)

ID = "GL904"
NAME = "cluster-adapter-prometheus"
SEVERITY = Severity.ERROR
SCOPE = "prometheus-url"
REQUIRES = "cluster"  # runs only with --cluster
STAGES = ("prometheus",)


def check(url: PrometheusUrl, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    cluster = inventory.cluster
    if cluster is None or cluster.states.get("services") != "synced":
        return
    host = url.service
    if url.parsed is None or host is None:
        return
    namespace = host.namespace or url.client_namespace
    if namespace is None:
        return
    services = [s for s in inventory.services_named(host.name, namespace) if s.made_by is None]
    if not services:
        yield _no_service(url, url.parsed, f"{namespace}/{host.name}", namespace, inventory, ctx)
        return
    service = services[0]
    if service.port_number(url.parsed.effective_port) is None:
        yield _no_port(url, url.parsed, namespace, service, ctx)
        return
    if (namespace, service.name) not in cluster.endpoints_read:
        return  # its endpoints could not be read: nothing is known
    state = inventory.endpoints_of(service)
    if state is None or state.ready == 0:
        yield _no_ready_endpoint(url, namespace, service, state, ctx)


def _no_service(
    url: PrometheusUrl,
    parsed: ParsedUrl,
    missing: str,
    namespace: str,
    inventory: Inventory,
    ctx: Context,
) -> Finding:
    """The URL names a Service the cluster does not have: the Prometheus Services it has."""
    candidates = [s for s in inventory.services() if s.made_by is None and looks_like_prometheus(s)]
    shown = ", ".join(
        f"{s.namespace}/{s.name} ({', '.join(str(p.port) for p in s.ports)})"
        for s in candidates[:4]
    )
    best = next((s for s in candidates if s.namespace == namespace), None)
    best = best or (candidates[0] if candidates else None)
    fix = (
        f"{parsed.scheme}://{best.name}.{best.namespace}.svc:"
        f"{best.ports[0].port if best.ports else 9090}{parsed.path}"
        if best is not None
        else "# no Prometheus Service found; list them: kubectl get svc -A | grep -i prometheus"
    )
    return ctx.finding(
        url.document,
        url.path,
        f"{url.client} queries Prometheus at {url.url}, but the cluster has no Service "
        f"{missing}. "
        + (
            f"Its Prometheus Services: {shown}"
            if shown
            else "It has no Service named like a Prometheus"
        ),
        fix,
        related=[related(s.document, (), "Prometheus Service") for s in candidates[:3]],
    )


def _no_port(
    url: PrometheusUrl, parsed: ParsedUrl, namespace: str, service: ServiceView, ctx: Context
) -> Finding:
    ports = ", ".join(p.describe() for p in service.ports) or "none"
    right = service.ports[0].port if service.ports else 9090
    return ctx.finding(
        url.document,
        url.path,
        f"{url.client} queries Prometheus at {url.url}, but Service {namespace}/"
        f"{service.name} has no port {parsed.effective_port} (its ports: {ports})",
        url_fix(url, f"{parsed.scheme}://{service.name}.{namespace}.svc:{right}{parsed.path}"),
        related=[related(service.document, (), "Prometheus Service")],
    )


def _no_ready_endpoint(
    url: PrometheusUrl,
    namespace: str,
    service: ServiceView,
    state: EndpointState | None,
    ctx: Context,
) -> Finding:
    waiting = f" ({state.not_ready} not ready)" if state is not None and state.not_ready else ""
    selector = f" (selector `{service.selector}`)" if service.selector is not None else ""
    return ctx.finding(
        url.document,
        url.path,
        f"{url.client} queries Prometheus at {url.url}, but Service {namespace}/{service.name} "
        f"has no ready endpoint{waiting}: no Prometheus pod answers behind it{selector}",
        f"kubectl -n {namespace} get endpointslices -l kubernetes.io/service-name={service.name}\n"
        f"kubectl -n {namespace} get pods -l "
        + (
            ",".join(f"{k}={v}" for k, v in service.selector.match_labels.items() if v)
            if service.selector is not None
            else "<the Prometheus pods' labels>"
        ),
        related=[related(service.document, (), "Prometheus Service")],
    )
