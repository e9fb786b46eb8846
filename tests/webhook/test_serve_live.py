"""``gpulint serve --prometheus``: the live rules in the webhook, from a snapshot refreshed in
the background.

Real processes: ``gpulint serve`` reads the fake API server (tests/kubefake.py) and a real
Prometheus scraping the live tests' fixture exporters (tests/live: the kube-prometheus-stack
nodes, where the workload's pod is in ``exported_pod``). The cluster holds an adapter
ConfigMap with a correct rule and a rule whose metric name is misspelt, a Deployment ``triton``
whose pods report GPU utilization (32 and 84) and a Deployment ``ghost`` whose pods report
nothing, each with an HPA on ``gpu_utilization``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import io
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from aiohttp import web
from gpulint.webhook.evaluator import _as_warning
from gpulint.webhook.logs import JsonLog
from gpulint.webhook.options import OptionError, add_serve_options, options_from_args
from gpulint.webhook.review import fit_warnings, rule_warning
from gpulint.webhook.server import _live

from gpulint.cli import build_parser
from gpulint.core.model import Finding, Location, Severity
from gpulint.live.options import DEFAULT_LOOKBACK, DEFAULT_MIN_HISTORY

from ..kubefake import FakeCluster, KubeFake
from ..live.conftest import require_prometheus
from ..live.harness import (
    AppServer,
    ExporterServer,
    Job,
    PrometheusServer,
    free_port,
    prometheus_config,
)
from ..live.world import stack_targets
from . import objects
from .harness import ROOT, Certificates, Webhook, admission_review

pytestmark = [pytest.mark.live, pytest.mark.slow]

CORRECT_RULE = {
    "seriesQuery": 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}',
    "resources": {
        "overrides": {
            "exported_namespace": {"resource": "namespace"},
            "exported_pod": {"resource": "pod"},
        }
    },
    "name": {"matches": "^DCGM_FI_DEV_GPU_UTIL$", "as": "gpu_utilization"},
    "metricsQuery": "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
}
MISSPELT_RULE = {
    **CORRECT_RULE,
    "seriesQuery": 'DCGM_FI_DEV_GPU_UTILIZATION{exported_namespace!="",exported_pod!=""}',
    "name": {"matches": "^DCGM_FI_DEV_GPU_UTILIZATION$", "as": "gpu_utilization_total"},
}
LIVE_ARGS = ("--prometheus-refresh=1", "--prometheus-timeout=10", "--lookback=10m")


def adapter_configmap(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "prometheus-adapter",
            "namespace": "monitoring",
            "labels": {"app.kubernetes.io/name": "prometheus-adapter"},
        },
        "data": {"config.yaml": yaml.safe_dump({"rules": rules}, sort_keys=False)},
    }


ADAPTER = adapter_configmap([CORRECT_RULE, MISSPELT_RULE])
TRITON_HPA = objects.gpu_hpa("triton", "ml", "triton", metric="gpu_utilization")
GHOST_HPA = objects.gpu_hpa("ghost", "ml", "ghost", metric="gpu_utilization")


def world() -> list[dict[str, Any]]:
    return [
        objects.deployment("triton", "ml", gpus=1),
        objects.deployment("ghost", "ml", gpus=1),
        TRITON_HPA,
        GHOST_HPA,
        ADAPTER,
    ]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus on a fixed port (so that a test can stop and restart it), scraping
    the two dcgm-exporter nodes of the stack world every second."""
    require_prometheus()
    targets = stack_targets()[:2]
    exporter = ExporterServer(targets).start()
    config = prometheus_config(
        [Job("gpu-operator/nvidia-dcgm-exporter/0", False, targets)], exporter, "1s"
    )
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), config, port=free_port())
    try:
        server.start()
        server.wait_for_scrapes(len(targets), 1)
        yield server
    finally:
        server.stop()
        exporter.stop()


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeFake]:
    cluster = FakeCluster()
    for obj in world():
        cluster.apply(copy.deepcopy(obj))
    server = KubeFake(cluster).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def kubeconfig(kube: KubeFake, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return kube.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")


@pytest.fixture(scope="module")
def live_hook(
    prometheus: PrometheusServer,
    kubeconfig: Path,
    module_certificates: Certificates,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    log = tmp_path_factory.mktemp("serve-live") / "serve.log"
    args = [f"--kubeconfig={kubeconfig}", f"--prometheus={prometheus.url}", *LIVE_ARGS]
    webhook = Webhook(module_certificates, log, args)
    try:
        webhook.wait_ready()
        yield webhook
    finally:
        webhook.stop()


def wait_live(hook: Webhook, usable: bool = True, timeout: float = 30.0) -> dict[str, Any]:
    """Until the live snapshot in use is (or is no longer) from a successful refresh."""
    end = time.monotonic() + timeout
    state: dict[str, Any] = {}
    while time.monotonic() < end:
        status, body = hook.get("/readyz")
        assert status == 200, body  # Prometheus never decides readiness
        state = body["prometheus"]
        if state["usable"] is usable:
            return state
        time.sleep(0.1)
    raise AssertionError(f"live snapshot not usable={usable} in {timeout} s: {state}")


def update(hook: Webhook, obj: dict[str, Any], old: dict[str, Any] | None = None) -> Any:
    """An UPDATE of ``obj`` (from ``old``, by default itself), timed."""
    started = time.monotonic()
    response = hook.review(admission_review(obj, "UPDATE", old=old or obj))
    return response, time.monotonic() - started


def live_warnings(response: dict[str, Any]) -> list[str]:
    """The warnings of live rules, and of offline findings they settled (GL402 by GL801)."""
    return [w for w in response.get("warnings", []) if w.startswith(("GL8", "GL402"))]


def cluster_lint(kubeconfig: Path, url: str) -> list[dict[str, Any]]:
    """What `gpulint lint --cluster --prometheus` says about the same cluster."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulint",
            "lint",
            "--cluster",
            f"--kubeconfig={kubeconfig}",
            f"--prometheus={url}",
            "--lookback=10m",
            "--select=GL8",
            "--format=json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr
    findings: list[dict[str, Any]] = json.loads(result.stdout)["findings"]
    return findings


def as_warning(rule: str, message: str) -> str:
    """A finding as the webhook's warnings carry it (one line, within the API's limits)."""
    (warning,) = fit_warnings([rule_warning(rule, message)])
    return warning


# --- live findings through the webhook ---------------------------------------------------------


def test_an_hpa_whose_pods_have_no_data_gets_the_gl804_warning_of_lint(
    live_hook: Webhook, kubeconfig: Path, prometheus: PrometheusServer
) -> None:
    wait_live(live_hook)
    response, _ = update(live_hook, GHOST_HPA)
    assert response["allowed"] is True  # GL804 is an error in lint; here a warning
    lint = cluster_lint(kubeconfig, prometheus.url)
    (expected,) = [f for f in lint if f["rule"] == "GL804" and f["object"]["name"] == "ghost"]
    assert expected["severity"] == "error"
    assert "no series carries a pod named ghost-<hash>-<id>" in expected["message"]
    assert live_warnings(response) == [as_warning("GL804", expected["message"])]


def test_a_correct_hpa_gets_no_live_finding(live_hook: Webhook) -> None:
    wait_live(live_hook)
    response, _ = update(live_hook, TRITON_HPA)
    assert response["allowed"] is True
    assert live_warnings(response) == []


def test_evidence_follows_the_admitted_metric_and_target(live_hook: Webhook) -> None:
    wait_live(live_hook)
    # Another selector is another question to Prometheus: the evidence collected for the
    # HPA as the cluster holds it does not apply.
    narrowed = copy.deepcopy(GHOST_HPA)
    narrowed["spec"]["metrics"][0]["pods"]["metric"]["selector"] = {"matchLabels": {"gpu": "0"}}
    response, _ = update(live_hook, narrowed, GHOST_HPA)
    assert live_warnings(response) == []
    # The same metric with a new target: the values observed for the pods judge the new one.
    raised = copy.deepcopy(TRITON_HPA)
    raised["spec"]["metrics"][0]["pods"]["target"]["averageValue"] = "500"
    response, _ = update(live_hook, raised, TRITON_HPA)
    assert response["allowed"] is True
    (warning,) = live_warnings(response)
    # Seconds of the 10m window scraped: the values so far, and no verdict yet (GL805).
    assert warning.startswith(
        "GL805: HPA triton targets gpu_utilization at 500 (averageValue), above anything "
        "observed so far (observed min 32 / median 58 / max 84 for Deployment ml/triton over "
    )


def test_an_edited_adapter_rule_gets_no_stale_evidence(live_hook: Webhook) -> None:
    wait_live(live_hook)
    response, _ = update(live_hook, ADAPTER)
    assert response["allowed"] is True
    (warning,) = live_warnings(response)
    # GL402's finding on the misspelt name, settled by what GL801 found: a warning.
    assert warning.startswith(
        'GL402: seriesQuery `DCGM_FI_DEV_GPU_UTILIZATION{exported_namespace!="",'
        'exported_pod!=""}` of adapter rule rules[1] of ConfigMap prometheus-adapter matches '
        "no series in Prometheus"
    )
    fixed = adapter_configmap([CORRECT_RULE, {**MISSPELT_RULE, "seriesQuery": "up"}])
    response, _ = update(live_hook, fixed, ADAPTER)
    assert response["allowed"] is True
    assert live_warnings(response) == []
    # The rule that serves the HPAs, edited: the ConfigMap brings in the HPAs reading through
    # it, and what Prometheus answered for the old rule (GL804 on ghost) is not reported.
    edited = {
        **CORRECT_RULE,
        "metricsQuery": "max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    }
    response, _ = update(live_hook, adapter_configmap([edited, MISSPELT_RULE]), ADAPTER)
    assert response["allowed"] is True
    assert [w.split(":")[0] for w in live_warnings(response)] == ["GL402"]


def test_the_refreshes_are_in_metrics_and_readyz(live_hook: Webhook) -> None:
    state = wait_live(live_hook)
    assert state["error"] is None and state["ageSeconds"] < 30
    metrics = live_hook.metrics()
    assert metrics.value("gpulint_webhook_prometheus_refreshes_total", result="ok") >= 1
    assert metrics.value("gpulint_webhook_prometheus_snapshot_usable") == 1
    assert 0 <= metrics.value("gpulint_webhook_prometheus_snapshot_age_seconds") < 30
    assert metrics.value("gpulint_webhook_prometheus_refresh_duration_seconds_count") >= 1
    last = metrics.value("gpulint_webhook_prometheus_last_refresh_timestamp_seconds")
    assert abs(time.time() - last) < 30
    for reason in ("unreachable", "timeout", "http-error", "bad-answer", "internal"):
        value = metrics.value("gpulint_webhook_prometheus_refresh_failures_total", reason=reason)
        assert value == 0


# --- Prometheus down, then back -------------------------------------------------------------


def test_prometheus_down_stops_live_findings_and_nothing_else(
    live_hook: Webhook, prometheus: PrometheusServer
) -> None:
    wait_live(live_hook)
    assert live_warnings(update(live_hook, GHOST_HPA)[0])
    prometheus.stop()
    try:
        wait_live(live_hook, usable=False)
        # A refresh caught in Prometheus's shutdown may get its 503 first; then the port is
        # closed: three refreshes in a row find it so.
        failures = "gpulint_webhook_prometheus_refresh_failures_total"
        end = time.monotonic() + 20
        while live_hook.metrics().value(failures, reason="unreachable") < 3:
            assert time.monotonic() < end, "no three failed refreshes"
            time.sleep(0.2)
        state = live_hook.get("/readyz")[1]["prometheus"]
        assert state["usable"] is False and state["reason"] == "unreachable"
        assert "cannot connect" in state["error"]
        for _ in range(5):
            response, seconds = update(live_hook, GHOST_HPA)
            assert response["allowed"] is True
            assert live_warnings(response) == []  # no stale GL804, and no GL809
            assert seconds < 1.0
        metrics = live_hook.metrics()
        assert metrics.value("gpulint_webhook_prometheus_snapshot_usable") == 0
        for reason in ("not-synced", "deadline", "error"):
            assert metrics.value("gpulint_webhook_fail_open_total", reason=reason) == 0
        failed = [r for r in live_hook.log_records() if r["event"] == "prometheus-refresh-failed"]
        # Logged when the failure starts or changes reason, not at each refresh.
        assert [r["reason"] for r in failed][-1:] == ["unreachable"]
        assert [r["reason"] for r in failed].count("unreachable") == 1
    finally:
        prometheus.launch().wait()
    wait_live(live_hook)
    assert live_warnings(update(live_hook, GHOST_HPA)[0])
    records = live_hook.log_records()
    (recovered,) = [r for r in records if r["event"] == "prometheus-recovered"]
    assert recovered["adapterRules"] == 2 and recovered["hpaMetrics"] == 2


# --- Prometheus slow ---------------------------------------------------------------------------


class SlowPrometheus(AppServer):
    """A Prometheus that takes 5 s over every API request (an overloaded one).

    ``in_flight`` counts the requests a client is still waiting on: a request whose client
    gave up (closed the connection) stops counting."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/api/v1/{endpoint:.*}", self._answer)
        return app

    async def _answer(self, request: web.Request) -> web.Response:
        self.in_flight += 1
        try:
            for _ in range(50):
                transport = request.transport
                if transport is None or transport.is_closing():
                    break
                await asyncio.sleep(0.1)
        finally:
            self.in_flight -= 1
        return web.json_response({"status": "success", "data": []})


