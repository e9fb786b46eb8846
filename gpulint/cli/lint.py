"""``gpulint lint``: lint the input (files or the cluster), fix it on request, report."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, TextIO

from gpulint.cli.adoption import Adoption
from gpulint.cli.exitcodes import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
from gpulint.cli.inputs import assembled, prepared_cluster, read_selection, read_settings
from gpulint.cli.livecheck import LiveCheck, live_check
from gpulint.cli.output import report_format, report_written, wants_color

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from gpulint.adoption.fix import Outcome
    from gpulint.engine.config import Settings
    from gpulint.engine.registry import Selection
    from gpulint.engine.result import Result


def run_lint(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpulint.engine.result import Result
    from gpulint.report.escape import escape_controls

    # Parsed documents form no reference cycles worth collecting during a run.
    gc.disable()
    prepared = _prepared(args, stderr)
    if prepared is None:
        return EXIT_USAGE
    settings, selection, live, adoption = prepared
    fixing = getattr(args, "fix", False) or getattr(args, "diff", False)

    def reported() -> Result | int:
        """One lint, narrowed to what is reported (baseline, changes)."""
        linted = _lint_once(args, settings, selection, live, stderr)
        if isinstance(linted, int):
            return linted
        try:
            adoption.narrow(linted)
        except ValueError as error:
            stderr.write(f"gpulint: error: {escape_controls(str(error))}\n")
            return EXIT_USAGE
        return linted

    result: Result | int = reported()
    if fixing and isinstance(result, Result):
        result = _fixed(args, result, reported, stdout, stderr)
    if isinstance(result, int):
        return result
    if adoption.written and not (args.format or args.output):
        # What was written is the answer; the findings are in the file (and in the report
        # that --format or --output asks for).
        stdout.write(f"gpulint: {escape_controls(adoption.written)}\n")
        return EXIT_OK
    _note_fixable(result, getattr(args, "unsafe_fixes", False), fixing)
    if not _write_report(args, result, stdout, stderr):
        return EXIT_USAGE
    if isinstance(live, LiveCheck) and live.failed_required:
        return EXIT_FINDINGS
    if args.fail_on == "never" or adoption.write_to:
        return EXIT_OK
    return _exit_code(args.fail_on, result)


def _prepared(
    args: argparse.Namespace, stderr: TextIO
) -> tuple[Settings, Selection, list[str] | LiveCheck, Adoption] | None:
    """What a lint run needs before it reads the input: the configuration, the selection, the
    live check and the adoption options; None after a usage error, said on stderr."""
    from gpulint.report.escape import escape_controls

    settings = read_settings(args, stderr)
    if settings is None:
        return None
    selection = read_selection(args, stderr)
    if selection is None:
        return None
    if getattr(args, "fix", False) or getattr(args, "diff", False):
        refused = _refuse_fix(args)
        if refused is not None:
            stderr.write(f"gpulint: error: {refused}\n")
            return None
    live = live_check(args, settings, selection, stderr)
    if live is None:
        return None
    try:
        adoption = Adoption(args)
    except ValueError as error:
        stderr.write(f"gpulint: error: {escape_controls(str(error))}\n")
        return None
    return settings, selection, live, adoption


def _fixed(
    args: argparse.Namespace,
    result: Result,
    reported: Callable[[], Result | int],
    stdout: TextIO,
    stderr: TextIO,
) -> Result | int:
    """``--fix``: the lint after the fixes, with a note of what was fixed; ``--diff``: the exit
    code after the diff is printed."""
    from gpulint.adoption.fix import Writable, fix
    from gpulint.core.paths import display_path
    from gpulint.engine.result import Result
    from gpulint.report.escape import escape_controls

    write = not args.diff
    fixed, outcome = fix(
        result,
        reported,
        Writable(args.paths or ["."]),
        unsafe=args.unsafe_fixes,
        write=write,
    )
    for file in outcome.refused:
        stderr.write(
            f"gpulint: not fixed: {escape_controls(display_path(file))} is outside the input "
            "or not a regular file\n"
        )
    if not write:
        return _print_diff(outcome, args.unsafe_fixes, stdout, stderr)
    if isinstance(fixed, Result) and outcome.fixes:
        files = len(outcome.files)
        names = [display_path(f) for f in outcome.files]
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if files > 10 else "")
        fixed.notes.append(
            f"fixed: {outcome.fixes} {'fix' if outcome.fixes == 1 else 'fixes'} applied to "
            f"{files} {'file' if files == 1 else 'files'} ({shown})"
        )
    if isinstance(fixed, Result) and outcome.deleted:
        gone = ", ".join(display_path(f) for f in outcome.deleted)
        fixed.notes.append(f"fixed: deleted {gone}: a fix removed every document in it")
    return fixed


def _print_diff(outcome: Outcome, unsafe: bool, stdout: TextIO, stderr: TextIO) -> int:
    """``--diff``: the patch on stdout, what it leaves out on stderr; 1 when there is a diff."""
    from gpulint.core.paths import display_path
    from gpulint.report.escape import escape_controls

    stdout.write("".join(outcome.diffs))
    if outcome.base is not None and (outcome.diffs or outcome.withheld):
        import shlex

        base = shlex.quote(escape_controls(display_path(outcome.base)))
        stderr.write(
            f"gpulint: --diff: the files lie outside the working directory, so the patch names "
            f"them from {base}: apply it there (`patch -p1 -d {base}` or `git -C {base} apply`)\n"
        )
    for file, diff in outcome.withheld.items():
        stderr.write(
            f"gpulint: --diff: {escape_controls(display_path(file))}: not in the "
            "patch: its name or a changed line holds control characters, shown "
            f"escaped here (`--fix` applies it)\n{diff}"
        )
    if outcome.waiting:
        stderr.write(
            f"gpulint: {outcome.waiting} more fixes overlap these; `--fix` applies "
            "them in a later round\n"
        )
    if not outcome.diffs and not outcome.withheld and not outcome.waiting:
        # On stderr: stdout stays an empty patch for whatever applies it.
        which = "fix applies" if unsafe else "safe fix applies (--unsafe-fixes adds the others)"
        stderr.write(f"gpulint: --diff: nothing to change: no {which}\n")
    return EXIT_FINDINGS if outcome.diffs or outcome.withheld else EXIT_OK


def _write_report(args: argparse.Namespace, result: Result, stdout: TextIO, stderr: TextIO) -> bool:
    from gpulint.report import render

    def write(out: TextIO) -> None:
        render(result, report_format(args.format, out), out, wants_color(args.color, out))

    return report_written(args.output, stdout, stderr, write)


def _exit_code(fail_on: str, result: Result) -> int:
    from gpulint.core.model import Severity

    threshold = Severity.parse(fail_on)
    return EXIT_FINDINGS if any(f.severity >= threshold for f in result.findings) else EXIT_OK


def _refuse_fix(args: argparse.Namespace) -> str | None:
    """Why ``--fix``/``--diff`` cannot run on this input, or None."""
    option = "--fix" if args.fix else "--diff"
    if args.fix and args.diff:
        return "--fix and --diff exclude each other (--diff writes nothing)"
    if getattr(args, "cluster", False):
        return f"{option} edits files; a live cluster has none (lint its manifests instead)"
    if "-" in (args.paths or []):
        return f"{option} edits files; stdin has none (lint the files it was rendered from)"
    return None


def _note_fixable(result: Result, unsafe: bool, fixing: bool) -> None:
    """Say how many of the findings ``--fix`` (and ``--unsafe-fixes``) would fix."""
    safe, more = result.fixable(unsafe)
    if fixing:
        safe = 0  # what was fixable has been fixed; what is left needs judgment or a round
    unsafe_too = (
        f"{more} more with `--fix --unsafe-fixes` (they change what the cluster does: review them)"
    )
    if safe:
        fixes = f"{safe} {'finding has a fix' if safe == 1 else 'findings have fixes'}"
        applies = f"fixable: {fixes} that `gpulint lint --fix` applies"
        # One note for both: a run says once what --fix does.
        if more:
            result.notes.append(f"{applies}, {unsafe_too}; `--diff` shows them first")
        else:
            result.notes.append(f"{applies} (`--diff` shows them first)")
    elif more:
        result.notes.append(f"fixable: {unsafe_too}")


def _lint_once(
    args: argparse.Namespace,
    settings: Settings,
    selection: Selection,
    live: list[str] | LiveCheck,
    stderr: TextIO,
) -> Result | int:
    """One lint of the input (files and units, or the cluster): the result, or an exit code
    after an error said on stderr."""
    from gpulint.engine.result import Result
    from gpulint.engine.runner import run

    notes: list[str] = list(live) if isinstance(live, list) else []
    prepare = live if isinstance(live, LiveCheck) else None
    if getattr(args, "cluster", False):
        cluster = prepared_cluster(args, settings, selection, prepare, stderr)
        if cluster is None:
            return EXIT_USAGE
        inventory, cluster_notes = cluster
        findings = run(inventory, selection)
        result = Result(findings, 0, len(inventory.manifests), inventory.skipped)
        result.versions = inventory.settings.versions  # with what the cluster said
        notes = cluster_notes + notes
    else:
        assembly = assembled(args, settings, stderr)
        if assembly is None:
            return EXIT_USAGE
        result = assembly.lint(settings, selection, prepare)
    result.config = settings.source
    result.notes.extend(notes)
    if isinstance(live, LiveCheck):
        result.notes.extend(live.notes)
    return result
