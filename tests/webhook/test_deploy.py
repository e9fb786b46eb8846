"""deploy/: what ``kubectl apply -k deploy/cert-manager`` and ``kubectl apply -k
deploy/without-cert-manager`` create, rendered by the real kustomize (tests/tools.py) and
checked without a cluster.

Every kustomization in deploy/ is built; every object it renders is validated against the
Kubernetes JSON schemas bundled by kubernetes-validate (cert-manager's kinds, which those
schemas do not have, against a structural check of the fields used), checked against what
``gpulint serve`` reads and accepts, and linted by gpulint itself. The without-cert-manager
variant needs the files make-certificate.sh writes beside it: it is built in a temporary
copy of deploy/ with a certificate made for the test, so the tree itself is never written.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import kubernetes_validate
import pytest
import trustme
import yaml
from gpulint.webhook.evaluator import EVALUATED_KINDS
from gpulint.webhook.options import ServeOptions, add_serve_options, options_from_args

from gpulint.cluster.kinds import (
    NAMED_CONFIGMAPS,
    AdapterConfigMapSelector,
    WatchedKind,
    watched_kinds,
)

from ..kubefake import FakeCluster, KubeFake
from ..tools import kustomize_build
from . import objects
from .harness import Certificates, Webhook, admission_review, free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# The directories users apply; deploy/base is only their shared base.
VARIANTS = ("cert-manager", "without-cert-manager")
KUSTOMIZATIONS = sorted(
    str(p.parent.relative_to(DEPLOY))
    for p in DEPLOY.rglob("kustomization.yaml")
    if "kind: Component" not in p.read_text()  # built only through an overlay that uses it
)
CERTIFICATE_FILES = ("tls.crt", "tls.key", "ca.crt")  # what the Secret of the variant holds
KUBERNETES_VERSION = "1.30"
WEBHOOK_LABELS = {"app.kubernetes.io/name": "gpulint", "app.kubernetes.io/component": "webhook"}


class Rendered(NamedTuple):
    objects: list[dict[str, Any]]
    text: str

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str) -> dict[str, Any]:
        (found,) = self.all(kind)
        return found


class Builds(NamedTuple):
    rendered: dict[str, Rendered]  # kustomization directory, relative to deploy/ -> output
    ca_pem: bytes  # the CA of the certificate the without-cert-manager copy was given


def write_test_certificate(directory: Path) -> bytes:
    """What make-certificate.sh writes there, made with trustme: a serving certificate for
    the webhook's Service and the CA that signed it. Returns the CA certificate (PEM)."""
    ca = trustme.CA()
    leaf = ca.issue_cert("gpulint-webhook.gpulint.svc", "gpulint-webhook.gpulint.svc.cluster.local")
    (directory / "tls.crt").write_bytes(b"".join(p.bytes() for p in leaf.cert_chain_pems))
    (directory / "tls.key").write_bytes(leaf.private_key_pem.bytes())
    (directory / "ca.crt").write_bytes(ca.cert_pem.bytes())
    return ca.cert_pem.bytes()


def build(directory: Path) -> Rendered:
    text = kustomize_build(directory)
    return Rendered([d for d in yaml.safe_load_all(text) if d], text)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    copy_of_deploy = tmp_path_factory.mktemp("deploy") / "deploy"
    shutil.copytree(DEPLOY, copy_of_deploy)
    ca_pem = write_test_certificate(copy_of_deploy / "without-cert-manager")
    rendered = {name: build(copy_of_deploy / name) for name in KUSTOMIZATIONS}
    return Builds(rendered, ca_pem)


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest, builds: Builds) -> Rendered:
    rendered: Rendered = builds.rendered[request.param]
    return rendered


