"""What the caches watch, how ConfigMaps are selected, and label selectors as strings."""

from __future__ import annotations

import pytest

from gpulint.cluster.kinds import (
    DEFAULT_CONFIGMAP_NAMESPACES,
    AdapterConfigMapSelector,
    configmap_scopes,
    is_kserve_config,
    parse_configmap_namespaces,
    watched_kinds,
)
from gpulint.core.selectors import parse_label_selector, selector_matches, selector_text


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
        "resourceclaimtemplates.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "verticalpodautoscalers.autoscaling.k8s.io",
        "scaledjobs.keda.sh",
        "poddisruptionbudgets.policy",
        "podautoscalers.autoscaling.aibrix.ai",
        "variantautoscalings.llmd.ai",
        "llminferenceservices.serving.kserve.io",
        "nimservices.apps.nvidia.com",
        "vllmruntimes.production-stack.vllm.ai",
        "models.kubeai.org",
    }
    llmisvc = kinds["llminferenceservices.serving.kserve.io"]
    assert llmisvc.versions == ("v1alpha2", "v1alpha1")
    templates = kinds["resourceclaimtemplates.resource.k8s.io"]
    assert templates.versions == ("v1", "v1beta2", "v1beta1")
    assert templates.collection_path("v1beta1", None) == (
        "/apis/resource.k8s.io/v1beta1/resourceclaimtemplates"
    )
    hpa = kinds["horizontalpodautoscalers.autoscaling"]
    assert hpa.versions == ("v2", "v2beta2")
    assert hpa.collection_path("v2", "ml") == (
        "/apis/autoscaling/v2/namespaces/ml/horizontalpodautoscalers"
    )
    kserve = kinds["configmaps[kserve: metadata.name=inferenceservice-config]"]
    assert kserve.collection_path("v1", kserve.scope(None)) == (
        "/api/v1/namespaces/kserve/configmaps"
    )
    # ConfigMaps are read in their namespaces, even when linting another one
    assert kserve.scope("ml") == "kserve" and hpa.scope("ml") == "ml"
    assert [k for k in kinds if k.startswith("configmaps")] == [
        "configmaps[monitoring: app.kubernetes.io/name=prometheus-adapter]",
        "configmaps[monitoring: metadata.name=prometheus-adapter]",
        "configmaps[monitoring: metadata.name=adapter-config]",
        "configmaps[monitoring: metadata.name=inferenceservice-config]",
        "configmaps[kserve: app.kubernetes.io/name=prometheus-adapter]",
        "configmaps[kserve: metadata.name=prometheus-adapter]",
        "configmaps[kserve: metadata.name=adapter-config]",
        "configmaps[kserve: metadata.name=inferenceservice-config]",
        "configmaps[knative-serving: metadata.name=config-autoscaler]",
    ]
    namespaces = ("monitoring", "kserve", "knative-serving")
    assert all(k.scope(None) in namespaces for k in kinds.values() if not k.group)
    # Knative's config is read by name in its namespace, even when linting another one.
    knative = kinds["configmaps[knative-serving: metadata.name=config-autoscaler]"]
    assert knative.scope("ml") == "knative-serving"


def test_configmap_namespaces_given_and_added() -> None:
    def configmap_streams(*args: object) -> list[tuple[str | None, str | None, str | None]]:
        return [
            (k.scope(None), k.label_selector, k.field_selector)
            for k in watched_kinds(*args)  # type: ignore[arg-type]
            if k.plural == "configmaps"
        ]

    named = AdapterConfigMapSelector.parse("custom-metrics/adapter")
    assert configmap_streams(named, ("monitoring",)) == [
        ("monitoring", None, "metadata.name=inferenceservice-config"),
        ("custom-metrics", None, "metadata.name=adapter"),
        ("custom-metrics", None, "metadata.name=inferenceservice-config"),
        ("knative-serving", None, "metadata.name=config-autoscaler"),
    ]
    assert configmap_scopes(named, ("monitoring",)) == ["monitoring", "custom-metrics"]
    assert configmap_scopes(named, ("custom-metrics",)) == ["custom-metrics"]
    # A name without a namespace, and a selector, are looked for in every namespace given.
    selected = AdapterConfigMapSelector.parse("adapter", "team=obs")
    assert configmap_streams(selected, ("a", "b")) == [
        ("a", "team=obs", None),
        ("a", None, "metadata.name=adapter"),
        ("a", None, "metadata.name=inferenceservice-config"),
        ("b", "team=obs", None),
        ("b", None, "metadata.name=adapter"),
        ("b", None, "metadata.name=inferenceservice-config"),
        ("knative-serving", None, "metadata.name=config-autoscaler"),
    ]
    # Every namespace: the cluster-wide streams (RBAC on ConfigMaps cluster-wide), which stay
    # cluster-wide when the resources are read in one namespace.
    everywhere = watched_kinds(None, ("*",))
    cluster_wide = [k for k in everywhere if k.plural == "configmaps"]
    assert [k.key for k in cluster_wide] == [
        "configmaps[app.kubernetes.io/name=prometheus-adapter]",
        "configmaps[metadata.name=prometheus-adapter]",
        "configmaps[metadata.name=adapter-config]",
        "configmaps[metadata.name=inferenceservice-config]",
        "configmaps[knative-serving: metadata.name=config-autoscaler]",
    ]
    assert all(k.scope("ml") is None for k in cluster_wide[:-1])
    assert configmap_scopes(named, ("*",)) == [None]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (None, DEFAULT_CONFIGMAP_NAMESPACES),
        (["monitoring"], ("monitoring",)),
        (
            ["monitoring, kserve", "observability,monitoring"],
            ("monitoring", "kserve", "observability"),
        ),
        (["kserve,*"], ("*",)),
    ],
)
def test_configmap_namespaces_option(values: list[str] | None, expected: tuple[str, ...]) -> None:
    assert parse_configmap_namespaces(values) == expected


@pytest.mark.parametrize("values", [[""], [" , "], ["Monitoring"], ["a.b"], ["-a"], ["a" * 64]])
def test_configmap_namespaces_that_are_not_namespaces(values: list[str]) -> None:
    with pytest.raises(ValueError):
        parse_configmap_namespaces(values)


def test_adapter_configmap_selection() -> None:
    named = AdapterConfigMapSelector.parse("monitoring/custom-metrics-config")
    (stream,) = named.streams()
    assert stream.field_selector == "metadata.name=custom-metrics-config"
    assert stream.namespace == "monitoring" and stream.scope("ml") == "monitoring"
    assert named.streams("monitoring") == [stream] and named.streams("kserve") == []
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
