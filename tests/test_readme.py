"""The README and the pages of docs/: the rule catalog generated from the rule modules, links
that reach their pages and anchors, a README that fits a screen, and snippets that run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from gpulint.engine.docs import RULES_DOC, rule_doc_link, rules_document
from gpulint.engine.registry import all_rules

from .conftest import ROOT

REGENERATE = "regenerate with: python -m gpulint.engine.docs"


README_LINES = 250


def pages() -> dict[str, str]:
    """The README and every page of docs/, by their path in the repository."""
    found = {"README.md": (ROOT / "README.md").read_text()}
    for page in sorted((ROOT / "docs").glob("*.md")):
        found[f"docs/{page.name}"] = page.read_text()
    return found


def test_docs_rules_matches_the_catalog() -> None:
    assert (ROOT / "docs" / "rules.md").read_text() == rules_document(all_rules()), REGENERATE


def _github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a Markdown page: each ``<a id>`` and each heading's slug
    (lower case, punctuation but hyphens dropped, spaces as hyphens, ``-1``, ``-2`` for
    repeats)."""
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', markdown))
    counts: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        seen = counts.get(slug, 0)
        counts[slug] = seen + 1
        anchors.add(slug if not seen else f"{slug}-{seen}")
    return anchors


def test_every_link_to_a_rule_reaches_its_section() -> None:
    """docs/rules.md's index, the README's pitfall table, `gpulint explain`, SARIF and the
    webhook's warnings link docs/rules.md#<anchor>; each anchor must be on the page, just
    before the rule's heading."""
    page = (ROOT / RULES_DOC).read_text()
    anchors = _github_anchors(page)
    indexed = re.findall(r"\]\(#(gl\d+)\)", page)
    assert len(indexed) == len(all_rules())
    readme = (ROOT / "README.md").read_text()
    linked = re.findall(rf"\]\({re.escape(RULES_DOC)}#([\w-]+)\)", readme)
    assert set(indexed) | set(linked) <= anchors
    for spec in all_rules():
        link = rule_doc_link(spec.id)
        assert link.startswith(f"{RULES_DOC}#")
        anchor = link.partition("#")[2]
        assert anchor in anchors
        assert f'<a id="{anchor}"></a>\n## {spec.id} {spec.name} ' in page


def _pitfall_table() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## What it catches")
    return readme[start : readme.index("\n## ", start + 1)]


def test_every_rule_is_in_the_readmes_pitfall_table_once() -> None:
    """A new rule is placed under the pitfall it catches; each ID links its section."""
    table = _pitfall_table()
    for spec in all_rules():
        link = f"[{spec.id}]({rule_doc_link(spec.id)})"
        assert table.count(link) == 1, spec.id
    listed = set(re.findall(r"\[(GL\d+)\]", table))
    assert listed == {spec.id for spec in all_rules()}


def test_the_readme_fits_a_screenful_of_scrolling() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= README_LINES


def test_every_page_of_docs_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in pages():
        if name != "README.md":
            assert f"]({name})" in readme, name


def test_every_relative_link_reaches_a_file_and_its_anchor() -> None:
    """Links between the README, docs/ and the rest of the repository (pages moved between
    them keep working); an anchor must be a heading or an ``<a id>`` of the page it names."""
    for name, text in pages().items():
        here = (ROOT / name).parent
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            page = (here / path).resolve() if path else ROOT / name
            assert page.exists(), f"{name}: {target}"
            assert ROOT.resolve() in page.parents or page == ROOT.resolve(), f"{name}: {target}"
            if anchor and page.suffix == ".md":
                assert anchor in _github_anchors(page.read_text()), f"{name}: {target}"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    blocks = re.findall(r"```sh\n(.*?)\n```", readme, re.DOTALL)
    test_commands = [b for b in blocks if "pytest" in b]
    assert len(test_commands) == 1
    assert test_commands[0].strip() in ci.splitlines()