def serve_options(rendered: Rendered) -> ServeOptions:
    """The Deployment's arguments as gpulint serve reads them (OptionError if it refuses)."""
    (container,) = rendered.one("Deployment")["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    add_serve_options(parser)
    return options_from_args(parser.parse_args(container["args"]))


def streams_of(options: ServeOptions) -> list[WatchedKind]:
    """What gpulint serve with these options lists and watches."""
    adapter = AdapterConfigMapSelector.parse(
        options.adapter_configmap, options.adapter_configmap_selector
    )
    return watched_kinds(adapter, options.configmap_namespaces)


# --- kustomize builds everything, into valid objects -----------------------------------------


def test_the_install_variants_and_their_base_are_every_kustomization() -> None:
    assert set(KUSTOMIZATIONS) == {"base", *VARIANTS}


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_manifest_file_is_listed_in_its_kustomization(name: str) -> None:
    """A YAML file that its kustomization does not list would silently never be applied."""
    directory = DEPLOY / name
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    listed = {r for r in kustomization.get("resources", []) if (directory / r).is_file()}
    on_disk = {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == listed


def _crd_structure(obj: dict[str, Any]) -> None:
    """cert-manager's Issuer and Certificate (cert-manager.io/v1): the fields gpulint uses."""
    assert obj["apiVersion"] == "cert-manager.io/v1"
    metadata, spec = obj["metadata"], obj["spec"]
    assert isinstance(metadata["name"], str) and isinstance(metadata["namespace"], str)
    if obj["kind"] == "Issuer":
        assert set(spec) == {"selfSigned"} and spec["selfSigned"] == {}
        return
    assert obj["kind"] == "Certificate"
    allowed = {"secretName", "dnsNames", "duration", "renewBefore", "privateKey", "issuerRef"}
    assert set(spec) <= allowed, set(spec) - allowed
    assert isinstance(spec["secretName"], str)
    assert all(isinstance(n, str) for n in spec["dnsNames"])
    for duration in ("duration", "renewBefore"):
        assert spec[duration].endswith("h") and int(spec[duration][:-1]) > 0
    assert spec["privateKey"]["algorithm"] in ("RSA", "ECDSA", "Ed25519")
    assert spec["privateKey"]["rotationPolicy"] in ("Always", "Never")
    assert spec["issuerRef"]["kind"] in ("Issuer", "ClusterIssuer")


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_rendered_object_validates_against_the_kubernetes_schemas(
    builds: Builds, name: str
) -> None:
    rendered = builds.rendered[name]
    assert rendered.objects
    for obj in rendered.objects:
        if obj["apiVersion"].startswith("cert-manager.io/"):
            _crd_structure(obj)
        else:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_variants_differ_from_the_base_only_in_the_serving_certificate(
    builds: Builds,
) -> None:
    base = builds.rendered["base"]

    def key(obj: dict[str, Any]) -> tuple[str, str | None, str]:
        return (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])

    shared = {key(o) for o in base.objects}
    added = {name: {key(o) for o in builds.rendered[name].objects} - shared for name in VARIANTS}
    assert added == {
        "cert-manager": {
            ("Issuer", "gpulint", "gpulint-selfsigned"),
            ("Certificate", "gpulint", "gpulint-webhook"),
        },
        "without-cert-manager": {("Secret", "gpulint", "gpulint-webhook-tls")},
    }
    for name in VARIANTS:
        rendered = builds.rendered[name]
        assert {key(o) for o in rendered.objects} >= shared
        changed = [
            key(o)
            for o in rendered.objects
            if key(o) in shared and o != next(b for b in base.objects if key(b) == key(o))
        ]
        assert changed == [("ValidatingWebhookConfiguration", None, "gpulint")], name


def test_gpulint_lints_what_kustomize_renders_without_errors(variant: Rendered) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "--format", "json", "-"],
        input=variant.text,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    assert report["summary"]["objects"] == len(variant.objects)


# --- what the webhook may read, and what the API server sends it ------------------------------


# A grant: (namespace or None for the ClusterRole, API group, resource, the one object it
# names or None for all of them).
Grant = tuple[str | None, str, str, str | None]


