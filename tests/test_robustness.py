"""Whatever the input, the result is findings or a clean error, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulint.engine.config import Settings
from gpulint.engine.runner import run
from gpulint.input.loader import load_file
from gpulint.inventory import Inventory

from .conftest import FIXTURES, lint_text

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(
        [
            "nvidia.com/gpu",
            "Deployment",
            "HorizontalPodAutoscaler",
            "apps/v1",
            "autoscaling/v2",
            "60m",
            "70%",
            "{{ .Values.x }}",
            "${n}",
            "Pods",
            "AverageValue",
            "DCGM_FI_DEV_GPU_UTIL",
            "<<.Series>>",
            "serving.kserve.io/v1beta1",
        ]
    ),
)
_keys = st.sampled_from(
    [
        "apiVersion",
        "kind",
        "metadata",
        "name",
        "namespace",
        "spec",
        "scaleTargetRef",
        "metrics",
        "type",
        "pods",
        "metric",
        "target",
        "averageValue",
        "template",
        "containers",
        "resources",
        "limits",
        "requests",
        "nvidia.com/gpu",
        "behavior",
        "scaleUp",
        "policies",
        "rules",
        "seriesQuery",
        "metricsQuery",
        "name",
        "as",
        "matches",
        "overrides",
        "predictor",
        "annotations",
        "minReplicas",
        "maxReplicas",
        "triggers",
        "custom",
        "data",
        "items",
    ]
)
_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(_keys, children, max_size=6)
    ),
    max_leaves=40,
)
_kinds = st.sampled_from(
    [
        "HorizontalPodAutoscaler",
        "Deployment",
        "InferenceService",
        "ScaledObject",
        "Service",
        "ConfigMap",
        "List",
        "StatefulSet",
    ]
)
_groups = st.sampled_from(
    [
        "autoscaling/v2",
        "autoscaling/v1",
        "autoscaling/v2beta2",
        "apps/v1",
        "serving.kserve.io/v1beta1",
        "serving.knative.dev/v1",
        "keda.sh/v1alpha1",
        "v1",
    ]
)


def _lint_bytes(data: bytes) -> None:
    inventory = Inventory(Settings())
    inventory.add_file(load_file("fuzz.yaml", data))
    for finding in run(inventory):
        assert finding.location.line >= 1 and finding.location.column >= 1
        assert finding.rule.startswith("GL")


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(_groups, _kinds, st.dictionaries(_keys, _values, max_size=6)),
        min_size=1,
        max_size=4,
    )
)
def test_arbitrary_objects_never_crash(documents: list[tuple[str, str, dict[str, object]]]) -> None:
    docs = []
    for api_version, kind, body in documents:
        docs.append({"apiVersion": api_version, "kind": kind, **body})
    _lint_bytes(yaml.safe_dump_all(docs).encode())


@settings(max_examples=200, deadline=None)
@given(_values)
def test_arbitrary_yaml_values_never_crash(value: object) -> None:
    _lint_bytes(yaml.safe_dump(value).encode())


def _real_manifests() -> list[bytes]:
    found = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    examples = Path(__file__).resolve().parent.parent / "examples"
    found += sorted(examples.rglob("*.yaml"))
    return [p.read_bytes() for p in found]


_REAL = _real_manifests()


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_REAL), st.data())
def test_mutated_real_manifests_never_crash(original: bytes, data: st.DataObject) -> None:
    text = bytearray(original)
    for _ in range(data.draw(st.integers(1, 6))):
        if not text:
            break
        position = data.draw(st.integers(0, len(text) - 1))
        action = data.draw(st.sampled_from(["delete", "insert", "replace", "dupline", "indent"]))
        if action == "delete":
            del text[position : position + data.draw(st.integers(1, 20))]
        elif action == "insert":
            text[position:position] = data.draw(
                st.sampled_from(
                    [
                        b":",
                        b"-",
                        b" ",
                        b"\n",
                        b"{",
                        b"[",
                        b"&a",
                        b"*a",
                        b"'",
                        b'"',
                        b"\t",
                        b"\xff",
                        b"---\n",
                        b"<<: *a\n",
                        b"0",
                        b"%",
                    ]
                )
            )
        elif action == "replace":
            text[position] = data.draw(st.integers(0, 255))
        else:
            start = text.rfind(b"\n", 0, position) + 1
            end = text.find(b"\n", position)
            end = len(text) if end < 0 else end
            line = bytes(text[start:end])
            text[start:end] = line + b"\n" + line if action == "dupline" else b"  " + line
    _lint_bytes(bytes(text))


def test_nested_alias_bomb_is_refused_quickly() -> None:
    levels = ['a: &a ["' + '","'.join(["lol"] * 9) + '"]']
    for i in range(1, 12):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        levels.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    # 9**12 nodes if expanded: refused by counting, before anything is expanded.
    findings = lint_text("\n".join(levels) + "\n", name="bomb.yaml")
    assert [f.rule for f in findings] == ["GL702"]
    assert "refuses to expand" in findings[0].message
