"""Findings in rendered input are at the line that wrote the value.

Every rule fixture is linted three ways: as a plain file, through a kustomize overlay whose base
holds it and whose patch writes each autoscaler again, line for line, and as the template of a
Helm chart that writes it literally. Each way gives the same findings at the same lines and
columns, with the same fix edits offered. A patch that replaces a node the base wrote (an
HPA's ``metrics`` list, which has no merge key) gets the finding, not the base.

Left out, with the reason: a fixture that is no Kubernetes object for kustomize (chart values,
an adapter config file), a ``kind: List`` (kustomize and Helm take its items apart), and a
fixture with template actions for Helm (Helm evaluates them: it is no longer literal).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.files import build_units, plan_units, unit_inventory
from gpulint.engine.registry import Selection
from gpulint.engine.runner import run
from gpulint.input.units import RenderOptions
from gpulint.input.yamlparse import YamlError, parse_documents

from .conftest import FIXTURES

pytestmark = pytest.mark.slow  # every fixture rendered through real kustomize and helm

LIMIT = 10 * 1024 * 1024
AUTOSCALERS = {"HorizontalPodAutoscaler", "ScaledObject", "ScaledJob"}


class Seen(NamedTuple):
    rule: str
    line: int
    column: int
    edits: bool


def _documents(text: str) -> list[tuple[int, int, Any]] | None:
    """(first line, last line, value) of each document; None when the text is no YAML."""
    try:
        parsed = list(parse_documents(text))
    except (YamlError, RecursionError, ValueError):
        return None
    return [(d.line, d.end_line, d.value) for d in parsed]


def _objects_only(documents: list[tuple[int, int, Any]]) -> bool:
    return all(
        isinstance(value, dict)
        and isinstance(value.get("apiVersion"), str)
        and isinstance(value.get("kind"), str)
        and value.get("kind") != "List"
        for _, _, value in documents
        if value is not None
    )


def _patch(text: str, documents: list[tuple[int, int, Any]]) -> str:
    """The fixture with every line blanked but its autoscalers': a patch that writes each
    autoscaler again at the same lines."""
    lines = text.split("\n")
    keep = set()
    for first, last, value in documents:
        if isinstance(value, dict) and value.get("kind") in AUTOSCALERS:
            keep.update(range(first - 1, last))
    return "\n".join(
        line if number in keep or line.startswith("---") else ""
        for number, line in enumerate(lines)
    )


def _findings(paths: list[str], options: RenderOptions) -> dict[Path, list[Finding]]:
    """Findings of the unit of each path (built together, so renders run side by side)."""
    settings = Settings()
    found: dict[Path, list[Finding]] = {}
    for unit in build_units(plan_units(paths, settings, LIMIT), options):
        inventory = unit_inventory(unit, settings)
        found.setdefault(Path(unit.name).resolve(), []).extend(run(inventory, Selection()))
    return found


def _seen(findings: list[Finding]) -> set[Seen]:
    return {
        Seen(f.rule, f.location.line, f.location.column, f.plan is not None and bool(f.plan.ops))
        for f in findings
    }


# What `rendered` found, kept for the worker's whole run: pytest-xdist tears module fixtures
# down whenever a worker's queue runs dry between two of this module's tests, and rendering
# every fixture three ways takes minutes.
_RENDERED: dict[str, dict[str, set[Seen]]] = {}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, set[Seen]]]:
    """fixture -> way ("plain", "kustomize", "helm") -> what lint finds; one lint run per way
    over every fixture, so the renders run side by side."""
    if not _RENDERED:
        _RENDERED.update(_render_every_fixture(tmp_path_factory))
    return _RENDERED


def _render_every_fixture(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, dict[str, set[Seen]]]:
    from tests.tools import helm_command, kustomize_command

    options = RenderOptions(" ".join(kustomize_command()), helm_command()[0], None, LIMIT, None)
    root = tmp_path_factory.mktemp("rendered")
    ways: dict[str, dict[str, str]] = {"plain": {}, "kustomize": {}, "helm": {}}
    for number, fixture in enumerate(sorted(FIXTURES.glob("GL*/*.yaml"))):
        text = fixture.read_text()
        documents = _documents(text)
        if documents is None:
            continue
        name = f"{fixture.parent.name}/{fixture.name}"
        plain = root / "plain" / str(number)
        plain.mkdir(parents=True)
        (plain / "in.yaml").write_text(text)
        ways["plain"][str(plain)] = name
        if _objects_only(documents):
            base, prod = root / "kustomize" / str(number) / "base", root / "kustomize" / str(number)
            base.mkdir(parents=True)
            (base / "in.yaml").write_text(text)
            (base / "kustomization.yaml").write_text("resources: [in.yaml]\n")
            overlay = prod / "prod"
            overlay.mkdir()
            autoscalers = [
                v for *_, v in documents if isinstance(v, dict) and v.get("kind") in AUTOSCALERS
            ]
            patches = ""
            if autoscalers:
                (overlay / "in.yaml").write_text(_patch(text, documents))
                patches = "patches:\n- path: in.yaml\n"
            (overlay / "kustomization.yaml").write_text(f"resources: [../base]\n{patches}")
            ways["kustomize"][str(overlay)] = name
        if "{{" not in text and _objects_only(documents):
            chart = root / "helm" / str(number)
            (chart / "templates").mkdir(parents=True)
            (chart / "Chart.yaml").write_text("apiVersion: v2\nname: fixture\nversion: 0.1.0\n")
            (chart / "templates" / "in.yaml").write_text(text)
            ways["helm"][str(chart)] = name
    seen: dict[str, dict[str, set[Seen]]] = {}
    # Renders stay inside the current directory (or the git work tree): lint from the root.
    home = os.getcwd()
    os.chdir(root)
    try:
        _lint_ways(ways, options, seen)
    finally:
        os.chdir(home)
    shutil.rmtree(root)
    return seen


def _lint_ways(
    ways: dict[str, dict[str, str]], options: RenderOptions, seen: dict[str, dict[str, set[Seen]]]
) -> None:
    for way, directories in ways.items():
        if way == "plain":
            # Plain files of several directories are one unit: each is linted alone.
            found = {}
            for directory in directories:
                found.update(_findings([directory], options))
        else:
            found = _findings(list(directories), options)
        for directory, name in directories.items():
            findings = found.pop(Path(directory).resolve(), [])
            seen.setdefault(name, {})[way] = _seen(findings)


FIXTURE_NAMES = sorted(f"{p.parent.name}/{p.name}" for p in FIXTURES.glob("GL*/*.yaml"))


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_each_way_of_writing_a_fixture_gives_the_same_findings_at_the_same_lines(
    name: str, rendered: dict[str, dict[str, set[Seen]]]
) -> None:
    ways = rendered.get(name)
    if ways is None:
        pytest.skip("not YAML: the loader's own fixture")
    plain = _comparable(ways["plain"])
    for way in ("kustomize", "helm"):
        if way not in ways or any(s.rule in NOT_RENDERED for s in ways[way]):
            continue  # the tool refuses the fixture (kustomize: an object it cannot index)
        got = _comparable(ways[way])
        assert got == plain, (way, sorted(got - plain), sorted(plain - got))


# The tool did not render the unit: nothing rendered to compare.
NOT_RENDERED = {"GL704", "GL705"}
# The loader's findings on the text itself (parse errors, suppression comments) are about the
# file as written, in either way; tests/test_hostile_parse.py and test_suppression.py own them.
LOADER = {"GL701", "GL702", "GL703"}
# GL103's fix merges two autoscalers' files; it is offered for plain files only (the merged
# file of an overlay would be a patch, not the object).
EDITS_PLAIN_ONLY = {"GL103"}


def _comparable(seen: set[Seen]) -> set[Seen]:
    return {
        s._replace(edits=s.edits and s.rule not in EDITS_PLAIN_ONLY)
        for s in seen
        if s.rule not in LOADER
    }


ADAPTER_AND_DEPLOYMENT = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: adapter, namespace: monitoring}
data:
  config.yaml: |
    rules:
    - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'
      resources:
        overrides:
          exported_namespace: {resource: namespace}
          exported_pod: {resource: pod}
      name: {matches: "^DCGM_FI_DEV_GPU_UTIL$", as: "gpu_util"}
      metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: llm}
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai
        resources:
          limits: {nvidia.com/gpu: 2}
"""