def role_grants(role: dict[str, Any]) -> set[Grant]:
    """What a read-only ClusterRole or Role grants."""
    namespace = role["metadata"].get("namespace") if role["kind"] == "Role" else None
    found: set[Grant] = set()
    for rule in role["rules"]:
        assert sorted(rule["verbs"]) == ["get", "list", "watch"]
        assert set(rule) - {"resourceNames"} == {"apiGroups", "resources", "verbs"}
        names = rule.get("resourceNames") or [None]
        found |= {
            (namespace, g, r, n)
            for g in rule["apiGroups"]
            for r in rule["resources"]
            for n in names
        }
    return found


def grants_needed(streams: list[WatchedKind], namespace: str | None) -> set[Grant]:
    """What reading ``streams`` needs: each resource where it is listed, or the one object a
    stream lists by name in a namespace no broader grant covers (RBAC lets a list or watch
    through with resourceNames when its fieldSelector is metadata.name=<that name>)."""
    whole: set[Grant] = set()
    named: set[Grant] = set()
    for stream in streams:
        scope = stream.scope(namespace)
        names = NAMED_CONFIGMAPS.get(scope, ()) if scope is not None else ()
        selector = stream.field_selector or ""
        if stream.label_selector is None and selector in (f"metadata.name={n}" for n in names):
            named.add((scope, stream.group, stream.plural, selector.partition("=")[2]))
        else:
            whole.add((scope, stream.group, stream.plural, None))
    return whole | {
        g
        for g in named
        if (g[0], g[1], g[2], None) not in whole and (None, g[1], g[2], None) not in whole
    }


def test_rbac_grants_exactly_what_the_webhook_reads(variant: Rendered) -> None:
    """The ClusterRole covers the streams read in every namespace, one Role per namespace the
    ConfigMap streams are read in, and Knative's config-autoscaler by name; read-only, bound
    to the webhook's ServiceAccount."""
    options = serve_options(variant)
    account = variant.one("ServiceAccount")["metadata"]
    subject = {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    needed = grants_needed(streams_of(options), options.namespace)
    needed_everywhere = {g for g in needed if g[0] is None}
    needed_in = needed - needed_everywhere
    assert (None, "", "configmaps", None) not in needed_everywhere
    assert ("knative-serving", "", "configmaps", "config-autoscaler") in needed_in

    cluster_role = variant.one("ClusterRole")
    assert role_grants(cluster_role) == needed_everywhere
    binding = variant.one("ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": cluster_role["metadata"]["name"],
    }
    assert binding["subjects"] == [subject]
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in variant.all("Role")}
    in_namespaces = set().union(*(role_grants(role) for role in roles.values()))
    assert in_namespaces == needed_in
    bound = set()
    for role_binding in variant.all("RoleBinding"):
        namespace = role_binding["metadata"]["namespace"]
        assert role_binding["roleRef"]["kind"] == "Role"
        assert (namespace, role_binding["roleRef"]["name"]) in roles
        assert role_binding["subjects"] == [subject]
        bound.add((namespace, role_binding["roleRef"]["name"]))
    assert bound == set(roles)