def test_a_slow_prometheus_does_not_delay_admissions(
    kubeconfig: Path, certificates: Certificates, tmp_path: Path
) -> None:
    slow = SlowPrometheus().start()
    args = [
        f"--kubeconfig={kubeconfig}",
        f"--prometheus={slow.url}",
        "--prometheus-timeout=1.5",
        "--prometheus-refresh=1",
    ]
    hook = Webhook(certificates, tmp_path / "serve.log", args)
    try:
        hook.wait_ready()
        answered_while_waiting = 0
        end = time.monotonic() + 4
        while time.monotonic() < end:
            waiting = slow.in_flight > 0
            response, seconds = update(hook, GHOST_HPA)
            assert response["allowed"] is True
            assert live_warnings(response) == []
            # A review waiting on the refresh would take the 1.5 s Prometheus timeout.
            assert seconds < 1.0, f"an admission took {seconds:.2f} s"
            answered_while_waiting += waiting and slow.in_flight > 0
            time.sleep(0.05)
        assert answered_while_waiting >= 5  # answered while a refresh waited on Prometheus
        metrics = hook.metrics()
        timeouts = metrics.value(
            "gpulint_webhook_prometheus_refresh_failures_total", reason="timeout"
        )
        assert timeouts >= 1
        assert metrics.value("gpulint_webhook_fail_open_total") == 0
        (failed,) = [r for r in hook.log_records() if r["event"] == "prometheus-refresh-failed"]
        assert failed["reason"] == "timeout" and "1.5 s timeout" in failed["message"]
    finally:
        hook.stop()
        slow.stop()


