"""``file:line:col: GL101 [error] headline``, the detail wrapped and the fix indented
below, a summary line last.

The first line of a finding is the headline (the message's first sentence), so that a run
reads as one line per problem; the rest of the message is wrapped under it, as pint and
ruff keep the explanation apart from the line that names the problem. Every line is wrapped at the
terminal's width (``gpulint.report.wrap``) except the code of a fix, which keeps its lines.

Findings that follow from another (``gpulint.engine.causes``: the same fix, an object its
fix deletes, a cause its rule declares) are not repeated in full: each is one entry under
the finding it follows from, its place, rule and headline (``follows from it: ...``), and
followers alike (one line of a base that several overlays build) are one entry naming their
units; the JSON and SARIF reports keep every one whole.

Everything that comes from the input (file names, messages, fixes, notes) is escaped
(``gpulint.report.escape``) before gpulint adds its own colours.
"""

from __future__ import annotations

from typing import TextIO

from gpulint.core.message import split_message
from gpulint.core.model import Finding, NotChecked, Severity
from gpulint.core.paths import display_path
from gpulint.engine.causes import followers
from gpulint.engine.result import CONTEXT_CHANGE, Result
from gpulint.report.escape import escape_controls, safe_line, safe_lines
from gpulint.report.wrap import code_lines, fill, output_width

_COLORS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.INFO: "\033[36m"}
_BOLD, _DIM, _RESET = "\033[1m", "\033[2m", "\033[0m"
INDENT = "    "
FIX_INDENT = INDENT + "     "  # under the text after "fix: "
FOLLOWER = f"{INDENT}follows from it: "


def wrapped(text: str, width: int) -> list[str]:
    """``text`` (escaped already) as lines of at most ``width`` columns, each indented."""
    return fill(text, width, INDENT)


def render_text(result: Result, stream: TextIO, color: bool = False) -> None:
    width = output_width(stream)
    findings = result.findings
    grouped = followers(findings)
    following = {index for members in grouped.values() for index in members}
    for index, finding in enumerate(findings):
        if index in following:
            continue
        _write_finding(finding, stream, color, width)
        for alike in _alike([findings[member] for member in grouped.get(index, ())]):
            _write_follower(alike, stream, color, width)
    write_trailer(result, stream, width, len(following))
    if len(result.units) > 1:
        shown = ", ".join(
            f"{escape_controls(u.name)} ({u.kind}, {u.objects})" for u in result.units[:20]
        )
        more = f" and {len(result.units) - 20} more" if len(result.units) > 20 else ""
        _write(stream, "units: ", shown + more, width, INDENT)
        _write_contexts(result, stream, width)


def write_trailer(
    result: Result,
    stream: TextIO,
    width: int,
    following: int,
    hint: str | None = None,
    one_line: bool = False,
) -> None:
    """What follows the findings: checks not run, files skipped, notes, the releases judged
    for, ``hint`` (a note of the reporter's own, last) and the summary. ``one_line``: each
    check not run on one unwrapped line, as the concise report prints a finding."""
    _write_not_checked(result.not_checked, stream, width, one_line)
    _write_skipped(result.skipped, stream, width)
    for note in result.notes:
        _write(stream, "note: ", escape_controls(note), width)
    if result.versions is not None and result.objects:
        judged = f"judged for {result.versions.describe()}"
        _write(stream, "versions: ", escape_controls(judged), width)
    if hint:
        _write(stream, "note: ", hint, width)
    _write(stream, "", summary(result, following), width, INDENT)


def heading(finding: Finding, color: bool) -> tuple[str, str]:
    """``file:line:col: GL101 [error] ``, plain (to measure) and as printed."""
    location = finding.location
    where = safe_line(
        escape_controls(f"{display_path(location.file)}:{location.line}:{location.column}")
    )
    severity = str(finding.severity)
    plain = f"{where}: {finding.rule} [{severity}] "
    if not color:
        return plain, plain
    severity = f"{_COLORS[finding.severity]}{severity}{_RESET}"
    return plain, f"{_BOLD}{where}{_RESET}: {_BOLD}{finding.rule}{_RESET} [{severity}] "


def shown_alike(finding: Finding) -> tuple[object, ...]:
    """What a finding's one-line entry shows: findings alike in it read as one line."""
    where = finding.location
    return (finding.rule, finding.severity, where.file, where.line, where.column, finding.headline)


