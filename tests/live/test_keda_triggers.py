"""KEDA prometheus triggers against a real Prometheus: the exact wording of GL810-GL812, the
request sent as KEDA sends it, and one failing query never costing the others their check.

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
from gpulint.engine.runner import Selection, inventory_from_paths, run
from gpulint.live.collector import collect
from gpulint.live.kedaquery import Answer
from gpulint.live.options import LiveOptions, parse_duration
from gpulint.live.snapshot import LiveSnapshot

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


CASES = [
    # (fixture, lookback, rule, index, line, severity, message, fix)
    (
        "GL810/fail_multiple_series.yaml",
        "24h",
        "GL810",
        0,
        19,
        Severity.ERROR,
        "prometheus trigger 0 of ScaledObject ml/triton: the query returns 2 series, set apart "
        'by exported_pod, UUID, device and 2 more (`{exported_pod="triton-7d9f8b6c5-x2k4q",'
        'UUID="<*>",device="nvidia0"}`, `{exported_pod="triton-7d9f8b6c5-p9w7z",UUID="<*>",'
        'device="nvidia1"}`), and KEDA fails every poll with \'prometheus query ... returned '
        "multiple elements' (whatever ignoreNullValues says): it takes exactly one, "
        f"{NO_VALUE}, and no spec.fallback stands in{ANSWERED_BY}",
        'query: \'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod=~"triton-.*"})'
        "'   # one value for the workload; sum() instead for a total divided by a per-replica "
        "threshold",
    ),
    (
        "GL810/fail_shape_keda_cannot_read.yaml",
        "24h",
        "GL810",
        0,
        20,
        Severity.ERROR,
        "prometheus trigger 0 of ScaledObject ml/triton: the query returns a scalar (a scalar "
        "result is [time, value], not a list of series), which KEDA cannot decode: it reads "
        "data.result as a list of series, each with one value, and every poll fails, "
        f"{NO_VALUE}; spec.fallback sets 2 replicas after 3 failures{ANSWERED_BY}",
        'query: \'vector(scalar(avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",'
        'exported_pod=~"triton-.*"})))\'   # one series KEDA can read',
    ),
    (
        "GL810/fail_rejected_by_prometheus.yaml",
        "24h",
        "GL810",
        1,
        22,
        Severity.ERROR,
        "prometheus trigger 1 of ScaledObject ml/llm: Prometheus rejects the query: invalid "
        'parameter "query": 1:73: parse error: unclosed left parenthesis; every poll KEDA makes '
        f"fails the same way, {NO_VALUE}, and no spec.fallback stands in{ANSWERED_BY}",
        "# fix the PromQL and try it as KEDA sends it:\n"
        "curl -sG 'http://127.0.0.1:<*>/api/v1/query' --data-urlencode "
        '\'query=avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod=~"llm-.*"}\'',
    ),
    (
        "GL811/fail_exporter_labels.yaml",
        "24h",
        "GL811",
        0,
        16,
        Severity.WARNING,
        "prometheus trigger 0 of ScaledObject ml/triton: the query returns no series: "
        'DCGM_FI_DEV_GPU_UTIL has 7 series, but the matchers `namespace="ml"` and '
        '`pod=~"triton-.*"` each exclude every one of them (the series carry exported_namespace '
        "and exported_pod and namespace and pod, no other pod or namespace label); KEDA reads 0 "
        "(ignoreNullValues defaults to true): the trigger is never active and asks for no "
        f"replicas, so KEDA scales Deployment triton to zero{ANSWERED_BY}",
        'query: \'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml",exported_pod=~"triton-.*"})'
        "'\n# the series carry the workload's namespace as exported_namespace\n"
        "# the series carry the workload's pod as exported_pod\n"
        'ignoreNullValues: "false"   # fail loudly rather than scale on 0',
    ),
    (
        "GL811/fail_gone_and_never_seen.yaml",
        "72h",
        "GL811",
        1,
        24,
        Severity.ERROR,
        "prometheus trigger 1 of ScaledObject ml/llm: the query returns no series: "
        "nv_gpu_utilization has no series now (last seen 2d ago (<*> UTC)); with "
        f"ignoreNullValues false every poll fails, {NO_VALUE}, and no spec.fallback stands "
        f"in{ANSWERED_BY}",
        "# compare the query with the series Prometheus has:\n"
        "curl -sG 'http://127.0.0.1:<*>/api/v1/query' --data-urlencode "
        "'query=avg(nv_gpu_utilization{namespace=\"ml\"})'",
    ),
    (
        "GL811/fail_gone_and_never_seen.yaml",
        "72h",
        "GL811",
        2,
        30,
        Severity.ERROR,
        "prometheus trigger 2 of ScaledObject ml/llm: the query returns no series: "
        "dcgm_gpu_utilisation has no series: it was never seen in the last 3d (--lookback); "
        "dcgm_gpu_utilization from dcgm-exporter 1.x compatibility names exists (<*>); with "
        f"ignoreNullValues false every poll fails, {NO_VALUE}, and no spec.fallback stands "
        f"in{ANSWERED_BY}",
        "query: 'avg(dcgm_gpu_utilization)'\n# dcgm_gpu_utilisation -> dcgm_gpu_utilization: <*>",
    ),
    (
        "GL811/fail_nan.yaml",
        "24h",
        "GL811",
        0,
        16,
        Severity.WARNING,
        "prometheus trigger 0 of ScaledObject search/embedder: the query returns NaN (0/0 gives "
        "NaN: an average or a ratio over no series, or a NaN sample); KEDA reads 0 "
        "(ignoreNullValues defaults to true): the trigger is never active and asks for no "
        "replicas, so Deployment embedder stays at minReplicaCount 1, whatever its "
        f"load{ANSWERED_BY}",
        "<*>",
    ),
    (
        "GL812/fail_ratio_threshold.yaml",
        "24h",
        "GL812",
        0,
        15,
        Severity.WARNING,
        "prometheus trigger 0 of ScaledObject search/embedder: threshold 70 is never reached: "
        "the query returns values on the 0-1 scale (DCGM_FI_PROF_GR_ENGINE_ACTIVE is a ratio; "
        "observed min 0.4 / median 0.4 / max 0.4 over the last 1d), so KEDA's HPA asks for "
        "ceil(value / threshold) = 1 replica at most and Deployment embedder never scales "
        f"out{ANSWERED_BY}",
        'threshold: "0.7"   # 70% on the 0-1 scale',
    ),
    (
        "GL812/fail_sum_over_cluster.yaml",
        "24h",
        "GL812",
        0,
        16,
        Severity.WARNING,
        "prometheus trigger 0 of ScaledObject ml/triton: threshold 5 is below every value the "
        "query returned divided by maxReplicaCount 4 (observed min 356 / median 356 / max 356 "
        "over the last 1d): KEDA's HPA asks for ceil(value / threshold) replicas, more than 4, "
        "so Deployment triton sits at maxReplicaCount (does the query add up more than the "
        f"workload's own GPUs?){ANSWERED_BY}",
        'threshold: "89"   # the peak observed reaches maxReplicaCount; or narrow the query to '
        "the workload's pods",
    ),
    (
        "GL812/fail_never_active.yaml",
        "24h",
        "GL812",
        0,
        17,
        Severity.WARNING,
        "prometheus trigger 0 of ScaledObject ml/llm: activationThreshold 95 is at or above "
        "every value the query returned (observed min 60 / median 60 / max 60 over the last "
        "1d): the trigger is never active (KEDA wants a value above it), so with "
        "minReplicaCount 0 KEDA keeps StatefulSet llm at zero replicas unless another trigger "
        f"is active{ANSWERED_BY}",
        'activationThreshold: "30"   # below the values observed',
    ),
]


@pytest.mark.parametrize(
    ("case", "lookback", "rule", "index", "line", "severity", "message", "fix"),
    CASES,
    ids=[f"{c[0]}#{c[3]}" for c in CASES],
)
def test_message_fix_and_severity(
    world: World,
    case: str,
    lookback: str,
    rule: str,
    index: int,
    line: int,
    severity: Severity,
    message: str,
    fix: str,
) -> None:
    findings, _ = lint_live([LIVE_FIXTURES / case], world.stack.url, lookback)
    found = _of(findings, rule)
    assert len(found) > index, show(findings)
    finding = found[index]
    assert finding.location.line == line, show([finding])
    assert finding.severity is severity, show([finding])
    assert like(message, finding.message), show([finding])
    assert like(fix, finding.fix), show([finding])


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
    assert any(
        n.startswith("live check: 3 KEDA prometheus triggers checked") for n in snapshot.notes
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
        "prometheus trigger 0 of ScaledObject ml/triton: Prometheus gave no answer to the query "
        "within 5.<*> s, and KEDA waits 3 s (KEDA_HTTP_DEFAULT_TIMEOUT, 3000 ms unless the KEDA "
        f"operator sets it): its polls time out too, {NO_VALUE}, and no spec.fallback stands in "
        "(measured from where gpulint runs) (answered by <*>)",
        broken[0].message,
    ), broken[0].message
    assert like(
        "prometheus trigger 1 of ScaledObject ml/triton: Prometheus took 3.<*> s to answer the "
        "query, longer than the 3 s KEDA waits (<*>): KEDA's polls time out, <*>",
        broken[1].message,
    ), broken[1].message
    assert broken[1].fix.startswith('timeout: "7')
    assert "answered more than 64 MiB" in broken[3].message
    assert "with a body that is not JSON ('<html>Sign in</html>')" in broken[4].message
    assert "/api/v1/query answered HTTP 502" in broken[5].message
    (scale,) = _of(findings, "GL812")
    assert scale.message.startswith("prometheus trigger 6 of ScaledObject ml/triton: threshold 70")


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