# --- the command line ---------------------------------------------------------------------------


def serve_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", "serve", "--tls-cert=c.pem", "--tls-key=k.pem", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_prometheus_needs_the_cluster_caches() -> None:
    refused = serve_command("--no-cluster", "--prometheus=http://127.0.0.1:9090")
    assert refused.returncode == 2
    assert refused.stderr == (
        "gpulint: error: --prometheus needs the cluster caches (the live check reads the "
        "cluster's adapter ConfigMaps and HPAs): drop --no-cluster, or drop --prometheus\n"
    )
    alone = serve_command("--prometheus-refresh=30")
    assert alone.returncode == 2
    assert alone.stderr == "gpulint: error: --prometheus-refresh needs --prometheus URL\n"
    helped = serve_command("--help")
    assert "need the cluster caches: not with --no-cluster" in " ".join(helped.stdout.split())


def test_min_history_reaches_the_live_check_as_for_lint() -> None:
    """``--min-history`` means for the webhook's live rules what it means for
    ``gpulint lint --prometheus``, parsed by the same function; it needs --prometheus."""
    parser = argparse.ArgumentParser()
    add_serve_options(parser)
    base = ["--tls-cert=c.pem", "--tls-key=k.pem", "--prometheus=http://127.0.0.1:9090"]
    options = options_from_args(parser.parse_args([*base, "--min-history=50%"]))
    assert options.min_history == 0.5
    log = JsonLog(io.StringIO())
    refresh = _live(options, cast(Any, None), log)
    assert refresh is not None and refresh.options.min_history == 0.5
    unset = _live(options_from_args(parser.parse_args(base)), cast(Any, None), log)
    assert unset is not None and unset.options.min_history == DEFAULT_MIN_HISTORY
    with pytest.raises(OptionError, match="is more than the whole look-back window"):
        options_from_args(parser.parse_args([*base, "--min-history=150%"]))
    alone = serve_command("--min-history=50%")
    assert alone.returncode == 2
    assert alone.stderr == "gpulint: error: --min-history needs --prometheus URL\n"


