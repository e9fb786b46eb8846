"""deploy/: what `kubectl apply -k deploy/` would create, checked without a cluster.

kustomize is not installed here, so the kustomizations are checked for what kustomize would
refuse (a listed file that is missing, a patch or replacement without its target), and every
manifest against the Kubernetes JSON schemas bundled by kubernetes-validate (cert-manager's
kinds, which those schemas do not have, against a structural check of their own).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from gpulint.webhook.evaluator import EVALUATED_KINDS
from gpulint.webhook.options import add_serve_options, options_from_args

from ..conftest import lint_paths
from .harness import free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAY = DEPLOY / "overlays" / "without-cert-manager"
KUBERNETES_VERSION = "1.30"

# (group, resource) the webhook's cluster inventory lists and watches: the evaluated kinds,
# and ConfigMaps (the prometheus-adapter config).
WATCHED = {
    ("autoscaling", "horizontalpodautoscalers"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("keda.sh", "scaledobjects"),
    ("serving.kserve.io", "inferenceservices"),
    ("serving.knative.dev", "services"),
    ("serving.knative.dev", "configurations"),
    ("", "configmaps"),
}
KIND_OF = {
    "horizontalpodautoscalers": "HorizontalPodAutoscaler",
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "scaledobjects": "ScaledObject",
    "inferenceservices": "InferenceService",
    "services": "Service",
    "configurations": "Configuration",
    "configmaps": "ConfigMap",
}


def kustomization(directory: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return data


def base_objects() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for name in kustomization(DEPLOY)["resources"]:
        objects.extend(d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d)
    return objects


def one(kind: str) -> dict[str, Any]:
    (found,) = [o for o in base_objects() if o["kind"] == kind]
    return found


def test_every_listed_resource_exists_and_every_manifest_is_listed() -> None:
    listed = kustomization(DEPLOY)["resources"]
    assert all((DEPLOY / name).is_file() for name in listed), listed
    on_disk = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == set(listed)


def test_gpulint_lints_its_own_deploy_cleanly() -> None:
    assert lint_paths(DEPLOY) == []


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


@pytest.mark.parametrize(
    "obj", base_objects(), ids=lambda o: f"{o['kind']}/{o['metadata']['name']}"
)
def test_every_manifest_validates_against_the_kubernetes_schemas(obj: dict[str, Any]) -> None:
    if obj["apiVersion"].startswith("cert-manager.io/"):
        _crd_structure(obj)
        return
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_cluster_role_reads_only_the_watched_kinds() -> None:
    role = one("ClusterRole")
    granted = set()
    for rule in role["rules"]:
        assert sorted(rule["verbs"]) == ["get", "list", "watch"]
        assert set(rule) == {"apiGroups", "resources", "verbs"}
        granted |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == WATCHED
    binding = one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (subject,) = binding["subjects"]
    account = one("ServiceAccount")
    assert (subject["name"], subject["namespace"]) == (
        account["metadata"]["name"],
        account["metadata"]["namespace"],
    )


def test_the_webhook_configuration_can_never_block_the_cluster() -> None:
    configuration = one("ValidatingWebhookConfiguration")
    service = one("Service")
    namespace = one("Namespace")["metadata"]["name"]
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
    assert sent == WATCHED
    evaluated = {(g, KIND_OF[r]) for g, r in sent if r != "configmaps"}
    assert evaluated == set(EVALUATED_KINDS)
    (adapter,) = [w for w in configuration["webhooks"] if w.get("objectSelector")]
    assert adapter["objectSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "prometheus-adapter"}
    }


def test_the_deployment_runs_hardened_and_highly_available() -> None:
    deployment = one("Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"] == labels
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"]["matchLabels"] == labels
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["serviceAccountName"] == one("ServiceAccount")["metadata"]["name"]
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
    budget = one("PodDisruptionBudget")
    assert budget["spec"]["selector"]["matchLabels"] == labels
    assert budget["spec"]["minAvailable"] == 1
    service = one("Service")
    assert service["spec"]["selector"] == labels
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert service["spec"]["ports"][0]["targetPort"] in port_names


def test_the_deployments_arguments_are_what_gpulint_serve_accepts() -> None:
    deployment = one("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    parser = argparse.ArgumentParser()
    add_serve_options(parser)
    options = options_from_args(parser.parse_args(container["args"]))
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["https"]
    assert options.port == port
    assert options.deadline < one("ValidatingWebhookConfiguration")["webhooks"][0]["timeoutSeconds"]
    assert options.shutdown_delay + options.shutdown_timeout <= pod["terminationGracePeriodSeconds"]
    (mount,) = container["volumeMounts"]
    assert options.tls_cert == f"{mount['mountPath']}/tls.crt"
    assert options.tls_key == f"{mount['mountPath']}/tls.key"
    (volume,) = pod["volumes"]
    assert volume["name"] == mount["name"]
    certificate = one("Certificate")
    assert volume["secret"]["secretName"] == certificate["spec"]["secretName"]


def test_cert_manager_issues_for_the_service_and_injects_its_ca() -> None:
    certificate = one("Certificate")
    service = one("Service")
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    assert set(certificate["spec"]["dnsNames"]) == {
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.cluster.local",
    }
    issuer = one("Issuer")
    assert certificate["spec"]["issuerRef"] == {
        "kind": "Issuer",
        "name": issuer["metadata"]["name"],
    }
    annotations = one("ValidatingWebhookConfiguration")["metadata"]["annotations"]
    assert annotations["cert-manager.io/inject-ca-from"] == (
        f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    )


# --- the overlay without cert-manager -------------------------------------------------------


def _matches(obj: dict[str, Any], selector: dict[str, Any]) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    have = {
        "group": group,
        "version": version,
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "namespace": obj["metadata"].get("namespace"),
    }
    return all(have[key] == value for key, value in selector.items())


def test_the_overlay_builds_on_the_base_and_its_patches_have_targets() -> None:
    overlay = kustomization(OVERLAY)
    assert overlay["resources"] == ["../.."]
    assert (OVERLAY / "../.." / "kustomization.yaml").resolve() == DEPLOY / "kustomization.yaml"
    objects = base_objects()
    deleted: list[dict[str, Any]] = []
    unannotated: list[str] = []
    for patch in overlay["patches"]:
        if "target" in patch:
            (target,) = [o for o in objects if _matches(o, patch["target"])]
            for operation in yaml.safe_load(patch["patch"]):
                assert operation["op"] == "remove"
                node: Any = target
                steps = [
                    s.replace("~1", "/").replace("~0", "~")
                    for s in operation["path"].strip("/").split("/")
                ]
                for step in steps:
                    node = node[step]
                unannotated.append(steps[-1])
            continue
        body = yaml.safe_load(patch["patch"])
        assert body.pop("$patch") == "delete"
        selector = {
            "kind": body["kind"],
            "name": body["metadata"]["name"],
            "namespace": body["metadata"]["namespace"],
        }
        (target,) = [o for o in objects if _matches(o, selector)]
        assert target["apiVersion"] == body["apiVersion"]
        deleted.append(target)
    # What is left needs no cert-manager: no object of its kinds, no CA injection.
    left = [o for o in objects if all(o is not d for d in deleted)]
    assert not [o for o in left if o["apiVersion"].startswith("cert-manager.io/")]
    assert unannotated == ["cert-manager.io/inject-ca-from"]
    assert not [
        o
        for o in left
        if any(k.startswith("cert-manager.io/") for k in o["metadata"].get("annotations", {}))
        and o["kind"] != "ValidatingWebhookConfiguration"
    ]


def test_the_overlay_makes_the_secret_the_deployment_mounts_and_the_ca_bundle() -> None:
    overlay = kustomization(OVERLAY)
    (generator,) = overlay["secretGenerator"]
    assert generator["type"] == "kubernetes.io/tls"
    assert overlay["generatorOptions"]["disableNameSuffixHash"] is True
    deployment = one("Deployment")
    (volume,) = deployment["spec"]["template"]["spec"]["volumes"]
    assert generator["name"] == volume["secret"]["secretName"]
    assert generator["namespace"] == deployment["metadata"]["namespace"]
    assert set(generator["files"]) == {"tls.crt", "tls.key", "ca.crt"}
    ignored = (OVERLAY / ".gitignore").read_text().split()
    assert set(generator["files"]) <= set(ignored)
    (replacement,) = overlay["replacements"]
    source = replacement["source"]
    assert (source["kind"], source["name"]) == ("Secret", generator["name"])
    assert source["fieldPath"] == "data.[ca.crt]"
    (target,) = replacement["targets"]
    configuration = one("ValidatingWebhookConfiguration")
    assert _matches(configuration, target["select"])
    assert target["fieldPaths"] == ["webhooks.*.clientConfig.caBundle"]
    assert target["options"] == {"create": True}
    assert all("clientConfig" in w for w in configuration["webhooks"])


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_the_overlays_certificate_script_makes_a_pair_the_api_server_would_accept(
    tmp_path: Path,
) -> None:
    """make-certificate.sh's files, served by gpulint serve, verified for the Service's DNS
    name against ca.crt as the API server verifies them (caBundle = ca.crt)."""
    work = tmp_path / "overlay"
    work.mkdir()
    shutil.copy(OVERLAY / "make-certificate.sh", work)
    made = subprocess.run(
        ["sh", str(work / "make-certificate.sh")], capture_output=True, text=True, timeout=60
    )
    assert made.returncode == 0, made.stderr
    files = {p.name for p in work.iterdir()}
    assert set(kustomization(OVERLAY)["secretGenerator"][0]["files"]) <= files
    assert "tls.csr" not in files
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpulint",
            "serve",
            f"--tls-cert={work / 'tls.crt'}",
            f"--tls-key={work / 'tls.key'}",
            f"--port={port}",
            "--bind=127.0.0.1",
            "--no-cluster",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        context = ssl.create_default_context(cafile=str(work / "ca.crt"))
        service = one("Service")["metadata"]
        name = f"{service['name']}.{service['namespace']}.svc"
        deadline = time.monotonic() + 30
        while True:
            try:
                with (
                    socket.create_connection(("127.0.0.1", port), 2) as raw,
                    context.wrap_socket(raw, server_hostname=name) as tls,
                ):
                    assert tls.version() in ("TLSv1.2", "TLSv1.3")
                    break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(30)
        log.close()
