"""``gpulint serve`` as a real process, reached over TLS by a client that verifies the CA.

* ``Certificates``: a CA and a serving certificate for localhost made with trustme, written
  where ``--tls-cert``/``--tls-key`` read them; ``rotate()`` writes a new pair from a new CA
  the way a Secret volume changes (new files swapped in under the same names).
* ``Webhook``: starts ``python -m gpulint serve`` on a free port, waits for it to listen, and
  speaks to it as the API server does (POST /validate with an AdmissionReview, verifying
  the server certificate against the CA).
* ``admission_review``: an AdmissionReview for an object, shaped like the API server's.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import trustme

from ..kubefake import KubeFake

ROOT = Path(__file__).resolve().parents[2]

# kind -> resource, as the API server names them in request.resource.
RESOURCES = {
    "HorizontalPodAutoscaler": "horizontalpodautoscalers",
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "ScaledObject": "scaledobjects",
    "InferenceService": "inferenceservices",
    "Service": "services",
    "Configuration": "configurations",
    "ConfigMap": "configmaps",
    "Pod": "pods",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "ResourceClaim": "resourceclaims",
    "Secret": "secrets",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Certificates:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.cert = directory / "tls.crt"
        self.key = directory / "tls.key"
        self.ca_file = directory / "ca.crt"
        self.generation = 0
        self.ca = trustme.CA()
        self._write(self.ca)

    def _write(self, ca: trustme.CA) -> None:
        issued = ca.issue_cert("localhost", "127.0.0.1")
        staging = self.directory / f".{self.generation}"
        staging.mkdir()
        issued.cert_chain_pems[0].write_to_path(str(staging / "tls.crt"))
        issued.private_key_pem.write_to_path(str(staging / "tls.key"))
        # Swap both files in by rename, as a Secret volume's atomic symlink swap does.
        os.replace(staging / "tls.crt", self.cert)
        os.replace(staging / "tls.key", self.key)
        staging.rmdir()
        ca.cert_pem.write_to_path(str(self.ca_file))

    def rotate(self, ca: trustme.CA | None = None) -> None:
        """A new serving pair issued by ``ca`` (a new CA by default)."""
        self.generation += 1
        self.ca = ca or trustme.CA()
        self._write(self.ca)

    def client_context(self, *cas: trustme.CA) -> ssl.SSLContext:
        """A client that verifies the server against ``cas`` (default: the current CA)."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        for ca in cas or (self.ca,):
            ca.configure_trust(context)
        return context


