"""``gpulint lint --fix`` and ``--diff``: fixes applied as edits, round after round.

Each round takes the edits of every fixable finding that do not overlap an edit already
taken (``edits.plan_edits``), writes them (``--fix``) or shows them (``--diff``), and lints
again: a fix that had to wait for an overlapping one, or a problem a fix reveals, is handled
in the next round. Rounds stop when nothing is left to fix, when a round would write what a
file already holds, or after ``MAX_ROUNDS``.

``--diff`` prints a patch that ``git apply`` applies (``escape.safe_patch``): a line of
context that a CI runner would run as a workflow command is shown removed and added again,
which applies to the same result. A file whose name or changed text holds a control character
(an escape sequence, a bidirectional override) cannot be shown both exactly and safely: its
diff is kept out of the patch and shown escaped on stderr instead, and ``--fix`` applies it.

A file whose every document a fix deletes (GL103 merging two HPAs, each in its own file) is
removed, not left empty (``--diff`` shows it as deleted), unless a kustomization beside it
lists it.

Only files of the input are written: a regular file (not a symbolic link) under the working
directory or under one of the paths given. An edit placed anywhere else (say, a source map
of rendered output naming a file outside the repository) leaves its finding unfixed.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gpulint.adoption.edits import diff_names, plan_edits, unified_diff
from gpulint.core.paths import within
from gpulint.engine.result import Result
from gpulint.report.escape import escape_controls, has_controls, safe_lines, safe_patch

MAX_ROUNDS = 8


@dataclass
class Outcome:
    """What fixing did (``--fix``) or would do (``--diff``)."""

    fixes: int = 0  # fixes applied (one per plan; a group's shared plan counts once)
    files: dict[str, None] = field(default_factory=dict)  # files changed, in order
    diffs: list[str] = field(default_factory=list)  # ``--diff``: one unified diff per file
    # ``--diff``: files whose diff cannot be printed as a patch safely, with the diff escaped
    withheld: dict[str, str] = field(default_factory=dict)
    waiting: int = 0  # ``--diff``: fixes that overlap a shown one (applied by a later round)
    refused: dict[str, None] = field(default_factory=dict)  # files gpulint may not write
    # files whose every document a fix deleted: removed (``--fix``) rather than left empty
    deleted: dict[str, None] = field(default_factory=dict)
    # ``--diff``: the directory the patch names files from, when not the working directory
    base: str | None = None


class Writable:
    """Which files ``--fix`` may write: regular files under the working directory or a
    given path."""

    def __init__(self, paths: Iterable[str]) -> None:
        roots = [os.getcwd()]
        for path in paths:
            if path == "-":
                continue
            absolute = os.path.abspath(path)
            roots.append(absolute if os.path.isdir(absolute) else os.path.dirname(absolute))
        self.roots = [os.path.realpath(root) for root in roots]

    def __call__(self, file: str) -> bool:
        try:
            info = os.lstat(file)
        except OSError:
            return False
        if not stat.S_ISREG(info.st_mode):
            return False
        real = os.path.realpath(file)
        return any(within(real, root) for root in self.roots)


def fix(
    result: Result,
    relint: Callable[[], Result | int],
    writable: Callable[[str], bool],
    unsafe: bool = False,
    write: bool = True,
) -> tuple[Result | int, Outcome]:
    """Fix ``result``'s findings (``write``: in place, re-linting after each round; else only
    the first round's diff). Returns the last lint (or its exit code) and what was done."""
    outcome = Outcome()
    current: Result | int = result
    for _ in range(MAX_ROUNDS):
        if isinstance(current, int):
            break
        applied = plan_edits(current.findings, current.sources, unsafe, writable)
        outcome.refused.update(dict.fromkeys(applied.refused))
        changed = [f for f, text in applied.after.items() if text != "".join(applied.before[f])]
        if not changed:
            break
        if not write:
            outcome.fixes = applied.plans
            outcome.waiting = applied.waiting
            outcome.files.update(dict.fromkeys(changed))
            names, outcome.base = diff_names(changed)
            for file in changed:
                before, after = applied.before[file], applied.after[file]
                name = names[file]
                gone = removable(file, after)
                if gone:
                    outcome.deleted[file] = None
                shown = (
                    None
                    if has_controls(name)
                    else safe_patch(unified_diff(file, before, after, name, gone))
                )
                if shown is None:
                    escaped = unified_diff(file, before, after, escape_controls(name), gone)
                    outcome.withheld[file] = "\n".join(safe_lines(escaped))
                else:
                    outcome.diffs.append(shown)
            break
        for file in changed:
            if removable(file, applied.after[file]):
                os.unlink(file)
                outcome.deleted[file] = None
            else:
                write_file(file, applied.after[file])
        outcome.fixes += applied.plans
        outcome.files.update(dict.fromkeys(changed))
        current = relint()
    return current, outcome


def removable(file: str, after: str) -> bool:
    """Whether fixing leaves ``file`` with nothing in it (every document deleted, no comment
    left), so that it is removed rather than left as an empty file; kept (empty) when a
    kustomization beside it lists it, which would then fail to build."""
    if after.strip():
        return False
    directory = os.path.dirname(os.path.abspath(file))
    name = os.path.basename(file)
    for kustomization in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        path = os.path.join(directory, kustomization)
        with (
            contextlib.suppress(OSError, UnicodeDecodeError),
            open(path, encoding="utf-8") as handle,
        ):
            if name in handle.read():
                return False
    return True


def write_file(file: str, text: str) -> None:
    """Replace ``file``'s text, keeping its mode; written beside it and renamed, so an
    interrupted run leaves the old file or the new one, never half of one."""
    directory = os.path.dirname(os.path.abspath(file))
    mode = stat.S_IMODE(os.stat(file).st_mode)
    handle, partial = tempfile.mkstemp(prefix=".gpulint-fix-", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.chmod(partial, mode)
        os.replace(partial, file)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
