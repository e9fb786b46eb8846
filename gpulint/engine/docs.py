"""Documentation generated from the rule modules: one source of truth for ``gpulint explain``,
docs/rules.md with its index, `gpulint rules --markdown` and the SARIF help text."""

from __future__ import annotations

import functools
import json

from gpulint.engine.registry import all_rules
from gpulint.engine.rule import RuleSpec

RULES_DOC = "docs/rules.md"  # in the repository, as the README and the reports link it


def fix_sentence(spec: RuleSpec) -> str:
    """What ``--fix`` does for the rule's findings."""
    if spec.fixes == ("safe",):
        return "Fix: safe; `gpulint lint --fix` applies it."
    if spec.fixes == ("unsafe",):
        return (
            "Fix: unsafe (it changes what the cluster does); applied only with "
            "`gpulint lint --fix --unsafe-fixes`."
        )
    if spec.fixes:
        return (
            "Fix: safe where it only removes the problem (`gpulint lint --fix`), unsafe "
            "where it needs judgment (`--unsafe-fixes`)."
        )
    return "Fix: written out in each finding; applied by hand."


def rule_anchor(rule_id: str) -> str:
    """The anchor of a rule in docs/rules.md: ``gl101``, written there as ``<a id="gl101">``
    before the rule's heading. GitHub serves it as ``user-content-gl101`` and follows
    ``#gl101`` to it; the heading's own anchor (``#gl101-hpa-cpu-on-gpu-workload-error``)
    would change with the rule's name or severity, this one never does."""
    return rule_id.lower()


@functools.cache
def rules_doc_url() -> str | None:
    """Where docs/rules.md is published, if the installed gpulint says: the ``Rules`` entry
    of ``[project.urls]`` in pyproject.toml (package metadata ``Project-URL: Rules, URL``)."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        entries = metadata("gpulint").get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    for entry in entries:
        label, _, url = str(entry).partition(",")
        if label.strip().lower() == "rules" and url.strip().startswith(("https://", "http://")):
            return url.strip()
    return None


def rule_help_uri(rule_id: str) -> str | None:
    """The rule's documentation as an absolute URL (SARIF ``helpUri``), when it is known."""
    base = rules_doc_url()
    return f"{base}#{rule_anchor(rule_id)}" if base else None


def rule_doc_link(rule_id: str) -> str:
    """The rule's documentation: its URL, else its place in the repository
    (``docs/rules.md#gl101``)."""
    return rule_help_uri(rule_id) or f"{RULES_DOC}#{rule_anchor(rule_id)}"


def rule_markdown(spec: RuleSpec) -> str:
    parts = [
        f"## {spec.id} {spec.name} ({spec.severity})",
        "",
        spec.doc.summary,
        "",
        fix_sentence(spec),
        "",
    ]
    for title, body in spec.doc.sections.items():
        parts += [f"### {title}", "", body, ""]
    if spec.options:
        parts += ["### Configuration", "", "```yaml", "rules:", f"  {spec.id}:"]
        for name, schema in spec.options.items():
            # The default as YAML writes it (null, true, "text"): the block is pasted as is.
            default = json.dumps(schema.get("default"))
            parts.append(f"    {name}: {default}  # {schema.get('description', '')}")
        parts += ["```", ""]
    return "\n".join(parts).rstrip() + "\n"


def rule_text(spec: RuleSpec) -> str:
    """``gpulint explain``: the rule's documentation for a terminal."""
    lines = [f"{spec.id} {spec.name} [{spec.severity}]", "", spec.doc.summary, ""]
    lines += [fix_sentence(spec), ""]
    for title, body in spec.doc.sections.items():
        lines += [title, "-" * len(title), body, ""]
    if spec.options:
        lines += ["Options (in .gpulint.yaml under rules: " + spec.id + ":)", "-" * 20]
        for name, schema in spec.options.items():
            lines.append(
                f"  {name} (default {schema.get('default')!r}): {schema.get('description', '')}"
            )
        lines.append("")
    where = rule_help_uri(spec.id) or f"{RULES_DOC}#{rule_anchor(spec.id)} in gpulint's repository"
    lines += ["Documentation: " + where, ""]
    return "\n".join(lines).rstrip() + "\n"


def rules_table(specs: list[RuleSpec], page: str = RULES_DOC) -> str:
    """The index of the rules as a Markdown table, each ID linking its section of ``page``
    (``""`` for links within docs/rules.md itself)."""
    rows = ["| ID | name | severity | fix | what it catches |", "|---|---|---|---|---|"]
    for spec in specs:
        summary = spec.doc.summary.replace("|", "\\|")
        fix = "/".join(spec.fixes) or "-"
        rows.append(
            f"| [{spec.id}]({page}#{rule_anchor(spec.id)}) | {spec.name} | "
            f"{spec.severity} | {fix} | {summary} |"
        )
    return "\n".join(rows)


def rules_document(specs: list[RuleSpec]) -> str:
    parts = [
        "# gpulint rules",
        "",
        "Generated from the rule modules in `rules/` by `gpulint rules --docs`. A fix is `safe`",
        "when it removes the problem and changes nothing else the cluster does, `unsafe` when it",
        "changes how the workload scales (`gpulint lint --fix --unsafe-fixes` applies those too).",
        "",
        rules_table(specs, page=""),
        "",
    ]
    for spec in specs:
        parts.append(f'<a id="{rule_anchor(spec.id)}"></a>')
        parts.append(rule_markdown(spec))
    return "\n".join(parts)


def update_files(rules_doc: str = RULES_DOC) -> None:
    """Regenerate docs/rules.md, with its index, from the rule modules."""
    with open(rules_doc, "w", encoding="utf-8") as handle:
        handle.write(rules_document(all_rules()))


if __name__ == "__main__":
    update_files()
