"""Terminal and CI-log injection: names, values and file names crafted to retitle a terminal
or to start a GitHub Actions workflow command are printed escaped by ``gpulint lint``.

The manifests are real files linted by the real command line; what is checked is the bytes it
writes, line by line, as a terminal or the Actions runner reads them (the runner trims leading
whitespace and runs any line starting ``::``).
"""

from __future__ import annotations

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from gpulint.report.escape import escape_controls, safe_line, safe_lines, xml_text

from .conftest import ROOT

# OSC 0 (set the window title) ended by BEL, a CSI colour, a newline that starts a workflow
# command, the legacy ##[command] form, an 8-bit CSI, a line separator, a right-to-left override.
INJECTED = (
    r"\e]0;pwned\a\e[31m\n::error file=evil.yaml,line=1::injected\r\n##[error]legacy"
    r"\x9b31m\L\u202Eend"
)
RAW = ("\x1b", "\x07", "\x9b", "\u2028", "\u202e", "\r")

MANIFEST = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: "triton{INJECTED}"
  namespace: ml
spec:
  selector:
    matchLabels: {{app: triton}}
  template:
    metadata:
      labels: {{app: triton}}
    spec:
      containers:
      - name: "server{INJECTED}"
        resources:
          limits:
            nvidia.com/gpu: "0.5"
            "nvidia.com/mig-1g.5gb\\n::error file=fix.yaml::from-a-fix": "0.5"
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: "triton{INJECTED}"
  namespace: ml
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: "triton{INJECTED}"}}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {{type: Utilization, averageUtilization: 80}}
"""


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", *args],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        timeout=120,
    )


def _commands(output: str) -> list[str]:
    """The lines a GitHub Actions runner would run as workflow commands."""
    return [
        line.strip()
        for line in re.split(r"\r\n|\r|\n", output)
        if line.strip().startswith(("::", "##"))
    ]


@pytest.fixture
def crafted(tmp_path: Path) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(MANIFEST)
    return path


@pytest.mark.parametrize("color", ["never", "always"])
def test_text_output_shows_control_characters_as_escapes(crafted: Path, color: str) -> None:
    result = _lint(crafted.parent, "--format", "text", f"--color={color}", crafted.name)
    assert result.returncode == 1, result.stderr
    output = result.stdout.decode()
    for raw in RAW[1:]:
        assert raw not in output, repr(raw)
    if color == "never":
        assert "\x1b" not in output
    else:  # gpulint's own colours are still there, and nothing else
        assert set(re.findall(r"\x1b\[[0-9;]*m", output)) <= {
            "\x1b[1m",
            "\x1b[0m",
            "\x1b[2m",
            "\x1b[31m",
            "\x1b[33m",
            "\x1b[36m",
        }
        assert "\x1b]" not in output
    assert _commands(output) == []
    shown = r"triton\x1b]0;pwned\x07\x1b[31m\n::error file=evil.yaml,line=1::injected\r\n"
    # Wrapped at 80 columns (tests/conftest.py): the words, whatever lines they are on.
    assert shown in " ".join(output.split())
    assert r"##[error]legacy\x9b31m\u2028\u202eend" in output
    # A newline written in a key reaches a fix: the fix line that starts with it is escaped.
    assert r"\x3a:error file=fix.yaml::from-a-fix" in output
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    rules = re.findall(r"manifest\.yaml:\d+:\d+: (GL\d+)", plain)
    assert {"GL101", "GL501"} <= set(rules)


def test_github_output_is_one_command_per_finding(crafted: Path) -> None:
    result = _lint(crafted.parent, "--format", "github", crafted.name)
    assert result.returncode == 1, result.stderr
    output = result.stdout.decode()
    for raw in RAW:
        assert raw not in output, repr(raw)
    lines = output.split("\n")
    assert lines[-1] == ""
    commands = _commands(output)
    assert len(commands) == len(lines) - 1 >= 3
    for command in commands:
        assert re.match(
            r"::(error|warning|notice) file=manifest\.yaml,line=\d+,col=\d+,title=GL", command
        )
        # The message holds the injected text, inert: its newlines are data (%0A).
        _, _, message = command.partition(",title=")
        assert "::error file=evil" not in message.split("::", 1)[0]
    assert r"triton\x1b]0;pwned\x07\x1b[31m\n::error file=evil.yaml" in output
    assert "%0Afix: " in output


def test_github_properties_cannot_be_broken_out_of(tmp_path: Path) -> None:
    # A file name with a comma, colons and a newline: in a property these would end it.
    name = "a,b::c\n::error file=x::y.yaml"
    path = tmp_path / name
    path.write_text(MANIFEST)
    result = _lint(tmp_path, "--format", "github", name)
    output = result.stdout.decode()
    commands = _commands(output)
    assert commands and len(commands) == len(output.split("\n")) - 1
    for command in commands:
        assert command.split(",line=")[0].endswith(
            "file=a%2Cb%3A%3Ac\\n%3A%3Aerror file=x%3A%3Ay.yaml"
        )


def test_a_file_name_that_starts_a_command_is_escaped_in_text(tmp_path: Path) -> None:
    name = "::error file=x::y.yaml"
    (tmp_path / name).write_text(MANIFEST)
    (tmp_path / "##[error]z.yaml").write_text("{{ .Values.broken }}: [\n")
    result = _lint(tmp_path, "--format", "text", ".")
    output = result.stdout.decode()
    assert _commands(output) == []
    # Reported relative to the working directory (no git root here): the name starts the
    # line, and only its first character is escaped.
    assert "\n\\x3a:error file=x::y.yaml:" in output or output.startswith("\\x3a:error file=x")


def test_a_relative_file_name_at_the_start_of_a_line_is_escaped(tmp_path: Path) -> None:
    name = "::error file=x::y.yaml"
    (tmp_path / name).write_text(MANIFEST)
    result = _lint(tmp_path, "--format", "text", name)
    output = result.stdout.decode()
    assert _commands(output) == []
    assert r"\x3a:error file=x::y.yaml:" in output


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_json_reports_escape_every_terminal_control(crafted: Path, fmt: str) -> None:
    result = _lint(crafted.parent, "--format", fmt, crafted.name)
    output = result.stdout.decode()
    for raw in RAW:
        assert raw not in output, repr(raw)
    assert _commands(output) == []
    report = json.loads(output)
    if fmt == "json":
        messages = [f["message"] for f in report["findings"]]
    else:
        messages = [r["message"]["text"] for r in report["runs"][0]["results"]]
    # The same data: the escapes stand for the characters of the manifest.
    injected = "triton\x1b]0;pwned\x07\x1b[31m\n::error file=evil.yaml,line=1::injected\r\n"
    assert any(injected + "##[error]legacy\x9b31m\u2028\u202eend" in m for m in messages)


def test_escape_helpers() -> None:
    assert (
        escape_controls("a\x00\x1b\x7f\x85\u2029\u2067b\t") == r"a\x00\x1b\x7f\x85\u2029\u2067b\t"
    )
    assert escape_controls("café ✓ 日本") == "café ✓ 日本"
    assert safe_line("\t ::set-output") == "\t \\x3a:set-output"
    assert safe_line("##vso[task]") == "\\x23#vso[task]"
    assert safe_line("a ::b") == "a ::b"
    assert safe_lines("one\x85::two\n  ::three") == ["one\\x85::two", "  \\x3a:three"]
    assert xml_text('a\x1b<b c="d">&\'\n') == "a\\x1b&lt;b c=&quot;d&quot;&gt;&amp;&#x27;\\n"


# --- every output format over hostile names, paths, units, labels and namespaces ---------------

# What a name, a value or a path could carry to act on a terminal (OSC title, BEL, CSI, an
# 8-bit CSI, C1 NEL, a line separator, a right-to-left override), a CI log (a carriage return,
# newlines starting workflow commands), a Markdown page (a link, a tracking pixel, HTML, a
# script, a mention, a bare link) or a Mermaid chart (a quote and bracket ending a label, an
# arrow, a directive, a backtick, an entity).
HOSTILE = (
    "\x1b]0;pwned\x07\x1b[31m\x9b31m\x85\u2028\r\n::error file=forged.yaml,line=1::forged"
    "\n::add-mask::secret\n##[error]legacy [x](http://evil.example) "
    "![](http://evil.example/pixel.png) <img src=http://evil.example/p.png> "
    "<script>alert(1)</script> @someone www.evil.example "
    '"] --> n9["x"] %%{init: {"theme": "dark"}}%% ` | #quot; \u202eend'
)
# A file or directory name: no slash, at most 255 bytes.
HOSTILE_NAME = (
    "\x1b]0;t\x07\r\n::error file=f,line=1::forged [x](evil) ![](pixel.png) <img src=x> "
    '@someone "] --> %%{init}%% \u202e'
)
SEED_BROKEN = ROOT / "examples" / "seed-ko" / "broken"
# Raw characters that must never reach an output (a newline only as the end of a line).
CONTROLS = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
MARKDOWN_TAGS = {"h2", "p", "strong", "table", "thead", "tbody", "tr", "th", "td", "br"}
MARKDOWN_TAGS |= {"blockquote", "pre", "code"}
# A workflow command as gpulint writes it: the input only in the values of its properties.
ANNOTATION = r"::(error|warning|notice) file=[^,:]*,line=\d+,col=\d+,title=GL\d+%3A[^:]*::.*"
# A line the Actions runner (or Azure's) runs: ``::name``, ``##[name]``, ``##vso[``; a Markdown
# heading of gpulint's (``## gpulint``) is none.
COMMAND = re.compile(r"^\s*(::|##\[|##vso\[)")
# A GitHub mention: @ and a user or team name, not inside a word or an address.
MENTION = re.compile(r"(?<![\w@/.])@[A-Za-z0-9][A-Za-z0-9-]*")


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar holding ``text`` (JSON's escapes are YAML's)."""
    return json.dumps(text)


