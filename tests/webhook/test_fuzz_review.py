"""A fuzz pass over AdmissionReview decoding: a review gpulint refuses, written as odd but
valid JSON (any whitespace, any key order, escaped characters, unknown fields holding deep,
long or strange values), is refused every time, answered by its uid; no exception escapes
and no body that carries a review gets a 400."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import objects
from .harness import admission_review
from .test_hostile_webhook import Served

_SPACE = st.sampled_from(["", " ", "\n", "\t", "\r\n", "  \n\t "])


def _denied_review() -> dict[str, Any]:
    """A Deployment that asks for half a GPU: GL501 refuses it on its own."""
    obj = objects.deployment()
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = (
        "0.5"
    )
    return admission_review(obj, uid="fuzzed-uid")


def _deep(depth: int, opener: str) -> str:
    closer = "}" if opener == "{" else "]"
    inner = '"k":' if opener == "{" else ""
    return (opener + inner) * depth + "0" + closer * depth


_ODD_VALUES = st.one_of(
    st.integers(min_value=1, max_value=3_000).map(lambda d: _deep(d, "[")),
    st.integers(min_value=1, max_value=3_000).map(lambda d: _deep(d, "{")),
    st.just("9" * 5_000),
    st.just("1e400"),
    st.just("-0.0"),
    st.just('"\\ud800"'),
    st.just('"\\u0000\\u001b[31m"'),
    st.text(max_size=40).map(json.dumps),
    st.just("null"),
    st.just("[]"),
    st.just("{}"),
)


@st.composite
def _written(draw: st.DrawFn, value: Any, top: bool = False) -> str:
    """``value`` as JSON written some odd but valid way; objects may gain unknown keys."""
    space = draw(_SPACE)
    if isinstance(value, dict):
        items = [(json.dumps(k), draw(_written(v))) for k, v in value.items()]
        if not top and draw(st.booleans()):
            items.append((json.dumps("x-fuzz-" + draw(st.text(max_size=8))), draw(_ODD_VALUES)))
        order = draw(st.permutations(range(len(items))))
        escaped = draw(st.booleans())
        parts = []
        for index in order:
            key, text = items[index]
            if escaped:  # the same key, its letters as \\u escapes
                key = '"' + "".join(f"\\u{ord(c):04x}" for c in json.loads(key)) + '"'
            parts.append(f"{space}{key}{draw(_SPACE)}:{draw(_SPACE)}{text}")
        return "{" + ",".join(parts) + space + "}"
    if isinstance(value, list):
        return "[" + ",".join(space + draw(_written(v)) for v in value) + space + "]"
    if isinstance(value, str) and draw(st.booleans()):
        return json.dumps(value, ensure_ascii=True).replace("/", "\\/")
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    server = Served()
    yield server
    server.close()


@pytest.mark.slow
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_refused_review_written_oddly_is_still_refused(
    served: Served, data: st.DataObject
) -> None:
    body = data.draw(_written(_denied_review(), top=True))
    status, text, _ = served.post(body.encode("utf-8", "surrogatepass"))
    assert status == 200, text[:300]
    response = json.loads(text)["response"]
    assert response["uid"] == "fuzzed-uid"
    assert response["allowed"] is False, response
    assert "limits nvidia.com/gpu is not a whole number" in response["status"]["message"]
