"""What the caches watch, how ConfigMaps are selected, and label selectors as strings."""

from __future__ import annotations

import pytest

from gpulint.cluster.kinds import (
    AdapterConfigMapSelector,
    is_kserve_config,
    parse_label_selector,
    selector_matches,
    selector_text,
    watched_kinds,
)


def test_watched_kinds_and_their_paths() -> None:
    kinds = {k.key: k for k in watched_kinds()}
    assert {k for k in kinds if not k.startswith("configmaps")} == {
        "horizontalpodautoscalers.autoscaling",
        "deployments.apps",
        "statefulsets.apps",
        "scaledobjects.keda.sh",
        "inferenceservices.serving.kserve.io",
        "services.serving.knative.dev",
        "configurations.serving.knative.dev",
    }
    hpa = kinds["horizontalpodautoscalers.autoscaling"]
    assert hpa.versions == ("v2", "v2beta2")
    assert hpa.collection_path("v2", "ml") == (
        "/apis/autoscaling/v2/namespaces/ml/horizontalpodautoscalers"
    )
    kserve = kinds["configmaps[metadata.name=inferenceservice-config]"]
    assert kserve.collection_path("v1", None) == "/api/v1/configmaps"
    # cluster-wide settings are read everywhere, even when linting one namespace
    assert kserve.scope("ml") is None and hpa.scope("ml") == "ml"
    assert [k for k in kinds if k.startswith("configmaps")] == [
        "configmaps[app.kubernetes.io/name=prometheus-adapter]",
        "configmaps[metadata.name=prometheus-adapter]",
        "configmaps[metadata.name=adapter-config]",
        "configmaps[metadata.name=inferenceservice-config]",
    ]


def test_adapter_configmap_selection() -> None:
    named = AdapterConfigMapSelector.parse("monitoring/custom-metrics-config")
    (stream,) = named.streams()
    assert stream.field_selector == "metadata.name=custom-metrics-config"
    assert stream.namespace == "monitoring" and stream.scope("ml") == "monitoring"
    both = AdapterConfigMapSelector.parse("adapter", "team=obs,tier in (metrics)")
    assert [(s.label_selector, s.field_selector) for s in both.streams()] == [
        ("team=obs,tier in (metrics)", None),
        (None, "metadata.name=adapter"),
    ]

    def configmap(name: str, namespace: str, **labels: str) -> dict[str, object]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
        }

    default = AdapterConfigMapSelector()
    assert default.matches(configmap("adapter-config", "custom-metrics"))
    assert default.matches(
        configmap("x", "monitoring", **{"app.kubernetes.io/name": "prometheus-adapter"})
    )
    assert not default.matches(configmap("grafana", "monitoring"))
    assert named.matches(configmap("custom-metrics-config", "monitoring"))
    assert not named.matches(configmap("custom-metrics-config", "other"))
    assert both.matches(configmap("x", "y", team="obs", tier="metrics"))
    assert not both.matches(configmap("x", "y", team="obs"))
    assert is_kserve_config(configmap("inferenceservice-config", "kserve"))
    for bad in ("a/b/c", "Upper", "ns/"):
        with pytest.raises(ValueError):
            AdapterConfigMapSelector.parse(bad)
    with pytest.raises(ValueError):
        AdapterConfigMapSelector.parse(None, "app in (x")


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("app=triton", {"app": "triton"}, True),
        ("app==triton,tier!=cpu", {"app": "triton"}, True),
        ("app=triton,tier!=cpu", {"app": "triton", "tier": "cpu"}, False),
        ("tier in (gpu, mig)", {"tier": "mig"}, True),
        ("tier notin (gpu)", {}, True),
        ("gpu", {"gpu": ""}, True),
        ("!gpu", {"gpu": "1"}, False),
        ("", {"anything": "x"}, True),
    ],
)
def test_label_selector_strings(text: str, labels: dict[str, str], expected: bool) -> None:
    assert selector_matches(text, labels) is expected


def test_label_selectors_as_the_hpa_controller_sends_them() -> None:
    assert selector_text(None) == ""
    assert (
        selector_text(
            {
                "matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["mig", "gpu"]},
                    {"key": "canary", "operator": "DoesNotExist"},
                    {"key": "zone", "operator": "Exists"},
                    {"key": "os", "operator": "NotIn", "values": ["windows"]},
                ],
            }
        )
        == "a=1,b=2,tier in (gpu,mig),!canary,zone,os notin (windows)"
    )
    assert selector_text({"matchExpressions": [{"key": "a", "operator": "In"}]}) is None
    assert selector_text({"matchLabels": ["a"]}) is None
    assert parse_label_selector("a=,b") is not None
    assert parse_label_selector("a b") is None
