"""KEDA prometheus triggers against a real Prometheus: the request sent as KEDA sends it, and
one failing query never costing the others their check (the wording of GL810-GL812 is in the
snapshots of their fixtures, tests/live/fixtures/GL81*/snapshots).

``<*>`` in an expected text stands for a part that changes from run to run (a port, a time).
The proxy in front of Prometheus is no stand-in for it: it records what reaches it and, for
queries that carry a marker comment (``# slow``), behaves as a slow or broken server would.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import ClientSession, web

from gpulint.core.model import Finding, Severity
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection
from gpulint.engine.runner import inventory_from_paths, run
from gpulint.live.collector import collect
from gpulint.live.options import LiveOptions, parse_duration
from gpulint.live.snapshot import Answer, LiveSnapshot
from gpulint.live.words import checked_note

from .conftest import LIVE_FIXTURES, lint_live, show
from .harness import AppServer
from .world import World

pytestmark = [pytest.mark.live, pytest.mark.slow]

ANSWERED_BY = (
    " (answered by http://127.0.0.1:<*> from --prometheus, not by the trigger's serverAddress "
    "http://prometheus-operated.monitoring.svc:9090)"
)
NO_VALUE = "so the HPA gets no value for this trigger (FailedGetExternalMetric)"


def like(template: str, text: str) -> bool:
    pattern = ".+?".join(re.escape(part) for part in template.split("<*>"))
    return re.fullmatch(pattern, text, re.DOTALL) is not None


def _of(findings: list[Finding], rule: str) -> list[Finding]:
    return sorted((f for f in findings if f.rule == rule), key=Finding.sort_key)


def test_a_trigger_that_names_the_server_checked_says_nothing_of_addresses(
    world: World, tmp_path: Path
) -> None:
    text = (LIVE_FIXTURES / "GL810" / "fail_multiple_series.yaml").read_text()
    manifest = tmp_path / "scaledobject.yaml"
    manifest.write_text(
        text.replace("http://prometheus-operated.monitoring.svc:9090", world.stack.url + "/")
    )
    findings, snapshot = lint_live([manifest], world.stack.url)
    found = _of(findings, "GL810")
    assert len(found) == 2, show(findings)
    assert all("answered by" not in f.message for f in found)
    assert not [n for n in snapshot.notes if "serverAddress" in n], snapshot.notes


def test_the_run_notes_the_addresses_queried_in_their_place(world: World) -> None:
    _, snapshot = lint_live(
        [LIVE_FIXTURES / "GL811" / "fail_gone_and_never_seen.yaml"], world.stack.url
    )
    assert (
        "3 KEDA triggers name serverAddress http://prometheus-operated.monitoring.svc:9090: "
        f"their queries were sent to {world.stack.url} (--prometheus) in its place"
    ) in snapshot.notes
    said = checked_note(snapshot.checked, world.stack.url, snapshot.window)
    assert said == (
        f"live check: 3 KEDA prometheus triggers checked against {world.stack.url} (look-back 24h)"
    )


def test_a_correct_keda_setup_produces_no_live_finding(world: World) -> None:
    findings, snapshot = lint_live([LIVE_FIXTURES / "correct" / "keda"], world.stack.url)
    assert [f for f in findings if f.rule.startswith("GL8")] == [], show(findings)
    # ...and not because nothing was checked: every trigger got one value and its history.
    assert len(snapshot.triggers) == 3
    for evidence in snapshot.triggers.values():
        assert evidence.reading is not None and evidence.reading.answer is Answer.VALUE
        assert evidence.observed, evidence


# --- what reaches Prometheus, and queries that fail one by one -----------------------------


class RecordingProxy(AppServer):
    """Forwards to the real Prometheus and records each query with its parameters and
    headers. A query with ``# slow N`` waits N seconds first; ``# huge`` is answered with a
    declared 10 GiB body, ``# html`` with a login page, ``# 502`` with a proxy's error."""

    def __init__(self, upstream: str) -> None:
        super().__init__()
        self.upstream = upstream
        self.queries: list[tuple[dict[str, list[str]], dict[str, str]]] = []
        self.refuse_all = False  # answer every query 400 bad_data, as a broken gateway may

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/api/v1/{endpoint:.*}", self._forward)
        return app

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        params: dict[str, list[str]] = {}
        form = list((await request.post()).items()) if request.method == "POST" else []
        for key, value in [*request.query.items(), *form]:
            params.setdefault(key, []).append(str(value))
        query = params.get("query", [""])[0]
        if request.match_info["endpoint"] == "query":
            self.queries.append((params, dict(request.headers)))
        if self.refuse_all:
            body = {"status": "error", "errorType": "bad_data", "error": "tenant unknown"}
            return web.json_response(body, status=400)
        slow = re.search(r"# slow (\d+(?:\.\d+)?)", query)
        if slow:
            await asyncio.sleep(float(slow.group(1)))
        if "# huge" in query:
            response = web.StreamResponse(headers={"Content-Length": str(10 << 30)})
            await response.prepare(request)
            await response.write(b'{"status":')
            await asyncio.sleep(30)
            return response
        if "# html" in query:
            return web.Response(text="<html>Sign in</html>", content_type="text/html")
        if "# 502" in query:
            return web.Response(status=502, text="Bad Gateway")
        async with (
            ClientSession() as session,
            session.request(
                "GET",
                f"{self.upstream}/api/v1/{request.match_info['endpoint']}",
                params=[(k, v) for k, values in params.items() for v in values],
            ) as answer,
        ):
            return web.Response(
                status=answer.status, body=await answer.read(), content_type="application/json"
            )


