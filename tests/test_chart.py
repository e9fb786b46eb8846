"""deploy/chart: the Helm chart of gpulint's admission webhook, rendered by the real helm.

The chart is linted (``helm lint --strict``) and rendered (``helm template``) with its
defaults and with sets of values that change every switch it has. Every object rendered is
validated against the Kubernetes JSON schemas bundled by kubernetes-validate (cert-manager's
and Prometheus Operator's kinds, which those schemas do not have, against the fields the chart
writes); the Deployment's arguments are parsed as ``gpulint serve`` parses them; the RBAC is
compared with what that ``gpulint serve`` lists and watches; the webhook's matchConditions are
evaluated by a CEL interpreter (cel-python) on the objects the API server would send; the
self-signed certificate is served by ``gpulint serve`` and verified as the API server verifies
it, and an upgrade against an API server that holds it keeps it; gpulint serve with the
arguments of a render syncs against an API server whose RBAC is that render's. The chart with
its defaults says what the kustomize install (deploy/cert-manager) says, and ``gpulint lint``
of the renders and of the whole deploy/ directory finds nothing.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import celpy
import kubernetes_validate
import pytest
import yaml
from celpy import celtypes
from gpulint.webhook.evaluator import EVALUATED_KINDS
from gpulint.webhook.options import ServeOptions, add_serve_options, options_from_args

from gpulint.cluster.kinds import (
    ADAPTER_LABEL,
    ADAPTER_NAMES,
    AdapterConfigMapSelector,
    watched_kinds,
)
from gpulint.input.document import Manifest
from gpulint.kinds.registry import spec_of
from gpulint.kinds.workload import (
    GPU_RESOURCE_NAMES,
    GPU_RESOURCE_PREFIXES,
    GpuNames,
    pod_templates,
)

from .kubefake import FakeCluster, KubeFake, Resource
from .tools import helm_command, kustomize_build, kustomize_command
from .webhook.harness import Certificates, Webhook, admission_review, free_port
from .webhook.test_deploy import grants_needed, role_grants, write_test_certificate

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "chart"
# `helm install gpulint deploy/chart -n gpulint`: the names the kustomize install uses too.
RELEASE = NAMESPACE = "gpulint"
KUBERNETES_VERSION = "1.30.0"  # the first with matchConditions in admissionregistration/v1
OLDER_KUBERNETES = "1.25.0"  # the oldest kubernetes-validate has schemas for
GPU_LIMIT = {"nvidia.com/gpu": "1"}
# What make-certificate.sh writes beside the without-cert-manager overlay (git ignores them).
CERTIFICATE_FILES = ("tls.crt", "tls.key", "ca.crt", "ca.key", "ca.srl")

# Values that change every switch of the chart, each set rendered and checked whole.
VALUES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "cert-manager": {"tls": {"mode": "cert-manager"}},
    "cert-manager-issuer": {
        "tls": {
            "mode": "cert-manager",
            "certManager": {"issuerRef": {"kind": "ClusterIssuer", "name": "corporate-ca"}},
        }
    },
    "older-cluster": {"webhook": {"matchConditions": {"enabled": False}}},
    "prometheus": {
        "prometheus": {
            "url": "https://prometheus.monitoring.svc:9091",
            "headers": {"X-Scope-OrgID": "tenant-1"},
            "headersFromSecrets": [
                {"name": "Authorization", "secretName": "prometheus-token", "secretKey": "header"}
            ],
            "timeout": 20,
            "refresh": 30,
            "lookback": "12h",
            "minHistory": "50%",
        },
        "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    },
    "highly-available": {
        "replicas": 3,
        "podAntiAffinity": "required",
        "podDisruptionBudget": {"minAvailable": 2},
        "webhook": {"failurePolicy": "Fail", "timeoutSeconds": 10},
        "serve": {"deadline": 8, "denyOn": "warning", "shutdownTimeout": 15},
        "image": {
            "repository": "registry.example.com/gpulint",
            "tag": "0.1.0",
            "digest": "sha256:" + "ab" * 32,
        },
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "200m"}},
    },
    "one-namespace": {
        "serve": {"namespace": "team-a", "select": ["GL1", "GL4"], "ignore": ["GL102"]},
        "adapter": {
            "configMapNamespaces": ["monitoring"],
            "configMap": "metrics/custom-adapter",
            "configMapLabels": {"team": "platform"},
        },
        "config": {"gpu-resources": ["example.com/gpu", "vendor.example/*"]},
        "webhook": {"excludedNamespaces": ["kube-system", "kube-public"]},
    },
    "all-namespaces": {"adapter": {"configMapNamespaces": ["*"]}},
    "no-cluster": {"serve": {"noCluster": True}},
    "client-auth": {
        "clientAuth": {
            "enabled": True,
            "caSecret": "apiserver-client-ca",
            "caKey": "ca.pem",
            "commonName": "kube-apiserver",
        },
        "networkPolicy": {"apiServer": {"cidrs": ["10.0.0.0/28", "fd00::/120"]}},
    },
    "open-network": {
        "networkPolicy": {
            "egress": {"enabled": False},
            "ingressFrom": [{"ipBlock": {"cidr": "10.0.0.0/16"}}],
        },
        "podDisruptionBudget": {"enabled": False},
        "topologySpreadConstraints": [],
        "podAntiAffinity": "none",
    },
}
KUBE_VERSIONS = {"older-cluster": OLDER_KUBERNETES}
CLUSTER_READING = [
    name for name, values in VALUES.items() if not values.get("serve", {}).get("noCluster")
]


class Rendered(NamedTuple):
    name: str
    values: dict[str, Any]
    objects: list[dict[str, Any]]
    text: str

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str) -> dict[str, Any]:
        (found,) = self.all(kind)
        return found

    def value(self, *path: str) -> Any:
        """A value as the chart reads it: the set's merged over the chart's defaults, as Helm
        merges them."""
        node: Any = merged(DEFAULTS, self.values)
        for key in path:
            node = node[key]
        return node

    @property
    def container(self) -> dict[str, Any]:
        (container,) = self.one("Deployment")["spec"]["template"]["spec"]["containers"]
        return container


DEFAULTS: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
DEFAULTS_APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


def merged(base: Any, over: Any) -> Any:
    """``over`` laid over ``base``: maps merge key by key, anything else replaces."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return copy.deepcopy(over)
    result = copy.deepcopy(base)
    for key, value in over.items():
        result[key] = merged(base.get(key), value)
    return result


