"""The README and docs/rules.md are generated from the rule modules and must not drift."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from gpulint.engine.docs import (
    RULES_DOC,
    TABLE_BEGIN,
    TABLE_END,
    rule_doc_link,
    rules_document,
    rules_table,
)
from gpulint.engine.registry import all_rules

from .conftest import ROOT

REGENERATE = "regenerate with: python -m gpulint.engine.docs"


def test_readme_rule_table_matches_the_catalog() -> None:
    text = (ROOT / "README.md").read_text()
    table = text[text.index(TABLE_BEGIN) + len(TABLE_BEGIN) : text.index(TABLE_END)].strip()
    assert table == rules_table(all_rules()), REGENERATE


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
    """The README's table, `gpulint explain`, SARIF and the webhook's warnings link
    docs/rules.md#<anchor>; each anchor must be on the page, just before the rule's heading."""
    page = (ROOT / RULES_DOC).read_text()
    anchors = _github_anchors(page)
    readme = (ROOT / "README.md").read_text()
    linked = re.findall(rf"\]\({re.escape(RULES_DOC)}#([\w-]+)\)", readme)
    assert len(linked) == len(all_rules())
    assert set(linked) <= anchors
    for spec in all_rules():
        link = rule_doc_link(spec.id)
        assert link.startswith(f"{RULES_DOC}#")
        anchor = link.partition("#")[2]
        assert anchor in anchors
        assert f'<a id="{anchor}"></a>\n## {spec.id} {spec.name} ' in page


def test_every_rule_is_in_the_readme_exactly_once() -> None:
    text = (ROOT / "README.md").read_text()
    for spec in all_rules():
        assert len(re.findall(rf"\[{spec.id}\]", text)) == 1, spec.id


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


def test_every_gpulint_command_in_the_readme_parses() -> None:
    """What a reader copies from a ``sh`` block is a command gpulint accepts."""
    import re
    import shlex

    from gpulint.cli import build_parser

    text = (ROOT / "README.md").read_text()
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
    readme = (ROOT / "README.md").read_text()
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
