"""One line per finding: ``file:line:col: GL101 [error] headline``, as ruff's ``concise``
output format prints a diagnostic, then the same trailer as the text report (checks not
run, files skipped, notes, the summary), each check not run on one line as well.

A finding's line is not wrapped, so that an editor's or a terminal's file:line:col link,
``grep`` and ``sort`` see one finding per line. A finding that follows from another
(``gpulint.engine.causes``) ends with the rule and place of the one at the top of its chain:
``(follows from GL403 at monitoring/values.yaml:12:9)``; lines that would read alike (one
line of a base that several overlays build) name the units each was found in. What a line
leaves out (the detail, the fix) is in ``--format text`` and ``--format json``, as a note
under the findings says.
"""

from __future__ import annotations

from collections import Counter
from typing import TextIO

from gpulint.core.model import Finding
from gpulint.core.paths import display_path
from gpulint.engine.causes import roots
from gpulint.engine.result import Result
from gpulint.report.escape import escape_controls, safe_line
from gpulint.report.text import heading, shown_alike, write_trailer
from gpulint.report.wrap import output_width

# What the concise report leaves out, and where it is: said under the findings.
MORE = "`--format text` shows why each finding matters and its fix"


def render_concise(result: Result, stream: TextIO, color: bool = False) -> None:
    findings = result.findings
    tops = roots(findings)
    # Findings at one line of a base that several overlays build can read alike: each of
    # those lines names its units.
    shown = Counter(shown_alike(finding) for finding in findings)
    for finding, top in zip(findings, tops, strict=True):
        said = []
        if shown[shown_alike(finding)] > 1 and finding.units:
            said.append(f"in {escape_controls(', '.join(finding.units))}")
        if top is not None:
            said.append(f"follows from {_place(findings[top])}")
        line = _line(finding, color) + (f" ({'; '.join(said)})" if said else "")
        stream.write(safe_line(line) + "\n")
    following = sum(1 for top in tops if top is not None)
    width = output_width(stream)
    write_trailer(result, stream, width, following, MORE if findings else None, one_line=True)


def _line(finding: Finding, color: bool) -> str:
    return heading(finding, color)[1] + escape_controls(finding.headline)


def _place(finding: Finding) -> str:
    where = finding.location
    return escape_controls(
        f"{finding.rule} at {display_path(where.file)}:{where.line}:{where.column}"
    )