def _alike(findings: list[Finding]) -> list[list[Finding]]:
    """``findings`` in their order, those that show alike (one place of a base that several
    overlays build, one headline) together, at the first one's place."""
    groups: dict[tuple[object, ...], list[Finding]] = {}
    for finding in findings:
        groups.setdefault(shown_alike(finding), []).append(finding)
    return list(groups.values())


def units_of(findings: list[Finding]) -> list[str]:
    """The units ``findings`` were found in, each once, in their order."""
    return list(dict.fromkeys(unit for finding in findings for unit in finding.units))


def _write_follower(same: list[Finding], stream: TextIO, color: bool, width: int) -> None:
    """Findings that follow from the one above and show alike: where, their rule and their
    headline, once, with the units they were found in when they are several."""
    finding = same[0]
    plain, shown = heading(finding, color)
    text = escape_controls(finding.headline)
    if len(same) > 1:
        units = escape_controls(", ".join(units_of(same)))
        text += f" (in {units})" if units else f" ({len(same)} findings)"
    lines = fill(text, width, FOLLOWER + plain, INDENT * 2)
    if color:
        lines[0] = FOLLOWER + shown + lines[0][len(FOLLOWER + plain) :]
    for line in lines:
        stream.write(safe_line(line) + "\n")


# A reason shared by more files than this is one line naming the first few (a monorepo's
# package.json files); the JSON report lists every file.
_SKIPPED_ONE_BY_ONE = 3


def _write_skipped(skipped: list[tuple[str, str]], stream: TextIO, width: int) -> None:
    """Each skipped file with its reason, in the order found; a reason many files share,
    once, where its first file was."""
    by_reason: dict[str, list[str]] = {}
    for path, reason in skipped:
        by_reason.setdefault(reason, []).append(path)
    for reason, paths in by_reason.items():
        names = [safe_line(escape_controls(display_path(p))) for p in paths]
        if len(names) <= _SKIPPED_ONE_BY_ONE:
            for shown in names:
                _write(stream, f"{shown}: skipped: ", escape_controls(reason), width)
            continue
        listed = ", ".join(names[:_SKIPPED_ONE_BY_ONE])
        text = f"{escape_controls(reason)} ({listed} and {len(names) - _SKIPPED_ONE_BY_ONE} more)"
        _write(stream, f"skipped: {len(names)} files: ", text, width, INDENT)


def _write_contexts(result: Result, stream: TextIO, width: int) -> None:
    """One line per cluster: its units, who lends them what; and how to change it."""
    for cluster in result.clusters:
        _write(stream, "cluster: ", escape_controls(cluster.describe()), width)
    if any(cluster.lends or cluster.ambiguous for cluster in result.clusters):
        _write(stream, "cluster: ", f"to change it, {CONTEXT_CHANGE}", width)


# Objects listed by place for one cause of a check that could not run; the JSON report lists
# every one (a repository with no Prometheus in it has one such note per ScaledObject).
NOT_CHECKED_LISTED = 3


def _write_not_checked(
    notes: list[NotChecked], stream: TextIO, width: int, one_line: bool = False
) -> None:
    """Each check that could not run: where, which, why and what lets it; a cause shared by
    many objects once, with the first few places. ``one_line``: not wrapped, the units it
    was found in at the end, so that each note is one line as each concise finding is."""
    causes: dict[tuple[str, str, str], list[NotChecked]] = {}
    for note in notes:
        causes.setdefault((note.checks, note.reason, note.remedy), []).append(note)
    for (checks, reason, remedy), same in causes.items():
        if len(same) <= NOT_CHECKED_LISTED + 1:
            for note in same:
                head = f"{safe_line(_place(note))}: not checked ({checks}): "
                text = escape_controls(f"{reason}; {remedy}")
                if one_line:
                    units = f" (in {', '.join(note.units)})" if note.units else ""
                    stream.write(safe_line(head + text + escape_controls(units)) + "\n")
                    continue
                _write(stream, head, text, width, INDENT)
                if note.units:
                    _write(stream, f"{INDENT}in: ", escape_controls(", ".join(note.units)), width)
            continue
        shown = ", ".join(_place(n) for n in same[:NOT_CHECKED_LISTED])
        more = len(same) - NOT_CHECKED_LISTED
        text = (
            f"{reason}; {remedy} (on {len(same):,} objects: {shown} and {more:,} more, all "
            "of them in --format json)"
        )
        if one_line:
            stream.write(safe_line(f"not checked ({checks}): {escape_controls(text)}") + "\n")
            continue
        _write(stream, f"not checked ({checks}): ", escape_controls(text), width, INDENT)


