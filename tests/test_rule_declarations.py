"""What a rule says about itself is read from its module, validated, and is all the front doors
need: a new rule is picked up by the CLI, the webhook, cluster mode and the trace without being
added to any list."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gpulint.rules
import pytest

from gpulint.core.model import Finding, Location, Severity
from gpulint.engine import registry
from gpulint.engine.config import RuleSettings, Settings
from gpulint.engine.registry import (
    RuleDeclarationError,
    Selection,
    read_declarations,
    rule_index,
    rules_requiring,
    stage_rules,
    unit_rules,
)
from gpulint.engine.runner import inventory_from_paths, run
from gpulint.live.snapshot import LiveSnapshot
from gpulint.trace import links
from webhook.evaluator import ClusterEvaluator

HEADER = '"""A rule for this test."""\n\nfrom gpulint.core.model import Severity\n\n'

# A live rule no list names: it reports that it saw the live snapshot, once per run.
NEW_LIVE_RULE = '''\
"""Reports that it ran with the live snapshot (a rule only this test adds)."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.core.model import Finding, Location, Severity
from gpulint.engine.rule import Context
from gpulint.inventory import Inventory

ID = "GL898"
NAME = "live-test-probe"
SEVERITY = Severity.ERROR
SCOPE = "inventory"
REQUIRES = "live"
STAGES = ("metrics-api",)


def check(inventory: Inventory, _: Inventory, ctx: Context) -> Iterator[Finding]:
    if inventory.live is not None:
        yield ctx.at(Location(inventory.files[0], 1, 1), "ran with the live snapshot", "none")