def test_the_webhook_configuration_sends_the_evaluated_kinds_and_never_blocks(
    variant: Rendered,
) -> None:
    configuration = variant.one("ValidatingWebhookConfiguration")
    service = variant.one("Service")
    namespace = variant.one("Namespace")["metadata"]["name"]
    kinds = {(s.group, s.plural): s.kind for s in watched_kinds()}
    sent: set[tuple[str, str]] = set()
    for webhook in configuration["webhooks"]:
        assert webhook["failurePolicy"] == "Ignore"
        assert webhook["sideEffects"] == "None"
        assert webhook["admissionReviewVersions"] == ["v1"]
        assert webhook["timeoutSeconds"] == 5
        assert webhook["matchPolicy"] == "Equivalent"
        (expression,) = webhook["namespaceSelector"]["matchExpressions"]
        assert expression["key"] == "kubernetes.io/metadata.name"
        assert expression["operator"] == "NotIn"
        assert set(expression["values"]) == {"kube-system", namespace}
        reference = webhook["clientConfig"]["service"]
        assert (reference["name"], reference["namespace"]) == (
            service["metadata"]["name"],
            service["metadata"]["namespace"],
        )
        assert reference["path"] == "/validate"
        assert reference["port"] == service["spec"]["ports"][0]["port"]
        for rule in webhook["rules"]:
            assert set(rule["operations"]) <= {"CREATE", "UPDATE"}
            sent |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
    # ResourceClaims are watched for what pods name, never judged: the control plane makes
    # one for every pod that names a template. PodDisruptionBudgets are watched for what a
    # VerticalPodAutoscaler may evict (GL112), judged with the VPA.
    assert set(kinds) - sent == {
        ("resource.k8s.io", "resourceclaims"),
        ("policy", "poddisruptionbudgets"),
    }
    assert sent <= set(kinds)
    evaluated = {(g, kinds[g, r]) for g, r in sent if r != "configmaps"}
    assert evaluated == set(EVALUATED_KINDS)
    # ConfigMaps have a webhook of their own, whose matchConditions send the adapter's only
    # (by label or by name, which an objectSelector cannot say: tests/test_chart.py evaluates
    # the expressions, which the chart's defaults share with this file).
    (adapter,) = [
        w
        for w in configuration["webhooks"]
        if any("configmaps" in r["resources"] for r in w["rules"])
    ]
    assert [(r["apiGroups"], r["resources"]) for r in adapter["rules"]] == [([""], ["configmaps"])]
    assert "objectSelector" not in adapter
    assert [c["name"] for c in adapter["matchConditions"]] == ["prometheus-adapter-config"]


# --- the Deployment --------------------------------------------------------------------------


