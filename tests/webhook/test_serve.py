"""``gpulint serve --no-cluster`` as a real process, over TLS, as the API server calls it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import ssl
import time
import warnings
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
import yaml
from gpulint.webhook.options import ServeOptions, add_serve_options, options_from_args
from gpulint.webhook.review import WARNING_RUNES, WARNINGS_TOTAL_RUNES, rule_warning

from gpulint.admission.overlay import FINDINGS_PER_RULE
from gpulint.cli import main
from gpulint.cluster.kinds import DEFAULT_CONFIGMAP_NAMESPACES

from ..conftest import lint_paths
from . import objects
from .harness import Certificates, Webhook, admission_review, running


def cli_findings(tmp_path: Path, obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """rule -> (message, fix) that `gpulint lint` reports for the object as a file."""
    path = tmp_path / "object.yaml"
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return {f.rule: (f.message, f.fix) for f in lint_paths(path)}


# --- verdicts --------------------------------------------------------------------------------


@pytest.mark.slow
def test_refuses_kserve_deploymentmode_as_a_field_with_the_cli_message(
    alone: Webhook, tmp_path: Path
) -> None:
    obj = objects.isvc_with_mode_field()
    response = alone.review(admission_review(obj))
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 403
    message = status["message"]
    assert message.startswith(
        "gpulint refused InferenceService default/triton-gpu (1 error):\n"
        "GL301 kserve-deploymentmode-field: "
    )
    cli_message, cli_fix = cli_findings(tmp_path, obj)["GL301"]
    assert f"GL301 kserve-deploymentmode-field: {cli_message}\n" in message
    for line in cli_fix.splitlines():
        assert f"\n    {line}" in message
    assert "serving.kserve.io/deploymentMode: Standard" in message  # KServe 0.20 by default
    # Below the deny level: a warning, prefixed with its rule ID.
    assert [w.split(":")[0] for w in response["warnings"]] == ["GL306"]


def test_warns_below_the_deny_level(alone: Webhook, tmp_path: Path) -> None:
    obj = objects.isvc_knative()
    response = alone.review(admission_review(obj))
    assert response["allowed"] is True
    assert "status" not in response
    (warning,) = response["warnings"]
    cli_message, _ = cli_findings(tmp_path, obj)["GL306"]
    # The headline of the message `gpulint lint` prints, and where to read the rest.
    assert warning == rule_warning("GL306", cli_message)
    assert warning.startswith("GL306: ")
    assert warning.endswith(" (gpulint explain GL306; docs/rules.md#gl306)")
    assert len(warning) <= WARNING_RUNES


def test_allows_a_correct_object_without_warnings(alone: Webhook) -> None:
    response = alone.review(admission_review(objects.isvc_standard()))
    assert response == {"uid": response["uid"], "allowed": True}


def test_dry_run_gets_the_same_answer(alone: Webhook) -> None:
    obj = objects.isvc_with_mode_field()
    real = alone.review(admission_review(obj, uid="real"))
    dry = alone.review(admission_review(obj, uid="dry", dry_run=True))
    assert {**real, "uid": "x"} == {**dry, "uid": "x"}


def test_an_update_keeps_problems_it_did_not_bring_as_warnings(alone: Webhook) -> None:
    broken = objects.isvc_with_mode_field()
    relabelled = json.loads(json.dumps(broken))
    relabelled["metadata"]["labels"] = {"team": "ml"}
    response = alone.review(admission_review(relabelled, "UPDATE", old=broken))
    assert response["allowed"] is True
    assert any(
        w.startswith("GL301 (already present): InferenceService triton-gpu sets ")
        for w in response["warnings"]
    ), response["warnings"]
    # The same object, broken by this update: refused.
    response = alone.review(admission_review(broken, "UPDATE", old=objects.isvc_standard()))
    assert response["allowed"] is False
    assert "GL301" in response["status"]["message"]


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
def test_delete_and_connect_are_allowed_without_evaluation(alone: Webhook, operation: str) -> None:
    broken = objects.isvc_with_mode_field()
    review = admission_review(None, operation, old=broken)
    response = alone.review(review)
    assert response == {"uid": review["request"]["uid"], "allowed": True}
    record = _decision(alone, review["request"]["uid"])
    assert record["verdict"] == "skipped"
    assert record["reason"] == operation.lower()


@pytest.mark.parametrize(
    ("review", "reason"),
    [
        (admission_review(objects.configmap()), "configmap"),
        (
            admission_review(
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"}}
            ),
            "kind",
        ),
        (admission_review(objects.isvc_with_mode_field(), sub_resource="status"), "subresource"),
    ],
    ids=["configmap-not-adapter", "pod", "subresource"],
)
def test_other_kinds_and_subresources_are_allowed_untouched(
    alone: Webhook, review: dict[str, Any], reason: str
) -> None:
    response = alone.review(review)
    assert response == {"uid": review["request"]["uid"], "allowed": True}
    assert _decision(alone, review["request"]["uid"])["reason"] == reason


def test_an_object_being_deleted_is_not_held_up(alone: Webhook) -> None:
    terminating = objects.isvc_with_mode_field()
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    terminating["metadata"]["finalizers"] = []
    review = admission_review(terminating, "UPDATE", old=terminating)
    assert alone.review(review)["allowed"] is True
    assert _decision(alone, review["request"]["uid"])["reason"] == "deleting"


def test_namespace_from_the_request_when_the_object_leaves_it_out(alone: Webhook) -> None:
    obj = objects.isvc_with_mode_field()
    del obj["metadata"]["namespace"]
    review = admission_review(obj)
    review["request"]["namespace"] = "team-a"
    response = alone.review(review)
    assert response["status"]["message"].startswith(
        "gpulint refused InferenceService team-a/triton-gpu"
    )


@pytest.mark.slow
def test_warnings_stay_within_the_api_servers_budget(
    certificates: Certificates, tmp_path: Path
) -> None:
    deployment = objects.deployment(gpus=None)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    containers = []
    for index in range(40):
        # A GPU request with no limit: GL501, once per container.
        one = json.loads(json.dumps(container))
        one["name"] = f"shard-{index:02d}-with-a-rather-long-container-name-to-fill-the-message"
        one["resources"] = {"requests": {"nvidia.com/gpu": "1"}}
        containers.append(one)
    deployment["spec"]["template"]["spec"]["containers"] = containers
    with running(certificates, tmp_path / "serve.log", ["--no-cluster", "--deny-on=never"]) as hook:
        response = hook.review(admission_review(deployment))
    assert response["allowed"] is True
    warnings = response["warnings"]
    assert 1 < len(warnings) < 40
    assert sum(len(w) for w in warnings) <= WARNINGS_TOTAL_RUNES
    assert all(len(w) <= WARNING_RUNES for w in warnings)
    assert all(w.isprintable() for w in warnings)
    assert all(w.startswith("GL501: ") for w in warnings[:-1])
    shown = len(warnings) - 1
    # An admission counts at most FINDINGS_PER_RULE findings of one rule: "or more".
    assert warnings[-1] == (
        f"gpulint: {FINDINGS_PER_RULE - shown} or more findings not shown; `gpulint lint` on "
        "the manifests lists all"
    )


@pytest.mark.parametrize(
    ("deny_on", "allowed", "warned"),
    [("warning", False, []), ("never", True, ["GL301", "GL306"])],
)
def test_deny_on(
    certificates: Certificates,
    tmp_path: Path,
    deny_on: str,
    allowed: bool,
    warned: list[str],
) -> None:
    with running(
        certificates, tmp_path / "serve.log", ["--no-cluster", f"--deny-on={deny_on}"]
    ) as hook:
        response = hook.review(admission_review(objects.isvc_with_mode_field()))
    assert response["allowed"] is allowed
    assert sorted(w.split(":")[0] for w in response.get("warnings", [])) == warned
    if not allowed:
        message = response["status"]["message"]
        assert "(1 error, 1 warning)" in message
        assert "\nGL301 " in message and "\nGL306 " in message


# --- failing open ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_passed_deadline_allows_with_a_warning_and_is_counted(
    certificates: Certificates, tmp_path: Path
) -> None:
    with running(
        certificates, tmp_path / "serve.log", ["--no-cluster", "--deadline=0.000001"]
    ) as hook:
        review = admission_review(objects.isvc_with_mode_field())
        response = hook.review(review)
        metrics = hook.metrics()
        record = _decision(hook, review["request"]["uid"])
    assert response["allowed"] is True
    assert response["warnings"] == [
        "gpulint could not evaluate InferenceService default/triton-gpu: its deadline of "
        "1e-06 s passed; the request was allowed unchecked"
    ]
    assert metrics.value("gpulint_webhook_fail_open_total", reason="deadline") == 1
    assert metrics.value("gpulint_webhook_fail_open_total", reason="error") == 0
    assert (
        metrics.value(
            "gpulint_webhook_requests_total",
            kind="InferenceService",
            operation="CREATE",
            verdict="fail-open",
        )
        == 1
    )
    assert record["verdict"] == "fail-open" and record["reason"] == "deadline"


# --- requests gpulint cannot answer ----------------------------------------------------------

_VALID = admission_review(objects.isvc_standard(), uid="u-1")


def _mutated(path: list[str], value: Any, *, delete: bool = False) -> bytes:
    review = json.loads(json.dumps(_VALID))
    node = review
    for step in path[:-1]:
        node = node[step]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return json.dumps(review).encode()


BAD_BODIES = [
    ("empty", b"", "empty", "the request body is empty; expected an AdmissionReview"),
    ("not-json", b"{not json", "not-json", "the request body is not JSON: "),
    ("not-utf8", b'{"a": "\xff"}', "not-json", "the request body is not UTF-8 JSON (byte 7)"),
    ("array", b"[]", "not-review", "the request body is a JSON array; expected an"),
    ("string", b'"AdmissionReview"', "not-review", "the request body is a JSON string"),
    # read with what lies past 100 levels cut (test_hostile_depth.py): an array, no review
    ("nested", b"[" * 100000 + b"]" * 100000, "not-review", "the request body is a JSON array"),
    ("wrong-kind", _mutated(["kind"], "Pod"), "wrong-kind", 'kind is "Pod"; expected'),
    ("no-kind", _mutated(["kind"], None, delete=True), "wrong-kind", "kind is missing"),
    (
        "v1beta1",
        _mutated(["apiVersion"], "admission.k8s.io/v1beta1"),
        "wrong-api-version",
        'apiVersion is "admission.k8s.io/v1beta1"; gpulint answers admission.k8s.io/v1 only',
    ),
    ("no-request", _mutated(["request"], None, delete=True), "no-request", "has no request"),
    ("null-request", _mutated(["request"], None), "no-request", "has no request"),
    ("list-request", _mutated(["request"], []), "no-request", "request is a JSON array"),
    ("no-uid", _mutated(["request", "uid"], None, delete=True), "no-uid", "request.uid is"),
    ("empty-uid", _mutated(["request", "uid"], " "), "no-uid", "request.uid is missing or"),
    ("number-uid", _mutated(["request", "uid"], 7), "no-uid", "request.uid is missing or"),
    (
        "bad-operation",
        _mutated(["request", "operation"], "PATCH"),
        "bad-operation",
        'request.operation is "PATCH"; expected one of CREATE, UPDATE, DELETE, CONNECT',
    ),
    (
        "no-object",
        _mutated(["request", "object"], None),
        "bad-object",
        "request.object is missing for a CREATE",
    ),
    ("list-object", _mutated(["request", "object"], []), "bad-object", "request.object is a"),
    (
        "bad-request-kind",
        _mutated(["request", "kind"], {"group": "apps"}),
        "bad-kind",
        "request.kind needs string group, version and kind",
    ),
]


@pytest.mark.parametrize(
    ("body", "reason", "message"),
    [case[1:] for case in BAD_BODIES],
    ids=[case[0] for case in BAD_BODIES],
)
def test_malformed_requests_get_400_with_a_message(
    alone: Webhook, body: bytes, reason: str, message: str
) -> None:
    before = (
        alone.metrics().value("gpulint_webhook_invalid_requests_total", reason=reason)
        if (f'reason="{reason}"' in alone.metrics().text)
        else 0.0
    )
    status, answer = alone.post_raw(body)
    assert status == 400
    assert answer["kind"] == "Status" and answer["code"] == 400
    assert answer["reason"] == "BadRequest"
    assert answer["message"].startswith(message) or message in answer["message"]
    assert "Traceback" not in answer["message"]
    after = alone.metrics().value("gpulint_webhook_invalid_requests_total", reason=reason)
    assert after == before + 1
    # And the server goes on answering.
    assert alone.review(admission_review(objects.isvc_standard()))["allowed"] is True


@pytest.mark.slow
def test_a_body_over_the_limit_is_refused_before_it_is_read(
    certificates: Certificates, tmp_path: Path
) -> None:
    obj = objects.configmap()
    obj["data"] = {"big": "x" * 4096}
    body = json.dumps(admission_review(obj)).encode()
    with running(
        certificates, tmp_path / "serve.log", ["--no-cluster", "--max-body-bytes=2048"]
    ) as hook:
        status, answer = hook.post_raw(body)
        assert status == 400
        assert answer["message"] == (
            f"the request body is {len(body)} bytes, over the limit of 2048 (--max-body-bytes)"
        )
        # Sent in chunks, without a length: refused once the limit is passed.
        connection = hook.connection()
        connection.putrequest("POST", "/validate")
        connection.putheader("Transfer-Encoding", "chunked")
        connection.putheader("Content-Type", "application/json")
        connection.endheaders()
        for start in range(0, len(body), 1000):
            piece = body[start : start + 1000]
            connection.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        connection.send(b"0\r\n\r\n")
        response = connection.getresponse()
        chunked = json.loads(response.read())
        connection.close()
        assert response.status == 400
        assert chunked["message"] == (
            "the request body is over the limit of 2048 bytes (--max-body-bytes)"
        )
        assert (
            hook.metrics().value("gpulint_webhook_invalid_requests_total", reason="too-large") == 2
        )


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/validate", 405), ("POST", "/mutate", 404), ("PUT", "/healthz", 405)],
)
def test_wrong_method_or_path_is_a_json_status(
    alone: Webhook, method: str, path: str, status: int
) -> None:
    got, body, response = alone.request(method, path, b"{}")
    assert got == status
    assert response.getheader("Content-Type", "").startswith("application/json")
    answer = json.loads(body)
    assert answer["kind"] == "Status" and answer["code"] == status


# --- TLS -------------------------------------------------------------------------------------


def test_tls_is_verified_against_the_ca_and_needs_tls_1_2(
    alone: Webhook, module_certificates: Certificates
) -> None:
    stranger = module_certificates.client_context(trustme.CA())
    with pytest.raises(ssl.SSLCertVerificationError):
        alone.connection(stranger).request("GET", "/healthz")
    old = module_certificates.client_context()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    with contextlib.suppress(ssl.SSLError):
        old.set_ciphers("ALL:@SECLEVEL=0")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        alone.connection(old).request("GET", "/healthz")
    tls12 = module_certificates.client_context()
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    connection = alone.connection(tls12)
    connection.request("GET", "/healthz")
    assert connection.getresponse().status == 200
    assert connection.sock.version() == "TLSv1.2"
    connection.close()


# --- probes, metrics, logs -------------------------------------------------------------------


def test_probes_and_metrics(alone: Webhook) -> None:
    assert alone.get("/healthz") == (200, {"ok": True})
    assert alone.get("/readyz") == (200, {"ready": True, "caches": {}})
    review = admission_review(objects.isvc_with_mode_field())
    alone.review(review)
    metrics = alone.metrics()
    assert metrics.value("gpulint_webhook_cache_synced") == 1
    assert (
        metrics.value(
            "gpulint_webhook_requests_total",
            kind="InferenceService",
            operation="CREATE",
            verdict="denied",
        )
        >= 1
    )
    assert metrics.value("gpulint_webhook_findings_total", rule="GL301", severity="error") >= 1
    assert metrics.value("gpulint_webhook_findings_total", rule="GL306", severity="warning") >= 1
    assert metrics.value("gpulint_webhook_request_duration_seconds_count", verdict="denied") >= 1
    assert metrics.value(
        "gpulint_webhook_request_duration_seconds_bucket", verdict="denied", le="+Inf"
    ) == metrics.value("gpulint_webhook_request_duration_seconds_count", verdict="denied")
    for reason in ("not-synced", "deadline", "error"):
        assert metrics.value("gpulint_webhook_fail_open_total", reason=reason) == 0


def test_one_log_line_per_decision_without_object_contents(alone: Webhook) -> None:
    obj = objects.isvc_with_mode_field()
    obj["metadata"]["annotations"] = {"team.example/token": "s3cr3t-t0ken"}
    review = admission_review(obj, uid="log-check")
    review["request"]["userInfo"] = {"username": "alice@example.com", "groups": ["devs"]}
    alone.review(review)
    lines = [r for r in alone.log_records() if r.get("uid") == "log-check"]
    assert len(lines) == 1
    (record,) = lines
    assert record["event"] == "decision"
    assert record["verdict"] == "denied"
    assert record["kind"] == "serving.kserve.io/v1beta1 InferenceService"
    assert (record["namespace"], record["name"], record["operation"]) == (
        "default",
        "triton-gpu",
        "CREATE",
    )
    assert record["rules"] == ["GL301", "GL306"] and record["refused"] == ["GL301"]
    assert isinstance(record["ms"], float)
    text = alone.log_text()
    for secret in ("s3cr3t-t0ken", "alice@example.com", "gs://models/triton", "RawDeployment"):
        assert secret not in text


# --- load ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_flood_of_concurrent_requests_is_answered_within_the_deadline(
    alone: Webhook, module_certificates: Certificates
) -> None:
    count = 600
    reviews = [
        admission_review(
            objects.isvc_with_mode_field(f"isvc-{i}")
            if i % 3 == 0
            else objects.deployment(f"app-{i}")
            if i % 3 == 1
            else objects.gpu_hpa(f"hpa-{i}"),
            uid=f"flood-{i}",
        )
        for i in range(count)
    ]
    before = alone.metrics()
    total_before = sum(v for n, _, v in before.samples if n == "gpulint_webhook_requests_total")

    async def flood() -> list[tuple[str, bool, float]]:
        connector = aiohttp.TCPConnector(
            ssl=module_certificates.client_context(), limit=200, force_close=False
        )
        async with aiohttp.ClientSession(connector=connector) as session:

            async def one(review: dict[str, Any]) -> tuple[str, bool, float]:
                started = time.monotonic()
                async with session.post(
                    f"https://localhost:{alone.port}/validate", json=review
                ) as response:
                    assert response.status == 200
                    answer = await response.json()
                return (
                    answer["response"]["uid"],
                    answer["response"]["allowed"],
                    time.monotonic() - started,
                )

            return await asyncio.gather(*(one(r) for r in reviews))

    results = asyncio.run(flood())
    assert [uid for uid, _, _ in results] == [r["request"]["uid"] for r in reviews]
    assert [allowed for _, allowed, _ in results] == [i % 3 != 0 for i in range(count)]
    after = alone.metrics()
    total_after = sum(v for n, _, v in after.samples if n == "gpulint_webhook_requests_total")
    assert total_after - total_before == count
    # Every answer came from an evaluation: no request fell back to failing open.
    for reason in ("not-synced", "deadline", "error"):
        assert after.value("gpulint_webhook_fail_open_total", reason=reason) == before.value(
            "gpulint_webhook_fail_open_total", reason=reason
        )
    # Server-side, each answer stayed within the 2 s deadline.
    assert after.value("gpulint_webhook_request_duration_seconds_bucket", le="2.5") == after.value(
        "gpulint_webhook_request_duration_seconds_count"
    )


# --- certificate rotation --------------------------------------------------------------------


@pytest.mark.slow
def test_certificate_rotation_while_requests_flow(
    certificates: Certificates, tmp_path: Path
) -> None:
    old_ca, new_ca = certificates.ca, trustme.CA()
    # The API server trusts both CAs while cert-manager's CA injector updates the caBundle.
    trusting_both = certificates.client_context(old_ca, new_ca)
    outcomes: list[tuple[float, str, bool]] = []  # (handshake done, issuer, answered 200)
    with running(
        certificates, tmp_path / "serve.log", ["--no-cluster", "--tls-check-interval=0.1"]
    ) as hook:
        body = json.dumps(admission_review(objects.isvc_standard())).encode()
        request = (
            b"POST /validate HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

        async def client(stop: asyncio.Event) -> None:
            while not stop.is_set():
                reader, writer = await asyncio.open_connection(
                    "localhost", hook.port, ssl=trusting_both
                )
                shaken = time.monotonic()
                peer = writer.get_extra_info("ssl_object").getpeercert()
                issuer = dict(x[0] for x in peer["issuer"])["organizationalUnitName"]
                writer.write(request)
                data = await reader.read()
                writer.close()
                outcomes.append((shaken, issuer, data.startswith(b"HTTP/1.1 200")))

        async def scenario() -> None:
            stop = asyncio.Event()
            tasks = [asyncio.create_task(client(stop)) for _ in range(4)]
            await asyncio.sleep(0.5)
            certificates.rotate(new_ca)
            await asyncio.sleep(1.5)
            stop.set()
            await asyncio.gather(*tasks)

        asyncio.run(scenario())
        reloads = hook.metrics().value("gpulint_webhook_certificate_reloads_total", result="ok")
    assert outcomes and all(ok for *_, ok in outcomes), "a request failed during the rotation"
    # Four clients finish in any order: order the connections by when their handshake ended.
    outcomes.sort()
    issuers = [issuer for _, issuer, _ in outcomes]
    assert len(set(issuers)) == 2, "the new certificate was never served"
    assert issuers[0] != issuers[-1]
    # Once the new pair is served, no new connection sees the old one again; a handshake
    # the server began before the swap may still end a moment after one it began after.
    first_new = next(done for done, issuer, _ in outcomes if issuer == issuers[-1])
    late_old = [done - first_new for done, issuer, _ in outcomes if issuer != issuers[-1]]
    assert max(late_old) < 0.25, late_old
    assert reloads == 1


@pytest.mark.slow
def test_a_half_written_pair_is_not_loaded(certificates: Certificates, tmp_path: Path) -> None:
    old_ca, new_ca = certificates.ca, trustme.CA()
    with running(
        certificates, tmp_path / "serve.log", ["--no-cluster", "--tls-check-interval=0.1"]
    ) as hook:
        issued = new_ca.issue_cert("localhost", "127.0.0.1")
        issued.cert_chain_pems[0].write_to_path(str(certificates.cert))  # the key comes later
        time.sleep(0.6)
        # The old pair is still served.
        old_client = hook.connection(certificates.client_context(old_ca))
        old_client.request("GET", "/healthz")
        assert old_client.getresponse().status == 200
        old_client.close()
        metrics = hook.metrics()
        assert metrics.value("gpulint_webhook_certificate_reloads_total", result="error") >= 1
        assert metrics.value("gpulint_webhook_certificate_reloads_total", result="ok") == 0
        issued.private_key_pem.write_to_path(str(certificates.key))
        certificates.ca = new_ca
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                hook.get("/healthz")
                break
            except ssl.SSLCertVerificationError:
                time.sleep(0.1)
        assert hook.get("/healthz") == (200, {"ok": True})
        with pytest.raises(ssl.SSLCertVerificationError):
            hook.connection(certificates.client_context(old_ca)).request("GET", "/healthz")
        failures = [r for r in hook.log_records() if r["event"] == "certificate-reload-failed"]
    assert len(failures) == 1
    assert "do not load as a pair (KEY_VALUES_MISMATCH)" in failures[0]["message"]


# --- shutdown --------------------------------------------------------------------------------


@pytest.mark.slow
def test_sigterm_drains_requests_in_flight(certificates: Certificates, tmp_path: Path) -> None:
    hook = Webhook(certificates, tmp_path / "serve.log", ["--no-cluster", "--shutdown-delay=1"])
    try:
        body = json.dumps(admission_review(objects.isvc_with_mode_field(), uid="late")).encode()
        connection = hook.connection(timeout=20)
        connection.putrequest("POST", "/validate")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders()
        connection.send(body[:100])  # a request in flight, its body half sent
        time.sleep(0.3)
        hook.process.send_signal(15)
        time.sleep(0.3)
        # During --shutdown-delay: not ready, still answering.
        assert hook.get("/readyz") == (503, {"ready": False, "reason": "shutting down"})
        connection.send(body[100:])
        response = connection.getresponse()
        answer = json.loads(response.read())
        connection.close()
        assert response.status == 200
        assert answer["response"]["uid"] == "late" and answer["response"]["allowed"] is False
        assert hook.process.wait(20) == 0
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", hook.port), 1):
            pass
        events = [r["event"] for r in hook.log_records()]
        assert events[-2:] == ["shutting-down", "stopped"] or events[-1] == "stopped"
    finally:
        hook.stop()


# --- start-up errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--deadline=0"], "--deadline must be a number of seconds above 0"),
        (["--deadline=31"], "--deadline must stay under the API server's webhook timeout"),
        (["--port=70000"], "--port must be 1-65535, not 70000"),
        (
            ["--adapter-configmap=monitoring/Adapter"],
            "--adapter-configmap: 'monitoring/Adapter' is not a ConfigMap as NAMESPACE/NAME",
        ),
        (
            ["--adapter-configmap-selector=a=(b"],
            "--adapter-configmap-selector: 'a=(b' is not a label selector",
        ),
        (["--kubeconfig=/nonexistent"], "--no-cluster reads no cluster"),
        (
            ["--configmap-namespaces=monitoring,Kserve"],
            "--configmap-namespaces: 'Kserve' is not a namespace name",
        ),
        (["--configmap-namespaces=kserve"], "--no-cluster reads no cluster"),
    ],
)
def test_usage_errors_exit_2(
    certificates: Certificates, tmp_path: Path, args: list[str], message: str
) -> None:
    hook = Webhook(certificates, tmp_path / "serve.log", ["--no-cluster", *args], wait=False)
    assert hook.process.wait(30) == 2
    hook.stop()
    assert message in hook.log_text()


def test_one_default_for_the_configmap_namespaces(capsys: pytest.CaptureFixture[str]) -> None:
    """gpulint serve's options spell out the caches' default; both commands' help shows it."""
    parser = argparse.ArgumentParser()
    add_serve_options(parser)
    options = options_from_args(parser.parse_args(["--tls-cert=c", "--tls-key=k"]))
    assert options.configmap_namespaces == DEFAULT_CONFIGMAP_NAMESPACES
    assert ServeOptions("c", "k").configmap_namespaces == DEFAULT_CONFIGMAP_NAMESPACES
    repeated = parser.parse_args(
        ["--tls-cert=c", "--tls-key=k", "--configmap-namespaces=a,b", "--configmap-namespaces=c"]
    )
    assert options_from_args(repeated).configmap_namespaces == ("a", "b", "c")
    for command in ("serve", "lint"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        shown = " ".join(capsys.readouterr().out.split())
        assert f"default: {','.join(DEFAULT_CONFIGMAP_NAMESPACES)}; * for every" in shown, command


def test_an_unreadable_certificate_exits_2(certificates: Certificates, tmp_path: Path) -> None:
    certificates.key.write_text("not a key")
    hook = Webhook(certificates, tmp_path / "serve.log", ["--no-cluster"], wait=False)
    assert hook.process.wait(30) == 2
    hook.stop()
    assert "the certificate and key do not load as a pair" in hook.log_text()


def _decision(hook: Webhook, uid: str) -> dict[str, Any]:
    for record in reversed(hook.log_records()):
        if record.get("event") == "decision" and record.get("uid") == uid:
            return record
    raise AssertionError(f"no decision logged for {uid}")


def test_broken_http_is_refused_and_every_log_line_stays_json(alone: Webhook) -> None:
    context = alone.certificates.client_context()

    def exchange(payload: bytes, *, half_close: bool = False) -> bytes:
        with (
            socket.create_connection(("127.0.0.1", alone.port), 5) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            tls.sendall(payload)
            if half_close:
                return b""
            tls.settimeout(5)
            return tls.recv(65536)

    gzip = exchange(
        b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: 5\r\n\r\nhello"
    )
    assert gzip.startswith(b"HTTP/1.1 400 ")
    body = json.loads(gzip.split(b"\r\n\r\n", 1)[1])
    assert body["message"].startswith("the request body cannot be read: ")
    framing = exchange(
        b"POST /validate HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\nabc\r\n0\r\n\r\n"
    )
    assert framing.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request")
    # A client that goes away with its body half sent.
    exchange(
        b'POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n{"a"',
        half_close=True,
    )
    time.sleep(0.3)
    assert alone.review(admission_review(objects.isvc_standard()))["allowed"] is True
    lines = alone.log_text().splitlines()
    assert lines and all(json.loads(line) for line in lines)
    assert "Traceback" not in alone.log_text()
