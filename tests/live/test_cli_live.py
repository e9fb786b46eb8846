"""The command line with ``--prometheus`` and ``check-adapter``, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import ClientSession, web

from .conftest import LIVE_FIXTURES
from .harness import ROOT, AppServer
from .world import World

pytestmark = [pytest.mark.live, pytest.mark.slow]

BROKEN = LIVE_FIXTURES / "GL804" / "fail_pod_label_of_exporter"
CORRECT = LIVE_FIXTURES / "correct" / "stack"


def gpulint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )


def test_lint_with_prometheus_reports_live_findings_as_text(world: World) -> None:
    result = gpulint("lint", "--prometheus", world.stack.url, str(BROKEN))
    assert result.returncode == 1, result.stderr
    words = " ".join(result.stdout.split())  # wrapped at 80 columns (tests/conftest.py)
    assert "adapter.yaml:6:7: GL802 [error]" in words
    # The HPA gets no data because of the mapping GL802 reports: shown under it.
    assert "follows from it: " in words
    assert "hpa.yaml:17:9: GL804 [error] HPA triton gets no value for gpu_utilization" in words
    assert f"checked against {world.stack.url}" in words


def test_scaled_objects_alone_are_checked_live(world: World) -> None:
    """No adapter config and no HPA in the input: the KEDA triggers still get their check."""
    case = LIVE_FIXTURES / "GL810" / "fail_multiple_series.yaml"
    result = gpulint("lint", "--prometheus", world.stack.url, str(case))
    assert result.returncode == 1, result.stderr
    words = " ".join(result.stdout.split())  # wrapped at 80 columns (tests/conftest.py)
    assert "fail_multiple_series.yaml:19:14: GL810 [error] Prometheus trigger 0" in words
    assert "live check: 2 KEDA prometheus triggers checked against" in words


def test_check_adapter_is_lint_with_the_adapter_file_first(world: World) -> None:
    adapter, hpa = BROKEN / "adapter.yaml", BROKEN / "hpa.yaml"
    checked = gpulint(
        "check-adapter", "--prometheus", world.stack.url, "-f", "json", str(adapter), str(hpa)
    )
    linted = gpulint("lint", "--prometheus", world.stack.url, "-f", "json", str(adapter), str(hpa))
    assert checked.returncode == linted.returncode == 1
    checked_rules = sorted(f["rule"] for f in json.loads(checked.stdout)["findings"])
    assert checked_rules == sorted(f["rule"] for f in json.loads(linted.stdout)["findings"])
    assert {"GL802", "GL804"} <= set(checked_rules)


def test_live_findings_in_json_and_sarif(world: World) -> None:
    report = json.loads(
        gpulint("lint", "--prometheus", world.stack.url, "-f", "json", str(BROKEN)).stdout
    )
    [gl804] = [f for f in report["findings"] if f["rule"] == "GL804"]
    assert (Path(gl804["file"]).name, gl804["line"], gl804["column"]) == ("hpa.yaml", 17, 9)
    assert gl804["object"]["kind"] == "HorizontalPodAutoscaler"
    assert [(Path(r["file"]).name, r["line"]) for r in gl804["related"]] == [("adapter.yaml", 11)]
    assert gl804["fix"].startswith("resources:\n  overrides:\n    exported_namespace:")
    sarif = json.loads(
        gpulint("lint", "--prometheus", world.stack.url, "-f", "sarif", str(BROKEN)).stdout
    )
    results = sarif["runs"][0]["results"]
    assert {"GL802", "GL804"} <= {r["ruleId"] for r in results}


def test_a_correct_setup_exits_zero(world: World) -> None:
    result = gpulint("check-adapter", "--prometheus", world.stack.url, str(CORRECT))
    assert result.returncode == 0, result.stdout
    assert " GL80" not in result.stdout


def test_require_prometheus_turns_an_unreachable_prometheus_into_exit_code_1(
    down_url: str,
) -> None:
    adapter = LIVE_FIXTURES / "GL809" / "fail_connection_refused.yaml"
    lenient = gpulint("lint", "--prometheus", down_url, str(adapter))
    strict = gpulint("lint", "--prometheus", down_url, "--require-prometheus", str(adapter))
    never = gpulint(
        "lint", "--prometheus", down_url, "--require-prometheus", "--fail-on", "never", str(adapter)
    )
    assert lenient.returncode == 0 and "GL809 [warning]" in lenient.stdout
    assert strict.returncode == 1 and "GL809 [error]" in strict.stdout
    assert never.returncode == 1, "--require-prometheus fails the run whatever --fail-on says"


def test_ignoring_the_live_rules_skips_the_live_check(down_url: str) -> None:
    adapter = LIVE_FIXTURES / "GL809" / "fail_connection_refused.yaml"
    result = gpulint("lint", "--prometheus", down_url, "--ignore", "GL8", str(adapter))
    assert result.returncode == 0
    assert "no live rule (GL801-GL812) is selected" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prometheus", "localhost:9090"], "is not an http(s) URL"),
        (["--prometheus", "http://127.0.0.1:9", "--lookback", "yesterday"], "is not a duration"),
        (["--prometheus", "http://127.0.0.1:9", "--prometheus-header", "Bearer x"], "NAME=VALUE"),
        (["--prometheus", "http://127.0.0.1:9", "--prometheus-timeout", "0"], "above zero"),
        (["--require-prometheus"], "need --prometheus URL"),
    ],
)
def test_bad_live_options_are_usage_errors(args: list[str], message: str) -> None:
    result = gpulint("lint", *args, str(CORRECT))
    assert result.returncode == 2
    assert message in result.stderr


def test_check_adapter_needs_an_adapter_config_and_a_url(tmp_path: Path) -> None:
    missing_url = gpulint("check-adapter", str(CORRECT / "prometheus-adapter-values.yaml"))
    assert missing_url.returncode == 2 and "--prometheus" in missing_url.stderr
    not_adapter = gpulint(
        "check-adapter", "--prometheus", "http://127.0.0.1:9", str(CORRECT / "hpas.yaml")
    )
    assert not_adapter.returncode == 2
    assert "holds no prometheus-adapter configuration" in not_adapter.stderr


class AuthProxy(AppServer):
    """A reverse proxy that wants a bearer token, in front of the real Prometheus (as an
    oauth2-proxy or a Mimir gateway would be)."""

    def __init__(self, upstream: str) -> None:
        super().__init__()
        self.upstream = upstream
        self.tenants: list[str] = []

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/prometheus/{tail:.*}", self._forward)
        return app

    async def _forward(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bearer s3cret":
            return web.Response(status=401, text="401 Unauthorized")
        self.tenants.append(request.headers.get("X-Scope-OrgID", ""))
        body = await request.read()
        url = f"{self.upstream}/{request.match_info['tail']}"
        async with (
            ClientSession() as session,
            session.request(
                request.method,
                url,
                params=request.query,
                data=body,
                headers={"Content-Type": request.content_type},
            ) as answer,
        ):
            return web.Response(
                status=answer.status, body=await answer.read(), content_type="application/json"
            )


@pytest.fixture
def proxy(world: World) -> Iterator[AuthProxy]:
    server = AuthProxy(world.stack.url).start()
    yield server
    server.stop()


def test_headers_reach_a_prometheus_behind_an_authenticating_proxy(proxy: AuthProxy) -> None:
    url = f"{proxy.url}/prometheus"
    refused = gpulint("lint", "--prometheus", url, str(BROKEN))
    assert "GL809 [warning]" in refused.stdout
    assert "answered HTTP 401 with a body that is not JSON ('401 Unauthorized')" in " ".join(
        refused.stdout.split()
    )
    allowed = gpulint(
        "lint",
        "--prometheus",
        url,
        "--prometheus-header",
        "Authorization=Bearer s3cret",
        "--prometheus-header",
        "X-Scope-OrgID=team-ml",
        str(BROKEN),
    )
    assert "GL809" not in allowed.stdout
    assert "GL804 [error]" in allowed.stdout
    assert proxy.tenants and set(proxy.tenants) == {"team-ml"}