def _hostile_tree(root: Path) -> Path:
    """The seed's broken chain twice, as two declared units (one in a hostile directory),
    every name, namespace, label value and metric the chain links by made hostile, and the
    HPA's file of the hostile directory named with a hostile name."""
    (root / ".gpulint.yaml").write_text('units: ["c/*"]\n')
    replacements = {
        "name: llm-server": f"name: {_quoted(HOSTILE + 'deploy')}",
        "namespace: llm\n": f"namespace: {_quoted(HOSTILE + 'ns')}\n",
        "{app: llm-server}": "{app: " + _quoted(HOSTILE + "label") + "}",
        "name: gpu_utilization": f"name: {_quoted(HOSTILE + 'metric')}",
        'as: "gpu_utilization"': f"as: {_quoted(HOSTILE + 'metric')}",
        "name: hpa-llm-server": f"name: {_quoted(HOSTILE + 'hpa')}",
    }
    written = ""
    for unit in (HOSTILE_NAME, "plain"):
        directory = root / "c" / unit
        directory.mkdir(parents=True)
        for source in SEED_BROKEN.iterdir():
            text = source.read_text()
            for old, new in replacements.items():
                text = text.replace(old, new)
            hostile_file = source.name == "hpa.yaml" and unit != "plain"
            name = HOSTILE_NAME + ".yaml" if hostile_file else source.name
            (directory / name).write_text(text)
            written += text
    assert all(new in written for new in replacements.values())
    return root


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", *args],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        timeout=300,
    )


