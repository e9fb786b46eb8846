"""A migration's changes as ``gpulint lint --diff`` and ``--fix`` make theirs.

Edits of files that exist are ``gpulint.adoption.edits`` operations placed at source
positions; a file every document of which goes is removed (``adoption.fix.removable``). New
files are created, never overwritten. ``--diff`` prints one patch that ``git apply`` applies
(``escape.safe_patch``; a file whose text cannot be printed both exactly and safely is
withheld and said escaped). Nothing is written outside the repository of the paths given, nor
through a symbolic link: an edited file is a regular file under the working directory or a
given path (``adoption.fix.Writable``), and a new file's directory is reached through real
directories only.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from gpulint.adoption.edits import (
    DeleteDocument,
    Edit,
    Op,
    Sources,
    apply,
    diff_names,
    overlapping,
    resolve,
    safe,
    unified_diff,
)
from gpulint.adoption.fix import removable, write_file
from gpulint.core.paths import within
from gpulint.input.units.boundary import boundary_of
from gpulint.migrate.placement import Placed, listed_ops
from gpulint.report.escape import escape_controls, has_controls, safe_lines, safe_patch

__all__ = ["Changes", "changes", "new_file_diff"]


@dataclass
class Changes:
    """What a migration changes: each edited file before and after, the files removed, the
    new files, and the migrations that could not be written with why."""

    before: dict[str, list[str]] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)
    removed: dict[str, None] = field(default_factory=dict)
    new: dict[str, str] = field(default_factory=dict)
    written: list[Placed] = field(default_factory=list)
    refused: list[tuple[Placed, str]] = field(default_factory=list)

    def patch(self) -> tuple[str, dict[str, str]]:
        """``--diff``: the patch, and the files withheld from it (escaped diffs)."""
        files = [*self.after, *self.new]
        names, _ = diff_names(files)
        shown: list[str] = []
        withheld: dict[str, str] = {}
        for file in files:
            name = names[file]
            if file in self.new:
                diff = new_file_diff(self.new[file], name)
            else:
                gone = file in self.removed
                diff = unified_diff(file, self.before[file], self.after[file], name, gone)
            printable = None if has_controls(name) else safe_patch(diff)
            if printable is None:
                withheld[file] = "\n".join(safe_lines(escape_controls(diff)))
            else:
                shown.append(printable)
        return "".join(shown), withheld

    def write(self) -> None:
        """``--write``: new files created (never over one), edited files replaced whole."""
        for file, text in self.new.items():
            _create(file, text)
        for file, text in self.after.items():
            if file in self.removed:
                os.unlink(file)
            else:
                write_file(file, text)


def new_file_diff(text: str, name: str) -> str:
    lines = text.splitlines(keepends=True)
    diff = difflib.unified_diff([], lines, fromfile="/dev/null", tofile=f"b/{name}")
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff
    )


def changes(placements: list[Placed], paths: list[str], writable: Callable[[str], bool]) -> Changes:
    """The edits and new files of every placement that can be written; the others refused
    with why. One placement's edits are all made or none."""
    sources = Sources()
    found = Changes()
    boundaries = {boundary_of("." if p == "-" else p) for p in paths or ["."]}
    accepted: list[Placed] = []
    deleted: set[tuple[str, int]] = set()
    for placed in placements:
        ops = _own_ops(placed, deleted)
        problem = _problem(placed, ops, sources, writable, boundaries, found.new)
        if problem is not None:
            found.refused.append((placed, problem))
            continue
        accepted.append(placed)
        for op in placed.ops:
            if isinstance(op, DeleteDocument):
                deleted.add((op.document.file, op.document.index))
        for new in placed.new_files:
            found.new[new.path] = new.text
    edits = _deletions([op for placed in accepted for op in placed.ops], sources)
    listed = listed_ops([item for placed in accepted for item in placed.listed])
    added = resolve(safe(*listed), sources) if listed else []
    if edits is not None and added is not None:
        edits = None if overlapping([*edits, *added]) else [*edits, *added]
    if edits is None or added is None:
        # Each placement resolved alone: only a clash between them is left (two edits of one
        # span), which gpulint does not order; nothing is written.
        for placed in accepted:
            found.refused.append((placed, "its edits overlap another migration's"))
        found.new.clear()
        return found
    found.written = accepted
    for file in dict.fromkeys(edit.file for edit in edits):
        lines = sources.lines(file)
        if lines is None:
            continue
        found.before[file] = lines
        text = apply(lines, [e for e in edits if e.file == file])
        found.after[file] = text
        if removable(file, text):
            found.removed[file] = None
    return found


