"""Report formats: text, JSON (the documented contract), SARIF (the official schema), GitHub."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import jsonschema
import pytest

from gpulint.core.model import Finding, Location, ObjectRef, Related, Severity
from gpulint.engine import docs as ruledocs
from gpulint.engine.result import Result
from gpulint.report import render
from gpulint.report.wrap import DEFAULT_WIDTH, code_lines, output_width

from .schemastore import schema

HEADLINE = "HPA ml/web scales Deployment ml/web, which asks for GPUs, on cpu only (100% sure)."
DETAIL = (
    "The pods hold 1 GPU each, and CPU utilisation says nothing about how busy a GPU is: "
    "a pod waiting on its GPU at 100% reads 5% CPU, so the HPA never scales out; see "
    "https://example.com/a-long-address/that-is/longer-than-any-line-of-the-report/so-it-stays"
    "-whole/on-its-own-line for why."
)


def _finding(**changes: object) -> Finding:
    values: dict[str, object] = {
        "rule": "GL101",
        "name": "hpa-cpu-on-gpu-workload",
        "severity": Severity.ERROR,
        "message": HEADLINE + " " + DETAIL,
        "location": Location("deploy/app.yaml", 12, 5),
        "fix": "metrics:\n- type: Pods",
        "object": ObjectRef("autoscaling/v2", "HorizontalPodAutoscaler", "ml", "web"),
        "related": (
            Related(
                ObjectRef("apps/v1", "Deployment", "ml", "web"), Location("deploy/app.yaml", 1, 1)
            ),
        ),
    }
    values.update(changes)
    return Finding(**values)  # type: ignore[arg-type]


def _result(*findings: Finding) -> Result:
    return Result(list(findings), files=3, objects=7, skipped=[("chart/t.yaml", "template")])


def _render(result: Result, fmt: str) -> str:
    out = io.StringIO()
    render(result, fmt, out)
    return out.getvalue()


def test_text_format_line_and_summary() -> None:
    text = _render(
        _result(
            _finding(),
            _finding(severity=Severity.WARNING, rule="GL102", location=Location("b.yaml", 1, 2)),
        ),
        "text",
    )
    lines = text.splitlines()
    # The headline from the finding's line on, the detail wrapped below it, then the fix,
    # every line within 80 columns (COLUMNS, tests/conftest.py) but a word longer than one.
    assert lines[0:2] == [
        "deploy/app.yaml:12:5: GL101 [error] HPA ml/web scales Deployment ml/web, which",
        "    asks for GPUs, on cpu only (100% sure).",
    ]
    assert lines[2:8] == [
        "    The pods hold 1 GPU each, and CPU utilisation says nothing about how busy a",
        "    GPU is: a pod waiting on its GPU at 100% reads 5% CPU, so the HPA never",
        "    scales out; see",
        "    https://example.com/a-long-address/that-is/longer-than-any-line-of-the-report/so-it-stays-whole/on-its-own-line",
        "    for why.",
        "    fix: metrics:",
    ]
    assert lines[8] == "         - type: Pods"
    assert (
        lines[9]
        == "b.yaml:1:2: GL102 [warning] HPA ml/web scales Deployment ml/web, which asks for"
    )
    assert lines[-1] == "gpulint: 1 error, 1 warning, 0 info in 3 files (7 objects), 1 skipped"
    assert "\033[" not in text
    assert {line for line in lines if len(line) > DEFAULT_WIDTH} == {lines[5]}


def test_text_long_headline_starts_below_a_long_location() -> None:
    where = Location("deploy/" + "a-very-long-directory-name/" * 2 + "app.yaml", 12, 5)
    lines = _render(_result(_finding(location=where)), "text").splitlines()
    assert lines[0] == f"{where.file}:12:5: GL101 [error]"
    assert (
        lines[1]
        == "    HPA ml/web scales Deployment ml/web, which asks for GPUs, on cpu only (100%"
    )


def test_fix_code_keeps_its_lines_and_only_its_comments_wrap() -> None:
    query = "metricsQuery: 'sum(rate(request_count{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'"
    comment = "# or set honorLabels: true on the dcgm-exporter scrape and keep pod/namespace"
    trailing = "  value: 2   # GPU pods added at most per period, which keeps a burst of load"
    sentence = "move the rule to externalRules (rules.external in chart values), or read it:"
    command = "kubectl get apiservice v1beta1.custom.metrics.k8s.io -o jsonpath='{.status}'"
    assert code_lines([command], 40) == [command]
    # A comment after code that reaches past half the width continues below the code.
    annotated = "    serving.kserve.io/mode: Raw   # the name every release accepts"
    assert code_lines([annotated], 40) == [
        "    serving.kserve.io/mode: Raw",
        "    # the name every release accepts",
    ]
    annotated = "    serving.kserve.io/mode: Raw   # the name every KServe release accepts; set it"
    assert code_lines([annotated], 40) == [
        "    serving.kserve.io/mode: Raw",
        "    # the name every KServe release",
        "    # accepts; set it",
    ]
    assert code_lines([query, comment, trailing, sentence, "  a: 1"], 40) == [
        query,
        "# or set honorLabels: true on the",
        "# dcgm-exporter scrape and keep",
        "# pod/namespace",
        "  value: 2   # GPU pods added at most",
        "             # per period, which keeps a",
        "             # burst of load",
        "move the rule to externalRules",
        "(rules.external in chart values), or",
        "read it:",
        "  a: 1",
    ]


def test_text_one_sentence_message_is_one_line() -> None:
    finding = _finding(message="HPA web scales only on cpu, 100% sure: a, b", fix="")
    assert _render(_result(finding), "text").splitlines()[0:2] == [
        "deploy/app.yaml:12:5: GL101 [error] HPA web scales only on cpu, 100% sure: a, b",
        "chart/t.yaml: skipped: template",
    ]


def test_text_is_wrapped_to_the_terminal_width(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fcntl
    import struct
    import termios

    monkeypatch.delenv("COLUMNS")
    leader, follower = os.openpty()
    try:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 72, 0, 0))
        with open(follower, "w", closefd=False) as terminal:
            assert output_width(terminal) == 72
            render(_result(_finding()), "text", terminal)
        with open(tmp_path / "report.txt", "w") as file:
            assert output_width(file) == DEFAULT_WIDTH
        os.close(follower)
        follower = -1
        written = b""
        while not written.endswith(b"skipped\r\n"):
            written += os.read(leader, 65536)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    lines = written.decode().replace("\r\n", "\n").splitlines()
    detail = lines[: lines.index("    fix: metrics:")]
    assert detail[2] == "    The pods hold 1 GPU each, and CPU utilisation says nothing about how"
    assert all(len(line) <= 72 for line in detail if "https://" not in line)


def test_columns_sets_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    assert output_width(io.StringIO()) == 120
    monkeypatch.setenv("COLUMNS", "wide")
    assert output_width(io.StringIO()) == DEFAULT_WIDTH


def test_text_summary_counts_suppressed_findings_by_rule_most_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    result = _result(_finding())
    result.suppressed = {"GL102": 1, "GL406": 2, "GL101": 1}
    summary = _render(result, "text").splitlines()[-1]
    assert summary.endswith(", 1 skipped, 4 suppressed (GL406 2, GL101 1, GL102 1)")


def test_text_colours_only_when_asked() -> None:
    out = io.StringIO()
    render(_result(_finding()), "text", out, color=True)
    assert "\033[31merror" in out.getvalue()


def test_baseline_counts_say_fixed_since_apart_from_not_evaluated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    result = _result()
    result.baseline = (3, 1, 2)
    summary = _render(result, "text").splitlines()[-1]
    assert summary.endswith(
        ", 3 baselined (1 baseline entry fixed since; 2 not evaluated: none of their files "
        "was in this run's input)"
    )
    result.baseline = (3, 0, 1)
    assert (
        _render(result, "text")
        .splitlines()[-1]
        .endswith(
            ", 3 baselined (1 baseline entry not evaluated: none of their files was in this "
            "run's input)"
        )
    )
    assert "; 3 baselined, 0 stale baseline entries, 1 not evaluated" in _render(result, "markdown")
    assert json.loads(_render(result, "json"))["summary"]["baseline"] == {
        "baselined": 3,
        "stale": 0,
        "notEvaluated": 1,
    }


def test_json_contract() -> None:
    data = json.loads(_render(_result(_finding()), "json"))
    assert data["version"] == 1
    assert data["summary"] == {
        "files": 3,
        "objects": 7,
        "errors": 1,
        "warnings": 0,
        "infos": 0,
        "skipped": [{"file": "chart/t.yaml", "reason": "template"}],
        "suppressed": {},
        "notes": [],
        "config": None,
        "units": [],
        "renderSeconds": 0.0,
        "lintSeconds": 0.0,
    }
    (finding,) = data["findings"]
    assert finding == {
        "rule": "GL101",
        "name": "hpa-cpu-on-gpu-workload",
        "severity": "error",
        "message": f"{HEADLINE} {DETAIL}",
        "headline": HEADLINE,
        "file": "deploy/app.yaml",
        "line": 12,
        "column": 5,
        "object": {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "namespace": "ml",
            "name": "web",
        },
        "related": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "namespace": "ml",
                "name": "web",
                "file": "deploy/app.yaml",
                "line": 1,
            }
        ],
        "fix": "metrics:\n- type: Pods",
    }


def test_json_names_the_helm_template() -> None:
    finding = _finding(location=Location("<stdin>", 3, 1, "chart/templates/hpa.yaml"))
    data = json.loads(_render(_result(finding), "json"))
    assert data["findings"][0]["renderedFrom"] == "chart/templates/hpa.yaml"


def test_github_workflow_commands_escape_properties_and_data() -> None:
    text = _render(_result(_finding(), _finding(severity=Severity.INFO)), "github")
    first, second = text.splitlines()
    # The title is the rule and the headline; the annotation's text is the detail and fix.
    title = HEADLINE.replace("%", "%25").replace(",", "%2C")
    assert first.startswith(
        f"::error file=deploy/app.yaml,line=12,col=5,title=GL101%3A {title}::The pods hold"
    )
    assert "100%25 sure" in first
    assert "at 100%25 reads 5%25 CPU" in first
    assert first.endswith("for why.%0Afix: metrics:%0A- type: Pods")
    assert second.startswith("::notice ")


def test_github_one_sentence_message_is_title_and_text() -> None:
    finding = _finding(message="HPA web has no behavior", fix="")
    (line,) = _render(_result(finding), "github").splitlines()
    assert line.endswith("title=GL101%3A HPA web has no behavior::HPA web has no behavior")


@pytest.fixture(scope="session")
def sarif_schema() -> dict[str, object]:
    data = schema("sarif-2.1.0.json")
    assert "sarif-schema-2.1.0" in data["$id"]
    return data


def test_sarif_validates_against_the_official_schema(sarif_schema: dict[str, object]) -> None:
    log = json.loads(_render(_result(_finding(), _finding(severity=Severity.INFO)), "sarif"))
    jsonschema.Draft7Validator(sarif_schema).validate(log)
    run = log["runs"][0]
    rule_ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert "GL101" in rule_ids
    result = run["results"][0]
    assert result["ruleId"] == "GL101"
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "GL101"
    assert result["level"] == "error"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 12, "startColumn": 5}
    assert run["results"][1]["level"] == "note"
    assert result["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 1
    # The whole message and the fix, whose first sentence viewers show as the title; the
    # headline alone for tools.
    assert result["message"] == {"text": f"{HEADLINE} {DETAIL}\nFix: metrics:\n- type: Pods"}
    assert result["properties"] == {"headline": HEADLINE}


def test_sarif_rule_help_comes_from_the_rule_docstring(sarif_schema: dict[str, object]) -> None:
    log = json.loads(_render(_result(), "sarif"))
    jsonschema.Draft7Validator(sarif_schema).validate(log)
    rules = {rule["id"]: rule for rule in log["runs"][0]["tool"]["driver"]["rules"]}
    help_text = rules["GL101"]["help"]["markdown"]
    assert "### Why is this bad?" in help_text
    assert "### Use instead" in help_text
    assert rules["GL703"]["defaultConfiguration"]["level"] == "note"
    assert rules["GL101"]["shortDescription"]["text"].startswith("An HPA or KEDA ScaledObject")
    assert rules["GL101"]["fullDescription"]["text"].startswith("An HPA")
    # Where docs/rules.md is published is not known: SARIF wants an absolute URI, or none.
    assert "helpUri" not in rules["GL101"]


def test_sarif_help_uri_points_at_the_rules_anchor(
    sarif_schema: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    published = "https://git.example.com/platform/gpulint/blob/main/docs/rules.md"
    monkeypatch.setattr(ruledocs, "rules_doc_url", lambda: published)
    log = json.loads(_render(_result(_finding()), "sarif"))
    jsonschema.Draft7Validator(sarif_schema).validate(log)
    rules = {rule["id"]: rule for rule in log["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["GL101"]["helpUri"] == f"{published}#gl101"
    assert rules["GL703"]["helpUri"] == f"{published}#gl703"


def test_followers_alike_in_several_overlays_are_one_entry_naming_them() -> None:
    """One line of a base that two overlays build, following from one cause in each: the
    text report shows it once under the cause, with both overlays; concise keeps a line for
    each, told apart by its overlay."""
    cause = _finding(rule="GL403", location=Location("monitoring/values.yaml", 12, 9))
    headline = "HPA llm gets no value for gpu_utilization: the query returns nothing."
    followers = [
        _finding(
            rule="GL804",
            message=headline + " " + DETAIL,
            location=Location("apps/llm/base/hpa.yaml", 16, 9),
            fix="",
            units=(f"apps/llm/overlays/{overlay}",),
            fix_printed_on=cause.key,
        )
        for overlay in ("prod", "staging")
    ]
    result = _result(cause, *followers)
    text = " ".join(_render(result, "text").split())
    assert text.count("follows from it: ") == 1
    assert (
        f"follows from it: apps/llm/base/hpa.yaml:16:9: GL804 [error] {headline} (in "
        "apps/llm/overlays/prod, apps/llm/overlays/staging)"
    ) in text
    assert "2 of them following from another" in text
    concise = _render(result, "concise").splitlines()
    assert concise[1:3] == [
        f"apps/llm/base/hpa.yaml:16:9: GL804 [error] {headline} (in apps/llm/overlays/{overlay}; "
        "follows from GL403 at monitoring/values.yaml:12:9)"
        for overlay in ("prod", "staging")
    ]


def test_markdown_fixes_are_code_a_reader_copies_as_printed() -> None:
    """As GitHub renders the summary (cmark-gfm): a fix is a code block holding its text
    exactly, a URL in it copied without the zero-width space that keeps prose unlinked; a
    backtick fence in the fix does not end the block; the message around it stays prose."""
    import html
    import re

    import cmarkgfm

    fix = (
        "triggers:\n- type: prometheus\n  metadata:\n"
        "    serverAddress: http://kube-prometheus-stack-prometheus.monitoring.svc:9090\n"
        '    query: sum(vllm:num_requests_waiting{namespace="ml"})   # @platform-team\n'
        "```\n<b>not markup</b>"
    )
    markdown = _render(_result(_finding(fix=fix)), "markdown")
    rendered = cmarkgfm.github_flavored_markdown_to_html(markdown)
    blocks = re.findall(r"<pre><code>(.*?)</code></pre>", rendered, flags=re.S)
    assert [html.unescape(block) for block in blocks] == [fix + "\n"]
    assert "&#8203;" not in markdown.split("**fix 1**", 1)[1]
    # The message is prose: its URL is kept from becoming a link.
    assert "https:&#8203;//example.com" in markdown and "<a " not in rendered


def test_concise_prints_each_check_not_run_on_one_line(tmp_path: Path) -> None:
    from .conftest import lint_result

    (tmp_path / "hpa.yaml").write_text(
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\n"
        "metadata: {name: llm, namespace: serving}\n"
        "spec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}\n"
        "  minReplicas: 1\n  maxReplicas: 4\n"
        "  metrics:\n  - type: Pods\n    pods:\n      metric: {name: gpu_utilization}\n"
        "      target: {type: AverageValue, averageValue: '60'}\n"
    )
    result = lint_result(tmp_path / "hpa.yaml")
    assert result.not_checked
    out = io.StringIO()
    render(result, "concise", out)
    lines = [line for line in out.getvalue().splitlines() if "not checked (" in line]
    assert len(lines) == 2
    for line in lines:  # where, which checks, why and the remedy, all on the one line
        assert "/hpa.yaml:" in line and " with it" in line
