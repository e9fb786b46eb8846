"""Fixtures of the webhook tests: certificates, and ``gpulint serve --no-cluster`` processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Certificates, Webhook


@pytest.fixture
def certificates(tmp_path: Path) -> Certificates:
    return Certificates(tmp_path)


@pytest.fixture(scope="module")
def module_certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return Certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def alone(
    module_certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    """One ``gpulint serve --no-cluster`` for a module's tests."""
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    webhook = Webhook(module_certificates, log, ["--no-cluster"])
    try:
        yield webhook
    finally:
        webhook.stop()