@pytest.fixture
def proxy(world: World) -> Iterator[RecordingProxy]:
    server = RecordingProxy(world.stack.url).start()
    yield server
    server.stop()


def _check(
    path: Path, url: str, headers: dict[str, str] | None = None, timeout: float = 20.0
) -> tuple[list[Finding], LiveSnapshot]:
    inventory = inventory_from_paths([str(path)], Settings())
    options = LiveOptions(url, dict(headers or {}), timeout, False, parse_duration("24h"))
    inventory.live = collect(inventory, options)
    return run(inventory, Selection([])), inventory.live


TRIGGERS = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: triton, namespace: ml}
spec:
  scaleTargetRef: {name: triton}
  minReplicaCount: 1
  maxReplicaCount: 4
  triggers:
"""
GOOD = 'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod=~"triton-.*"})'
RATIO = 'avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace="ml",exported_pod=~"triton-.*"})'


def _trigger(query: str, threshold: str = "50", **metadata: str) -> str:
    lines = [
        "  - type: prometheus",
        "    metadata:",
        "      serverAddress: http://prometheus-operated.monitoring.svc:9090",
        "      query: |",
        *(f"        {line}" for line in query.splitlines()),
        f'      threshold: "{threshold}"',
        *(f'      {key}: "{value}"' for key, value in metadata.items()),
    ]
    return "\n".join(lines) + "\n"


def test_the_query_goes_out_as_keda_sends_it(proxy: RecordingProxy, tmp_path: Path) -> None:
    manifest = tmp_path / "scaledobject.yaml"
    manifest.write_text(
        TRIGGERS
        + _trigger(
            GOOD,
            namespace="ml",
            queryParameters="dedup=true,query=up",
            customHeaders="X-Scope-OrgID=team-a,Authorization=Bearer from-the-manifest,Host=evil",
        )
    )
    findings, snapshot = _check(manifest, proxy.url, {"Authorization": "Bearer from-the-user"})
    assert snapshot.available, snapshot.error
    (params, headers), *_ = [q for q in proxy.queries if q[0]["query"] == [GOOD]]
    assert params["namespace"] == ["ml"] and params["dedup"] == ["true"]
    # KEDA's own query comes first (trimmed of the block's newline); gpulint sends only it.
    assert "up" not in params["query"]
    assert headers["X-Scope-OrgID"] == "team-a"
    assert headers["Authorization"] == "Bearer from-the-user"  # --prometheus-header wins
    assert headers["Host"] != "evil"
    (evidence,) = snapshot.triggers.values()
    assert evidence.dropped == [
        "queryParameters query (KEDA's own query comes first)",
        "customHeaders 'Host'",
    ]
    assert evidence.reading is not None and evidence.reading.answer is Answer.VALUE
    assert not [f for f in findings if f.rule in ("GL810", "GL811")], show(findings)


def test_each_failing_query_is_its_own_finding_and_the_others_are_still_judged(
    proxy: RecordingProxy, tmp_path: Path
) -> None:
    manifest = tmp_path / "scaledobject.yaml"
    manifest.write_text(
        TRIGGERS
        + _trigger(f"{GOOD}\n# slow 6")  # KEDA waits 3 s, gpulint 5 s
        + _trigger(f"{GOOD}\n# slow 3.5")  # answered, later than KEDA waits
        + _trigger(f"{GOOD}\n# slow 3.5", timeout="10s")  # the trigger waits longer
        + _trigger(f"{GOOD}\n# huge")
        + _trigger(f"{GOOD}\n# html")
        + _trigger(f"{GOOD}\n# 502")
        + _trigger(RATIO, threshold="70")  # healthy query, wrong scale: still judged
    )
    started = time.monotonic()
    findings, snapshot = _check(manifest, proxy.url)
    assert time.monotonic() - started < 15
    assert snapshot.available, snapshot.error
    assert not _of(findings, "GL809")
    broken = {int(f.message.split()[2]): f for f in _of(findings, "GL810")}
    assert sorted(broken) == [0, 1, 3, 4, 5], show(findings)
    assert all(f.severity is Severity.WARNING for f in broken.values())
    assert like(
        "Prometheus trigger 0 of ScaledObject ml/triton: Prometheus gave no answer to the query "
        "within 5.<*> s, and KEDA waits 3 s (KEDA_HTTP_DEFAULT_TIMEOUT, 3000 ms unless the KEDA "
        f"operator sets it): its polls time out too, {NO_VALUE}, and no spec.fallback stands in "
        "(measured from where gpulint runs) (answered by <*>).",
        broken[0].message,
    ), broken[0].message
    assert like(
        "Prometheus trigger 1 of ScaledObject ml/triton: Prometheus took 3.<*> s to answer the "
        "query, longer than the 3 s KEDA waits (<*>): KEDA's polls time out, <*>",
        broken[1].message,
    ), broken[1].message
    assert broken[1].fix.startswith('timeout: "7')
    assert "answered more than 64 MiB" in broken[3].message
    assert "with a body that is not JSON ('<html>Sign in</html>')" in broken[4].message
    assert "/api/v1/query answered HTTP 502" in broken[5].message
    (scale,) = _of(findings, "GL812")
    assert scale.message.startswith("Prometheus trigger 6 of ScaledObject ml/triton: threshold 70")


def test_only_keda_triggers_and_prometheus_down_is_one_gl809_at_the_server_address(
    down_url: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "scaledobject.yaml"
    manifest.write_text(TRIGGERS + _trigger(GOOD) + _trigger(RATIO))
    findings, snapshot = _check(manifest, down_url, timeout=5)
    (unreachable,) = _of(findings, "GL809")
    assert unreachable.location.line == 11  # the first trigger's serverAddress
    assert "KEDA prometheus triggers were not checked" in unreachable.message
    assert snapshot.triggers == {}
    assert not [f for f in findings if f.rule in ("GL810", "GL811", "GL812")]


def test_a_server_that_refuses_every_query_is_gl809_not_a_finding_per_trigger(
    proxy: RecordingProxy, tmp_path: Path
) -> None:
    proxy.refuse_all = True
    manifest = tmp_path / "scaledobject.yaml"
    manifest.write_text(TRIGGERS + _trigger(GOOD) + _trigger(RATIO))
    findings, snapshot = _check(manifest, proxy.url)
    (unreachable,) = _of(findings, "GL809")
    assert "/api/v1/query refused vector(1): tenant unknown" in unreachable.message
    assert snapshot.triggers == {}
    assert not [f for f in findings if f.rule in ("GL810", "GL811", "GL812")]


def test_a_trigger_keda_cannot_build_is_noted_and_never_queried(
    proxy: RecordingProxy, tmp_path: Path
) -> None:
    manifest = tmp_path / "scaledobject.yaml"
    no_threshold = "\n".join(
        _trigger(f"{GOOD}\n# refused: no threshold").splitlines()[:-1]  # without threshold
    )
    manifest.write_text(
        TRIGGERS
        + _trigger(GOOD)
        + _trigger(f"{GOOD}\n# refused: a quantity", threshold="600m")
        + no_threshold
        + "\n"
    )
    findings, snapshot = _check(manifest, proxy.url)
    assert snapshot.available, snapshot.error
    assert [t.index for t in snapshot.triggers] == [0]
    assert not [q for q, _ in proxy.queries if "# refused" in q["query"][0]]
    assert (
        "prometheus trigger 1 of ScaledObject ml/triton is not checked live: KEDA refuses it "
        "(threshold is no number)"
    ) in snapshot.notes
    assert (
        "prometheus trigger 2 of ScaledObject ml/triton is not checked live: KEDA refuses it "
        "(no threshold)"
    ) in snapshot.notes
    assert not [f for f in findings if f.rule in ("GL810", "GL811", "GL812")], show(findings)
