"""The releases a cluster runs, read from the fake API server by ``gpulint lint --cluster`` and
by the webhook's cache (gpulint.cluster.versions)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gpulint.cli import main
from gpulint.cluster.cache import ClusterCache
from gpulint.engine.versions import Release

from ..kubefake import CRD_RESOURCE, KubeFake, load_world
from .conftest import wait_for

WORLD = """
kubefake:
  version: "1.34"
  crd-labels:
    scaledobjects.keda.sh: {app.kubernetes.io/version: v2.17.2}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: queue, namespace: batch}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
  minReplicas: 0
  maxReplicas: 4
  metrics:
  - type: External
    external:
      metric: {name: queue_depth}
      target: {type: AverageValue, averageValue: "20"}
"""


def _lint(kubeconfig: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    main(["lint", "--cluster", "--kubeconfig", str(kubeconfig), "-f", "json", *args])
    report: dict = json.loads(capsys.readouterr().out)
    return report


def test_cluster_mode_judges_for_the_releases_the_cluster_runs(
    fake: KubeFake, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_world(fake.cluster, WORLD)
    report = _lint(kubeconfig, capsys, "--select", "GL108")
    versions = report["summary"]["versions"]
    assert versions["kubernetes"] == {"version": "1.34", "source": "cluster", "detail": "/version"}
    assert versions["keda"]["version"] == "2.17" and versions["keda"]["source"] == "cluster"
    assert versions["knative"]["version"] == "1.23"  # serving.knative.dev/release: v1.23.0
    assert versions["kserve"]["source"] == "default"  # its CRD carries no version label
    # minReplicas 0 on 1.34: HPAScaleToZero is off there
    assert [f["rule"] for f in report["findings"]] == ["GL108"]
    # an option beats what the cluster says
    report = _lint(kubeconfig, capsys, "--select", "GL108", "--kubernetes-version", "1.37")
    assert report["findings"] == []
    assert report["summary"]["versions"]["kubernetes"]["source"] == "option"
    assert ("GET", "/version", {}) in fake.cluster.requests


def test_a_crd_gpulint_may_not_read_leaves_the_configured_release_and_says_so(
    fake: KubeFake, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_world(fake.cluster, WORLD)
    fake.cluster.forbidden.add(CRD_RESOURCE)
    report = _lint(kubeconfig, capsys, "--select", "GL108", "--keda-version", "2.18")
    assert report["summary"]["versions"]["keda"]["source"] == "option"
    knative = report["summary"]["versions"]["knative"]
    assert knative == {"version": "1.23", "source": "default"}
    notes = report["summary"]["notes"]
    assert any(
        note.startswith(
            "Knative's release not read from the cluster: reading CRD "
            "services.serving.knative.dev was refused (403); judged for Knative 1.23 (the default"
        )
        for note in notes
    ), notes
    assert not any(note.startswith("KEDA's") for note in notes)  # given on the command line


def test_the_webhook_cache_reads_the_releases_and_its_verdicts_follow(
    fake: KubeFake, new_cache: Callable[..., ClusterCache]
) -> None:
    load_world(fake.cluster, WORLD)
    cache = new_cache()
    wait_for(lambda: cache.synced() and cache.settings.versions.kubernetes == Release(1, 34))
    assert cache.settings.versions.keda == Release(2, 17)
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "other", "namespace": "batch"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "other"},
            "minReplicas": 0,
            "maxReplicas": 2,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "queue_depth"},
                        "target": {"type": "AverageValue", "averageValue": "5"},
                    },
                }
            ],
        },
    }
    assert [f.rule for f in cache.evaluate(hpa, "CREATE") if f.rule == "GL108"] == ["GL108"]
    # an upgrade is followed at the next reading
    fake.cluster.version = {"major": "1", "minor": "37+", "gitVersion": "v1.37.0-gke.1"}
    wait_for(lambda: cache.settings.versions.kubernetes == Release(1, 37))
    assert [f.rule for f in cache.evaluate(hpa, "CREATE") if f.rule == "GL108"] == []