def _place(note: NotChecked) -> str:
    location = note.location
    return escape_controls(f"{display_path(location.file)}:{location.line}:{location.column}")


def _write_finding(finding: Finding, stream: TextIO, color: bool, width: int) -> None:
    """A finding: its headline, the rest of its message wrapped, where it was found, its fix."""
    location = finding.location
    headline, detail = split_message(finding.message)
    # Filled without colour codes, which take no columns; coloured after.
    plain, coloured = heading(finding, color)
    head = fill(escape_controls(headline), width, plain, INDENT)
    if color:
        head[0] = coloured + head[0][len(plain) :]
    for line in head:
        stream.write(safe_line(line) + "\n")
    if detail:
        for line in wrapped(escape_controls(detail), width):
            stream.write(safe_line(line) + "\n")
    if finding.units:
        _write(stream, f"{INDENT}in: ", escape_controls(", ".join(finding.units)), width)
    if location.rendered_from and location.rendered_from not in finding.units:
        rendered = escape_controls(location.rendered_from)
        _write(stream, f"{INDENT}rendered from: ", rendered, width)
    if location.note:
        _write(stream, f"{INDENT}note: ", escape_controls(location.note), width)
    if finding.fix:
        lines = code_lines(safe_lines(finding.fix.rstrip("\n")), width - len(FIX_INDENT))
        prefix = f"{_DIM}fix:{_RESET}" if color else "fix:"
        stream.write(f"{INDENT}{prefix} {lines[0]}\n")
        for line in lines[1:]:
            stream.write(safe_line(f"{FIX_INDENT}{line}") + "\n")


def summary(result: Result, following: int = 0) -> str:
    """The last line: counts by severity, files and objects, what was left out, timings;
    ``following`` findings were shown under the finding they follow from."""
    errors, warnings, infos = (
        result.count(s) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)
    )
    # Cluster mode reads objects, not files.
    where = f"in {result.files} file{'s' * (result.files != 1)} " if result.files else ""
    text = (
        f"gpulint: {errors} error{'s' * (errors != 1)}, "
        f"{warnings} warning{'s' * (warnings != 1)}, {infos} info "
        f"{where}({result.objects} object{'s' * (result.objects != 1)})"
    )
    if following:
        text += f", {following} of them following from another"
    if result.skipped:
        text += f", {len(result.skipped)} skipped"
    if result.not_checked:
        count = len(result.not_checked)
        text += f", {count} check{'s' * (count != 1)} not run"
    suppressed = sum(result.suppressed.values())
    if suppressed:
        most_first = sorted(result.suppressed.items(), key=lambda item: (-item[1], item[0]))
        by_rule = ", ".join(f"{rule} {count}" for rule, count in most_first)
        text += f", {suppressed} suppressed ({by_rule})"
    if result.baseline is not None:
        text += _baseline_counts(*result.baseline)
    if len(result.units) > 1:
        text += f"; {len(result.units)} units"
    if any(unit.rendered_by for unit in result.units):
        text += f"; rendering {result.render_seconds:.1f} s, lint {result.lint_seconds:.1f} s"
    if result.config:
        text += f"; config {escape_controls(display_path(result.config))}"
    return text


def _baseline_counts(baselined: int, stale: int, not_evaluated: int) -> str:
    """``, 3 baselined (1 baseline entry fixed since; 2 not evaluated: ...)``."""
    spare = []
    if stale:
        spare.append(f"{stale} baseline entr{'ies' if stale != 1 else 'y'} fixed since")
    if not_evaluated:
        entries = "" if stale else f" baseline entr{'ies' if not_evaluated != 1 else 'y'}"
        spare.append(
            f"{not_evaluated}{entries} not evaluated: none of their files was in this run's input"
        )
    return f", {baselined} baselined" + (f" ({'; '.join(spare)})" if spare else "")


def _write(stream: TextIO, first: str, text: str, width: int, rest: str | None = None) -> None:
    """``first`` and ``text`` (escaped already) filled at ``width``, continued under the text
    after ``first`` unless ``rest`` says where."""
    for line in fill(text, width, first, rest):
        stream.write(safe_line(line) + "\n")