def _decoded(output: bytes) -> str:
    return output.decode("utf-8", "surrogateescape")


def _assert_inert_text(output: str, what: str) -> None:
    """No raw control character, and no line a CI runner would run as a command."""
    raw = CONTROLS.search(output)
    assert raw is None, f"{what}: raw {raw.group()!r}"  # type: ignore[union-attr]
    commands = [line for line in output.split("\n") if COMMAND.match(line)]
    assert commands == [], what


def _assert_inert_markdown(markdown: str, what: str, own: frozenset[str] = frozenset()) -> str:
    """As GitHub renders it (its own cmark, raw HTML let through as a job summary lets the
    tags it allows through): no tag but the report's own (``MARKDOWN_TAGS`` and ``own``), so
    no link, image or script; no mention; each Mermaid block only nodes with one-line quoted
    labels, arrows and classes. The HTML it renders to."""
    import html

    import cmarkgfm
    from cmarkgfm.cmark import Options

    _assert_inert_text(markdown, what)
    rendered = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    tags = set(re.findall(r"<([A-Za-z][A-Za-z0-9]*)", rendered))
    assert tags <= MARKDOWN_TAGS | own, f"{what}: {tags - MARKDOWN_TAGS - own}"
    text = html.unescape(re.sub(r"<[^>]*>", "", re.sub(r"<pre.*?</pre>", "", rendered, flags=re.S)))
    assert MENTION.findall(text) == [], what
    for block in re.findall(r"```mermaid\n(.*?)```", markdown, flags=re.S):
        for line in block.splitlines():
            node = re.fullmatch(r'  n\d+\["([^"]*)"\]:::(ok|broken|unknown)', line)
            if node is not None:
                # Only Mermaid's entities (#quot; #35;) may hold its characters.
                bare = re.sub(r"#(?:[a-z]+|\d+);", "", node.group(1).replace("<br/>", ""))
                assert not re.search(r'[<>`%{}|;"#]', bare), line
                continue
            assert (
                line == "flowchart LR"
                or re.fullmatch(r"  n\d+ --> n\d+", line)
                or (line.startswith("  classDef ") and "evil" not in line)
            ), f"{what}: {line!r}"
    return rendered