def _deletions(ops: list[Op], sources: Sources) -> list[Edit] | None:
    """The documents deleted, each placed alone: the deletions of two documents that follow
    each other in one file share the ``---`` between them, so their spans are joined into one
    deletion (a deletion replaces its span with nothing: two that touch delete their union)."""
    edits: list[Edit] = []
    for op in ops:
        placed = resolve(safe(op), sources)
        if placed is None:
            return None
        edits.extend(placed)
    joined: list[Edit] = []
    for edit in sorted(edits, key=lambda e: (e.file, e.start, e.end)):
        last = joined[-1] if joined else None
        if (
            last is not None
            and last.file == edit.file
            and not last.text
            and not edit.text
            and edit.start <= last.end
        ):
            joined[-1] = last._replace(end=max(last.end, edit.end))
        else:
            joined.append(edit)
    return joined


def _own_ops(placed: Placed, deleted: set[tuple[str, int]]) -> list[Op]:
    """The placement's operations, less a deletion another placement makes already (one HPA
    file read by two units)."""
    ops = [
        op
        for op in placed.ops
        if not (isinstance(op, DeleteDocument) and (op.document.file, op.document.index) in deleted)
    ]
    placed.ops = ops
    return [*ops, *listed_ops(placed.listed)]


def _problem(
    placed: Placed,
    ops: list[Op],
    sources: Sources,
    writable: Callable[[str], bool],
    boundaries: set[str],
    new: dict[str, str],
) -> str | None:
    edits: list[Edit] | None = resolve(safe(*ops), sources) if ops else []
    if edits is None:
        files = ", ".join(sorted({op.document.file for op in ops}))
        return f"gpulint cannot place the change exactly in the text of {files}"
    for edit in edits:
        if not writable(edit.file) or not _inside(edit.file, boundaries):
            return f"{edit.file} may not be written (a link, or outside the repository)"
    for file in placed.new_files:
        if file.path in new or os.path.lexists(file.path):
            return f"{file.path} exists already"
        directory = os.path.dirname(os.path.abspath(file.path))
        if not _real_directory(directory, boundaries) or not writable_directory(
            directory, writable
        ):
            return f"{file.path} may not be written (a link, or outside the repository)"
    return None


def _inside(file: str, boundaries: set[str]) -> bool:
    real = os.path.realpath(file)
    return any(within(real, boundary) for boundary in boundaries)


def _real_directory(directory: str, boundaries: set[str]) -> bool:
    """Is ``directory`` inside a boundary, and is none of the steps to it a symbolic link
    that lies in the repository (a link above it, such as a linked /tmp, is no step of
    the repository's)?"""
    real = os.path.realpath(directory)
    if not any(within(real, boundary) for boundary in boundaries):
        return False
    step = os.path.abspath(directory)
    while True:
        if os.path.islink(step):
            target = os.path.realpath(step)
            if any(within(target, b) for b in boundaries):
                return False
        parent = os.path.dirname(step)
        if parent == step:
            return True
        step = parent


def writable_directory(directory: str, writable: Callable[[str], bool]) -> bool:
    """A directory of a path ``--write`` may write: ``writable``'s roots, asked of a file
    that would be there (``Writable`` asks for a regular file: its roots are read here)."""
    roots = getattr(writable, "roots", None)
    if roots is None:
        return True
    real = os.path.realpath(directory)
    return any(within(real, root) for root in roots)


def _create(file: str, text: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    handle = os.open(file, flags, 0o644)
    with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
        out.write(text)