BASE_HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: vllm
  namespace: llm
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  maxReplicas: 4
  behavior:
    scaleDown: {stabilizationWindowSeconds: 600}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target: {type: Utilization, averageUtilization: 80}
"""

PROD_PATCH = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: vllm
  namespace: llm
spec:
  metrics:
    - type: Pods
      pods:
        metric: {name: gpu_util}
        target: {type: AverageValue, averageValue: "60"}
"""


def test_a_finding_on_a_list_a_patch_replaced_is_in_the_patch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kustomize: list[str], helm: list[str]
) -> None:
    """An HPA's ``metrics`` has no merge key: prod's patch replaces the base's CPU metric
    with a GPU one the adapter sums over 2 GPUs. GL406 is about what the patch wrote."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "objects.yaml").write_text(ADAPTER_AND_DEPLOYMENT)
    (tmp_path / "base" / "hpa.yaml").write_text(BASE_HPA)
    (tmp_path / "base" / "kustomization.yaml").write_text("resources: [objects.yaml, hpa.yaml]\n")
    (tmp_path / "prod").mkdir()
    (tmp_path / "prod" / "hpa.yaml").write_text(PROD_PATCH)
    (tmp_path / "prod" / "kustomization.yaml").write_text(
        "resources: [../base]\npatches:\n- path: hpa.yaml\n"
    )
    monkeypatch.chdir(tmp_path)
    options = RenderOptions(" ".join(kustomize), helm[0], None, LIMIT, None)
    (findings,) = _findings(["prod"], options).values()
    (sum_over_gpus,) = [f for f in findings if f.rule == "GL406"]
    location = sum_over_gpus.location
    assert (location.file, location.line, location.column) == ("prod/hpa.yaml", 8, 7)
    assert location.note is None


def test_a_literal_value_in_a_helm_template_gets_its_fix_as_an_edit(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    helm: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GL109 on a template that writes ``apiVersion: autoscaling/v2beta2`` literally: the
    finding is at that line and --diff shows the replacement in the template."""
    from gpulint.cli import main

    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (chart / "templates" / "hpa.yaml").write_text(
        "apiVersion: autoscaling/v2beta2\nkind: HorizontalPodAutoscaler\n"
        "metadata: {name: {{ .Release.Name }}}\n"
        "spec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: x}\n"
        "  maxReplicas: 3\n"
    )
    monkeypatch.chdir(tmp_path)
    main(["lint", "--no-config", "--helm", helm[0], "--select", "GL109", "chart"])
    out = capsys.readouterr().out
    assert out.startswith("chart/templates/hpa.yaml:1:1: GL109")
    assert "template expression" not in out
    main(
        [
            "lint",
            "--no-config",
            "--helm",
            helm[0],
            "--select",
            "GL109",
            "--diff",
            "--unsafe-fixes",
            "chart",
        ]
    )
    diff = capsys.readouterr().out
    assert "-apiVersion: autoscaling/v2beta2\n+apiVersion: autoscaling/v2\n" in diff