def _holds_hostile(value: Any) -> bool:
    """Whether a JSON value holds one of the hostile strings as it is (the data kept)."""
    if isinstance(value, str):
        return HOSTILE in value or HOSTILE_NAME in value
    if isinstance(value, dict):
        return any(_holds_hostile(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_hostile(v) for v in value)
    return False


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _hostile_tree(tmp_path_factory.mktemp("hostile"))


@pytest.mark.slow
def test_every_output_format_shows_hostile_input_and_acts_on_none(hostile: Path) -> None:
    done = _run(hostile, "lint", "--format", "json", ".")
    assert done.returncode == 1, done.stderr
    _assert_inert_text(_decoded(done.stdout + done.stderr), "json")
    report = json.loads(done.stdout)
    findings = report["findings"]
    rules = sorted(f["rule"] for f in findings)
    assert {"GL102", "GL406", "GL603", "GL604"} <= set(rules)
    assert len(report["summary"]["units"]) == 2
    assert _holds_hostile(findings) and _holds_hostile(report["summary"]["units"])

    for fmt in ("text", "github", "markdown", "sarif"):
        done = _run(hostile, "lint", "--color", "never", "--format", fmt, ".")
        assert done.returncode == 1, (fmt, done.stderr)
        output, errors = _decoded(done.stdout), _decoded(done.stderr)
        _assert_inert_text(errors, f"lint {fmt} stderr")
        if fmt == "text":
            _assert_inert_text(output, fmt)
            shown = re.findall(r"^\S.*?:\d+:\d+: (GL\d+) \[", output, flags=re.M)
            assert sorted(shown) == rules  # nothing hidden by a name holding a newline
            units = [line for line in output.split("\n") if line.startswith("units: ")]
            assert len(units) == 1 and r"c/\x1b]0;t\x07\r\n::error file=f" in units[0]
            assert r"\u202e" in output and r"\x9b31m\x85\u2028" in output
        elif fmt == "github":
            assert CONTROLS.search(output) is None
            lines = output.split("\n")
            assert lines.pop() == ""
            # One command per finding, each of gpulint's shape: input only in its values.
            assert len(lines) == len(findings)
            for line in lines:
                assert re.fullmatch(ANNOTATION, line), line
        elif fmt == "markdown":
            _assert_inert_markdown(output, fmt)
            assert output.count("\n| ") == len(findings) + 1  # the header row and one per finding
            assert "pixel.png" in output and "@&#8203;someone" in output
        else:
            _assert_inert_text(output, fmt)
            sarif = json.loads(done.stdout)
            results = sarif["runs"][0]["results"]
            assert sorted(r["ruleId"] for r in results) == rules
            assert _holds_hostile(results)

    for fmt in ("text", "json", "mermaid"):
        done = _run(hostile, "trace", "--color", "never", "--format", fmt, ".")
        assert done.returncode == 1, (fmt, done.stderr)
        output = _decoded(done.stdout)
        _assert_inert_text(_decoded(done.stderr), f"trace {fmt} stderr")
        if fmt == "mermaid":
            _assert_inert_markdown(output, "trace mermaid")
            assert output.count("```mermaid") == 2
            assert "<br/>GL604" in output  # the broken link, as in a plain trace
        else:
            _assert_inert_text(output, f"trace {fmt}")
        if fmt == "json":
            traces = json.loads(done.stdout)["traces"]
            assert len(traces) == 2 and _holds_hostile(traces)
        if fmt == "text":
            # Counted in the words of the output, which wraps at 80 columns beside the tree.
            words = " ".join(output.replace("│", " ").split())
            assert words.count("<- first break") == 2


# An HPA no replay can run (its metric comes from metrics-server), under a hostile name: its
# reason is a line on stderr.
UNREPLAYABLE = f"""\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {_quoted(HOSTILE + "cpu")}
  namespace: {_quoted(HOSTILE + "ns")}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {_quoted(HOSTILE + "cpu")}}}
  maxReplicas: 2
  metrics:
  - type: Resource
    resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 70}}}}
"""
# The tags of replay's own page and pictures (html.parser lowercases them).
REPLAY_PAGE_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "b"}
REPLAY_PAGE_TAGS |= {"section", "table", "tr", "th", "td"}
SVG_TAGS = {"svg", "title", "rect", "text", "polyline", "line"}
_VOID = {"meta", "rect", "polyline", "line"}  # written without an end tag, or self-closed