def test_the_deployment_runs_hardened_and_highly_available(variant: Rendered) -> None:
    spec = variant.one("Deployment")["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert labels == WEBHOOK_LABELS
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"] == labels
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"]["matchLabels"] == labels
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["serviceAccountName"] == variant.one("ServiceAccount")["metadata"]["name"]
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert set(container["resources"]) == {"requests", "limits"}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    budget = variant.one("PodDisruptionBudget")
    assert budget["spec"]["selector"]["matchLabels"] == labels
    assert budget["spec"]["minAvailable"] == 1
    service = variant.one("Service")
    assert service["spec"]["selector"] == labels
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert service["spec"]["ports"][0]["targetPort"] in port_names


def test_the_deployments_arguments_are_what_gpulint_serve_accepts(variant: Rendered) -> None:
    pod = variant.one("Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    options = serve_options(variant)
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["https"]
    assert options.port == port
    assert (
        options.deadline
        < (variant.one("ValidatingWebhookConfiguration")["webhooks"][0]["timeoutSeconds"])
    )
    assert options.shutdown_delay + options.shutdown_timeout <= pod["terminationGracePeriodSeconds"]
    (mount,) = container["volumeMounts"]
    assert options.tls_cert == f"{mount['mountPath']}/tls.crt"
    assert options.tls_key == f"{mount['mountPath']}/tls.key"
    (volume,) = pod["volumes"]
    assert volume["name"] == mount["name"]
    # The variant provides the Secret mounted: cert-manager through the Certificate, the
    # other directly.
    secret = volume["secret"]["secretName"]
    made = [c["spec"]["secretName"] for c in variant.all("Certificate")]
    made += [s["metadata"]["name"] for s in variant.all("Secret")]
    assert made == [secret]


@pytest.mark.slow
def test_the_webhook_as_deployed_reads_what_it_needs_and_no_other_configmaps(
    builds: Builds, module_certificates: Certificates, tmp_path: Path
) -> None:
    """gpulint serve with the Deployment's arguments, against an API server whose RBAC is the
    rendered ClusterRole and Roles: every stream syncs, no ConfigMap is listed outside the
    Roles' namespaces, and the adapter config in monitoring is what admissions are judged by."""
    rendered = builds.rendered["cert-manager"]
    cluster = FakeCluster()
    cluster.grant_as([rendered.one("ClusterRole")], rendered.all("Role"))
    assert cluster.granted_in == {"configmaps": {"monitoring", "kserve"}}
    assert cluster.granted_names == {"configmaps": {"knative-serving": {"config-autoscaler"}}}
    adapter = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "prometheus-adapter",
            "namespace": "monitoring",
            "labels": {"app.kubernetes.io/name": "prometheus-adapter"},
        },
        "data": {
            "config.yaml": yaml.safe_dump(
                {
                    "rules": [
                        {
                            "seriesQuery": 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}',
                            "resources": {
                                "overrides": {
                                    "exported_namespace": {"resource": "namespace"},
                                    "exported_pod": {"resource": "pod"},
                                }
                            },
                            "name": {"as": "gpu_utilization"},
                            "metricsQuery": "avg(<<.Series>>{<<.LabelMatchers>>}) by "
                            "(<<.GroupBy>>)",
                        }
                    ]
                }
            )
        },
    }
    elsewhere = copy.deepcopy(adapter)
    elsewhere["metadata"]["namespace"] = "team-metrics"
    for obj in (objects.deployment("llm-server", "llm", gpus=2), adapter, elsewhere):
        cluster.apply(obj)
    kube = KubeFake(cluster).start()
    (container,) = rendered.one("Deployment")["spec"]["template"]["spec"]["containers"]
    # The harness gives the certificate and the port; --shutdown-delay would only slow the end.
    kept = [
        a for a in container["args"] if a.split("=")[0] not in ("--tls-cert", "--tls-key", "--port")
    ]
    kept = [a for a in kept if not a.startswith("--shutdown-delay")]
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
    hook = Webhook(
        module_certificates, tmp_path / "serve.log", [*kept, f"--kubeconfig={kubeconfig}"]
    )
    try:
        caches = hook.wait_ready()["caches"]
        assert set(caches.values()) == {"synced"}, caches
        misspelt = objects.gpu_hpa("llm-server", "llm", "llm-server", metric="gpu_utilisation")
        response = hook.review(admission_review(misspelt))
        assert response["allowed"] is False
        assert "\nGL401 " in response["status"]["message"]
        correct = objects.gpu_hpa("llm-server", "llm", "llm-server")
        assert hook.review(admission_review(correct))["allowed"] is True
    finally:
        hook.stop()
        kube.stop()
    listed = {path for _, path, _ in cluster.requests if path.endswith("/configmaps")}
    assert listed == {
        "/api/v1/namespaces/monitoring/configmaps",
        "/api/v1/namespaces/kserve/configmaps",
        "/api/v1/namespaces/knative-serving/configmaps",
    }
    # In knative-serving, config-autoscaler alone: the name the Role grants.
    assert {
        query.get("fieldSelector")
        for _, path, query in cluster.requests
        if path == "/api/v1/namespaces/knative-serving/configmaps"
    } == {"metadata.name=config-autoscaler"}
    (serving,) = [r for r in hook.log_records() if r.get("event") == "serving"]
    assert serving["configmapNamespaces"] == ["monitoring", "kserve"]


# --- the network -----------------------------------------------------------------------------


