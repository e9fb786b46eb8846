"""``gpulint serve --client-ca``: /validate answers only clients with a certificate from the
bundle's CAs, as the API server presents one when its AdmissionConfiguration names it. Real
TLS with trustme: a client without a certificate gets 401 before its body is read, one whose
certificate another CA issued fails the handshake, one with the certificate is served; the
probes and /metrics need none; a rotated bundle replaces the old one.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from gpulint.webhook.options import OptionError, add_serve_options, options_from_args

from . import objects
from .harness import Certificates, Webhook, admission_review, running


class ClientCA:
    """A CA for the API server's client certificate, its bundle written where --client-ca
    reads it."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "client-ca.crt"
        self.ca = trustme.CA()
        self.ca.cert_pem.write_to_path(str(self.path))

    def rotate(self) -> None:
        """A new CA, swapped in by rename as a Secret volume swaps its files."""
        self.ca = trustme.CA()
        staging = self.path.with_suffix(".new")
        self.ca.cert_pem.write_to_path(str(staging))
        os.replace(staging, self.path)


def _with_certificate(
    hook: Webhook, ca: trustme.CA, common_name: str = "kube-apiserver"
) -> ssl.SSLContext:
    context = hook.certificates.client_context()
    ca.issue_cert("kube-apiserver.example", common_name=common_name).configure_cert(context)
    return context


def _review(hook: Webhook, context: ssl.SSLContext) -> tuple[int, dict[str, object]]:
    connection = hook.connection(context)
    try:
        body = json.dumps(admission_review(objects.half_gpu_deployment())).encode()
        connection.request("POST", "/validate", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.fixture
def client_ca(tmp_path: Path) -> ClientCA:
    return ClientCA(tmp_path)


@pytest.fixture
def guarded(certificates: Certificates, client_ca: ClientCA, tmp_path: Path) -> Iterator[Webhook]:
    args = ["--no-cluster", f"--client-ca={client_ca.path}", "--tls-check-interval=0.1"]
    with running(certificates, tmp_path / "serve.log", args) as hook:
        yield hook


def test_a_client_with_the_certificate_is_served(guarded: Webhook, client_ca: ClientCA) -> None:
    status, answer = _review(guarded, _with_certificate(guarded, client_ca.ca))
    assert status == 200
    assert answer["response"]["allowed"] is False  # type: ignore[index]


def test_a_client_without_a_certificate_gets_401_before_its_body_is_read(
    guarded: Webhook,
) -> None:
    raw = socket.create_connection(("127.0.0.1", guarded.port), timeout=10)
    sock = guarded.certificates.client_context().wrap_socket(raw, server_hostname="localhost")
    with sock:
        # a body announced and never sent: the answer cannot wait for it
        sock.sendall(
            b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 6000000\r\n\r\n"
        )
        started = time.monotonic()
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert time.monotonic() - started < 0.5
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401 ")
    assert json.loads(payload)["reason"] == "Unauthorized"
    metrics = guarded.metrics()
    assert metrics.value("gpulint_webhook_invalid_requests_total", reason="unauthenticated") == 1
    assert metrics.value("gpulint_webhook_buffered_body_bytes") == 0


def test_the_probes_and_metrics_need_no_certificate(guarded: Webhook) -> None:
    assert guarded.get("/healthz") == (200, {"ok": True})
    assert guarded.get("/readyz")[0] == 200
    assert guarded.request("GET", "/metrics")[0] == 200


def test_a_certificate_another_ca_issued_fails_the_handshake(guarded: Webhook) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _review(guarded, _with_certificate(guarded, trustme.CA()))


@pytest.mark.slow
def test_a_rotated_bundle_trusts_the_new_ca_and_no_longer_the_old(
    guarded: Webhook, client_ca: ClientCA
) -> None:
    old = client_ca.ca
    client_ca.rotate()
    deadline = time.monotonic() + 10
    while guarded.metrics().value("gpulint_webhook_certificate_reloads_total", result="ok") < 1:
        assert time.monotonic() < deadline, guarded.log_text()
        time.sleep(0.05)
    assert _review(guarded, _with_certificate(guarded, client_ca.ca))[0] == 200
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _review(guarded, _with_certificate(guarded, old))


def test_with_a_client_name_only_its_certificate_is_served(
    certificates: Certificates, client_ca: ClientCA, tmp_path: Path
) -> None:
    args = ["--no-cluster", f"--client-ca={client_ca.path}", "--client-cn=kube-apiserver"]
    with running(certificates, tmp_path / "serve.log", args) as hook:
        assert _review(hook, _with_certificate(hook, client_ca.ca))[0] == 200
        status, answer = _review(hook, _with_certificate(hook, client_ca.ca, "kubelet"))
        metrics = hook.metrics()
    assert status == 403
    assert answer["message"] == (
        "this webhook answers only the client certificate of CN=kube-apiserver (--client-cn), "
        "not one of CN=kubelet"
    )
    assert metrics.value("gpulint_webhook_invalid_requests_total", reason="forbidden") == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "holds no certificate"),
        (b"not a certificate\n", "holds no certificate"),
        (
            b"-----BEGIN CERTIFICATE-----\nbm90IGRlcg==\n-----END CERTIFICATE-----\n",
            "does not load as PEM certificates",
        ),
    ],
)
def test_a_bundle_without_a_usable_certificate_is_a_start_up_error(
    certificates: Certificates, tmp_path: Path, content: bytes, message: str
) -> None:
    bundle = tmp_path / "client-ca.crt"
    bundle.write_bytes(content)
    args = ["--no-cluster", f"--client-ca={bundle}"]
    hook = Webhook(certificates, tmp_path / "serve.log", args, wait=False)
    assert hook.process.wait(15) == 2
    hook.stop()
    assert f"the client CA bundle {bundle} {message}" in hook.log_text(), hook.log_text()


def test_a_client_name_without_the_cas_is_a_usage_error() -> None:
    parser = argparse.ArgumentParser()
    add_serve_options(parser)
    args = parser.parse_args(["--tls-cert=c", "--tls-key=k", "--client-cn=kube-apiserver"])
    with pytest.raises(OptionError, match="--client-cn needs --client-ca"):
        options_from_args(args)