class _Page(html.parser.HTMLParser):
    """The tags of an HTML page, each closed where it was opened; text kept."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.tags: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag not in _VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open.pop() == tag, (tag, self.open)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _assert_svg(svg: str, what: str) -> str:
    """A well-formed SVG of replay's own elements; its text."""
    root = ElementTree.fromstring(svg)
    tags = {element.tag.rpartition("}")[2] for element in root.iter()}
    assert tags <= SVG_TAGS, f"{what}: {tags - SVG_TAGS}"
    return " ".join(root.itertext())


def _saturated(query: str, start: float, end: float, step: float) -> bytes:
    """A load that holds the HPA at maxReplicas (GL952, whose message names it), on the two
    pods kube-state-metrics saw."""
    from tests.replay.answers import matrix, points

    if "kube_" in query:
        return matrix(points(start, end, step, "2"))
    return matrix(points(start, end, step, "100"), points(start, end, step, "100"))


@pytest.mark.slow
def test_replay_and_trace_in_every_format_show_hostile_names_and_act_on_none(
    hostile: Path, tmp_path: Path
) -> None:
    """`gpulint replay` of the hostile tree against a Prometheus that answers its queries, in
    every format: each names the autoscalers and its findings escaped for where it goes, the
    SVG and the HTML page are well-formed with only their own elements, the Markdown renders
    no link, image, HTML or mention of a name's; each line on stderr is one line, inert."""
    from tests.replay.answers import RangeServer

    tree = tmp_path / "tree"
    shutil.copytree(hostile, tree)
    (tree / "c" / "plain" / "unreplayable.yaml").write_text(UNREPLAYABLE)
    server = RangeServer(_saturated).start()
    replay = ["replay", ".", "--prometheus", server.url, "--range", "1h", "--fail-on", "never"]
    try:
        outputs = {}
        for fmt in ("text", "json", "svg", "html", "markdown"):
            done = _run(tree, *replay, "--format", fmt)
            assert done.returncode == 0, (fmt, done.stderr)
            outputs[fmt] = _decoded(done.stdout)
            errors = _decoded(done.stderr)
            _assert_inert_text(errors, f"replay {fmt} stderr")
            lines = errors.splitlines()
            said = [line for line in lines if line.startswith("gpulint: ")]
            assert said == lines, fmt  # no name broke a line in two
            assert len([line for line in lines if "not replayed" in line]) == 1
            assert r"\x1b]0;pwned\x07\x1b[31m\x9b31m\x85\u2028\r\n::error" in said[0]
            if fmt == "svg":  # two replays, the first shown: said on stderr, escaped
                assert "the SVG shows the first" in errors
        missing = _run(tree, *replay, "--autoscaler", HOSTILE)
        assert missing.returncode == 2
        _assert_inert_text(_decoded(missing.stderr), "replay --autoscaler stderr")
        said = _decoded(missing.stderr).splitlines()
        assert len(said) == 1 and said[0].endswith(": no such HPA or ScaledObject")
    finally:
        server.stop()

    text = outputs["text"]
    _assert_inert_text(text, "replay text")
    assert text.count("\nHorizontalPodAutoscaler ") == 3 and text.count("GL952 ") == 2
    # the two replays, and the one left out in its line (its name escaped as on stderr)
    assert text.count(" not replayed: metric 1 is a Resource metric") == 1
    assert r"\x1b]0;pwned\x07\x1b[31m\x9b31m\x85\u2028\r\n::error file=forged" in text
    assert r"\n::add-mask::secret\n##[error]legacy" in text and r"\u202eendhpa" in text

    _assert_inert_text(outputs["json"], "replay json")
    replays = json.loads(outputs["json"])["replays"]
    assert len(replays) == 2 and _holds_hostile([r["autoscaler"] for r in replays])
    assert all(r["findings"] and _holds_hostile(r["findings"]) for r in replays)

    _assert_inert_text(outputs["svg"], "replay svg")
    shown = _assert_svg(outputs["svg"], "replay svg")
    assert r"\x1b]0;pwned\x07" in shown and "<script>alert(1)</script>" in shown

    page = outputs["html"]
    _assert_inert_text(page, "replay html")
    parsed = _Page()
    parsed.feed(page)
    parsed.close()
    assert parsed.open == [], parsed.open
    assert parsed.tags <= REPLAY_PAGE_TAGS | SVG_TAGS, parsed.tags - REPLAY_PAGE_TAGS - SVG_TAGS
    pictures = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    assert len(pictures) == 2
    for picture in pictures:
        _assert_svg(picture, "replay html picture")
    words = " ".join(parsed.text)
    assert words.count("<script>alert(1)</script>") >= 4 and words.count("GL952") == 2

    markdown = outputs["markdown"]
    rendered = _assert_inert_markdown(markdown, "replay markdown", frozenset({"h3", "ul", "li"}))
    assert "<img" not in rendered and markdown.count("\nreplicas, ") == 2
    assert "@&#8203;someone" in markdown and markdown.count("**GL952**") == 2

    # The pictures as files, under names no input name makes a path of, shown from a URL.
    server = RangeServer(_saturated).start()
    try:
        done = _run(
            tree, "replay", ".", "--prometheus", server.url, "--range", "1h", "--fail-on",
            "never", "--format", "markdown", "--pictures", "pictures", "--pictures-url",
            "https://ci.example/run/1",
        )  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    files = {f.name: f for f in (tree / "pictures").iterdir()}
    assert len(files) == 2 and all(re.fullmatch(r"[A-Za-z0-9._-]+\.svg", name) for name in files)
    rendered = _assert_inert_markdown(
        _decoded(done.stdout), "replay markdown pictures", frozenset({"h3", "img", "ul", "li"})
    )
    images = re.findall(r'<img src="https://ci\.example/run/1/([^"]*)" alt="([^"]*)"', rendered)
    assert sorted(name for name, _ in images) == sorted(files)
    for name, alt in images:
        _assert_svg(files[name].read_text(), "replay markdown picture")
        assert "evil.example" in alt  # the name, shown as text

    done = _run(hostile, "trace", "--autoscaler", HOSTILE, ".")
    assert done.returncode == 2
    errors = _decoded(done.stderr)
    _assert_inert_text(errors, "trace --autoscaler stderr")
    assert len(errors.splitlines()) == 1 and r"\x1b]0;pwned" in errors


