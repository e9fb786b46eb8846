"""Objects nested deeper than Python's JSON reader goes, as a cluster holds them (the API
server keeps objects up to 10,000 levels deep): the cache keeps syncing and judging, and
``gpulint lint --cluster`` reports with a note instead of a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulint.cli import main
from gpulint.cluster.cache import ClusterCache
from gpulint.cluster.decoding import MAX_OBJECT_DEPTH, TOO_DEEP, deeper_than, loads_bounded

from ..kubefake import KubeFake, RawJSON, load_world
from .conftest import cached_names, wait_for
from .test_mode import WORLD

DEPTH = 1_500


def nested(depth: int = DEPTH) -> RawJSON:
    return RawJSON('{"a":' * depth + "1" + "}" * depth)


def claim_template(name: str, parameters: Any) -> dict[str, Any]:
    """A DRA ResourceClaimTemplate whose opaque driver parameters are ``parameters``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
                    "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}],
                }
            }
        },
    }


# --- the decoder ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "deeper"),
    [
        (b'{"a":[1,{"b":2}]}', 3, False),
        (b'{"a":[1,{"b":2}]}', 2, True),
        # brackets inside strings (escaped quotes and backslashes around them) do not count
        (b'{"a":"[[[[\\"{{","b":"\\\\"}', 1, False),
        (b'{"a":"]]]]","b":{"c":{"d":1}}}', 2, True),
        (b"[" * 5000 + b"]" * 5000, MAX_OBJECT_DEPTH, True),
    ],
)
def test_depth_is_measured_outside_strings(text: bytes, limit: int, deeper: bool) -> None:
    assert deeper_than(text, limit) is deeper


def test_parts_past_the_limit_are_cut_and_the_rest_read() -> None:
    deep = '{"a":' * DEPTH + '"x"' + "}" * DEPTH
    text = f'{{"items":[{{"name":"deep","p":{deep},"q":"[{{"}},{{"name":"fine"}}]}}'.encode()
    value, cut = loads_bounded(text, 4)
    assert cut
    first, second = value["items"]
    assert first["name"] == "deep" and first["q"] == "[{"
    assert first["p"]["a"] is TOO_DEEP  # the fifth level
    assert second == {"name": "fine"}


def test_a_string_that_looks_like_the_cut_marker_stays_a_string() -> None:
    text = json.dumps({"a": "gpulint-too-deep-00", "b": [[[[1]]]]}).encode()
    value, cut = loads_bounded(text, 2)
    assert cut and value["a"] == "gpulint-too-deep-00" and value["b"] == [TOO_DEEP]


# --- the cache --------------------------------------------------------------------------------


def test_a_claim_template_nested_1500_deep_does_not_stop_the_cache(
    fake: KubeFake, new_cache: Callable[..., ClusterCache], caplog: pytest.LogCaptureFixture
) -> None:
    load_world(fake.cluster, WORLD)
    fake.cluster.create(claim_template("deep", nested()))
    cache = new_cache()
    wait_for(cache.synced, what="the caches to sync")
    assert set(cache.sync_state().values()) <= {"synced", "absent"}
    assert "deep" in cached_names(cache, "ResourceClaimTemplate")
    assert cache.too_deep_objects == 1
    assert "ResourceClaimTemplate ml/deep nests deeper than 100 levels" in caplog.text
    # a deep one that arrives by watch is kept too, and the stream goes on
    fake.cluster.create(claim_template("deeper", nested(3 * DEPTH)))
    fake.cluster.create(claim_template("plain", {"sharing": "time-slicing"}))
    wait_for(lambda: "plain" in cached_names(cache, "ResourceClaimTemplate"), what="the watch")
    assert {"deep", "deeper", "plain"} <= cached_names(cache, "ResourceClaimTemplate")
    assert cache.too_deep_objects == 2
    # and admissions are judged: the CPU HPA of the world on its GPU Deployment
    with cache.lock:
        hpa = next(
            m
            for m in cache.inventory.manifests
            if m.kind == "HorizontalPodAutoscaler" and m.name == "embedder"
        )
    findings = cache.evaluate(json.loads(json.dumps(hpa.data)), "CREATE")
    assert "GL101" in {f.rule for f in findings}


# --- gpulint lint --cluster -------------------------------------------------------------------


def test_lint_cluster_reports_with_a_note_instead_of_a_traceback(
    fake: KubeFake, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_world(fake.cluster, WORLD)
    fake.cluster.create(claim_template("deep", nested()))
    code = main(["lint", "--cluster", "--kubeconfig", str(kubeconfig)])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "Traceback" not in out + err
    assert "GL101" in out
    assert (
        "note: ResourceClaimTemplate ml/deep nests deeper than 100 levels: the parts below "
        "that depth were not read"
    ) in " ".join(out.split())  # wrapped at 80 columns (tests/conftest.py)


_TRICKY_TEXT = st.text(alphabet='[]{}"\\/:, ab\u00e9\u2028\U0001f600\n\t', max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY_TEXT, inner, max_size=4),
    max_leaves=40,
)


def _cut_at(value: Any, limit: int, depth: int = 0) -> Any:
    """``value`` with what opens deeper than ``limit`` as TOO_DEEP, by recursion (the test's
    values are shallow)."""
    if isinstance(value, dict | list):
        if depth + 1 > limit:
            return TOO_DEEP
        if isinstance(value, dict):
            return {k: _cut_at(v, limit, depth + 1) for k, v in value.items()}
        return [_cut_at(v, limit, depth + 1) for v in value]
    return value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(_JSON, st.integers(min_value=1, max_value=6), st.booleans())
def test_the_bounded_reader_cuts_exactly_past_the_limit(
    value: Any, limit: int, ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert deeper_than(text, limit) is (_depth(value) > limit)
    read, cut = loads_bounded(text, limit)
    assert cut is (_depth(value) > limit)
    assert read == _cut_at(value, limit)
