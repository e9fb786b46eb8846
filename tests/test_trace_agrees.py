"""``gpulint trace`` and ``gpulint lint`` agree: a trace's broken links are exactly the chain
findings lint reports for that autoscaler.

Each input is built into units as both commands build it; lint's findings of each unit are
computed once and compared with what every trace of the unit shows. A chain finding "for an
autoscaler" is one of warning or error severity, of a rule that declares the stage (its
``STAGES``), on an object of the trace: the autoscaler itself (what it says of each link: its
scaleTargetRef, the metric it asks for; for a KEDA trigger the rules on its query, under that
trigger only), or a link's object (for an
adapter config with several rules, under the rule the link stands for; for chart values,
in the values file the link is written in). Both directions are checked: none of those is
missing from the trace, and every finding the trace shows is one of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpulint.core.model import Finding, Severity
from gpulint.engine.config import Settings
from gpulint.engine.files import build_units, plan_units, unit_inventory
from gpulint.engine.registry import Selection, stage_rules, unit_rules
from gpulint.engine.runner import run
from gpulint.input.units import RenderOptions
from gpulint.trace.chain import traces
from gpulint.trace.links import BROKEN, Link, Trace

from .conftest import CORPUS, FIXTURES, ROOT

pytestmark = pytest.mark.slow  # lint and trace over every fixture, example and corpus repository

LIMIT = 10 * 1024 * 1024
STAGES = stage_rules()
# Findings about the whole unit's Prometheus break their stages on every trace of the unit
# (their rules declare STAGE_REACH = "unit").
UNIT_RULES = unit_rules()
# The autoscaler that queries Prometheus itself (KEDA): its query is what an adapter rule's
# metricsQuery is for an HPA, and the rules on it are adapter-rule rules.
QUERY_STAGE = "adapter-rule"


def _inputs() -> list[Any]:
    found = sorted(p for p in FIXTURES.glob("*/*.yaml"))
    found.append(FIXTURES / "units" / "gitops")  # kustomize overlays and a Helm chart
    found += sorted(p for p in (ROOT / "examples").glob("*/*") if p.is_dir())
    inputs: list[Any] = [_case(p) for p in found if not p.name.startswith(".")]
    if CORPUS.is_dir():
        inputs += [_case(p, pytest.mark.corpus) for p in sorted(CORPUS.iterdir()) if p.is_dir()]
    return inputs


def _case(path: Path, *marks: pytest.MarkDecorator) -> Any:
    return pytest.param(path, marks=marks, id=str(path.relative_to(path.parents[1])))


def _breaks(finding: Finding) -> bool:
    return finding.severity >= Severity.WARNING


def _own(finding: Finding, trace: Trace, link: Link) -> bool:
    """Is the finding, of a rule of the link's stage, on the link's object?"""
    ref = finding.object
    if finding.rule in UNIT_RULES:
        return link.stage in UNIT_RULES[finding.rule]
    if ref == trace.autoscaler:
        # What the autoscaler says of each link (its scaleTargetRef, the metric it asks for).
        return True
    if ref is not None and not ref.api_version:
        # Chart values: the object is the values file the link is written in.
        if link.location is None or link.location.file != finding.location.file:
            return False
    elif ref is None or ref != link.object:
        return False
    if link.stage == "adapter-rule" and link.node:
        return finding.path[: len(link.node)] == link.node
    return True


def _expected(findings: list[Finding], trace: Trace) -> dict[str, set[int]]:
    """stage -> the findings lint reports on that stage of the trace (by identity)."""
    expected: dict[str, set[int]] = {}
    for link in trace.links:
        mine = expected.setdefault(link.stage, set())
        for finding in findings:
            if not _breaks(finding):
                continue
            if finding.rule in STAGES[link.stage] and _own(finding, trace, link):
                mine.add(id(finding))
            query = link.stage == "autoscaler" and finding.rule in STAGES[QUERY_STAGE]
            keda = all(other.stage != QUERY_STAGE for other in trace.links)
            trigger = finding.path[: len(link.node)] == link.node
            if query and keda and finding.object == trace.autoscaler and trigger:
                mine.add(id(finding))
    return expected


def _describe(findings: list[Finding], ids: set[int]) -> list[str]:
    return sorted(
        f"{f.rule} {f.location.file}:{f.location.line} {f.object}" for f in findings if id(f) in ids
    )


def _compare(path: Path, options: RenderOptions) -> list[Trace]:
    """Every trace of the units of ``path``, each checked against lint's findings."""
    settings = Settings()
    seen: list[Trace] = []
    for unit in build_units(plan_units([str(path)], settings, LIMIT), options):
        inventory = unit_inventory(unit, settings)
        findings = list(run(inventory, Selection()))
        for trace in traces(inventory, findings, unit.name):
            seen.append(trace)
            expected = _expected(findings, trace)
            for link in trace.links:
                shown = {id(f) for f in link.found if _breaks(f)}
                want = expected[link.stage]
                where = f"{trace.autoscaler} {trace.metric}: {link.stage}"
                assert shown == want, (
                    where,
                    "missing",
                    _describe(findings, want - shown),
                    "not lint's",
                    _describe(list(link.found), shown - want),
                )
                if want:
                    assert link.status == BROKEN, where
                assert set(link.findings) == {f.rule for f in link.found}, where
    return seen


@pytest.fixture
def tools(kustomize: list[str], helm: list[str]) -> RenderOptions:
    return RenderOptions(" ".join(kustomize), helm[0], None, LIMIT, None)


@pytest.mark.parametrize("path", _inputs())
def test_trace_breaks_exactly_where_lint_reports_chain_findings(
    path: Path, tools: RenderOptions
) -> None:
    _compare(path, tools)


BASE_HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: llm
  namespace: ml
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  maxReplicas: 8
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "70"}
"""

PROD_PATCH = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: llm
  namespace: ml
spec:
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target:
        type: AverageValue
        averageValue: 800m
"""


def test_a_patch_that_breaks_the_target_breaks_the_trace_where_lint_reports_it(
    tmp_path: Path, tools: RenderOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The finding is reported in the patch that wrote the value, not in the file that wrote
    the HPA's header; the trace finds it by the object all the same."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "hpa-gpu.yaml").write_text(BASE_HPA)
    (tmp_path / "base" / "kustomization.yaml").write_text("resources: [hpa-gpu.yaml]\n")
    prod = tmp_path / "overlays" / "prod"
    prod.mkdir(parents=True)
    (prod / "hpa-gpu.yaml").write_text(PROD_PATCH)
    (prod / "kustomization.yaml").write_text(
        "resources: [../../base]\npatches:\n- path: hpa-gpu.yaml\n"
    )
    monkeypatch.chdir(tmp_path)
    (found,) = _compare(Path("."), tools)
    autoscaler = found.links[-1]
    assert autoscaler.status == BROKEN and autoscaler.findings == ("GL107",)
    (finding,) = autoscaler.found
    assert (finding.location.file, finding.location.line) == ("overlays/prod/hpa-gpu.yaml", 13)