@pytest.mark.slow
def test_diff_and_fix_notes_over_hostile_names(hostile: Path, tmp_path: Path) -> None:
    done = _run(hostile, "lint", "--diff", ".")
    assert done.returncode == 1, done.stderr
    patch, errors = _decoded(done.stdout), _decoded(done.stderr)
    _assert_inert_text(patch, "--diff stdout")
    _assert_inert_text(errors, "--diff stderr")
    # The plain unit's HPA: an ordinary file, in the patch (its hostile names are escaped in
    # the YAML itself, so the patch holds the file's characters).
    assert patch.startswith("--- a/c/plain/hpa.yaml\n+++ b/c/plain/hpa.yaml\n@@ ")
    assert patch.count("\n--- a/") == 0 and "+  behavior:\n" in patch
    # The HPA under a hostile name: shown escaped on stderr, and said why.
    assert errors.count("not in the patch") == 1
    # Its directory and file name, in the message and in both headers: on one line each.
    assert errors.count(r"\x1b]0;t\x07\r\n::error file=f,line=1::forged") == 6
    assert "+  behavior:\n" in errors

    for fmt in ("text", "markdown"):
        copy = tmp_path / fmt
        shutil.copytree(hostile, copy)
        done = _run(copy, "lint", "--fix", "--color", "never", "--format", fmt, ".")
        assert done.returncode == 1, done.stderr
        output = _decoded(done.stdout)
        _assert_inert_text(_decoded(done.stderr), f"--fix {fmt} stderr")
        if fmt == "markdown":
            _assert_inert_markdown(output, "--fix markdown")
        else:
            _assert_inert_text(output, "--fix text")
        assert "fixed: 2 fixes applied to 2 files" in output
        assert "forged" in output.split("fixed: ", 1)[1]  # the hostile names, escaped

    # --write-baseline: its error names the path it could not write, escaped.
    target = f"{HOSTILE_NAME}/baseline.json"
    done = _run(hostile, "lint", "--write-baseline", target, ".")
    assert done.returncode == 2
    errors = _decoded(done.stderr)
    _assert_inert_text(errors, "--write-baseline stderr")
    assert "cannot write baseline" in errors and r"\x1b]0;t\x07\r\n" in errors
    copy = tmp_path / "baseline"
    shutil.copytree(hostile, copy)
    done = _run(copy, "lint", "--write-baseline", HOSTILE_NAME + ".json", ".")
    assert done.returncode == 0, done.stderr
    _assert_inert_text(_decoded(done.stdout + done.stderr), "--write-baseline")
    done = _run(copy, "lint", "--baseline", HOSTILE_NAME + ".json", ".")
    assert done.returncode == 0, done.stderr
    _assert_inert_text(_decoded(done.stdout + done.stderr), "--baseline")
    assert "baselined" in _decoded(done.stdout)