def helm_environment(home: Path) -> dict[str, str]:
    """Helm's cache, configuration and data in ``home``, never the user's."""
    return {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def run_helm(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*helm_command(), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=helm_environment(home),
    )


def values_file(directory: Path, name: str, values: dict[str, Any]) -> Path:
    path = directory / f"{name}.values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def render(home: Path, name: str, values: dict[str, Any], *extra: str) -> Rendered:
    version = KUBE_VERSIONS.get(name, KUBERNETES_VERSION)
    result = run_helm(
        home,
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--kube-version",
        version,
        "--values",
        str(values_file(home, name, values)),
        *extra,
    )
    assert result.returncode == 0, result.stderr
    objects = [d for d in yaml.safe_load_all(result.stdout) if d]
    return Rendered(name, values, objects, result.stdout)


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm")


@pytest.fixture(scope="module")
def renders(helm_home: Path) -> dict[str, Rendered]:
    return {name: render(helm_home, name, values) for name, values in VALUES.items()}


@pytest.fixture(params=list(VALUES))
def rendered(request: pytest.FixtureRequest, renders: dict[str, Rendered]) -> Rendered:
    return renders[request.param]


@pytest.fixture(params=CLUSTER_READING)
def reading(request: pytest.FixtureRequest, renders: dict[str, Rendered]) -> Rendered:
    """A render whose webhook reads the cluster (not serve.noCluster)."""
    return renders[request.param]


def serve_options(rendered: Rendered) -> ServeOptions:
    """The container's arguments as gpulint serve reads them (OptionError if it refuses).
    ``$(VAR)`` is what the kubelet replaces with the variable's value; any value does."""
    parser = argparse.ArgumentParser()
    add_serve_options(parser)
    args = [a.replace("$(", "").replace(")", "") for a in rendered.container["args"]]
    return options_from_args(parser.parse_args(args))


# --- helm lint and the Kubernetes schemas ------------------------------------------------------


@pytest.mark.parametrize("name", list(VALUES))
def test_helm_lint_strict_passes(helm_home: Path, name: str) -> None:
    result = run_helm(
        helm_home,
        "lint",
        "--strict",
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--kube-version",
        KUBE_VERSIONS.get(name, KUBERNETES_VERSION),
        "--values",
        str(values_file(helm_home, f"lint-{name}", VALUES[name])),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def _cert_manager_structure(obj: dict[str, Any]) -> None:
    """cert-manager.io/v1 Issuer and Certificate: the fields the chart writes."""
    assert obj["apiVersion"] == "cert-manager.io/v1"
    spec = obj["spec"]
    if obj["kind"] == "Issuer":
        assert spec == {"selfSigned": {}}
        return
    assert obj["kind"] == "Certificate"
    assert set(spec) == {
        "secretName",
        "dnsNames",
        "duration",
        "renewBefore",
        "privateKey",
        "issuerRef",
    }
    assert all(isinstance(n, str) and n for n in spec["dnsNames"])
    for duration in ("duration", "renewBefore"):
        assert spec[duration].endswith("h") and int(spec[duration][:-1]) > 0
    assert spec["privateKey"] == {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"}
    assert spec["issuerRef"]["kind"] in ("Issuer", "ClusterIssuer")
    assert isinstance(spec["issuerRef"]["name"], str)


def _service_monitor_structure(obj: dict[str, Any]) -> None:
    """monitoring.coreos.com/v1 ServiceMonitor: the fields the chart writes."""
    assert obj["apiVersion"] == "monitoring.coreos.com/v1"
    spec = obj["spec"]
    assert set(spec) == {"selector", "endpoints"}
    assert set(spec["selector"]) == {"matchLabels"}
    (endpoint,) = spec["endpoints"]
    assert set(endpoint) == {"port", "path", "scheme", "interval", "tlsConfig"}
    assert endpoint["scheme"] == "https"
    assert set(endpoint["tlsConfig"]) == {"serverName", "ca"}
    assert set(endpoint["tlsConfig"]["ca"]["secret"]) == {"name", "key"}


def test_every_rendered_object_validates_against_the_kubernetes_schemas(
    rendered: Rendered,
) -> None:
    version = KUBE_VERSIONS.get(rendered.name, KUBERNETES_VERSION)
    assert rendered.objects
    for obj in rendered.objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE
        if obj["apiVersion"].startswith("cert-manager.io/"):
            _cert_manager_structure(obj)
        elif obj["apiVersion"].startswith("monitoring.coreos.com/"):
            _service_monitor_structure(obj)
        else:
            kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize(
    ("values", "kube_version", "said"),
    [
        ({"serve": {"deadline": 5}}, KUBERNETES_VERSION, "serve.deadline (5 s) must be below"),
        ({}, OLDER_KUBERNETES, "webhook.matchConditions.enabled needs Kubernetes 1.30"),
        (
            {"serve": {"noCluster": True}, "prometheus": {"url": "http://prometheus:9090"}},
            KUBERNETES_VERSION,
            "prometheus.url needs the cluster caches",
        ),
        (
            {"serve": {"shutdownDelay": 15}},
            KUBERNETES_VERSION,
            "must fit in terminationGracePeriodSeconds",
        ),
        ({"webhook": {"failurePolicy": "Sometimes"}}, KUBERNETES_VERSION, "webhook.failurePolicy"),
        ({"webhook": {"timeoutSeconds": 31}}, KUBERNETES_VERSION, "webhook.timeoutSeconds"),
        ({"replica": 3}, KUBERNETES_VERSION, "Additional property replica is not allowed"),
        ({"tls": {"mode": "manual"}}, KUBERNETES_VERSION, "tls.mode"),
        ({"replicas": 1}, KUBERNETES_VERSION, "a node drain could never evict"),
        ({"adapter": {"configMap": "Not A Name"}}, KUBERNETES_VERSION, "adapter.configMap"),
    ],
)
def test_values_the_webhook_cannot_use_are_refused_with_the_value_to_change(
    helm_home: Path, values: dict[str, Any], kube_version: str, said: str
) -> None:
    result = run_helm(
        helm_home,
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--kube-version",
        kube_version,
        "--values",
        str(values_file(helm_home, "refused", values)),
    )
    assert result.returncode != 0
    assert said in result.stderr, result.stderr


# --- what the webhook may read ----------------------------------------------------------------


def test_rbac_grants_exactly_what_the_webhook_reads(reading: Rendered) -> None:
    """Read-only grants, bound to the webhook's ServiceAccount, for exactly the streams gpulint
    serve with the rendered arguments lists and watches: cluster-wide ones in the ClusterRole,
    the others in a Role of the namespace they are read in."""
    options = serve_options(reading)
    adapter = AdapterConfigMapSelector.parse(
        options.adapter_configmap, options.adapter_configmap_selector
    )
    needed = grants_needed(watched_kinds(adapter, options.configmap_namespaces), options.namespace)
    needed_everywhere = {g for g in needed if g[0] is None}
    needed_in = needed - needed_everywhere
    account = reading.one("ServiceAccount")["metadata"]
    subject = {"kind": "ServiceAccount", "name": account["name"], "namespace": NAMESPACE}

    cluster_roles = reading.all("ClusterRole")
    everywhere = set().union(*(role_grants(r) for r in cluster_roles))
    assert everywhere == needed_everywhere
    bindings = reading.all("ClusterRoleBinding")
    assert len(bindings) == len(cluster_roles) == (1 if needed_everywhere else 0)
    for binding, role in zip(bindings, cluster_roles, strict=True):
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        }
        assert binding["subjects"] == [subject]
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in reading.all("Role")}
    assert set().union(*(role_grants(role) for role in roles.values())) == needed_in
    bound = set()
    for role_binding in reading.all("RoleBinding"):
        namespace = role_binding["metadata"]["namespace"]
        assert role_binding["roleRef"]["kind"] == "Role"
        assert role_binding["subjects"] == [subject]
        bound.add((namespace, role_binding["roleRef"]["name"]))
    assert bound == set(roles)


def test_knatives_config_autoscaler_is_granted_by_name_unless_turned_off(
    renders: dict[str, Rendered], helm_home: Path
) -> None:
    """One Role in knative-serving names config-autoscaler; with readConfigAutoscaler false
    (a cluster without Knative, hence without the namespace) there is none."""
    by_default = [
        r
        for r in renders["defaults"].all("Role")
        if r["metadata"]["namespace"] == ("knative-serving")
    ]
    assert [rule["resourceNames"] for role in by_default for rule in role["rules"]] == [
        ["config-autoscaler"]
    ]
    off = render(helm_home, "no-knative", {"knative": {"readConfigAutoscaler": False}})
    assert "knative-serving" not in {o["metadata"].get("namespace") for o in off.objects}


def test_without_the_cluster_there_is_no_rbac_and_no_token(renders: dict[str, Rendered]) -> None:
    rendered = renders["no-cluster"]
    assert serve_options(rendered).no_cluster is True
    kinds = {o["kind"] for o in rendered.objects}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    assert rendered.one("ServiceAccount")["automountServiceAccountToken"] is False
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (egress,) = [p for p in rendered.all("NetworkPolicy") if "Egress" in p["spec"]["policyTypes"]]
    ports = {(p["protocol"], p["port"]) for r in egress["spec"]["egress"] for p in r["ports"]}
    assert ports == {("UDP", 53), ("TCP", 53)}  # no API server to reach


# --- what the API server sends it -------------------------------------------------------------


def test_the_webhook_configuration_sends_the_evaluated_kinds_as_the_values_say(
    rendered: Rendered,
) -> None:
    configuration = rendered.one("ValidatingWebhookConfiguration")
    service = rendered.one("Service")
    kinds = {(s.group, s.plural): s.kind for s in watched_kinds()}
    excluded = {*rendered.value("webhook", "excludedNamespaces"), NAMESPACE}
    conditions = rendered.value("webhook", "matchConditions", "enabled")
    sent: set[tuple[str, str]] = set()
    for webhook in configuration["webhooks"]:
        assert webhook["failurePolicy"] == rendered.value("webhook", "failurePolicy")
        assert webhook["timeoutSeconds"] == rendered.value("webhook", "timeoutSeconds")
        assert webhook["sideEffects"] == "None"
        assert webhook["admissionReviewVersions"] == ["v1"]
        assert webhook["matchPolicy"] == "Equivalent"
        (expression,) = webhook["namespaceSelector"]["matchExpressions"]
        assert expression["key"] == "kubernetes.io/metadata.name"
        one_namespace = rendered.value("serve", "namespace")
        if one_namespace and webhook["name"] != "adapter-config.gpulint.dev":
            # gpulint knows that namespace alone: objects elsewhere are not sent.
            assert (expression["operator"], expression["values"]) == ("In", [one_namespace])
        else:
            assert expression["operator"] == "NotIn"
            assert set(expression["values"]) == excluded
        reference = webhook["clientConfig"]["service"]
        assert reference == {
            "name": service["metadata"]["name"],
            "namespace": service["metadata"]["namespace"],
            "path": "/validate",
            "port": service["spec"]["ports"][0]["port"],
        }
        for rule in webhook["rules"]:
            assert rule["operations"] == ["CREATE", "UPDATE"]
            assert rule["scope"] == "Namespaced"
            sent |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
        assert ("matchConditions" in webhook) == (
            conditions and webhook["name"] != "scaling.gpulint.dev"
        )
    # Watched, never judged: ResourceClaims (what pods name) and PodDisruptionBudgets (what a
    # VerticalPodAutoscaler may evict, GL112).
    assert set(kinds) - sent == {
        ("resource.k8s.io", "resourceclaims"),
        ("policy", "poddisruptionbudgets"),
    }
    assert {(g, kinds[g, r]) for g, r in sent if r != "configmaps"} == set(EVALUATED_KINDS)
    (adapter,) = [w for w in configuration["webhooks"] if w["name"] == "adapter-config.gpulint.dev"]
    if conditions:
        assert "objectSelector" not in adapter
    else:
        labels = rendered.value("adapter", "configMapLabels") or {
            "app.kubernetes.io/name": "prometheus-adapter"
        }
        assert adapter["objectSelector"] == {"matchLabels": labels}
    assert serve_options(rendered).deadline < rendered.value("webhook", "timeoutSeconds")


# --- the matchConditions, evaluated ------------------------------------------------------------

CEL = celpy.Environment()


def conditions_hold(webhook: dict[str, Any], review: dict[str, Any]) -> bool:
    """Whether every matchCondition of ``webhook`` is true for the review's request, as the
    API server evaluates them. An expression that does not compile, or fails or gives
    something other than a bool on this request, fails the test: the API server would apply
    failurePolicy to the request instead."""
    request = review["request"]
    activation = {
        "object": celpy.json_to_cel(request["object"]),
        "oldObject": celpy.json_to_cel(request["oldObject"]),
        "request": celpy.json_to_cel(request),
    }
    for condition in webhook.get("matchConditions", []):
        program = CEL.program(CEL.compile(condition["expression"]))
        result = program.evaluate(activation)
        assert isinstance(result, celtypes.BoolType), (condition["name"], result)
        if not result:
            return False
    return True


def sent_to_gpulint(
    configuration: dict[str, Any],
    obj: dict[str, Any],
    old: dict[str, Any] | None = None,
) -> bool:
    """Whether the API server calls one of the webhooks for this CREATE (or UPDATE from
    ``old``): a rule matches the object's group and resource, and the matchConditions hold.
    (Namespace and object selectors aside: the objects here are in a namespace sent.)"""
    spec = spec_of(obj["apiVersion"], obj["kind"])
    assert spec is not None
    group = obj["apiVersion"].rpartition("/")[0]
    review = admission_review(obj, "UPDATE" if old is not None else "CREATE", old=old)
    review["request"]["resource"]["resource"] = spec.plural
    for webhook in configuration["webhooks"]:
        matches = any(
            group in rule["apiGroups"] and spec.plural in rule["resources"]
            for rule in webhook["rules"]
        )
        selector = webhook.get("objectSelector", {}).get("matchLabels", {})
        labelled = [o for o in (obj, old) if o is not None]
        selected = not selector or any(
            selector.items() <= o["metadata"].get("labels", {}).items() for o in labelled
        )
        if matches and selected and conditions_hold(webhook, review):
            return True
    return False


def pod_template_object(
    kind: str = "Deployment",
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    claims: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": containers or [{"name": "app", "image": "app:1"}]}
    if init_containers is not None:
        pod["initContainers"] = init_containers
    if claims is not None:
        pod["resourceClaims"] = claims
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "app", "namespace": "team-a"},
        "spec": {
            "selector": {"matchLabels": {"app": "app"}},
            "template": {"metadata": {"labels": {"app": "app"}}, "spec": pod},
        },
    }


