"""An adapter ConfigMap that is slow to parse never stalls ``gpulint serve``: its embedded
YAML is parsed in a child process within the review's deadline; the review answers in time
(the config judged without, with a warning) and /healthz and other reviews never wait."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from . import objects
from .harness import Certificates, admission_review, running


@pytest.mark.slow
def test_a_slow_adapter_config_answers_in_time_and_stalls_nothing(
    certificates: Certificates, tmp_path: Path
) -> None:
    with running(certificates, tmp_path / "serve.log", ["--no-cluster", "--deadline=0.4"]) as hook:
        hostile = admission_review(objects.slow_adapter_configmap(), uid="hostile")
        answers: dict[str, Any] = {}

        def send() -> None:
            started = time.monotonic()
            answers["hostile"] = hook.review(hostile)
            answers["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=send)
        thread.start()
        time.sleep(0.05)
        health = []
        for _ in range(5):
            started = time.monotonic()
            status, _ = hook.get("/healthz")
            health.append((status, time.monotonic() - started))
        normal_started = time.monotonic()
        normal = hook.review(admission_review(objects.cpu_hpa(), uid="ok"))
        normal_seconds = time.monotonic() - normal_started
        thread.join(30)
        response = answers["hostile"]
        assert response["uid"] == "hostile" and response["allowed"] is True
        assert any("did not read the configuration embedded" in w for w in response["warnings"])
        assert answers["seconds"] < 3.0
        assert all(status == 200 and seconds < 1.0 for status, seconds in health), health
        assert normal["uid"] == "ok" and normal_seconds < 3.0
