"""Hostile AdmissionReviews through the server's own aiohttp application: every body is an
AdmissionReview answered by its uid or a 400 JSON Status, within the deadline, never a 500;
what a request sends never becomes a metric label, and reaches the log short and escaped.

The application is the real one (``WebhookApp`` with the ``--no-cluster`` evaluator), served
by aiohttp's test server on loopback; only the TLS in front of it is left out (the process
tests in test_hostile_serve.py have it).
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from gpulint.webhook.app import WebhookApp
from gpulint.webhook.evaluator import StandaloneEvaluator
from gpulint.webhook.logs import MAX_FIELD_CHARS, JsonLog
from gpulint.webhook.metrics import WebhookMetrics
from gpulint.webhook.review import REVIEW_DEPTH
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpulint.cluster.decoding import loads_bounded
from gpulint.cluster.kinds import AdapterConfigMapSelector
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection
from gpulint.input.yamlparse import read_json

from . import objects
from .harness import Metrics, admission_review

DEADLINE = 2.0
REQUESTS = "gpulint_webhook_requests_total"


class Served:
    """One application on a test server, driven from synchronous tests (hypothesis)."""

    def __init__(self, metrics: WebhookMetrics | None = None, **options: Any) -> None:
        self.stream = io.StringIO()
        self.webhook = WebhookApp(
            StandaloneEvaluator(Settings(), Selection()),
            deny_on="error",
            deadline=DEADLINE,
            max_body_bytes=6 * 1024 * 1024,
            adapter_configmaps=AdapterConfigMapSelector.parse(None, None),
            log=JsonLog(self.stream),
            metrics=metrics or WebhookMetrics(),
            **options,
        )
        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(self._start())

    async def _start(self) -> TestClient[Any, Any]:
        client = TestClient(TestServer(self.webhook.application()))
        await client.start_server()
        return client

    def post(self, body: bytes) -> tuple[int, str, float]:
        async def send() -> tuple[int, str]:
            answer = await self.client.post(
                "/validate", data=body, headers={"Content-Type": "application/json"}
            )
            return answer.status, await answer.text()

        started = time.monotonic()
        status, text = self.loop.run_until_complete(send())
        return status, text, time.monotonic() - started

    def review(self, review: dict[str, Any]) -> dict[str, Any]:
        status, text, _ = self.post(json.dumps(review).encode())
        assert status == 200, text
        answer: dict[str, Any] = json.loads(text)["response"]
        return answer

    def metrics(self) -> Metrics:
        async def scrape() -> str:
            return await (await self.client.get("/metrics")).text()

        return Metrics(self.loop.run_until_complete(scrape()))

    def log_lines(self) -> list[str]:
        return self.stream.getvalue().splitlines()

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    server = Served()
    yield server
    server.close()


def _status_400(status: int, text: str) -> dict[str, Any]:
    assert status == 400, text
    body: dict[str, Any] = json.loads(text)
    assert (body["kind"], body["code"], body["status"]) == ("Status", 400, "Failure")
    return body


def _with_raw(review: dict[str, Any], raw: str, where: tuple[str | int, ...]) -> bytes:
    """The review as JSON with the raw JSON text ``raw`` at ``where``."""
    node: Any = review
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = "\x00RAW\x00"
    return json.dumps(review).replace('"\\u0000RAW\\u0000"', raw).encode()


# --- numbers, depth, encoding ---------------------------------------------------------------

ANNOTATION = ("request", "object", "metadata", "annotations", "team.example/note")


def _annotated() -> dict[str, Any]:
    obj = objects.deployment()
    obj["metadata"]["annotations"] = {"team.example/note": "placeholder"}
    return admission_review(obj, uid="hostile")


@pytest.mark.parametrize(
    "raw",
    ["9" * 4_301, "-" + "1" * 10_000, "1e400", "-1e400", "1" * 99 + ".5e-400", '"\\ud800"'],
    ids=["4301-digits", "10000-digits", "1e400", "-1e400", "tiny", "lone-surrogate"],
)
def test_numbers_no_api_server_sends_are_answered(served: Served, raw: str) -> None:
    status, text, _ = served.post(_with_raw(_annotated(), raw, ANNOTATION))
    assert status == 200, text
    answer = json.loads(text)
    assert answer["response"]["uid"] == "hostile"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # read with its parts past 100 levels cut (test_hostile_depth.py): not a review
        (b"[" * 100_000 + b"]" * 100_000, "is a JSON array; expected an AdmissionReview"),
        (b'{"kind": NaN}', "not JSON: NaN is not a JSON value"),
        (b'{"kind": -Infinity}', "not JSON: -Infinity is not a JSON value"),
        (b'{"apiVersion": "\xff\xfe"}', "not UTF-8 JSON (byte 16)"),
        (b'{"a": 1', "not JSON: Expecting ',' delimiter"),
    ],
    ids=["deep", "nan", "infinity", "latin1", "truncated"],
)
def test_bodies_the_json_reader_rejects_are_400(served: Served, body: bytes, message: str) -> None:
    status, text, _ = served.post(body)
    assert message in _status_400(status, text)["message"]


def test_a_uid_with_a_lone_surrogate_comes_back_as_sent(served: Served) -> None:
    review = admission_review(objects.deployment())
    body = json.dumps(review).replace(review["request"]["uid"], "\\ud83d-uid").encode()
    status, text, _ = served.post(body)
    assert status == 200, text
    assert json.loads(text)["response"]["uid"] == "\ud83d-uid"


def test_a_huge_gpu_count_in_a_second_container_does_not_allow_a_fraction(
    served: Served,
) -> None:
    obj = objects.deployment()
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    container["resources"]["limits"]["nvidia.com/gpu"] = "0.5"
    second = json.loads(json.dumps(container))
    second["name"] = "sidecar"
    second["resources"]["limits"]["nvidia.com/gpu"] = "1e3000000"
    obj["spec"]["template"]["spec"]["containers"].append(second)
    response = served.review(admission_review(obj))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert message.startswith("gpulint refused Deployment llm/llm-server (2 errors):")
    assert (
        "Deployment llm/llm-server: container server: limits nvidia.com/gpu is not a whole "
        "number. Its value '0.5'" in message
    )
    assert "container sidecar: limits nvidia.com/gpu is out of range. Its value '1e3000000'" in (
        message
    )


def test_a_raw_huge_integer_gpu_count_is_denied_as_out_of_range(served: Served) -> None:
    obj = objects.deployment()
    review = admission_review(obj, uid="raw")
    where = ("request", "object", "spec", "template", "spec", "containers", 0, "resources")
    body = _with_raw(review, '{"limits": {"nvidia.com/gpu": %s}}' % ("7" * 5_000), where)
    status, text, _ = served.post(body)
    assert status == 200, text
    response = json.loads(text)["response"]
    assert response["allowed"] is False
    assert "(5,000 characters)' is out of range" in response["status"]["message"]


# --- metrics and logs -----------------------------------------------------------------------


def test_kinds_chosen_by_requests_are_counted_as_other() -> None:
    served = Served()
    try:
        for index in range(300):
            review = admission_review(objects.configmap(), uid=f"kind-{index}")
            review["request"]["kind"]["kind"] = f"{index:05d}" + "K" * (64 * 1024)
            review["request"]["kind"]["group"] = "evil.example"
            assert served.review(review)["allowed"] is True
        served.review(admission_review(objects.deployment()))
        metrics = served.metrics()
        assert len(metrics.text) < 20_000, len(metrics.text)
        kinds = {labels["kind"] for name, labels, _ in metrics.samples if name == REQUESTS}
        assert kinds == {"other", "Deployment"}
        value = metrics.value("gpulint_webhook_requests_total", kind="other", verdict="skipped")
        assert value == 300
        lines = served.log_lines()
        assert len(lines) == 301
        assert max(len(line) for line in lines) < 4 * MAX_FIELD_CHARS
    finally:
        served.close()


def test_strings_chosen_by_requests_reach_the_log_short_and_escaped(served: Served) -> None:
    before = len(served.log_lines())
    obj = objects.deployment()
    name = "x\x1b]0;pwned\x07\u009b31m\u2028\u202e" + "n" * 100_000
    obj["metadata"]["name"] = name
    review = admission_review(obj, uid="u" * 1_000_000)
    review["request"]["name"] = name
    served.review(review)
    (line,) = served.log_lines()[before:]
    for raw in ("\x1b", "\x07", "\x9b", "\u2028", "\u202e"):
        assert raw not in line, repr(raw)
    record = json.loads(line)
    assert record["name"].startswith("x\x1b]0;pwned\x07\x9b31m\u2028\u202e")  # the same text
    assert record["name"].endswith("(100,017 characters)")
    assert record["uid"].endswith("(1,000,000 characters)")
    assert len(line) < 3 * MAX_FIELD_CHARS


def test_a_denial_shows_the_objects_control_characters_as_escapes(served: Served) -> None:
    """kubectl prints a denial on the terminal of whoever applied the object."""
    obj = objects.deployment(name="llm\x1b]0;pwned\x07")
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    container["name"] = "server\n::error file=x::y\u009b"
    container["resources"]["limits"]["nvidia.com/gpu"] = "0.5"
    response = served.review(admission_review(obj))
    assert response["allowed"] is False
    message = response["status"]["message"]
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in message
    assert message.startswith("gpulint refused Deployment llm/llm\\x1b]0;pwned\\x07 (1 error):")
    assert "llm\\x1b]0;pwned\\x07: container server\\n::error file=x::y\\x9b: limits" in message
    assert not [line for line in message.split("\n") if line.lstrip().startswith("::")]


class _BrokenMetrics(WebhookMetrics):
    """A page that fails to render, the way a bug in the exposition would."""

    def exposition(self) -> bytes:
        raise RuntimeError("broken")


def test_an_error_outside_any_review_is_a_400_json_status() -> None:
    served = Served(_BrokenMetrics())
    try:

        async def scrape() -> tuple[int, str]:
            answer = await served.client.get("/metrics")
            return answer.status, await answer.text()

        status, text = served.loop.run_until_complete(scrape())
        body = _status_400(status, text)
        assert body["message"] == "gpulint could not answer this request (RuntimeError)"
        (record,) = [json.loads(line) for line in served.log_lines()]
        assert record["event"] == "request-error" and record["error"] == "RuntimeError"
    finally:
        served.close()


# --- mutated reviews, generated -------------------------------------------------------------

_SEEDS = (
    objects.deployment,
    objects.cpu_hpa,
    objects.gpu_hpa,
    objects.isvc_with_mode_field,
    objects.isvc_knative,
    objects.configmap,
)
_CONTROL = st.characters(
    codec="utf-8",
    categories=("Cc", "Cf", "Zl", "Zp", "Lu", "Nd"),
    include_characters="\x00\x1b\x07\n\r\t\x7f\x85\x9b\u2028\u202e",
)
_NUMBERS = st.one_of(
    st.integers().map(str),
    st.integers(min_value=1, max_value=6_000).map(lambda n: "9" * n),
    st.integers(min_value=1, max_value=400).map(lambda n: f"1e{n * 3}"),
    st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
    st.sampled_from(["-0", "0.0", "1e-400", "1.5e308", "-1e400", "0.000000001", "1E3"]),
)
_STRINGS = st.one_of(
    st.text(_CONTROL, max_size=200).map(json.dumps),
    st.sampled_from(['"\\ud800"', '"\\udfff\\ud800"', '"1e3000000"', '"0.5"', '"70%"']),
    st.integers(min_value=0, max_value=1_500_000).map(lambda n: json.dumps("s" * n)),
)
_DEPTH = st.integers(min_value=1, max_value=3_000)
_NESTED = st.one_of(
    _DEPTH.map(lambda d: "[" * d + "]" * d),
    _DEPTH.map(lambda d: '{"a":' * d + "1" + "}" * d),
    _DEPTH.map(lambda d: '[{"a":' * d + "null" + "}]" * d),
)
_WRONG = st.sampled_from(["null", "true", "false", "[]", "{}", '""', "0", "[1, 2]", '{"x": {}}'])
_NOT_JSON = st.sampled_from(["NaN", "Infinity", "-Infinity", "[1,", "{'a': 1}", "\x00", "01"])
_RAW = st.one_of(_NUMBERS, _STRINGS, _NESTED, _WRONG, _NOT_JSON)


def _paths(value: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    # A copy: the seeds share parts (objects._BEHAVIOR) that a mutation must not change.
    review = json.loads(json.dumps(admission_review(draw(st.sampled_from(_SEEDS))(), uid="u")))
    for marker in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(st.sampled_from([p for p in _paths(review) if p]))
        node: Any = review
        for step in where[:-1]:
            node = node[step]
        if isinstance(node, dict) and draw(st.booleans()) and draw(st.booleans()):
            node.pop(where[-1], None)  # a field left out
            continue
        node[where[-1]] = f"\x00RAW{marker}\x00"
    text = json.dumps(review)
    for marker in range(3):
        placeholder = f'"\\u0000RAW{marker}\\u0000"'
        if placeholder in text:
            text = text.replace(placeholder, draw(_RAW), 1)
    return text.encode("utf-8", "surrogatepass")


def _sent_uid(body: bytes) -> str | None:
    """The uid a correct answer carries, or None when no answer can (then: 400)."""
    try:
        review, _ = loads_bounded(body, REVIEW_DEPTH, lambda data: read_json(data.decode()))
        uid = review["request"]["uid"]
    except (ValueError, RecursionError, TypeError, KeyError):
        return None
    return uid if isinstance(uid, str) else None


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(body=_mutated())
def test_mutated_reviews_get_an_answer_or_a_400_within_the_deadline(
    served: Served, body: bytes
) -> None:
    status, text, elapsed = served.post(body)
    assert elapsed < DEADLINE + 1.0, f"{elapsed:.2f} s"
    assert status in (200, 400), (status, text[:300])
    answer = json.loads(text)
    if status == 400:
        event(f"400 {answer.get('message', '')[:40]}")
        _status_400(status, text)
        return
    event(f"200 allowed={answer.get('response', {}).get('allowed')}")
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == _sent_uid(body)
    assert isinstance(answer["response"]["allowed"], bool)