def test_network_policies_admit_only_the_webhook_port_and_limit_egress(
    variant: Rendered,
) -> None:
    (container,) = variant.one("Deployment")["spec"]["template"]["spec"]["containers"]
    # gpulint serves reviews, probes and /metrics on its one port (--port): nothing else
    # needs to be reachable.
    (https,) = container["ports"]
    assert https["containerPort"] == serve_options(variant).port
    policies = variant.all("NetworkPolicy")
    for policy in policies:
        assert policy["metadata"]["namespace"] == variant.one("Namespace")["metadata"]["name"]
        assert policy["spec"]["podSelector"] == {"matchLabels": WEBHOOK_LABELS}
    ingress = [p["spec"] for p in policies if "Ingress" in p["spec"]["policyTypes"]]
    egress = [p["spec"] for p in policies if "Egress" in p["spec"]["policyTypes"]]
    assert len(ingress) == len(egress) == 1
    (rule,) = ingress[0]["ingress"]
    # From anywhere: the API server cannot be selected by labels on most clusters.
    assert set(rule) == {"ports"}
    assert rule["ports"] == [{"protocol": "TCP", "port": https["containerPort"]}]
    opened = set()
    for rule in egress[0]["egress"]:
        assert rule.get("ports"), "an egress rule without ports opens every port"
        destination = rule.get("to")
        for port in rule["ports"]:
            opened.add((port["protocol"], port["port"], json.dumps(destination)))
    monitoring = json.dumps(
        [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    )
    assert opened == {
        ("TCP", 443, "null"),  # the API server, on managed clusters
        ("TCP", 6443, "null"),  # the API server, on kubeadm, k3s, kind, OpenShift
        ("UDP", 53, "null"),  # DNS
        ("TCP", 53, "null"),
        ("TCP", 9090, monitoring),  # Prometheus, with --prometheus
    }


def test_the_apiserver_component_narrows_ingress_to_the_addresses_an_overlay_gives(
    tmp_path: Path,
) -> None:
    """deploy/components/ingress-from-apiserver, used as its kustomization.yaml shows."""
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    overlay = tmp_path / "mine"
    overlay.mkdir()
    usage = (DEPLOY / "components/ingress-from-apiserver/kustomization.yaml").read_text()
    example = [
        line.removeprefix("#   ")
        for line in usage.splitlines()
        if line.startswith("#   ") and not line.startswith("#   # ")
    ]
    text = "\n".join(example[: example.index("") if "" in example else None])
    (overlay / "kustomization.yaml").write_text(text.split("# the addresses")[0].rstrip() + "\n")
    rendered = build(overlay)
    (policy,) = [p for p in rendered.all("NetworkPolicy") if "Ingress" in p["spec"]["policyTypes"]]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [
        {"ipBlock": {"cidr": "10.0.0.0/28"}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
    ]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8443}]
    # everything else is the install it overlays
    base = {
        (o["kind"], o["metadata"]["name"]) for o in build(tmp_path / "deploy/cert-manager").objects
    }
    assert {(o["kind"], o["metadata"]["name"]) for o in rendered.objects} == base


