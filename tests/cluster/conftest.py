"""The fake API server, a kubeconfig for it, and caches that stop when a test ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpulint.cluster.cache import ClusterCache
from gpulint.cluster.mode import connect
from gpulint.engine.config import Settings
from gpulint.input.document import Manifest

from ..kubefake import FakeCluster, KubeFake

CLUSTER_FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def fake() -> Iterator[KubeFake]:
    server = KubeFake(FakeCluster()).start()
    yield server
    server.stop()


@pytest.fixture
def kubeconfig(fake: KubeFake, tmp_path: Path) -> Path:
    return fake.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def new_cache(kubeconfig: Path) -> Iterator[Callable[..., ClusterCache]]:
    """Make caches (started) on the fake; every one is stopped at the end of the test."""
    made: list[ClusterCache] = []

    def make(settings: Settings | None = None, **options: Any) -> ClusterCache:
        api_client, _ = connect(str(kubeconfig))
        options.setdefault("watch_timeout", 5)
        options.setdefault("backoff", (0.05, 0.5))
        options.setdefault("recheck_interval", 0.5)
        cache = ClusterCache(api_client, settings or Settings(), **options)
        made.append(cache)
        cache.start()
        return cache

    yield make
    for cache in made:
        cache.stop(timeout=5)


def knative_config_by_name() -> dict[str, dict[str, set[str]]]:
    """What deploy/'s Role in knative-serving grants: config-autoscaler alone, by name."""
    return {"configmaps": {"knative-serving": {"config-autoscaler"}}}


def wait_for(condition: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what or condition}")


def cached(cache: ClusterCache, kind: str) -> list[Manifest]:
    with cache.lock:
        return [m for m in cache.inventory.manifests if m.kind == kind]


def cached_names(cache: ClusterCache, kind: str) -> set[str]:
    return {m.name for m in cached(cache, kind)}