def admission_review(
    obj: dict[str, Any] | None,
    operation: str = "CREATE",
    *,
    old: dict[str, Any] | None = None,
    uid: str | None = None,
    dry_run: bool = False,
    sub_resource: str = "",
) -> dict[str, Any]:
    subject = obj if obj is not None else old
    assert subject is not None
    api_version, kind = subject["apiVersion"], subject["kind"]
    group, _, version = api_version.rpartition("/")
    metadata = subject.get("metadata") or {}
    gvk = {"group": group, "version": version, "kind": kind}
    resource = {"group": group, "version": version, "resource": RESOURCES.get(kind, "things")}
    request: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": gvk,
        "resource": resource,
        "requestKind": gvk,
        "requestResource": resource,
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace", ""),
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class Webhook:
    """One ``gpulint serve`` process."""

    def __init__(
        self,
        certificates: Certificates,
        log_path: Path,
        extra_args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        program: Sequence[str] = (sys.executable, "-m", "gpulint"),
        user: int | None = None,
        wait: bool = True,
    ) -> None:
        """``env`` is added to this process's environment; with ``user`` (a uid whose group
        is the same number) it is the whole environment."""
        self.certificates = certificates
        self.port = free_port()
        self.log_path = log_path
        args = [
            *program,
            "serve",
            f"--tls-cert={certificates.cert}",
            f"--tls-key={certificates.key}",
            f"--port={self.port}",
            "--bind=127.0.0.1",
            *extra_args,
        ]
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        as_user: dict[str, Any] = {}
        if user is not None:
            as_user = {"user": user, "group": user, "extra_groups": []}
        self.process = subprocess.Popen(
            args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd="/" if user is not None else str(log_path.parent),
            env=dict(env or {}) if user is not None else {**os.environ, **(env or {})},
            **as_user,
        )
        if wait:
            self.wait_listening()

    # --- lifecycle -----------------------------------------------------------------------

    def wait_listening(self, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.process.poll() is not None:
                raise AssertionError(f"gpulint serve exited early:\n{self.log_text()}")
            with contextlib.suppress(OSError):
                status, _ = self.get("/healthz", timeout=2)
                if status == 200:
                    return
            time.sleep(0.05)
        raise AssertionError(f"gpulint serve did not listen in {timeout} s:\n{self.log_text()}")

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        end = time.monotonic() + timeout
        body: dict[str, Any] = {}
        while time.monotonic() < end:
            status, body = self.get("/readyz")
            if status == 200:
                return body
            time.sleep(0.1)
        raise AssertionError(f"not ready after {timeout} s: {body}\n{self.log_text()}")

    def stop(self, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._log.close()
        return code

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        records = []
        for line in self.log_text().splitlines():
            with contextlib.suppress(ValueError):
                records.append(json.loads(line))
        return records

    # --- requests ------------------------------------------------------------------------

    def connection(
        self, context: ssl.SSLContext | None = None, timeout: float = 10.0
    ) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "localhost",
            self.port,
            context=context or self.certificates.client_context(),
            timeout=timeout,
        )

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
    ) -> tuple[int, bytes, http.client.HTTPResponse]:
        connection = self.connection(timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.read(), response
        finally:
            connection.close()

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
        status, body, _ = self.request("GET", path, timeout=timeout)
        return status, json.loads(body)

    def post_raw(
        self, body: bytes, content_type: str = "application/json"
    ) -> tuple[int, dict[str, Any]]:
        status, data, _ = self.request("POST", "/validate", body, {"Content-Type": content_type})
        return status, json.loads(data)

    def review(self, review: dict[str, Any]) -> dict[str, Any]:
        """POST an AdmissionReview; returns its response (after checking the envelope)."""
        status, answer = self.post_raw(json.dumps(review).encode())
        assert status == 200, answer
        assert answer["apiVersion"] == "admission.k8s.io/v1"
        assert answer["kind"] == "AdmissionReview"
        response: dict[str, Any] = answer["response"]
        assert response["uid"] == review["request"]["uid"]
        return response

    def metrics(self) -> Metrics:
        status, data, _ = self.request("GET", "/metrics")
        assert status == 200
        return Metrics(data.decode())


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Metrics:
    """The text exposition of /metrics, parsed."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: list[tuple[str, dict[str, str], float]] = []
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if match:
                labels = dict(_LABEL.findall(match.group(2) or ""))
                self.samples.append((match.group(1), labels, float(match.group(3))))

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels``."""
        found = [
            v
            for n, have, v in self.samples
            if n == name and all(have.get(k) == want for k, want in labels.items())
        ]
        assert found, f"no sample {name} {labels} in /metrics"
        return sum(found)


@contextlib.contextmanager
def running(
    certificates: Certificates, log_path: Path, extra_args: Sequence[str] = (), **kwargs: Any
) -> Iterator[Webhook]:
    webhook = Webhook(certificates, log_path, extra_args, **kwargs)
    try:
        yield webhook
    finally:
        webhook.stop()


@contextlib.contextmanager
def serving_cluster(
    kube: KubeFake, certificates: Certificates, directory: Path, *, ready: bool = True
) -> Iterator[Webhook]:
    """``gpulint serve`` whose caches read the fake API server ``kube`` (kubeconfig and log in
    ``directory``); with ``ready``, once its caches have synced."""
    kubeconfig = kube.write_kubeconfig(directory / "kubeconfig")
    webhook = Webhook(certificates, directory / "serve.log", [f"--kubeconfig={kubeconfig}"])
    try:
        if ready:
            webhook.wait_ready()
        yield webhook
    finally:
        webhook.stop()
