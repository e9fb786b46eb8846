"""A hostile server at the Prometheus URL: redirects elsewhere, answers without end, bombs,
nests JSON without end. Each is GL809 with its reason, within bounded memory, and no header
given for Prometheus ever reaches another host.

The servers are real HTTP servers on loopback (aiohttp); the client is gpulint's own.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from aiohttp import web

from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection
from gpulint.engine.runner import inventory_from_paths, run
from gpulint.live.client import MAX_ANSWER_BYTES, MAX_DEPTH, MAX_REDIRECTS
from gpulint.live.collector import collect
from gpulint.live.options import LiveOptions
from gpulint.live.snapshot import LiveSnapshot

from .conftest import LIVE_FIXTURES, show
from .harness import ROOT, AppServer

CONFIG = LIVE_FIXTURES / "GL801" / "pass_correct.yaml"
HEADERS = {"X-Scope-OrgID": "tenant-a", "Authorization": "Bearer s3cr3t"}
SERIES = [
    {
        "__name__": "DCGM_FI_DEV_GPU_UTIL",
        "gpu": "0",
        "exported_namespace": "ml",
        "exported_pod": "triton-0",
        "namespace": "gpu-operator",
        "pod": "nvidia-dcgm-exporter-abcde",
    }
]


def _success(data: object) -> web.Response:
    return web.json_response({"status": "success", "data": data})


class Hostile(AppServer):
    """One server, one behaviour per path prefix (``<url>/<behaviour>/api/v1/...``); every
    request is recorded with its headers."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.elsewhere = ""  # the URL of another server, for redirects away
        self._bomb: bytes | None = None

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{behaviour}/api/v1/{endpoint:.*}", self._answer)
        return app

    def bomb(self) -> bytes:
        """A gzip body of 64 KiB that decompresses to 1 GiB."""
        if self._bomb is None:
            stream = gzip.compress(b"[" * (1 << 24), compresslevel=9)
            # Concatenated gzip members decompress to their concatenation (RFC 1952).
            self._bomb = stream * 64
        return self._bomb

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        behaviour = request.match_info["behaviour"]
        endpoint = request.match_info["endpoint"]
        self.seen.append((f"{behaviour}/{endpoint}", dict(request.headers)))
        query = f"?{request.query_string}" if request.query_string else ""
        if behaviour == "away":
            raise web.HTTPFound(f"{self.elsewhere}/ok/api/v1/{endpoint}{query}")
        if behaviour == "other-host":  # the same port under another name: another origin
            raise web.HTTPTemporaryRedirect(f"http://localhost:{self.port}/ok/api/v1/{endpoint}")
        if behaviour == "home":
            raise web.HTTPTemporaryRedirect(f"/ok/api/v1/{endpoint}{query}")
        if behaviour == "loop":
            raise web.HTTPFound(f"/loop/api/v1/{endpoint}{query}")
        if behaviour == "ok":
            if endpoint == "series":
                return _success(SERIES)
            if endpoint in ("labels",) or endpoint.startswith("label/"):
                return _success(["DCGM_FI_DEV_GPU_UTIL"])
            return _success({"resultType": "vector", "result": []})
        if behaviour == "declared":
            response = web.StreamResponse(headers={"Content-Length": str(10 << 30)})
            await response.prepare(request)
            await response.write(b'{"status":')
            await asyncio.sleep(30)
            return response
        if behaviour == "endless":
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            await response.write(b'{"status":"success","data":["')
            chunk = b"x" * (1 << 20)
            for _ in range(4096):  # 4 GiB, were it read to the end
                await response.write(chunk)
            return response
        if behaviour == "bomb":
            return web.Response(
                body=self.bomb(),
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
            )
        if behaviour == "wide":
            # 20 MiB on the wire, 80 MiB once decoded (each character takes four bytes).
            data = ["\U0001f600" * (5 << 20)]
            text = json.dumps({"status": "success", "data": data}, ensure_ascii=False)
            return web.Response(body=text.encode(), content_type="application/json")
        if behaviour == "deep":
            return web.Response(body=b"[" * 100_000 + b"]" * 100_000)
        if behaviour == "shallow-deep":  # within what Python's JSON reader takes
            data = "[" * 500 + "]" * 500
            return web.Response(text=f'{{"status":"success","data":[{{"a":{data}}}]}}')
        if behaviour == "long-error":
            body = {"status": "error", "errorType": "internal", "error": "x" * (8 << 20)}
            return web.json_response(body, status=503)
        raise web.HTTPNotFound()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Hostile, Hostile]]:
    hostile, elsewhere = Hostile().start(), Hostile().start()
    hostile.elsewhere = elsewhere.url
    yield hostile, elsewhere
    hostile.stop()
    elsewhere.stop()