def test_lookback_reaches_the_live_check_and_both_commands_word_the_window_alike() -> None:
    parser = argparse.ArgumentParser()
    add_serve_options(parser)
    base = ["--tls-cert=c.pem", "--tls-key=k.pem", "--prometheus=http://127.0.0.1:9090"]
    log = JsonLog(io.StringIO())
    given = _live(
        options_from_args(parser.parse_args([*base, "--lookback=6h"])), cast(Any, None), log
    )
    assert given is not None and given.options.lookback == 6 * 3600
    unset = _live(options_from_args(parser.parse_args(base)), cast(Any, None), log)
    assert unset is not None and unset.options.lookback == DEFAULT_LOOKBACK == 24 * 3600

    def helps(command: argparse.ArgumentParser) -> dict[str, str | None]:
        return {
            action.option_strings[0]: action.help
            for action in command._actions
            if action.option_strings and action.option_strings[0] in ("--lookback", "--min-history")
        }

    lint = build_parser()._subparsers._group_actions[0].choices["lint"]  # type: ignore[union-attr]
    assert helps(parser) == helps(lint) and len(helps(parser)) == 2


_PROBE = textwrap.dedent(
    """
    import json, os, signal, socket, sys, threading, time
    from gpulint.cli import main

    def probe(port):
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        loaded = {m.split(".")[0] for m in sys.modules} & {"prometheus_api_client"}
        # One write on stderr: the server's log lines share stdout with other threads.
        os.write(2, ("LOADED=" + json.dumps(sorted(loaded)) + "\\n").encode())
        os.kill(os.getpid(), signal.SIGTERM)

    args = json.loads(sys.argv[1])
    threading.Thread(target=probe, args=(int(sys.argv[2]),), daemon=True).start()
    sys.exit(main(args))
    """
)