def container(limits: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"name": "app", "image": "app:1", **extra}
    if limits is not None:
        found["resources"] = {"limits": limits, "requests": {"cpu": "1"}}
    return found


# (name, object, whether the API server sends it with the chart's default values)
WORKLOADS: list[tuple[str, dict[str, Any], bool]] = [
    ("gpu-deployment", pod_template_object(containers=[container(GPU_LIMIT)]), True),
    (
        "gpu-statefulset",
        pod_template_object("StatefulSet", containers=[container({"amd.com/gpu": "2"})]),
        True,
    ),
    (
        "mig-slice",
        pod_template_object(containers=[container({"nvidia.com/mig-1g.5gb": "1"})]),
        True,
    ),
    (
        "shared-gpu",
        pod_template_object(containers=[container({"nvidia.com/gpu.shared": "1"})]),
        True,
    ),
    ("intel-gpu", pod_template_object(containers=[container({"gpu.intel.com/i915": "1"})]), True),
    (
        "gpu-in-an-init-container",
        pod_template_object(containers=[container()], init_containers=[container(GPU_LIMIT)]),
        True,
    ),
    (
        "gpu-in-the-second-container",
        pod_template_object(containers=[container({"cpu": "1"}), container(GPU_LIMIT)]),
        True,
    ),
    (
        "dra-claim",
        pod_template_object(
            containers=[container(resources={"claims": [{"name": "gpu"}]})],
            claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        ),
        True,
    ),
    ("cpu-only", pod_template_object(containers=[container({"cpu": "2", "memory": "4Gi"})]), False),
    ("no-resources", pod_template_object(), False),
    ("empty-resources", pod_template_object(containers=[container(resources={})]), False),
    ("empty-claims", pod_template_object(claims=[]), False),
    ("no-template-spec", {**pod_template_object(), "spec": {"template": {}}}, False),
    (
        "custom-resource",
        pod_template_object(containers=[container({"example.com/gpu": "1"})]),
        False,
    ),
]


