"""Bad and hostile answers: gpulint reports GL809 or finishes within its time budget, and
never crashes.

These servers are not Prometheus stand-ins: they are broken servers (down, slow, erroring,
malformed, huge) served by aiohttp, the way a misrouted URL, a proxy or an overloaded
Prometheus answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from gpulint.core.model import Finding
from gpulint.live.snapshot import MAX_VALUES_PER_LABEL

from .conftest import LIVE_FIXTURES, lint_live, show
from .harness import ROOT, AppServer

pytestmark = [pytest.mark.live, pytest.mark.slow]

CONFIG = LIVE_FIXTURES / "GL801" / "pass_correct.yaml"
HUGE_SERIES = 200_000


class BrokenServers(AppServer):
    """One server, one broken behaviour per path prefix (``<url>/slow``, ``<url>/500`` ...)."""

    def __init__(self) -> None:
        super().__init__()
        self._huge: bytes | None = None
        self.requests: list[str] = []

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{behaviour}/api/v1/{endpoint:.*}", self._answer)
        return app

    def huge_series(self) -> bytes:
        if self._huge is None:
            series = [
                {
                    "__name__": "DCGM_FI_DEV_GPU_UTIL",
                    "gpu": str(i % 8),
                    "UUID": f"GPU-{i:08x}-0000-0000-0000-000000000000",
                    "Hostname": f"gpu-node-{i // 8}",
                    "exported_namespace": f"team-{i % 50}",
                    "exported_pod": f"worker-{i // 8}",
                    "namespace": "gpu-operator",
                    "pod": f"nvidia-dcgm-exporter-{i // 8:05d}",
                }
                for i in range(HUGE_SERIES)
            ]
            self._huge = json.dumps({"status": "success", "data": series}).encode()
        return self._huge

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        behaviour = request.match_info["behaviour"]
        endpoint = request.match_info["endpoint"]
        self.requests.append(f"{behaviour}/{endpoint}")
        if behaviour == "slow":
            await asyncio.sleep(10)
        if behaviour == "500":
            return web.Response(status=500, text="Internal Server Error")
        if behaviour == "500json":
            body = {"status": "error", "errorType": "internal", "error": "out of memory"}
            return web.json_response(body, status=500)
        if behaviour == "malformed":
            return web.Response(
                text='{"status":"success","data":[{"__name__":"DCGM_FI_DEV', status=200
            )
        if behaviour == "html":
            return web.Response(text="<html><body>Sign in</body></html>", content_type="text/html")
        if behaviour == "wrongshape":
            return web.json_response({"status": "success", "data": {"result": 42}})
        if behaviour == "trickle":
            response = web.StreamResponse()
            await response.prepare(request)
            for _ in range(300):
                await response.write(b" ")
                await asyncio.sleep(0.1)
            return response
        if behaviour == "huge":
            if endpoint == "series":
                return web.Response(body=self.huge_series(), content_type="application/json")
            if endpoint.startswith("label/"):
                return web.json_response({"status": "success", "data": ["DCGM_FI_DEV_GPU_UTIL"]})
            return web.json_response(
                {"status": "success", "data": {"resultType": "vector", "result": []}}
            )
        raise web.HTTPNotFound()


@pytest.fixture(scope="module")
def broken() -> Iterator[BrokenServers]:
    server = BrokenServers().start()
    yield server
    server.stop()


def _gl809(findings: list[Finding]) -> Finding:
    found = [f for f in findings if f.rule == "GL809"]
    assert len(found) == 1, show(findings)
    assert not [f for f in findings if f.rule in ("GL801", "GL802", "GL803", "GL804")]
    return found[0]


@pytest.mark.parametrize(
    ("behaviour", "timeout", "reason"),
    [
        ("slow", 1.5, "answer within the 1.5 s timeout"),
        ("trickle", 1.5, "within the 1.5 s timeout"),
        ("500", 5, "answered HTTP 500 with a body that is not JSON ('Internal Server Error')"),
        ("500json", 5, "/api/v1/series answered HTTP 500: internal: out of memory"),
        ("malformed", 5, "/api/v1/series answered HTTP 200 with a body that is not JSON"),
        ("html", 5, "with a body that is not JSON ('<html><body>Sign in</body></html>')"),
        ("wrongshape", 5, "/api/v1/series answered without a list of series"),
    ],
)
def test_a_broken_server_becomes_gl809_within_the_timeout(
    broken: BrokenServers, behaviour: str, timeout: float, reason: str
) -> None:
    started = time.monotonic()
    findings, snapshot = lint_live([CONFIG], f"{broken.url}/{behaviour}", timeout=timeout)
    elapsed = time.monotonic() - started
    finding = _gl809(findings)
    assert reason in finding.message, finding.message
    assert elapsed < timeout + 1.0, f"took {elapsed:.1f} s with a {timeout} s budget"
    assert snapshot.error is not None and snapshot.rules == {}


def test_prometheus_down_is_gl809(down_url: str) -> None:
    started = time.monotonic()
    findings, _ = lint_live([CONFIG], down_url, timeout=5)
    assert "cannot connect: Connection refused" in _gl809(findings).message
    assert time.monotonic() - started < 2


def test_an_unresolvable_host_is_gl809() -> None:
    findings, _ = lint_live([CONFIG], "http://prometheus.invalid:9090", timeout=5)
    assert "cannot connect" in _gl809(findings).message


def test_two_hundred_thousand_series_finish_within_the_budget(broken: BrokenServers) -> None:
    broken.huge_series()  # built before the clock starts: the server's work, not gpulint's
    budget = 20.0
    started = time.monotonic()
    findings, snapshot = lint_live([CONFIG], f"{broken.url}/huge", timeout=budget)
    elapsed = time.monotonic() - started
    assert snapshot.available, snapshot.error
    assert elapsed < budget, f"{elapsed:.1f} s"
    [evidence] = snapshot.rules.values()
    assert evidence.series.count == HUGE_SERIES
    # Memory stays bounded whatever the answer's size.
    assert len(evidence.series.values["exported_pod"]) == MAX_VALUES_PER_LABEL
    # The rendered query came back empty from this server: reported, not a crash.
    assert [f.rule for f in findings if f.rule.startswith("GL8")] == ["GL803"], show(findings)


def test_the_command_line_never_shows_a_traceback(broken: BrokenServers, tmp_path: Path) -> None:
    for behaviour in ("malformed", "500", "wrongshape"):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpulint",
                "check-adapter",
                "--prometheus",
                f"{broken.url}/{behaviour}",
                "--prometheus-timeout",
                "5",
                str(CONFIG),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "NO_COLOR": "1"},
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        assert "GL809 [warning]" in result.stdout
