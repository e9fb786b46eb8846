"""SARIF 2.1.0 for GitHub code scanning and other SARIF consumers.

One reportingDescriptor per rule, generated from the rule's docstring: ``shortDescription``
its summary line, ``fullDescription`` what it checks, ``help`` the whole documentation,
``helpUri`` its section of docs/rules.md when gpulint knows where that is published
(``gpulint.engine.docs.rules_doc_url``; SARIF wants an absolute URI there). Results have real
line/column regions and related locations for cross-object findings.

A result's ``message.text`` is the whole message, then the fix: its first sentence is the
headline, which is what SARIF viewers show where room is short (GitHub code scanning titles
an alert with it, and reads no ``markdown``), so the detail and the fix stay in the alert.
``properties.headline`` has the headline alone, for tools. A result that follows from another
(``gpulint.engine.causes``) names it in ``properties.followsFrom`` (its index in ``results``
and its rule) and lists it first among its related locations.

Artifact URIs are the one place paths are not spelled from the working directory: they are
relative to the repository's top level under ``uriBaseId: %SRCROOT%``
(``originalUriBaseIds`` gives its absolute URI), because GitHub code scanning matches a
result to a file of the repository by its path from the root (``gpulint.core.paths``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

import gpulint
from gpulint.adoption.edits import Edit
from gpulint.core.model import Finding, Location, Severity
from gpulint.core.paths import is_file_path, sarif_root
from gpulint.engine.causes import roots
from gpulint.engine.docs import rule_help_uri, rule_markdown
from gpulint.engine.registry import all_rules
from gpulint.engine.result import Result
from gpulint.report.escape import write_json

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


ROOT = "%SRCROOT%"


def _artifact(path: str, root: str) -> dict[str, Any]:
    """A file relative to ``%SRCROOT%`` (the repository), as code scanning wants it."""
    if not is_file_path(path):
        return {"uri": quote(path, safe="/:")}
    relative = os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
    return {"uri": quote(relative, safe="/"), "uriBaseId": ROOT}


def _physical(location: Location, root: str) -> dict[str, Any]:
    return {
        "physicalLocation": {
            "artifactLocation": _artifact(location.file, root),
            "region": {"startLine": max(location.line, 1), "startColumn": max(location.column, 1)},
        }
    }


def _fix(finding: Finding, edits: list[Edit] | None, root: str) -> dict[str, Any] | None:
    """The finding's edits as a SARIF fix: one artifactChange per file, each edit a
    replacement of a region (an empty region inserts)."""
    if not edits or finding.plan is None:
        return None
    changes: dict[str, list[dict[str, Any]]] = {}
    for edit in sorted(edits, key=lambda e: (e.file, e.start)):
        region = {
            "startLine": edit.start[0],
            "startColumn": edit.start[1],
            "endLine": edit.end[0],
            "endColumn": edit.end[1],
        }
        changes.setdefault(edit.file, []).append(
            {"deletedRegion": region, "insertedContent": {"text": edit.text}}
        )
    first = (finding.fix or "").strip().splitlines()[:1]
    summary = first[0][:200] if first else f"the fix for {finding.rule}"
    return {
        "description": {"text": f"{summary} ({finding.plan.applicability} fix)"},
        "artifactChanges": [
            {"artifactLocation": _artifact(file, root), "replacements": replacements}
            for file, replacements in changes.items()
        ],
    }


def sarif_log(result: Result) -> dict[str, Any]:
    specs = all_rules()
    index = {spec.id: i for i, spec in enumerate(specs)}
    rules = []
    for spec in specs:
        descriptor: dict[str, Any] = {
            "id": spec.id,
            "name": spec.name,
            "shortDescription": {"text": spec.doc.summary},
            "fullDescription": {
                "text": spec.doc.section("Description", "What it checks") or spec.doc.summary
            },
            "help": {"text": spec.doc.summary, "markdown": rule_markdown(spec)},
            "defaultConfiguration": {"level": _LEVELS[spec.severity]},
            "properties": {"tags": ["kubernetes", "gpu", "autoscaling"]},
        }
        help_uri = rule_help_uri(spec.id)
        if help_uri is not None:
            descriptor["helpUri"] = help_uri
        rules.append(descriptor)
    edits = {id(f): result.edits_of(f) for f in result.findings}
    root = sarif_root(
        [f.location.file for f in result.findings]
        + [e.file for found in edits.values() for e in found or ()]
    )
    results = []
    tops = roots(result.findings)
    for finding, top in zip(result.findings, tops, strict=True):
        text = finding.message
        if finding.fix:
            text += f"\nFix: {finding.fix}"
        entry: dict[str, Any] = {
            "ruleId": finding.rule,
            "level": _LEVELS[finding.severity],
            "message": {"text": text},
            "locations": [_physical(finding.location, root)],
        }
        if finding.rule in index:
            entry["ruleIndex"] = index[finding.rule]
        related = []
        if top is not None:
            cause = result.findings[top]
            physical = _physical(cause.location, root)
            physical["id"] = 0
            physical["message"] = {"text": f"{cause.rule}: {cause.headline}"}
            related.append(physical)
        for number, item in enumerate(finding.related, start=1):
            if item.location is None:
                continue
            physical = _physical(item.location, root)
            physical["id"] = number
            physical["message"] = {"text": str(item.ref)}
            related.append(physical)
        if related:
            entry["relatedLocations"] = related
        fix = _fix(finding, edits[id(finding)], root)
        if fix is not None:
            entry["fixes"] = [fix]
        properties: dict[str, Any] = {"headline": finding.headline}
        if top is not None:
            properties["followsFrom"] = {"result": top, "ruleId": result.findings[top].rule}
        if finding.units:
            properties["units"] = list(finding.units)
        if finding.location.rendered_from:
            properties["renderedFrom"] = finding.location.rendered_from
        if finding.settled_by:
            properties["settledBy"] = finding.settled_by
        entry["properties"] = properties
        results.append(entry)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpulint",
                        "version": gpulint.__version__,
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "originalUriBaseIds": {ROOT: {"uri": Path(root).as_uri() + "/"}},
                "results": results,
            }
        ],
    }


def render_sarif(result: Result, stream: TextIO) -> None:
    write_json(sarif_log(result), stream)