@pytest.mark.parametrize(("name", "obj", "expected"), WORKLOADS, ids=[w[0] for w in WORKLOADS])
def test_workloads_are_sent_when_they_ask_for_gpus(
    renders: dict[str, Rendered], name: str, obj: dict[str, Any], expected: bool
) -> None:
    configuration = renders["defaults"].one("ValidatingWebhookConfiguration")
    assert sent_to_gpulint(configuration, obj) is expected
    # Never less than what gpulint itself counts as a GPU workload (DRA claims are sent
    # whatever their device class, which only gpulint can look up).
    if any(t.gpu_requests(GpuNames()) for t in pod_templates(Manifest(obj, "admitted.yaml"))):
        assert expected
    # Without matchConditions every workload is sent.
    older = renders["older-cluster"].one("ValidatingWebhookConfiguration")
    assert sent_to_gpulint(older, obj) is True


def test_every_gpu_resource_gpulint_knows_is_sent(renders: dict[str, Rendered]) -> None:
    """The chart's list follows gpulint's (gpulint.kinds.workload): a name added there and not in
    the chart's matchConditions would leave such workloads unchecked."""
    configuration = renders["defaults"].one("ValidatingWebhookConfiguration")
    resources = [*GPU_RESOURCE_NAMES, *(f"{prefix}any" for prefix in GPU_RESOURCE_PREFIXES)]
    for resource in resources:
        obj = pod_template_object(containers=[container({resource: "1"})])
        assert sent_to_gpulint(configuration, obj) is True, resource


def test_a_workload_that_drops_its_gpus_is_sent_and_one_that_never_had_any_is_not(
    renders: dict[str, Rendered],
) -> None:
    configuration = renders["defaults"].one("ValidatingWebhookConfiguration")
    gpu = pod_template_object(containers=[container(GPU_LIMIT)])
    cpu = pod_template_object(containers=[container({"cpu": "2"})])
    assert sent_to_gpulint(configuration, cpu, old=gpu) is True
    assert sent_to_gpulint(configuration, gpu, old=cpu) is True
    assert sent_to_gpulint(configuration, cpu, old=copy.deepcopy(cpu)) is False


def test_the_configured_gpu_resources_are_sent_too(renders: dict[str, Rendered]) -> None:
    rendered = renders["one-namespace"]
    configuration = rendered.one("ValidatingWebhookConfiguration")
    extra = rendered.value("config", "gpu-resources")
    for resource, expected in [
        ("example.com/gpu", True),
        ("vendor.example/a100", True),
        ("nvidia.com/gpu", True),
        ("example.com/gpus", False),
        ("vendor.example", False),
    ]:
        obj = pod_template_object(containers=[container({resource: "1"})])
        assert sent_to_gpulint(configuration, obj) is expected, resource
        templates = pod_templates(Manifest(obj, "admitted.yaml"))
        assert bool(any(t.gpu_requests(GpuNames(extra)) for t in templates)) is expected


def configmap(
    name: str, namespace: str = "monitoring", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {}}


_LABEL_KEY, _, _LABEL_VALUE = ADAPTER_LABEL.partition("=")
CONFIGMAPS = [
    *(configmap(name, "kube-monitoring") for name in ADAPTER_NAMES),
    configmap("anything", labels={_LABEL_KEY: _LABEL_VALUE}),
    configmap("anything", labels={"app.kubernetes.io/name": "grafana"}),
    configmap("kube-root-ca.crt", "team-a"),
    configmap("custom-adapter", "metrics"),
    configmap("custom-adapter", "monitoring"),
    configmap("rules", "metrics", labels={"team": "platform"}),
    configmap("rules", "monitoring", labels={"team": "platform", "app": "x"}),
    configmap("rules", "monitoring", labels={"team": "ml"}),
]


@pytest.mark.parametrize("name", ["defaults", "one-namespace"])
def test_configmaps_are_sent_when_gpulint_reads_them_as_the_adapter_config(
    renders: dict[str, Rendered], name: str
) -> None:
    """The matchConditions and gpulint's own AdapterConfigMapSelector agree on every
    ConfigMap: names, labels and the namespace of adapter.configMap NAMESPACE/NAME."""
    rendered = renders[name]
    configuration = rendered.one("ValidatingWebhookConfiguration")
    options = serve_options(rendered)
    selector = AdapterConfigMapSelector.parse(
        options.adapter_configmap, options.adapter_configmap_selector
    )
    verdicts = []
    for obj in CONFIGMAPS:
        expected = selector.matches(obj)
        verdicts.append(expected)
        assert sent_to_gpulint(configuration, obj) is expected, obj["metadata"]
        unlabelled = copy.deepcopy(obj)
        unlabelled["metadata"].pop("labels", None)
        # A ConfigMap that loses the adapter's label is sent (its old version had it).
        assert sent_to_gpulint(configuration, unlabelled, old=obj) is expected
    assert True in verdicts and False in verdicts


def test_autoscalers_and_serving_objects_are_always_sent(renders: dict[str, Rendered]) -> None:
    configuration = renders["defaults"].one("ValidatingWebhookConfiguration")
    for api_version, kind in [
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("keda.sh/v1alpha1", "ScaledObject"),
        ("serving.kserve.io/v1beta1", "InferenceService"),
        ("serving.knative.dev/v1", "Service"),
        ("serving.knative.dev/v1", "Configuration"),
        ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    ]:
        obj = {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": "x", "namespace": "team-a"},
            "spec": {},
        }
        assert sent_to_gpulint(configuration, obj) is True, kind
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "x", "namespace": "team-a"},
        "spec": {},
    }
    assert sent_to_gpulint(configuration, claim) is False
    assert sent_to_gpulint(configuration, configmap("plain", "team-a")) is False