def _check(url: str, timeout: float = 20.0) -> tuple[list[Finding], LiveSnapshot]:
    inventory = inventory_from_paths([str(CONFIG)], Settings())
    inventory.live = collect(inventory, LiveOptions(url, dict(HEADERS), timeout))
    return run(inventory, Selection([])), inventory.live


def _gl809(findings: list[Finding]) -> str:
    found = [f for f in findings if f.rule == "GL809"]
    assert len(found) == 1, show(findings)
    return found[0].message


@pytest.mark.parametrize("behaviour", ["away", "other-host"])
def test_a_redirect_to_another_origin_is_gl809_and_sends_it_nothing(
    servers: tuple[Hostile, Hostile], behaviour: str
) -> None:
    hostile, elsewhere = servers
    before = len(elsewhere.seen), [p for p, _ in hostile.seen if p.startswith("ok/")]
    findings, snapshot = _check(f"{hostile.url}/{behaviour}")
    message = _gl809(findings)
    assert "a redirect to http://" in message
    assert f"gpulint follows redirects only within http://127.0.0.1:{hostile.port}" in message
    assert snapshot.error_reason == "http-error"
    # Nothing reached the other origin: neither the request nor its headers.
    assert (len(elsewhere.seen), [p for p, _ in hostile.seen if p.startswith("ok/")]) == before


def test_a_redirect_within_the_origin_is_followed_with_its_headers(
    servers: tuple[Hostile, Hostile],
) -> None:
    hostile, _ = servers
    findings, snapshot = _check(f"{hostile.url}/home")
    assert snapshot.error is None, snapshot.error
    assert not [f for f in findings if f.rule == "GL809"], show(findings)
    followed = [headers for path, headers in hostile.seen if path == "ok/series"]
    assert followed, hostile.seen
    assert all(h.get("X-Scope-OrgID") == "tenant-a" for h in followed)


def test_a_redirect_loop_ends_as_gl809(servers: tuple[Hostile, Hostile]) -> None:
    hostile, _ = servers
    count = len(hostile.seen)
    message = _gl809(_check(f"{hostile.url}/loop")[0])
    assert f"more than {MAX_REDIRECTS} redirects" in message
    assert len(hostile.seen) - count == MAX_REDIRECTS + 1


@pytest.mark.parametrize("behaviour", ["declared", "endless", "bomb", "wide"])
def test_an_answer_over_the_size_cap_is_gl809_at_once(
    servers: tuple[Hostile, Hostile], behaviour: str
) -> None:
    hostile, _ = servers
    if behaviour == "bomb":
        hostile.bomb()  # the server's work, before the clock starts
    started = time.monotonic()
    message = _gl809(_check(f"{hostile.url}/{behaviour}", timeout=20)[0])
    assert f"answered more than {MAX_ANSWER_BYTES >> 20} MiB; narrow the seriesQuery" in message
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("behaviour", ["deep", "shallow-deep"])
def test_json_nested_without_end_is_gl809(servers: tuple[Hostile, Hostile], behaviour: str) -> None:
    hostile, _ = servers
    message = _gl809(_check(f"{hostile.url}/{behaviour}")[0])
    assert f"with JSON nested deeper than {MAX_DEPTH} levels" in message


def test_a_megabyte_error_text_is_clipped(servers: tuple[Hostile, Hostile]) -> None:
    hostile, _ = servers
    message = _gl809(_check(f"{hostile.url}/long-error")[0])
    assert "answered HTTP 503: internal: xxxx" in message
    assert len(message) < 1_000


@pytest.mark.slow
@pytest.mark.parametrize("behaviour", ["endless", "bomb"])
def test_memory_stays_near_the_cap_whatever_the_answer(
    servers: tuple[Hostile, Hostile], behaviour: str
) -> None:
    """The whole command line, measured by the kernel: the peak RSS of a run that reads a
    4 GiB answer (or a 1 GiB gzip bomb) stays within the cap and the interpreter."""
    hostile, _ = servers
    if behaviour == "bomb":
        hostile.bomb()
    # A small launcher runs the check and reports its peak RSS: measured from the pytest
    # process, the forked child's figure would include pytest's own memory.
    launcher = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run(sys.argv[1:]).returncode\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    check = [sys.executable, "-m", "gpulint", "check-adapter", "--prometheus"]
    check += [f"{hostile.url}/{behaviour}", "--prometheus-timeout", "30", str(CONFIG)]
    result = subprocess.run(
        [sys.executable, "-c", launcher, *check],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "GL809 [warning]" in result.stdout, result.stdout
    assert "narrow the seriesQuery" in result.stdout
    peak = int(result.stderr.strip().splitlines()[-1]) * 1024
    # The interpreter with gpulint and requests loaded is about 60 MiB.
    assert peak < MAX_ANSWER_BYTES + (110 << 20), f"peak RSS {peak >> 20} MiB"