def loaded_while_serving(certificates: Certificates, *args: str) -> list[str]:
    """The HTTP client modules a serving ``gpulint serve`` has imported."""
    port = free_port()
    argv = [
        "serve",
        f"--tls-cert={certificates.cert}",
        f"--tls-key={certificates.key}",
        f"--port={port}",
        "--bind=127.0.0.1",
        *args,
    ]
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), str(port)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=90,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("LOADED=")]
    loaded: list[str] = json.loads(line.removeprefix("LOADED="))
    return loaded


def test_the_prometheus_client_is_imported_only_with_prometheus(
    certificates: Certificates, kubeconfig: Path
) -> None:
    assert loaded_while_serving(certificates, f"--kubeconfig={kubeconfig}") == []
    with_live = loaded_while_serving(
        certificates, f"--kubeconfig={kubeconfig}", "--prometheus=http://127.0.0.1:9"
    )
    assert with_live == ["prometheus_api_client"]


@pytest.mark.parametrize(
    ("alone", "settled", "admitted"),
    [
        (Severity.WARNING, Severity.ERROR, Severity.WARNING),
        (Severity.INFO, Severity.ERROR, Severity.WARNING),
        (Severity.ERROR, Severity.ERROR, Severity.ERROR),
    ],
)
def test_what_prometheus_saw_refuses_no_request_a_settled_finding_included(
    alone: Severity, settled: Severity, admitted: Severity
) -> None:
    """A finding the live values raised (GL402 settled by GL801) refuses a request only as the
    object alone would have it refused."""
    finding = Finding(
        "GL402",
        "adapter-unknown-gpu-series",
        settled,
        "seriesQuery finds nothing.",
        Location("cluster://monitoring/ConfigMap/adapter", 1, 1),
        settled_by="GL801",
        input_severity=alone,
    )
    assert _as_warning(finding).severity is admitted