GPU_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama}
spec:
  selector: {matchLabels: {app: llama}}
  template:
    metadata: {labels: {app: llama}}
    spec:
      containers:
      - {name: main, image: triton, resources: {limits: {nvidia.com/gpu: 1}}}
"""
# An HPA on a deprecated API (GL109 rewrites line 8) with no behavior (GL102 adds one at the
# end): lines of its annotation that a runner would run are context of both fixes.
COMMANDS_IN_CONTEXT = """\
metadata:
  name: llama
  annotations:
    note: |
      ::error file=forged.yaml,line=1::forged
        ::add-mask::secret
      ##[error]legacy
apiVersion: autoscaling/v2beta2
kind: HorizontalPodAutoscaler
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llama}
  maxReplicas: 3
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
"""


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(
        ["git", *args], cwd=repo, input=stdin, capture_output=True, check=True, timeout=60
    )
    return done.stdout


@pytest.mark.slow
def test_diff_is_a_patch_git_applies_with_workflow_commands_in_its_context(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "deployment.yaml").write_text(GPU_DEPLOYMENT)
    (repo / "hpa.yaml").write_text(COMMANDS_IN_CONTEXT)
    (repo / "crlf.yaml").write_bytes(COMMANDS_IN_CONTEXT.replace("llama", "crlf").encode())
    (repo / "crlf.yaml").write_bytes((repo / "crlf.yaml").read_bytes().replace(b"\n", b"\r\n"))
    (repo / "crlf-deployment.yaml").write_text(GPU_DEPLOYMENT.replace("llama", "crlf"))
    fixed = tmp_path / "fixed"
    shutil.copytree(repo, fixed)
    assert _run(fixed, "lint", "--fix", ".").returncode == 1  # GL101 needs a person

    done = _run(repo, "lint", "--diff", ".")
    assert done.returncode == 1, done.stderr
    patch = _decoded(done.stdout)
    _assert_inert_text(patch.replace("\r\n", "\n"), "--diff")  # a CRLF file's lines end so
    assert "not in the patch" not in _decoded(done.stderr)
    # Each line a runner would run is shown removed and added again, in both files.
    for line in ("::error file=forged.yaml", "  ::add-mask::secret", "##[error]legacy"):
        assert patch.count(f"\n-      {line}") == 2 and patch.count(f"\n+      {line}") == 2
    assert patch.count("\n+apiVersion: autoscaling/v2\n") == 1  # and once with \r\n
    _git(repo, "apply", "--check", "-", stdin=done.stdout)
    _git(repo, "apply", "-", stdin=done.stdout)
    for name in ("hpa.yaml", "crlf.yaml"):
        assert (repo / name).read_bytes() == (fixed / name).read_bytes()
    assert b"\r\n  behavior:\r\n" in (repo / "crlf.yaml").read_bytes()


def test_diff_keeps_a_file_with_a_control_character_out_of_the_patch(tmp_path: Path) -> None:
    """A right-to-left override beside a fix: the diff is shown escaped on stderr; the patch
    on stdout holds only the ordinary file and still applies."""
    (tmp_path / "deployment.yaml").write_text(GPU_DEPLOYMENT)
    (tmp_path / "hpa.yaml").write_text(COMMANDS_IN_CONTEXT)
    bidi = COMMANDS_IN_CONTEXT.replace("llama", "bidi").replace("##[error]", "\u202e\u2066")
    (tmp_path / "bidi.yaml").write_text(bidi)
    (tmp_path / "bidi-deployment.yaml").write_text(GPU_DEPLOYMENT.replace("llama", "bidi"))
    done = _run(tmp_path, "lint", "--diff", ".")
    assert done.returncode == 1
    patch, errors = _decoded(done.stdout), _decoded(done.stderr)
    _assert_inert_text(patch, "--diff")
    _assert_inert_text(errors, "--diff stderr")
    assert patch.startswith("--- a/hpa.yaml\n") and "bidi.yaml" not in patch
    assert "gpulint: --diff: bidi.yaml: not in the patch" in errors
    assert r"      \u202e\u2066legacy" in errors and "+apiVersion: autoscaling/v2" in errors
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "apply", "--check", "-", stdin=done.stdout)


def test_safe_patch() -> None:
    from gpulint.adoption.edits import unified_diff
    from gpulint.report.escape import safe_patch

    before = ["a\n", "  ::error x\n", "b\n", "##[warning]y"]
    patch = safe_patch(unified_diff("f.yaml", before, "A\n  ::error x\nb\n##[warning]y"))
    assert patch == (
        "--- a/f.yaml\n+++ b/f.yaml\n@@ -1,4 +1,4 @@\n-a\n+A\n"
        "-  ::error x\n+  ::error x\n b\n"
        "-##[warning]y\n\\ No newline at end of file\n+##[warning]y\n\\ No newline at end of file\n"
    )
    assert safe_patch(" a\tb\r\n") == " a\tb\r\n"  # a tab, a CRLF line: ordinary
    for control in ("\x1b", "\x07", "\r", "\x9b", "\x85", "\u2028", "\u202e"):
        assert safe_patch(f"-x\n+a{control}b\n") is None, repr(control)