'''

# An adapter configuration with a rule: what makes a lint ask Prometheus.
ADAPTER = Path(__file__).parent / "live" / "fixtures" / "GL809" / "fail_connection_refused.yaml"


@pytest.fixture
def new_live_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """GL898 in a folder of the rule pack, the index read again with it (and without after)."""
    folder = tmp_path / "more_rules"
    folder.mkdir()
    (folder / "gl898_live_test_probe.py").write_text(NEW_LIVE_RULE)
    monkeypatch.setattr(gpulint.rules, "__path__", [*gpulint.rules.__path__, str(folder)])
    registry.forget_index()
    yield folder
    sys.modules.pop("gpulint.rules.gl898_live_test_probe", None)
    monkeypatch.undo()
    registry.forget_index()


def test_the_index_holds_what_the_modules_declare() -> None:
    by_id = {info.id: info for info in rule_index()}
    assert by_id["GL901"].requires == "cluster" and by_id["GL901"].probes_cluster
    assert by_id["GL602"].stages == ("service", "scrape")
    assert by_id["GL801"].requires == "live" and by_id["GL801"].stages == ("adapter-rule",)
    assert by_id["GL703"].stages == () and by_id["GL703"].requires is None
    assert "GL806" in stage_rules()["scrape"] and "GL806" not in stage_rules()["workload"]
    # Findings about the unit's Prometheus break their stage on every trace of the unit.
    assert by_id["GL806"].stage_reach == "unit" and by_id["GL801"].stage_reach == "object"
    assert unit_rules() == {"GL806": ("scrape",), "GL809": ("prometheus",)}
    live = rules_requiring("live")
    assert {"GL801", "GL809", "GL812"} <= live and "GL901" not in live
    assert not any(info.probes_cluster for info in rule_index() if info.id != "GL901")


def test_the_imported_rule_says_what_the_index_read() -> None:
    for info in rule_index():
        spec = registry.load_rule(info)
        assert (spec.id, spec.name, spec.severity, spec.scope, spec.fixes) == (
            info.id,
            info.name,
            info.severity,
            info.scope,
            info.fixes,
        )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('NAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n', "no ID declared"),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSCOPE = "hpa"\n',
            "no SEVERITY declared",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "h" + "pa"\n',
            "gpulint.rules.gl990_x:8: SCOPE must be a literal",
        ),
        (
            'ID = PREFIX + "990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n',
            "gpulint.rules.gl990_x:5: ID must be a literal",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.FATAL\nSCOPE = "hpa"\n',
            "SEVERITY must be a member of Severity",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = "error"\nSCOPE = "hpa"\n',
            "SEVERITY must be a member of Severity",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpas"\n',
            "unknown SCOPE 'hpas'",
        ),
        (
            'ID = "990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n',
            "ID must be a string matching GL",
        ),
        (
            'ID = "GL990"\nNAME = "A Rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n',
            "NAME must be a string matching",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'REQUIRES = "prometheus"\n',
            "unknown REQUIRES 'prometheus'",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'STAGES = ("autoscaler", "hpa")\n',
            "unknown STAGES hpa",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'STAGES = "autoscaler"\n',
            "STAGES must be a tuple of strings",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'FIXES = ("safe", "risky")\n',
            "unknown FIXES risky",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            "PROBES_CLUSTER = True\n",
            'PROBES_CLUSTER needs REQUIRES = "cluster"',
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'STAGES = ("scrape",)\nSTAGE_REACH = "everywhere"\n',
            "gpulint.rules.gl990_x:10: unknown STAGE_REACH 'everywhere' (one of object, unit)",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'STAGES = ("scrape",)\nSTAGE_REACH = ("unit",)\n',
            "gpulint.rules.gl990_x:10: STAGE_REACH must be a string",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'STAGE_REACH = "unit"\n',
            'gpulint.rules.gl990_x:9: STAGE_REACH = "unit" needs STAGES',
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'STAGE_REACH = "unit" if DEBUG else "object"\nSTAGES = ("scrape",)\n',
            "gpulint.rules.gl990_x:9: STAGE_REACH must be a literal",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'ID = "GL991"\n',
            "gpulint.rules.gl990_x:9: ID is declared twice (first at line 5)",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'EXPLAINS = "GL804"\n',
            "gpulint.rules.gl990_x:9: EXPLAINS must be a tuple of rule IDs",
        ),
        (
            'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
            'EXPLAINS = ("live-hpa-no-data",)\n',
            "gpulint.rules.gl990_x:9: EXPLAINS must be a tuple of rule IDs",
        ),
    ],
)
def test_a_declaration_that_cannot_be_read_names_the_module(body: str, error: str) -> None:
    with pytest.raises(RuleDeclarationError) as raised:
        read_declarations("gpulint.rules.gl990_x", HEADER + body)
    assert error in str(raised.value)
    assert str(raised.value).startswith("gpulint.rules.gl990_x")


def _pack_with(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rules: dict[str, str]) -> None:
    """The rule pack with these extra modules (name -> declarations) in a folder of it."""
    folder = tmp_path / "extra_rules"
    folder.mkdir()
    for name, body in rules.items():
        (folder / name).write_text(HEADER + body)
    monkeypatch.setattr(gpulint.rules, "__path__", [*gpulint.rules.__path__, str(folder)])
    registry.forget_index()


@pytest.mark.parametrize(
    ("rules", "error"),
    [
        (
            {
                "gl990_a.py": 'ID = "GL990"\nNAME = "a"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
                'EXPLAINS = ("GL999",)\n'
            },
            "gpulint.rules.gl990_a: EXPLAINS names no rule GL999",
        ),
        (
            {
                "gl990_a.py": 'ID = "GL990"\nNAME = "a"\nSEVERITY = Severity.ERROR\nSCOPE = "hpa"\n'
                'EXPLAINS = ("GL990",)\n'
            },
            "gpulint.rules.gl990_a: EXPLAINS names the rule itself",
        ),
        (
            {
                "gl990_a.py": 'ID = "GL990"\nNAME = "a"\nSEVERITY = Severity.ERROR\n'
                'SCOPE = "hpa"\nEXPLAINS = ("GL991",)\n',
                "gl991_b.py": 'ID = "GL991"\nNAME = "b"\nSEVERITY = Severity.ERROR\n'
                'SCOPE = "hpa"\nEXPLAINS = ("GL990",)\n',
            },
            "EXPLAINS leads back to GL99",
        ),
        (
            {
                "gl990_a.py": 'ID = "GL990"\nNAME = "a"\nSEVERITY = Severity.ERROR\n'
                'SCOPE = "hpa"\nSETTLES = ("GL107",)\n'
            },
            "gpulint.rules.gl990_a: SETTLES needs REQUIRES",
        ),
        (
            {
                "gl990_a.py": 'ID = "GL990"\nNAME = "a"\nSEVERITY = Severity.ERROR\n'
                'SCOPE = "hpa"\nREQUIRES = "live"\nSETTLES = ("GL999",)\n'
            },
            "gpulint.rules.gl990_a: SETTLES names no rule GL999",
        ),
        (
            {
                "gl990_a.py": 'ID = "GL990"\nNAME = "a"\nSEVERITY = Severity.ERROR\n'
                'SCOPE = "hpa"\nREQUIRES = "live"\nSETTLES = ("GL804",)\n'
            },
            "gpulint.rules.gl990_a: SETTLES names GL804, which needs live data too",
        ),
    ],
)
def test_explains_names_rules_that_exist_and_leads_back_to_none(
    rules: dict[str, str], error: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pack_with(monkeypatch, tmp_path, rules)
    try:
        with pytest.raises(RuleDeclarationError, match=error):
            rule_index()
    finally:
        monkeypatch.undo()
        registry.forget_index()


def test_explains_is_read_into_who_explains_whom() -> None:
    by_id = {info.id: info for info in rule_index()}
    assert by_id["GL403"].explains == ("GL802", "GL804")
    assert registry.explained_by()["GL804"] == frozenset({"GL403", "GL802", "GL803"})


def test_settles_is_read_into_who_settles_whom() -> None:
    assert {info.id: info for info in rule_index()}["GL805"].settles == ("GL107",)
    assert registry.settled_by() == {
        "GL107": frozenset({"GL805"}),
        "GL402": frozenset({"GL801", "GL811"}),
    }


def test_declarations_may_span_lines_and_the_docstring_is_no_declaration() -> None:
    source = (
        '"""A rule.\n\nID = "GL000"  (an example in the documentation)\n"""\n\n'
        "from gpulint.core.model import Severity\n\n"
        'ID = "GL990"  # the rule\nNAME: str = "a-rule"\nSEVERITY = Severity.INFO\n'
        'SCOPE = "hpa"\nSTAGES = (\n    "autoscaler",\n    "metrics-api",\n)\n'
        'FIXES = ("safe",)\n'
    )
    info = read_declarations("gpulint.rules.gl990_x", source)
    assert (info.id, info.name, info.severity, info.scope) == (
        "GL990",
        "a-rule",
        Severity.INFO,
        "hpa",
    )
    assert info.stages == ("autoscaler", "metrics-api") and info.fixes == ("safe",)


def test_a_declaration_on_the_first_line_counts_and_one_inside_a_line_does_not() -> None:
    # No docstring: the first line is a declaration. After the docstring's quotes on the same
    # line, ``ID`` does not start a line: it is no declaration.
    source = 'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.INFO\nSCOPE = "hpa"\n'
    assert read_declarations("gpulint.rules.gl990_x", source).id == "GL990"
    with pytest.raises(RuleDeclarationError, match="no ID declared"):
        read_declarations("gpulint.rules.gl990_x", '"""A rule."""ID = "GL990"\n' + source[13:])
    # The line of a declaration is counted from the top of the source.
    with pytest.raises(RuleDeclarationError, match=r"gl990_x:3: ID is declared twice"):
        read_declarations("gpulint.rules.gl990_x", source[:13] + '\nID = "GL991"\n' + source[13:])


def test_a_rule_about_the_unit_breaks_its_stages_on_every_trace() -> None:
    """``STAGE_REACH = "unit"``: its findings count on its stages of every trace, wherever
    they are placed; a rule's other findings only on the traces through their object."""
    source = HEADER + (
        'ID = "GL990"\nNAME = "a-rule"\nSEVERITY = Severity.ERROR\nSCOPE = "inventory"\n'
        'STAGES = ("scrape", "prometheus")\nSTAGE_REACH = "unit"\n'
    )
    info = read_declarations("gpulint.rules.gl990_x", source)
    assert (info.stages, info.stage_reach) == (("scrape", "prometheus"), "unit")
    placed = Location("prometheus/values.yaml", 3, 1)
    about_unit = Finding("GL990", "a-rule", Severity.ERROR, "Prometheus is down.", placed)
    on_object = about_unit._replace(rule="GL991", name="b-rule")
    stages = {stage: frozenset() for stage in links.STAGES}
    stages |= {"scrape": frozenset({"GL990", "GL991"}), "prometheus": frozenset({"GL990"})}
    findings = links.StageFindings([about_unit, on_object], stages, {"GL990": info.stages})
    elsewhere = [links.Anchor("apps/llm.yaml", None)]
    assert findings.on("scrape", elsewhere) == [about_unit]
    assert findings.on("prometheus", elsewhere) == [about_unit]
    assert findings.on("workload", elsewhere) == []
    here = [links.Anchor("prometheus/values.yaml", None)]
    assert findings.on("scrape", here) == [about_unit, on_object]


def test_a_new_rule_is_in_the_trace_stages_it_declares(new_live_rule: Path) -> None:
    assert "GL898" in stage_rules()["metrics-api"]
    assert "GL898" in rules_requiring("live")
    assert tuple(stage_rules()) == links.STAGES


def test_a_new_live_rule_is_selected_by_the_cli(new_live_rule: Path) -> None:
    """``--prometheus --select GL898`` runs it: no list of live rules to forget it in."""
    code = textwrap.dedent(
        f"""
        import sys
        import gpulint.rules
        gpulint.rules.__path__.append({str(new_live_rule)!r})
        from gpulint.cli import main
        sys.exit(main(sys.argv[1:]))
        """
    )
    # Nothing listens on port 9 of the loopback: the snapshot says Prometheus is down.
    args = ["lint", "--no-config", "--prometheus", "http://127.0.0.1:9", "--select", "GL898"]
    result = subprocess.run(
        [sys.executable, "-c", code, *args, str(ADAPTER)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )
    assert "no live rule" not in result.stdout + result.stderr
    words = " ".join(result.stdout.split())  # a message as a sentence, wrapped at 80 columns
    assert "GL898 [error] Ran with the live snapshot." in words, result.stderr
    assert result.returncode == 1


class _Cache:
    """The cluster cache's ``evaluate``, answered by running the engine over an inventory
    that has a live snapshot (as the webhook's refresh gives it)."""

    def __init__(self, adapter: Path) -> None:
        self.inventory = inventory_from_paths([str(adapter)], Settings())
        self.inventory.live = LiveSnapshot("http://127.0.0.1:9", error="down")

    def evaluate(self, *args: Any) -> list[Any]:
        selection: Selection = args[3]
        return run(self.inventory, selection)


def test_a_new_live_rule_is_selected_and_downgraded_by_the_webhook(new_live_rule: Path) -> None:
    """The webhook runs it when live data is there and, as for every live rule, never lets
    it refuse a request (its finding is a warning)."""
    live: Any = object()  # the refresh is only started and stopped by the evaluator
    evaluator = ClusterEvaluator(_Cache(ADAPTER), Selection(select=["GL898"]), live)  # type: ignore[arg-type]
    findings = evaluator.evaluate({}, "CREATE", None, 0.0)
    assert [(f.rule, f.severity) for f in findings] == [("GL898", Severity.WARNING)]


def test_rules_import_gpulint_through_the_rule_api_only() -> None:
    import ast

    import gpulint.ruleapi as api

    for info in rule_index():
        path = Path(gpulint.rules.__path__[0]) / f"{info.module.rsplit('.', 1)[1]}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpulint"):
                assert node.module == "gpulint.ruleapi", f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("gpulint") for a in node.names), path.name
    for name in api.__all__:
        assert getattr(api, name) is not None, name


def test_the_plan_follows_settings_changed_between_runs(tmp_path: Path) -> None:
    """The engine plans a run's rules once per settings: switching a rule off in place, or
    replacing its settings, between two runs of the same Settings plans again."""
    (tmp_path / "hpa.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: autoscaling/v2
            kind: HorizontalPodAutoscaler
            metadata: {name: gpu, namespace: ml}
            spec:
              scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: gpu}
              minReplicas: 1
              maxReplicas: 3
              metrics:
              - type: Resource
                resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
            ---
            apiVersion: apps/v1
            kind: Deployment
            metadata: {name: gpu, namespace: ml}
            spec:
              template:
                spec:
                  containers:
                  - name: vllm
                    resources: {limits: {nvidia.com/gpu: 1}}
            """
        )
    )
    settings = Settings()

    def rules_found() -> set[str]:
        return {f.rule for f in run(inventory_from_paths([str(tmp_path)], settings))}

    assert "GL101" in rules_found()
    settings.rules["GL101"] = RuleSettings(enabled=False)
    assert "GL101" not in rules_found()
    settings.rules["GL101"].enabled = True
    assert "GL101" in rules_found()
    settings.rules["GL101"] = RuleSettings(severity=Severity.INFO)
    assert {
        f.severity
        for f in run(inventory_from_paths([str(tmp_path)], settings))
        if f.rule == "GL101"
    } == {Severity.INFO}