def test_readme_main_job_lints_the_examples() -> None:
    readme = (ROOT / "README.md").read_text()
    assert ".venv/bin/gpulint lint examples/" in readme
    assert (ROOT / "examples").is_dir()


def test_every_rule_documents_why_and_how_to_fix() -> None:
    for spec in all_rules():
        sections = {title.lower() for title in spec.doc.sections}
        assert spec.doc.summary.endswith("."), spec.id
        for needed in (
            "what it checks",
            "why is this bad?",
            "example",
            "use instead",
            "references",
        ):
            assert needed in sections, f"{spec.id} lacks ## {needed}"


def test_every_gpulint_command_in_the_readme_and_docs_parses() -> None:
    """What a reader copies from a ``sh`` block of the README or docs/ is a command gpulint
    accepts."""
    import re
    import shlex

    from gpulint.cli import build_parser

    text = "\n".join(pages().values())
    commands = [
        line.strip()
        for block in re.findall(r"```sh\n(.*?)\n```", text, re.DOTALL)
        for line in block.splitlines()
        if line.strip().startswith("gpulint ")
    ]
    assert any(c.startswith("gpulint trace ") for c in commands)
    for command in commands:
        words = shlex.split(command, comments=True)
        for stop in ("|", ">", ">>", "&&"):
            if stop in words:
                words = words[: words.index(stop)]
        build_parser().parse_args(words[1:])  # SystemExit on anything the CLI refuses


def test_the_text_sample_is_what_gpulint_prints() -> None:
    readme = (ROOT / "docs" / "lint.md").read_text()
    command = "gpulint lint --select GL406\n  tests/fixtures/GL406/fail_sum.yaml"
    assert f"`{command}`:" in readme
    sample = readme.split(f"`{command}`:\n\n  ```\n", 1)[1].split("  ```\n", 1)[0]
    done = subprocess.run(
        [sys.executable, "-m", "gpulint", *command.split()[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sample == "".join(f"  {line}\n" for line in done.stdout.splitlines())


def test_every_configuration_snippet_is_a_configuration_gpulint_accepts(tmp_path: Path) -> None:
    """A ``yaml`` block of the README or docs/ that holds gpulint settings loads as
    `.gpulint.yaml` (its directory patterns made to match), and every other block parses;
    workflows and hooks are run and validated by tests/test_action.py and
    tests/test_precommit.py."""
    from gpulint.engine.config import ConfigError, config_schema, load_settings
    from gpulint.engine.registry import rule_names, rule_option_schemas

    settings_keys = set(config_schema(rule_option_schemas())["properties"])
    loaded = 0
    for name, text in pages().items():
        for block in re.findall(r"^( *)```yaml\n(.*?)\n\1```", text, re.DOTALL | re.MULTILINE):
            indent, body = block
            body = textwrap.dedent(body) if indent else body
            data = next(iter(yaml.safe_load_all(body)), None)
            if not (isinstance(data, dict) and data and set(data) <= settings_keys):
                continue  # a manifest, a workflow
            adapter = {"custom", "external", "resource", "default"}
            if not isinstance(data.get("rules", {}), dict) or adapter & set(data.get("rules", {})):
                continue  # prometheus-adapter's rules (its chart's values, or its config)
            path = tmp_path / f"{len(list(tmp_path.iterdir()))}.gpulint.yaml"
            path.write_text(body)
            for pattern in re.findall(r'"([\w*./-]+)"', body):
                if "/" in pattern or pattern.endswith("*"):
                    (tmp_path / pattern.replace("*", "x")).mkdir(parents=True, exist_ok=True)
            try:
                load_settings(str(path), rule_option_schemas(), rule_names())
            except ConfigError as error:
                pytest.fail(f"{name}: a snippet gpulint refuses: {error}")
            loaded += 1
    assert loaded >= 2  # the README's and docs/configuration.md's