# --- the Deployment and the network -----------------------------------------------------------


def test_the_deployment_runs_hardened_and_highly_available(rendered: Rendered) -> None:
    deployment = rendered.one("Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()
    assert spec["replicas"] == rendered.value("replicas") >= 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True
    assert (security["runAsUser"], security["runAsGroup"]) == (65532, 65532)
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["serviceAccountName"] == rendered.one("ServiceAccount")["metadata"]["name"]
    container = rendered.container
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["resources"] == rendered.value("resources")
    assert "memory" in container["resources"]["limits"]
    image = rendered.value("image")
    reference = f"{image['repository']}:{image['tag'] or DEFAULTS_APP_VERSION}"
    if image["digest"]:
        reference += f"@{image['digest']}"
    assert container["image"] == reference
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    options = serve_options(rendered)
    assert container["ports"] == [
        {"name": "https", "containerPort": options.port, "protocol": "TCP"}
    ]
    assert options.shutdown_delay + options.shutdown_timeout <= pod["terminationGracePeriodSeconds"]
    spread = pod.get("topologySpreadConstraints", [])
    assert len(spread) == len(rendered.value("topologySpreadConstraints"))
    for constraint in spread:
        assert constraint["labelSelector"] == {"matchLabels": selector}
    anti = pod.get("affinity", {}).get("podAntiAffinity", {})
    mode = rendered.value("podAntiAffinity")
    if mode == "preferred":
        (term,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["labelSelector"] == {"matchLabels": selector}
    elif mode == "required":
        (term,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["labelSelector"] == {"matchLabels": selector}
    else:
        assert anti == {}
    budgets = rendered.all("PodDisruptionBudget")
    if rendered.value("podDisruptionBudget", "enabled"):
        (budget,) = budgets
        assert budget["spec"]["selector"] == {"matchLabels": selector}
        assert budget["spec"]["minAvailable"] == rendered.value(
            "podDisruptionBudget", "minAvailable"
        )
        assert budget["spec"]["minAvailable"] < spec["replicas"]
    else:
        assert budgets == []
    assert rendered.one("Service")["spec"]["selector"] == selector


def test_the_arguments_are_what_the_values_say(renders: dict[str, Rendered]) -> None:
    defaults = serve_options(renders["defaults"])
    assert defaults.deny_on == "error" and defaults.deadline == 2
    assert defaults.configmap_namespaces == ("monitoring", "kserve")
    assert defaults.prometheus is None and defaults.config is None
    available = serve_options(renders["highly-available"])
    assert (available.deny_on, available.deadline, available.shutdown_timeout) == ("warning", 8, 15)
    one = renders["one-namespace"]
    options = serve_options(one)
    assert options.namespace == "team-a"
    assert (options.select, options.ignore) == (("GL1", "GL4"), ("GL102",))
    assert options.adapter_configmap == "metrics/custom-adapter"
    assert options.adapter_configmap_selector == "team=platform"
    assert options.configmap_namespaces == ("monitoring",)
    # The .gpulint.yaml of `config` is mounted where --config reads it.
    configmap_name = one.one("ConfigMap")["metadata"]["name"]
    (mount,) = [m for m in one.container["volumeMounts"] if m["name"] == "config"]
    assert options.config == f"{mount['mountPath']}/gpulint.yaml"
    (volume,) = [
        v
        for v in one.one("Deployment")["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "config"
    ]
    assert volume["configMap"]["name"] == configmap_name
    assert (
        yaml.safe_load(one.one("ConfigMap")["data"]["gpulint.yaml"])
        == VALUES["one-namespace"]["config"]
    )
    prometheus = renders["prometheus"]
    options = serve_options(prometheus)
    assert options.prometheus == "https://prometheus.monitoring.svc:9091"
    assert (options.prometheus_timeout, options.prometheus_refresh) == (20, 30)
    assert options.lookback == 12 * 3600
    assert options.min_history == 0.5
    headers = dict(options.prometheus_headers)
    assert headers["X-Scope-OrgID"] == "tenant-1"
    # The token is never in the pod spec: the kubelet puts the Secret's value in its place.
    assert "$(GPULINT_PROMETHEUS_HEADER_0)" in " ".join(prometheus.container["args"])
    (env,) = prometheus.container["env"]
    assert env == {
        "name": "GPULINT_PROMETHEUS_HEADER_0",
        "valueFrom": {"secretKeyRef": {"name": "prometheus-token", "key": "header"}},
    }
    # With clientAuth, --client-ca reads the bundle of the Secret, mounted where it says.
    client_auth = renders["client-auth"]
    options = serve_options(client_auth)
    assert options.client_cn == "kube-apiserver"
    assert options.client_ca is not None
    directory, _, key = options.client_ca.rpartition("/")
    assert key == "ca.pem"
    (mount,) = [m for m in client_auth.container["volumeMounts"] if m["mountPath"] == directory]
    (volume,) = [
        v
        for v in client_auth.one("Deployment")["spec"]["template"]["spec"]["volumes"]
        if v["name"] == mount["name"]
    ]
    assert volume == {"name": mount["name"], "secret": {"secretName": "apiserver-client-ca"}}
    assert serve_options(renders["defaults"]).client_ca is None


def test_network_policies_admit_only_the_webhook_port_and_limit_egress(rendered: Rendered) -> None:
    policies = rendered.all("NetworkPolicy")
    selector = rendered.one("Deployment")["spec"]["selector"]
    for policy in policies:
        assert policy["spec"]["podSelector"] == selector
    ingress = [p["spec"] for p in policies if "Ingress" in p["spec"]["policyTypes"]]
    (rule,) = ingress[0]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": serve_options(rendered).port}]
    cidrs = rendered.value("networkPolicy", "apiServer", "cidrs")
    ingress_from = rendered.value("networkPolicy", "ingressFrom")
    if cidrs or ingress_from:
        # the API server named (or peers given): only it, Prometheus and the peers
        assert rule["from"] == [
            *({"ipBlock": {"cidr": cidr}} for cidr in cidrs),
            *rendered.value("networkPolicy", "metricsFrom"),
            *ingress_from,
        ]
    else:  # `helm template` reads no cluster: the API server is not named, and anyone may
        assert "from" not in rule
    egress = [p["spec"] for p in policies if "Egress" in p["spec"]["policyTypes"]]
    if not rendered.value("networkPolicy", "egress", "enabled"):
        assert egress == []
        return
    opened = set()
    for rule in egress[0]["egress"]:
        assert rule.get("ports"), "an egress rule without ports opens every port"
        for port in rule["ports"]:
            opened.add((port["protocol"], port["port"], json.dumps(rule.get("to"))))
    expected = {("UDP", 53, "null"), ("TCP", 53, "null")}
    if not serve_options(rendered).no_cluster:
        expected |= {("TCP", 443, "null"), ("TCP", 6443, "null")}
    if rendered.value("prometheus", "url"):
        to = json.dumps(rendered.value("networkPolicy", "egress", "prometheusTo"))
        expected.add(("TCP", 9091, to))  # the port of prometheus.url
    assert opened == expected


def test_the_service_monitor_scrapes_metrics_over_verified_tls(
    renders: dict[str, Rendered],
) -> None:
    rendered = renders["prometheus"]
    monitor = rendered.one("ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"] == rendered.one("Service")["spec"]["selector"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == rendered.one("Service")["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["tlsConfig"]["ca"]["secret"] == {
        "name": rendered.one("Deployment")["spec"]["template"]["spec"]["volumes"][0]["secret"][
            "secretName"
        ],
        "key": "ca.crt",
    }
    assert endpoint["tlsConfig"]["serverName"] == f"gpulint-webhook.{NAMESPACE}.svc"
    assert renders["defaults"].all("ServiceMonitor") == []


# --- the serving certificate ------------------------------------------------------------------


def test_cert_manager_issues_for_the_service_and_injects_its_ca(
    renders: dict[str, Rendered],
) -> None:
    for name in ("cert-manager", "cert-manager-issuer"):
        rendered = renders[name]
        certificate = rendered.one("Certificate")
        service = rendered.one("Service")["metadata"]
        assert set(certificate["spec"]["dnsNames"]) == {
            f"{service['name']}.{service['namespace']}.svc",
            f"{service['name']}.{service['namespace']}.svc.cluster.local",
        }
        volumes = rendered.one("Deployment")["spec"]["template"]["spec"]["volumes"]
        assert certificate["spec"]["secretName"] == volumes[0]["secret"]["secretName"]
        configuration = rendered.one("ValidatingWebhookConfiguration")
        assert configuration["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": f"{NAMESPACE}/{certificate['metadata']['name']}"
        }
        assert all("caBundle" not in w["clientConfig"] for w in configuration["webhooks"])
        assert rendered.all("Secret") == []
    issuer = renders["cert-manager"].one("Issuer")
    assert renders["cert-manager"].one("Certificate")["spec"]["issuerRef"] == {
        "kind": "Issuer",
        "name": issuer["metadata"]["name"],
    }
    assert renders["cert-manager-issuer"].all("Issuer") == []
    assert renders["cert-manager-issuer"].one("Certificate")["spec"]["issuerRef"] == {
        "kind": "ClusterIssuer",
        "name": "corporate-ca",
    }


def self_signed_pair(rendered: Rendered) -> tuple[bytes, bytes, bytes, bytes]:
    """The rendered Secret's tls.crt, tls.key and ca.crt, and the webhooks' one caBundle."""
    data = rendered.one("Secret")["data"]
    bundles = {
        w["clientConfig"]["caBundle"]
        for w in rendered.one("ValidatingWebhookConfiguration")["webhooks"]
    }
    (bundle,) = bundles
    return (
        base64.b64decode(data["tls.crt"]),
        base64.b64decode(data["tls.key"]),
        base64.b64decode(data["ca.crt"]),
        base64.b64decode(bundle),
    )


@pytest.fixture
def served_chart_certificate(
    renders: dict[str, Rendered], tmp_path: Path
) -> Iterator[tuple[int, Path]]:
    """gpulint serve on the rendered Secret's tls.crt and tls.key; the port and the caBundle
    as the API server trusts it."""
    rendered = renders["defaults"]
    crt, key, _, bundle = self_signed_pair(rendered)
    (tmp_path / "tls.crt").write_bytes(crt)
    (tmp_path / "tls.key").write_bytes(key)
    (tmp_path / "ca-bundle.crt").write_bytes(bundle)
    port = free_port()
    with open(tmp_path / "serve.log", "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpulint",
                "serve",
                f"--tls-cert={tmp_path / 'tls.crt'}",
                f"--tls-key={tmp_path / 'tls.key'}",
                f"--port={port}",
                "--bind=127.0.0.1",
                "--no-cluster",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 1).close()
                    break
                except ConnectionRefusedError:
                    assert process.poll() is None, (tmp_path / "serve.log").read_text()
                    assert time.monotonic() < deadline, "gpulint serve did not listen"
                    time.sleep(0.1)
            yield port, tmp_path / "ca-bundle.crt"
        finally:
            process.terminate()
            process.wait(30)


def test_the_self_signed_certificate_is_served_and_verified_for_the_service_name(
    renders: dict[str, Rendered], served_chart_certificate: tuple[int, Path]
) -> None:
    _, _, ca, bundle = self_signed_pair(renders["defaults"])
    assert bundle == ca
    port, bundle_file = served_chart_certificate
    context = ssl.create_default_context(cafile=str(bundle_file))
    service = renders["defaults"].one("Service")["metadata"]
    for name in (
        f"{service['name']}.{service['namespace']}.svc",
        f"{service['name']}.{service['namespace']}.svc.cluster.local",
    ):
        with (
            socket.create_connection(("127.0.0.1", port), 5) as raw,
            context.wrap_socket(raw, server_hostname=name) as tls,
        ):
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
    with (
        socket.create_connection(("127.0.0.1", port), 5) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        context.wrap_socket(raw, server_hostname="gpulint-webhook.elsewhere.svc")


class _ApiServer(KubeFake):
    """The fake API server, with the /version that `helm --dry-run=server` asks first."""

    async def _route(self, request: Any, path: str, query: dict[str, str]) -> Any:
        from aiohttp import web

        if path == "/version":
            major, minor, _ = KUBERNETES_VERSION.split(".")
            return web.json_response(
                {"major": major, "minor": minor, "gitVersion": f"v{KUBERNETES_VERSION}"}
            )
        return await super()._route(request, path, query)


def test_an_upgrade_keeps_the_self_signed_certificate_the_cluster_holds(
    helm_home: Path, renders: dict[str, Rendered], tmp_path: Path
) -> None:
    """Rendered against an API server that holds the release's Secret (helm's lookup, as on
    `helm upgrade`), the chart reuses its CA and certificate instead of making new ones;
    without one (`helm template`) every render makes a new CA."""
    installed = renders["defaults"].one("Secret")
    cluster = FakeCluster()
    secrets = Resource("", "v1", "Secret", "secrets")
    cluster.resources[secrets.key] = secrets
    cluster.objects[secrets.key] = {}
    cluster.apply(copy.deepcopy(installed))
    server = _ApiServer(cluster).start()
    try:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        upgraded = render(
            helm_home, "upgrade", {}, "--dry-run=server", "--kubeconfig", str(kubeconfig)
        )
    finally:
        server.stop()
    assert any(path.endswith("/secrets/gpulint-webhook-tls") for _, path, _ in cluster.requests)
    assert upgraded.one("Secret")["data"] == installed["data"]
    assert self_signed_pair(upgraded)[3] == base64.b64decode(installed["data"]["ca.crt"])
    again = render(helm_home, "again", {})
    assert again.one("Secret")["data"]["ca.crt"] != installed["data"]["ca.crt"]


def _ingress_from(rendered: Rendered) -> Any:
    (policy,) = [p for p in rendered.all("NetworkPolicy") if "Ingress" in p["spec"]["policyTypes"]]
    (rule,) = policy["spec"]["ingress"]
    return rule.get("from")


@pytest.mark.parametrize(
    ("endpoints", "narrowed"),
    [
        (["172.18.0.2"], ["172.18.0.2/32"]),  # a control plane on its own nodes (kind)
        (["172.18.0.2", "fd00:10::2"], ["172.18.0.2/32", "fd00:10::2/128"]),
        (["172.18.0.2", "10.100.0.9"], None),  # one address is no node's: a managed one
        ([], None),
    ],
)
def test_the_api_server_on_the_clusters_nodes_is_named_at_install(
    helm_home: Path, tmp_path: Path, endpoints: list[str], narrowed: list[str] | None
) -> None:
    """Rendered against an API server (helm's lookup, as on install and upgrade), the
    ingress policy admits the addresses of the `kubernetes` Endpoints when every one is a
    node's, besides Prometheus; otherwise the port stays open."""
    cluster = FakeCluster()
    nodes = Resource("", "v1", "Node", "nodes", namespaced=False)
    cluster.resources[nodes.key] = nodes
    cluster.objects[nodes.key] = {}
    for index, address in enumerate(["172.18.0.2", "172.18.0.3", "fd00:10::2"]):
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{index}"},
                "status": {"addresses": [{"type": "InternalIP", "address": address}]},
            }
        )
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "subsets": [{"addresses": [{"ip": ip} for ip in endpoints]}] if endpoints else [],
        }
    )
    server = _ApiServer(cluster).start()
    try:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        against = ("--dry-run=server", "--kubeconfig", str(kubeconfig))
        installed = render(helm_home, "install", {}, *against)
        off = {"networkPolicy": {"apiServer": {"lookup": False}}}
        not_looked_up = render(helm_home, "no-lookup", off, *against)
    finally:
        server.stop()
    if narrowed is None:
        assert _ingress_from(installed) is None
    else:
        assert _ingress_from(installed) == [
            *({"ipBlock": {"cidr": cidr}} for cidr in narrowed),
            *DEFAULTS["networkPolicy"]["metricsFrom"],
        ]
    assert _ingress_from(not_looked_up) is None


# --- the chart and the kustomize install say the same thing -----------------------------------


@pytest.fixture(scope="module")
def kustomize_render() -> Rendered:
    text = kustomize_build(DEPLOY / "cert-manager")
    return Rendered("kustomize", {}, [d for d in yaml.safe_load_all(text) if d], text)


def _rules(role: dict[str, Any]) -> set[tuple[str, str, tuple[str, ...]]]:
    return {
        (g, r, tuple(sorted(rule["verbs"])))
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }


def test_the_chart_with_its_defaults_says_what_the_kustomize_install_says(
    renders: dict[str, Rendered], kustomize_render: Rendered
) -> None:
    chart, kustomize = renders["cert-manager"], kustomize_render
    # The webhooks: the same names, rules, matchConditions and settings.
    ours = {w["name"]: w for w in chart.one("ValidatingWebhookConfiguration")["webhooks"]}
    theirs = {w["name"]: w for w in kustomize.one("ValidatingWebhookConfiguration")["webhooks"]}
    assert list(ours) == list(theirs)
    for name, webhook in ours.items():
        other = theirs[name]
        for field in (
            "rules",
            "matchConditions",
            "failurePolicy",
            "timeoutSeconds",
            "sideEffects",
            "matchPolicy",
            "admissionReviewVersions",
            "namespaceSelector",
            "objectSelector",
            "clientConfig",
        ):
            assert webhook.get(field) == other.get(field), (name, field)
    assert (
        chart.one("ValidatingWebhookConfiguration")["metadata"]["annotations"]
        == kustomize.one("ValidatingWebhookConfiguration")["metadata"]["annotations"]
    )
    # The self-signed chart sends the same matchConditions as the cert-manager one.
    default_webhooks = renders["defaults"].one("ValidatingWebhookConfiguration")["webhooks"]
    assert [w.get("matchConditions") for w in default_webhooks] == [
        w.get("matchConditions") for w in theirs.values()
    ]
    # RBAC: the same grants, in the same namespaces.
    assert _rules(chart.one("ClusterRole")) == _rules(kustomize.one("ClusterRole"))
    assert {r["metadata"]["namespace"]: _rules(r) for r in chart.all("Role")} == {
        r["metadata"]["namespace"]: _rules(r) for r in kustomize.all("Role")
    }
    # The same gpulint serve, reading the same certificate.
    assert chart.container["args"] == kustomize.container["args"]
    assert serve_options(chart) == serve_options(kustomize)
    for field in ("ports", "readinessProbe", "livenessProbe", "resources", "securityContext"):
        assert chart.container[field] == kustomize.container[field], field
    ours_pod = chart.one("Deployment")["spec"]["template"]["spec"]
    theirs_pod = kustomize.one("Deployment")["spec"]["template"]["spec"]
    for field in ("securityContext", "terminationGracePeriodSeconds", "volumes"):
        assert ours_pod[field] == theirs_pod[field], field
    assert (
        chart.one("Deployment")["spec"]["replicas"]
        == kustomize.one("Deployment")["spec"]["replicas"]
    )
    certificate, other_certificate = chart.one("Certificate"), kustomize.one("Certificate")
    assert certificate["metadata"]["name"] == other_certificate["metadata"]["name"]
    assert certificate["spec"] == other_certificate["spec"]
    assert (
        chart.one("PodDisruptionBudget")["spec"]["minAvailable"]
        == kustomize.one("PodDisruptionBudget")["spec"]["minAvailable"]
    )

    # The same ingress; egress to the API server and DNS alike (the kustomize install also
    # opens the Prometheus port in monitoring, since its manifests cannot know the URL).
    def policy(rendered: Rendered, kind: str) -> dict[str, Any]:
        (found,) = [p for p in rendered.all("NetworkPolicy") if kind in p["spec"]["policyTypes"]]
        return found["spec"]

    assert policy(chart, "Ingress")["ingress"] == policy(kustomize, "Ingress")["ingress"]
    assert all(
        rule in policy(kustomize, "Egress")["egress"] for rule in policy(chart, "Egress")["egress"]
    )


# --- gpulint lints its own deployment ---------------------------------------------------------


def lint(*args: str, stdin: str | None = None) -> tuple[int, dict[str, Any], str]:
    """``gpulint lint --format json ARGS``: its exit code, report and messages."""
    result = subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "--format", "json", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, json.loads(result.stdout), result.stderr


@pytest.mark.parametrize("name", ["defaults", "cert-manager", "prometheus", "one-namespace"])
def test_gpulint_finds_nothing_in_what_the_chart_renders(
    renders: dict[str, Rendered], name: str
) -> None:
    rendered = renders[name]
    code, report, stderr = lint("-", stdin=rendered.text)
    assert code == 0, stderr
    assert report["findings"] == []
    assert report["summary"]["objects"] == len(rendered.objects)


def test_gpulint_lint_of_deploy_renders_the_chart_and_the_overlays_and_finds_nothing(
    tmp_path: Path,
) -> None:
    """`gpulint lint deploy/` as a user runs it once make-certificate.sh has written the
    without-cert-manager overlay's files: the chart through helm, each overlay through
    kustomize, and not one finding."""
    helm = helm_command()
    kustomize = kustomize_command()
    copy_of_deploy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy_of_deploy, ignore=shutil.ignore_patterns(*CERTIFICATE_FILES))
    write_test_certificate(copy_of_deploy / "without-cert-manager")
    code, report, stderr = lint(
        "--helm", helm[0], "--kustomize", " ".join(kustomize), str(copy_of_deploy)
    )
    assert code == 0, stderr
    assert report["findings"] == []
    units = {u["name"].rpartition("deploy/")[2]: u for u in report["summary"]["units"]}
    assert {name: u["kind"] for name, u in units.items()} == {
        "chart": "helm",
        "cert-manager": "kustomize",
        "without-cert-manager": "kustomize",
        # Components no kustomization here uses: judged through the overlays that use them.
        "components/client-certificates": "kustomize",
        "components/ingress-from-apiserver": "kustomize",
    }
    used = {name: u for name, u in units.items() if not name.startswith("components/")}
    assert all(u["objects"] > 0 for u in used.values())
    assert sorted(s["file"].rpartition("deploy/")[2] for s in report["summary"]["skipped"]) == [
        "components/client-certificates/kustomization.yaml",
        "components/ingress-from-apiserver/kustomization.yaml",
    ]


# --- the chart's documentation ----------------------------------------------------------------

README = CHART / "README.md"


def _value_paths(schema: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, node in schema.get("properties", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        if "properties" in node:
            yield from _value_paths(node, path)
        else:
            yield path


def test_every_value_is_documented_once_in_the_values_table() -> None:
    """values.schema.json lists every value the chart reads (helm refuses any other); the
    README's table has one row for each, and no row for a value that does not exist."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    documented = [
        line.split("|")[1].strip().strip("`")
        for line in README.read_text().splitlines()
        if line.startswith("| `")
    ]
    assert sorted(documented) == sorted(_value_paths(schema))
    for path in documented:
        node: Any = DEFAULTS
        for key in path.split("."):
            assert key in node, f"{path} is documented but not in values.yaml"
            node = node[key]


def _blocks(language: str) -> list[str]:
    text = README.read_text()
    fence = f"```{language}\n"
    blocks = []
    while fence in text:
        text = text.split(fence, 1)[1]
        block, text = text.split("```", 1)
        blocks.append(block)
    return blocks


def test_the_documented_install_and_upgrade_render_as_written(
    helm_home: Path, tmp_path: Path
) -> None:
    """The README's `helm install` and `helm upgrade` commands, run from the repository's root
    with its example values file, as `helm template` with the same arguments (no cluster here
    to install into)."""
    (values,) = _blocks("yaml")
    (tmp_path / "my-values.yaml").write_text(values)
    (tmp_path / "deploy").symlink_to(DEPLOY)
    commands = [
        line
        for block in _blocks("sh")
        for line in block.splitlines()
        if line.startswith(("helm install ", "helm upgrade "))
    ]
    assert [c.split()[1] for c in commands] == ["install", "upgrade"]
    for command in commands:
        argv = command.split()
        result = subprocess.run(
            [*helm_command(), "template", *argv[2:], "--kube-version", KUBERNETES_VERSION],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env=helm_environment(helm_home),
        )
        assert result.returncode == 0, (command, result.stderr)
        objects = [d for d in yaml.safe_load_all(result.stdout) if d]
        (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
        assert deployment["metadata"]["name"] == "gpulint-webhook"
        assert deployment["metadata"]["namespace"] == "gpulint"
        image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image.startswith("registry.example.com/gpulint:")
    # The rollout the README waits for is the Deployment it installs.
    assert "deployment/gpulint-webhook" in README.read_text()


def test_the_chart_installs_the_version_of_gpulint_it_ships_with() -> None:
    """The image tag defaults to the chart's appVersion: it must be the package's version, so
    that a release cannot leave the chart installing the previous one."""
    from importlib.metadata import version

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == version("gpulint")
    assert chart["name"] == "gpulint"


# --- the webhook as the chart deploys it ------------------------------------------------------


def test_the_webhook_as_the_chart_deploys_it_reads_what_its_rbac_grants_and_judges_by_its_config(
    renders: dict[str, Rendered], tmp_path: Path
) -> None:
    """gpulint serve with the container's arguments (serve.namespace, adapter.*, select and
    ignore, and the config file the chart mounts), against an API server whose RBAC is the
    rendered Roles: every stream syncs, and a CPU-only HPA on a Deployment that asks for the
    config's own GPU resource is refused."""
    rendered = renders["one-namespace"]
    cluster = FakeCluster()
    cluster.grant_as(rendered.all("ClusterRole"), rendered.all("Role"))
    workload = pod_template_object(containers=[container({"example.com/gpu": "1"})])
    workload["metadata"] = {"name": "llm", "namespace": "team-a"}
    cluster.apply(workload)
    server = KubeFake(cluster).start()
    config = tmp_path / "gpulint.yaml"
    config.write_text(rendered.one("ConfigMap")["data"]["gpulint.yaml"])
    (mount,) = [m for m in rendered.container["volumeMounts"] if m["name"] == "config"]
    args = [
        a.replace(f"{mount['mountPath']}/gpulint.yaml", str(config))
        for a in rendered.container["args"]
        if a.split("=")[0] not in ("--tls-cert", "--tls-key", "--port", "--shutdown-delay")
    ]
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    hook = Webhook(
        Certificates(tmp_path), tmp_path / "serve.log", [*args, f"--kubeconfig={kubeconfig}"]
    )
    try:
        caches = hook.wait_ready()["caches"]
        assert set(caches.values()) == {"synced"}, caches
        hpa = {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "llm", "namespace": "team-a"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"},
                "minReplicas": 1,
                "maxReplicas": 4,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 70},
                        },
                    }
                ],
            },
        }
        response = hook.review(admission_review(hpa))
        assert response["allowed"] is False, response
        assert "\nGL101 " in response["status"]["message"]
        assert "example.com/gpu" in response["status"]["message"]
    finally:
        hook.stop()
        server.stop()
    listed = {path for _, path, _ in cluster.requests if path.endswith("/configmaps")}
    assert listed == {
        "/api/v1/namespaces/monitoring/configmaps",
        "/api/v1/namespaces/metrics/configmaps",
        "/api/v1/namespaces/knative-serving/configmaps",
    }
    deployments = {path for _, path, _ in cluster.requests if path.endswith("/deployments")}
    assert deployments == {"/apis/apps/v1/namespaces/team-a/deployments"}


def test_the_main_readme_installs_the_chart_with_the_charts_own_commands() -> None:
    """The project README repeats the chart's three install commands; they are the ones the
    test above renders as written."""
    main = (ROOT / "README.md").read_text()
    start = main.index("## Admission webhook")
    section = main[start : main.index("\n## ", start + 1)]
    (install,) = [b for b in _blocks("sh") if "helm install " in b]
    assert f"```sh\n{install}```" in section
    assert "helm upgrade gpulint deploy/chart" in " ".join(section.split())