def test_the_client_certificates_component_runs_gpulint_with_the_overlays_ca_bundle(
    tmp_path: Path,
) -> None:
    """deploy/components/client-certificates, used as its kustomization.yaml shows: the
    Deployment passes --client-ca with the bundle of the overlay's ConfigMap mounted there,
    and gpulint serve accepts the arguments."""
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    overlay = tmp_path / "mine"
    overlay.mkdir()
    usage = (DEPLOY / "components/client-certificates/kustomization.yaml").read_text()
    example = [line.removeprefix("#   ") for line in usage.splitlines() if line.startswith("#   ")]
    (overlay / "kustomization.yaml").write_text("\n".join(example[1:]) + "\n")
    (overlay / "ca.crt").write_bytes(trustme.CA().cert_pem.bytes())
    rendered = build(overlay)
    deployment = rendered.one("Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    add_serve_options(parser)
    options = options_from_args(parser.parse_args(container["args"]))
    assert options.client_ca is not None
    directory, _, key = options.client_ca.rpartition("/")
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
    (volume,) = [
        v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]
    ]
    (configmap,) = [
        c for c in rendered.all("ConfigMap") if c["metadata"]["name"] == volume["configMap"]["name"]
    ]
    assert configmap["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert configmap["data"][key].startswith("-----BEGIN CERTIFICATE-----")


# --- the serving certificate -----------------------------------------------------------------


def test_cert_manager_issues_for_the_service_and_injects_its_ca(builds: Builds) -> None:
    rendered = builds.rendered["cert-manager"]
    certificate = rendered.one("Certificate")
    service = rendered.one("Service")
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    assert set(certificate["spec"]["dnsNames"]) == {
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.cluster.local",
    }
    issuer = rendered.one("Issuer")
    assert certificate["spec"]["issuerRef"] == {
        "kind": "Issuer",
        "name": issuer["metadata"]["name"],
    }
    configuration = rendered.one("ValidatingWebhookConfiguration")
    assert configuration["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": (
            f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
        )
    }
    assert all("caBundle" not in w["clientConfig"] for w in configuration["webhooks"])


def test_without_cert_manager_the_secret_and_the_ca_bundle_come_from_the_files(
    builds: Builds,
) -> None:
    rendered = builds.rendered["without-cert-manager"]
    assert not [o for o in rendered.objects if o["apiVersion"].startswith("cert-manager.io/")]
    assert not [
        o
        for o in rendered.objects
        if any(k.startswith("cert-manager.io/") for k in o["metadata"].get("annotations", {}))
    ]
    secret = rendered.one("Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["namespace"] == rendered.one("Deployment")["metadata"]["namespace"]
    assert set(secret["data"]) == set(CERTIFICATE_FILES)
    assert base64.b64decode(secret["data"]["ca.crt"]) == builds.ca_pem
    for webhook in rendered.one("ValidatingWebhookConfiguration")["webhooks"]:
        # kustomize folds long base64 over lines; the API server's decoder skips newlines.
        assert base64.b64decode(webhook["clientConfig"]["caBundle"]) == builds.ca_pem
    ignored = (DEPLOY / "without-cert-manager" / ".gitignore").read_text().split()
    assert {*CERTIFICATE_FILES, "ca.key", "ca.srl"} <= set(ignored)


class Served(NamedTuple):
    process: subprocess.Popen[bytes]
    port: int
    ca_bundle: Path  # the rendered caBundle, decoded, as the API server trusts it


@pytest.fixture
def served_pair(tmp_path: Path) -> Iterator[Served]:
    """make-certificate.sh run in a copy of deploy/, the variant built there, and gpulint
    serve on the tls.crt and tls.key of the Secret kustomize rendered."""
    if shutil.which("openssl") is None:
        pytest.skip("make-certificate.sh needs the openssl command")
    copy_of_deploy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy_of_deploy)
    overlay = copy_of_deploy / "without-cert-manager"
    made = subprocess.run(
        ["sh", str(overlay / "make-certificate.sh")], capture_output=True, text=True, timeout=60
    )
    assert made.returncode == 0, made.stderr
    assert {p.name for p in overlay.iterdir()} >= {*CERTIFICATE_FILES, "ca.key"}
    assert "tls.csr" not in {p.name for p in overlay.iterdir()}
    assert (overlay / "ca.key").stat().st_mode & 0o077 == 0
    rendered = build(overlay)
    data = rendered.one("Secret")["data"]
    served = tmp_path / "served"
    served.mkdir()
    for name in ("tls.crt", "tls.key"):
        (served / name).write_bytes(base64.b64decode(data[name]))
    (bundle,) = {
        w["clientConfig"]["caBundle"]
        for w in rendered.one("ValidatingWebhookConfiguration")["webhooks"]
    }
    (served / "ca-bundle.crt").write_bytes(base64.b64decode(bundle))
    port = free_port()
    with open(tmp_path / "serve.log", "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpulint",
                "serve",
                f"--tls-cert={served / 'tls.crt'}",
                f"--tls-key={served / 'tls.key'}",
                f"--port={port}",
                "--bind=127.0.0.1",
                "--no-cluster",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield Served(process, port, served / "ca-bundle.crt")
        finally:
            process.terminate()
            process.wait(30)


@pytest.mark.slow
def test_make_certificate_gives_a_pair_the_api_server_accepts_through_kustomize(
    builds: Builds, served_pair: Served
) -> None:
    """The script's files, through the rendered Secret and caBundle, verified for the
    Service's DNS name as the API server verifies a webhook."""
    context = ssl.create_default_context(cafile=str(served_pair.ca_bundle))
    service = builds.rendered["without-cert-manager"].one("Service")["metadata"]
    name = f"{service['name']}.{service['namespace']}.svc"
    deadline = time.monotonic() + 30
    while True:
        try:
            with (
                socket.create_connection(("127.0.0.1", served_pair.port), 2) as raw,
                context.wrap_socket(raw, server_hostname=name) as tls,
            ):
                assert tls.version() in ("TLSv1.2", "TLSv1.3")
                return
        except ConnectionRefusedError:
            assert served_pair.process.poll() is None, "gpulint serve exited"
            assert time.monotonic() < deadline, "gpulint serve did not listen"
            time.sleep(0.1)
