"""The JSON report (version 1): a contract for tools, documented in docs/lint.md.

``message`` is a finding's full text; ``headline`` its first sentence (``Finding.headline``),
for tools that show one line per finding. A finding that follows from another
(``gpulint.engine.causes``) names the one at the top of its chain in ``followsFrom``: its
index in ``findings``, rule and place; every finding is listed whole either way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

import gpulint
from gpulint.adoption.edits import Edit
from gpulint.core.model import Finding, NotChecked, ObjectRef, Severity
from gpulint.core.paths import display_path
from gpulint.engine.causes import roots
from gpulint.engine.result import CONTEXT_CHANGE, ClusterSummary, Result
from gpulint.report.escape import write_json


def _object(ref: ObjectRef | None) -> dict[str, Any] | None:
    if ref is None:
        return None
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "namespace": ref.namespace,
        "name": ref.name,
    }


def edits_to_list(
    edits: list[Edit], shown: Callable[[str], str] = display_path
) -> list[dict[str, Any]]:
    return [
        {
            "file": shown(edit.file),
            "start": {"line": edit.start[0], "column": edit.start[1]},
            "end": {"line": edit.end[0], "column": edit.end[1]},
            "text": edit.text,
        }
        for edit in edits
    ]


def finding_to_dict(
    finding: Finding, edits: list[Edit] | None = None, shown: Callable[[str], str] = display_path
) -> dict[str, Any]:
    """``shown`` is how a file is written (``display_path``, or a memo of it)."""
    location = finding.location
    data: dict[str, Any] = {
        "rule": finding.rule,
        "name": finding.name,
        "severity": str(finding.severity),
        "message": finding.message,
        "headline": finding.headline,
        "file": shown(location.file),
        "line": location.line,
        "column": location.column,
        "object": _object(finding.object),
        "related": [
            {
                **(_object(r.ref) or {}),
                "file": shown(r.location.file) if r.location else None,
                "line": r.location.line if r.location else None,
            }
            for r in finding.related
        ],
        "fix": finding.fix,
    }
    if location.rendered_from:
        data["renderedFrom"] = location.rendered_from
    if location.note:
        data["locationNote"] = location.note
    if finding.units:
        data["units"] = list(finding.units)
    if finding.settled_by:
        # The live rule whose observed values this finding reports (gpulint.engine.settled).
        data["settledBy"] = finding.settled_by
    if edits and finding.plan is not None:
        data["edits"] = edits_to_list(edits, shown)
        data["fixApplicability"] = finding.plan.applicability
    return data


def follows_from(index: int, cause: Finding, shown: Callable[[str], str]) -> dict[str, Any]:
    """The finding another follows from, as ``followsFrom`` names it."""
    return {
        "finding": index,
        "rule": cause.rule,
        "file": shown(cause.location.file),
        "line": cause.location.line,
        "column": cause.location.column,
    }


def result_to_dict(result: Result) -> dict[str, Any]:
    # The findings of a large run name the same files many times over (each related object
    # too): each file's reported path is worked out once.
    paths: dict[str, str] = {}

    def shown(file: str) -> str:
        path = paths.get(file)
        if path is None:
            path = paths[file] = display_path(file)
        return path

    findings = [finding_to_dict(f, result.edits_of(f), shown) for f in result.findings]
    for data, top in zip(findings, roots(result.findings), strict=True):
        if top is not None:
            data["followsFrom"] = follows_from(top, result.findings[top], shown)
    report: dict[str, Any] = {
        "version": 1,
        "gpulintVersion": gpulint.__version__,
        "findings": findings,
        "notChecked": [_not_checked(n, shown) for n in result.not_checked],
        "summary": {
            "files": result.files,
            "objects": result.objects,
            "errors": result.count(Severity.ERROR),
            "warnings": result.count(Severity.WARNING),
            "infos": result.count(Severity.INFO),
            "skipped": [
                {"file": display_path(path), "reason": reason} for path, reason in result.skipped
            ],
            "suppressed": dict(sorted(result.suppressed.items())),
            "notes": list(result.notes),
            "config": display_path(result.config) if result.config else None,
            "units": [
                {
                    "name": unit.name,
                    "kind": unit.kind,
                    "root": display_path(unit.root) if unit.root != "-" else "-",
                    "objects": unit.objects,
                    "renderedBy": list(unit.rendered_by),
                    "renderSeconds": round(unit.render_seconds, 3),
                    "context": unit.context,
                }
                for unit in result.units
            ],
            "renderSeconds": round(result.render_seconds, 3),
            "lintSeconds": round(result.lint_seconds, 3),
        },
    }
    if result.versions is not None:
        report["summary"]["versions"] = result.versions.as_dict()
    if result.clusters:
        report["summary"]["clusters"] = [_cluster(cluster) for cluster in result.clusters]
    if any(unit.context for unit in result.units):
        report["summary"]["contextChange"] = CONTEXT_CHANGE
    if result.baseline is not None:
        baselined, stale, not_evaluated = result.baseline
        report["summary"]["baseline"] = {
            "baselined": baselined,
            "stale": stale,
            "notEvaluated": not_evaluated,
        }
    return report


def _not_checked(note: NotChecked, shown: Callable[[str], str]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "checks": note.checks.split(", "),
        "file": shown(note.location.file),
        "line": note.location.line,
        "column": note.location.column,
        "object": _object(note.object),
        "reason": note.reason,
        "remedy": note.remedy,
    }
    if note.units:
        data["units"] = list(note.units)
    return data


def _cluster(cluster: ClusterSummary) -> dict[str, Any]:
    return {
        "name": cluster.name,
        "why": cluster.why,
        "units": list(cluster.units),
        "lends": [
            {"component": category, "from": provider, "to": list(takers)}
            for category, provider, takers in cluster.lends
        ],
        "notLent": [
            {"component": category, "equallyNear": list(providers), "to": list(takers)}
            for category, providers, takers in cluster.ambiguous
        ],
    }


def render_json(result: Result, stream: TextIO) -> None:
    write_json(result_to_dict(result), stream, lines="findings")
