"""Knative's config-autoscaler read from the cluster: its pod-autoscaler-class is the class of
revisions that name none, in ``gpulint lint --cluster`` and in the webhook's cache, as in
files (GL203 on a GPU metric under the default KPA class; none under a cluster default HPA)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpulint.cluster.cache import ClusterCache

from ..kubefake import KubeFake
from .conftest import wait_for
from .test_cluster_fixtures import lint_cluster

# A revision that names no autoscaler class, scaled on a GPU metric: fine on the HPA class,
# rejected by Knative on the KPA.
SERVICE = """
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: embedder, namespace: search}
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/metric: DCGM_FI_DEV_GPU_UTIL
        autoscaling.knative.dev/target: "60"
        autoscaling.knative.dev/max-scale: "4"
    spec:
      containers:
      - image: ghcr.io/example/embedder:1
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def _config(klass: str, namespace: str = "knative-serving") -> str:
    return f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: config-autoscaler, namespace: {namespace}}}
data:
  pod-autoscaler-class: {klass}
"""


@pytest.mark.parametrize(
    ("config", "reported"),
    [
        (_config("hpa.autoscaling.knative.dev"), False),
        (_config("kpa.autoscaling.knative.dev"), True),
        ("", True),  # no config-autoscaler: Knative's own default, KPA
        # Knative reads its config in knative-serving only: elsewhere it sets nothing.
        (_config("hpa.autoscaling.knative.dev", "team-a"), True),
    ],
    ids=["hpa-default", "kpa-default", "no-config", "config-elsewhere"],
)
def test_cluster_mode_judges_revisions_by_the_clusters_default_class(
    config: str,
    reported: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = SERVICE + ("---" + config if config else "")
    _, report, err = lint_cluster(world, tmp_path, monkeypatch=monkeypatch)
    rules = [f["rule"] for f in report["findings"]]
    assert ("GL203" in rules) is reported, (rules, err)
    notes = report["summary"]["notes"]
    assert not [n for n in notes if "not read" in n], notes


def _admitted(cache: ClusterCache, obj: dict[str, Any]) -> list[str]:
    return [f.rule for f in cache.evaluate(copy.deepcopy(obj), "UPDATE", old=obj)]


def test_the_webhooks_cache_follows_the_clusters_default_class(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    fake.cluster.load(SERVICE + "---" + _config("hpa.autoscaling.knative.dev"))
    cache = new_cache()
    wait_for(cache.synced, what="sync")
    stream = "configmaps[knative-serving: metadata.name=config-autoscaler]"
    assert cache.sync_state()[stream] == "synced"
    service = yaml.safe_load(SERVICE)
    assert "GL203" not in _admitted(cache, service)
    # The cluster's default goes back to the KPA: the revision's GPU metric is refused.
    fake.cluster.apply(yaml.safe_load(_config("kpa.autoscaling.knative.dev")))
    wait_for(lambda: "GL203" in _admitted(cache, service), what="the KPA default")
    # ...and to the HPA class again.
    fake.cluster.apply(yaml.safe_load(_config("hpa.autoscaling.knative.dev")))
    wait_for(lambda: "GL203" not in _admitted(cache, service), what="the HPA default")
