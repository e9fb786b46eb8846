"""The live rules against a real Prometheus: what the snapshots of their fixtures do not show
(each finding's wording, location and fix are in tests/live/fixtures/*/snapshots, compared by
test_live_fixtures.py): related objects, severities that depend on options, hostile answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpulint.core.model import Finding, Severity
from gpulint.report.json import finding_to_dict

from ..conftest import lint_paths
from .conftest import LIVE_FIXTURES, lint_live, server_url
from .world import World

pytestmark = [pytest.mark.live, pytest.mark.slow]


def findings_of(world: World, down_url: str, case: str, rule: str) -> list[Finding]:
    """The findings of ``rule``, and those it settled (gpulint.engine.settled)."""
    path = LIVE_FIXTURES / case
    url, lookback = server_url(world, down_url, path)
    findings, _ = lint_live([path], url, lookback)
    return sorted((f for f in findings if rule in (f.rule, f.settled_by)), key=Finding.sort_key)


def test_gl801_names_the_hpas_that_ask_for_the_metric(world: World, down_url: str) -> None:
    [finding] = findings_of(world, down_url, "GL801/fail_exporter_renamed", "GL801")
    [link] = finding.related
    assert (str(link.ref), link.role) == (
        "HorizontalPodAutoscaler ml/triton",
        "asks for its metric",
    )
    assert link.location is not None
    assert (Path(link.location.file).name, link.location.line) == ("hpa.yaml", 17)


@pytest.mark.parametrize("case", ["GL804/fail_mig_instances", "GL805/fail_multi_gpu_sum"])
def test_hpa_findings_point_back_at_the_adapter_rule(
    world: World, down_url: str, case: str
) -> None:
    [finding] = findings_of(world, down_url, case, case[:5])
    [link] = finding.related
    assert link.location is not None
    assert (Path(link.location.file).name, link.location.line) == ("adapter.yaml", 11)
    assert link.role == "adapter rule that serves the metric"


def test_disappeared_within_a_longer_look_back_but_not_within_the_default(
    world: World,
) -> None:
    path = LIVE_FIXTURES / "GL801" / "fail_disappeared.yaml"
    short, _ = lint_live([path], world.stack.url, "24h", select=["GL801"])
    long, _ = lint_live([path], world.stack.url, "72h", select=["GL801"])
    assert "was never seen in the last 24h (--lookback)" in short[0].message
    assert "was last seen 2d ago" in long[0].message


def test_gl809_is_an_error_when_prometheus_is_required(down_url: str) -> None:
    path = LIVE_FIXTURES / "GL809" / "fail_connection_refused.yaml"
    warned, _ = lint_live([path], down_url, select=["GL809"])
    failed, snapshot = lint_live([path], down_url, required=True, select=["GL809"])
    assert [f.severity for f in warned] == [Severity.WARNING]
    assert [f.severity for f in failed] == [Severity.ERROR]
    assert failed[0].message.endswith("(--require-prometheus).")
    assert not snapshot.available and snapshot.rules == {}


@pytest.mark.parametrize("server", ["stack", "gmp"])
def test_the_series_gl801_suggests_find_series_and_map_the_workload(
    world: World, down_url: str, server: str, tmp_path: Path
) -> None:
    """GL801's suggestion, pasted as it says, draws neither GL801 nor GL802 on the same
    Prometheus: under honor_labels: false (stack) it names exported_pod, not the exporter's
    pod; where the exporter's labels are kept (gmp) it keeps pod."""
    case = LIVE_FIXTURES / "GL801" / "fail_exporter_renamed"
    copy = tmp_path / "case"
    copy.mkdir()
    hpa = (case / "hpa.yaml").read_text()
    (copy / "hpa.yaml").write_text(hpa)
    adapter = (case / "adapter.yaml").read_text().replace("# live: stack", f"# live: {server}")
    (copy / "adapter.yaml").write_text(adapter)
    url, lookback = server_url(world, down_url, copy / "adapter.yaml")
    findings, _ = lint_live([copy], url, lookback)
    [finding] = [f for f in findings if "GL801" in (f.rule, f.settled_by)]
    suggested = yaml.safe_load(finding.fix)
    rule = yaml.safe_load(adapter)["rules"][0]
    rule["seriesQuery"] = suggested["seriesQuery"]
    if "resources" in suggested:
        rule["resources"] = suggested["resources"]
    (copy / "adapter.yaml").write_text(f"# live: {server}\n" + yaml.safe_dump({"rules": [rule]}))
    metric = suggested["seriesQuery"].split("{")[0]
    (copy / "hpa.yaml").write_text(hpa.replace("container_accelerator_duty_cycle", metric))
    again, _ = lint_live([copy], url, lookback)
    assert not [f for f in again if {f.rule, f.settled_by} & {"GL801", "GL802", "GL402"}], [
        f.message for f in again
    ]
    labels = "exported_pod" if server == "stack" else "pod"
    assert f'{labels}!=""' in suggested["seriesQuery"]


@pytest.mark.parametrize(
    ("case", "offline_rule", "live_rule"),
    [
        ("GL801/fail_exporter_renamed", "GL402", "GL801"),
        ("GL805/fail_known_ratio_settles_gl107", "GL107", "GL805"),
    ],
)
def test_one_defect_is_one_finding_on_its_line(
    world: World, down_url: str, case: str, offline_rule: str, live_rule: str
) -> None:
    """A legacy seriesQuery that finds nothing (GL402 offline, GL801 live) and a target on the
    wrong scale (GL107 offline, GL805 live) are reported once: the offline finding, on its
    line, settled by the live rule; without --prometheus the offline rule reports it alone."""
    path = LIVE_FIXTURES / case
    url, lookback = server_url(world, down_url, path)
    findings, _ = lint_live([path], url, lookback)
    settled = {
        (f.location.file, f.location.line)
        for f in findings
        if (f.rule, f.settled_by) == (offline_rule, live_rule)
    }
    assert settled, [f"{f.rule} {f.message}" for f in findings]
    assert not [f for f in findings if f.rule == live_rule], [f.message for f in findings]
    offline = lint_paths(path)
    assert {(f.location.file, f.location.line) for f in offline if f.rule == offline_rule} == (
        settled
    )
    assert not [f for f in offline if f.settled_by]


def test_the_values_settle_the_offline_finding_as_one_error(world: World, down_url: str) -> None:
    """GL107 hedges a target of "60" on a 0-1 ratio (unless the query adds series up); the
    values GL805 reads answer it: one finding, GL107's, an error that says what was observed."""
    path = LIVE_FIXTURES / "GL805" / "fail_known_ratio_settles_gl107"
    url, lookback = server_url(world, down_url, path)
    findings, _ = lint_live([path], url, lookback)
    [offline] = [f for f in lint_paths(path) if f.rule == "GL107"]
    assert offline.severity is Severity.WARNING and "unless its query" in offline.message
    on_line = [f for f in findings if f.location == offline.location]
    assert [(f.rule, f.severity, f.settled_by) for f in on_line] == [
        ("GL107", Severity.ERROR, "GL805")
    ], [f"{f.rule} {f.message}" for f in findings]
    [settled] = on_line
    assert "unless" not in settled.message
    assert "observed min 0." in settled.message, settled.message
    # The fix and the edits --fix applies are GL107's.
    assert settled.fix == offline.fix
    assert settled.plan is not None and offline.plan is not None
    assert settled.plan.applicability == offline.plan.applicability
    assert finding_to_dict(settled)["settledBy"] == "GL805"
