"""Report only what a change touched, while judging it with the whole repository.

Cross-object rules need every object (an HPA in one file, the Deployment it scales in
another), so the whole input is always linted; what is narrowed is the report. Two ways to
say what changed:

* ``--changed-since REF``: the lines that differ between the working tree and
  ``git merge-base REF HEAD`` (what a pull request from HEAD into REF would change, edits not
  yet committed included), with git's rename detection, plus untracked files (not ignored);
* ``--report-only``: the files given on the command line, whole (what pre-commit passes).

A finding counts as changed when a changed line falls in the YAML document (``---`` to
``---``) that holds the finding, or one that holds an object it names (the Deployment of an
HPA finding), or when the file is new. A finding about a rendered object (a kustomize overlay,
a Helm chart) also counts when a source file that produced that object or an object it names
changed, in any unit it was found in (``Finding.made_from``): the document of a base that
holds it, a patch that targets it (its document), a kustomization of the chain that built it,
a generator's input; the chart template's document that wrote it, the chart's helpers,
values files and Chart.yaml. A file that produced nothing for those objects (a patch of
another object, a template of another) does not count. A file moved without edits changes
no line, so its findings are not reported.

File names are read from git's NUL-separated output (``-z``) as bytes, never from a quoted
diff header: a pull request cannot hide a file's findings behind a name with a tab, a
newline, a quote, a character beyond ASCII or a leading dash, nor under any locale.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from gpulint.core.model import Finding, Location, SourceFile
from gpulint.core.paths import display_path, is_file_path

_HUNK = re.compile(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@")
_DOCUMENT_START = re.compile(r"^---(?:\s|$)")


class ChangedError(ValueError):
    """Changes that cannot be found: not a git repository, an unknown REF (exit code 2)."""


class Changes:
    """Changed lines per file (absolute paths); None for a file that is new as a whole."""

    def __init__(self, lines: dict[str, set[int] | None], description: str) -> None:
        self.lines = lines
        self.description = description  # "since origin/main (merge base 1a2b3c4)"
        self._spans: dict[str, list[tuple[int, int]]] = {}
        self._changed_dirs: set[str] = set()
        for path in lines:
            directory = os.path.dirname(path)
            while directory not in self._changed_dirs:
                self._changed_dirs.add(directory)
                parent = os.path.dirname(directory)
                if parent == directory:
                    break
                directory = parent

    def touches(self, finding: Finding) -> bool:
        locations = [finding.location, *(r.location for r in finding.related if r.location)]
        if any(self._in_changed_document(location) for location in locations):
            return True
        if finding.made_from:
            return any(self._in_changed_source(source) for source in finding.made_from)
        # A rendered finding whose sources are not known (piped output gpulint could not map
        # back): any change under its chart or kustomization counts.
        return any(self._in_changed_render(location) for location in locations)

    def narrow(self, findings: Iterable[Finding]) -> tuple[list[Finding], int]:
        """The findings the changes touch, and how many others were left out."""
        kept, outside = [], 0
        for finding in findings:
            if self.touches(finding):
                kept.append(finding)
            else:
                outside += 1
        return kept, outside

    def _in_changed_document(self, location: Location) -> bool:
        return self._changed(location.file, location.line)

    def _in_changed_source(self, source: SourceFile) -> bool:
        return self._changed(source.file, source.line)

    def _changed(self, file: str, line: int) -> bool:
        """Did a line of ``file`` change in the document holding ``line`` (0: anywhere)?"""
        if not is_file_path(file):
            return False
        path = _absolute(file)
        if path not in self.lines:
            return False
        changed = self.lines[path]
        if changed is None or (line == 0 and changed):
            return True
        start, end = self._document_span(path, line)
        return any(start <= number <= end for number in changed)

    def _in_changed_render(self, location: Location) -> bool:
        if not location.rendered_from or not is_file_path(location.file):
            return False
        root = _render_root(location)
        return root is not None and root in self._changed_dirs

    def _document_span(self, path: str, line: int) -> tuple[int, int]:
        spans = self._spans.get(path)
        if spans is None:
            spans = self._spans[path] = document_spans(path)
        index = bisect.bisect_right(spans, (line, float("inf"))) - 1
        return spans[index] if index >= 0 else (line, line)


def document_spans(path: str) -> list[tuple[int, int]]:
    """The (first, last) lines of each YAML document of a file, by its ``---`` markers (a
    template of a chart too, which is not YAML before rendering)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return [(1, 1 << 30)]
    starts = [1] + [n for n, text in enumerate(lines, 1) if n > 1 and _DOCUMENT_START.match(text)]
    ends = [s - 1 for s in starts[1:]] + [max(len(lines), 1)]
    return list(zip(starts, ends, strict=True))


def _absolute(path: str) -> str:
    return os.path.realpath(path)


def _render_root(location: Location) -> str | None:
    """The directory whose files render the object: the chart directory (``Chart.yaml``)
    above a template, else the kustomization the finding names as what rendered it."""
    directory = os.path.dirname(_absolute(location.file))
    while True:
        if os.path.isfile(os.path.join(directory, "Chart.yaml")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    # A unit is named as reports name files: relative to the working directory.
    rendered = location.rendered_from or ""
    return _absolute(rendered) if os.path.isdir(rendered) else None


def whole_files(paths: Iterable[str]) -> Changes:
    """``--report-only``: every line of these files counts as changed."""
    files = [p for p in paths if os.path.isfile(p)]
    return Changes(dict.fromkeys((_absolute(p) for p in files), None), "in the files given")


# Options of every ``git diff`` here: the output gpulint parses, whatever the user's git
# configuration says (diff.external, color.diff, diff.relative, diff.noprefix or
# diff.mnemonicPrefix, diff.interHunkContext, textconv drivers; a YAML file git takes for
# binary still has its lines counted).
_DIFF = (
    "diff",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
    "--text",
    "--find-renames",
)
_HUNKS = ("--unified=0", "--inter-hunk-context=0", "--src-prefix=a/", "--dst-prefix=b/")


class _Git(NamedTuple):
    root: str

    def run(self, *args: str) -> bytes:
        try:
            done = subprocess.run(
                # Names are read from ``-z`` output; quotePath=false lets a diff header show
                # a name beyond ASCII as it is, so such a file needs no diff of its own.
                ["git", "-c", "core.quotePath=false", *args],
                cwd=self.root,
                capture_output=True,
                check=False,
            )
        except OSError as error:
            raise ChangedError(f"--changed-since needs git: {error.strerror}") from None
        if done.returncode != 0:
            message = os.fsdecode(done.stderr).strip().splitlines()
            raise ChangedError(f"git {args[0]}: {message[-1] if message else 'failed'}")
        return done.stdout

    def text(self, *args: str) -> str:
        return os.fsdecode(self.run(*args)).strip()


class _Entry(NamedTuple):
    """One file of ``git diff -z --name-status``: its status letter, and its name before
    and after (the same but for a rename or copy)."""

    status: str
    old: str
    new: str


def changes_since(ref: str, paths: Iterable[str] = (".",)) -> Changes:
    """``--changed-since REF`` over the git repository that holds ``paths`` (see the module
    docstring); the working directory's when no path is a file or directory (stdin). Raises
    ChangedError."""
    directories = dict.fromkeys(
        (p if os.path.isdir(p) else os.path.dirname(p)) or "."
        for p in paths
        if p != "-" and os.path.exists(p)
    )
    roots = dict.fromkeys(_top_level(ref, d) for d in directories or ["."])
    if len(roots) > 1:
        raise ChangedError(
            f"--changed-since {ref}: the paths are in {len(roots)} git repositories "
            f"({', '.join(roots)}); lint each one on its own"
        )
    git = _Git(next(iter(roots)))
    for name in (ref, "HEAD"):
        try:
            git.run("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
        except ChangedError:
            hint = " (in CI, fetch it: actions/checkout with fetch-depth: 0)" if name == ref else ""
            raise ChangedError(f"--changed-since {ref}: no commit {name!r}{hint}") from None
    try:
        base = git.text("merge-base", ref, "HEAD")
    except ChangedError:
        raise ChangedError(f"--changed-since {ref}: {ref} and HEAD share no history") from None
    lines = _changed_tracked(git, base)
    untracked = git.run("ls-files", "-z", "--others", "--exclude-standard", "--full-name")
    for raw in untracked.split(b"\0"):
        if raw:
            lines[_absolute(os.path.join(git.root, os.fsdecode(raw)))] = None
    return Changes(lines, f"since {ref} (merge base {base[:12]})")


def _top_level(ref: str, directory: str) -> str:
    """The top level of the git work tree holding ``directory``. Raises ChangedError."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=directory,
            capture_output=True,
            check=False,
        )
    except OSError as error:
        raise ChangedError(f"--changed-since needs git: {error.strerror}") from None
    if done.returncode != 0:
        where = display_path(directory)
        where = f"the working directory ({os.getcwd()})" if where == "." else where
        raise ChangedError(f"--changed-since {ref}: {where} is not in a git repository")
    # One line, ended by one newline; a directory name may end in a space.
    return os.fsdecode(done.stdout.removesuffix(b"\n"))


def _changed_tracked(git: _Git, base: str) -> dict[str, set[int] | None]:
    """The changed lines of the tracked files that differ from ``base``.

    Which files changed, and their names, come from ``git diff -z --name-status``, never from
    a diff header: git C-quotes a header name holding a tab, a newline, a quote or a
    backslash, and ends one holding a space with a tab. The lines come from one
    ``git diff --unified=0`` of the whole tree, for the files whose header names them exactly
    as the ``-z`` list does; any other changed file (a name git quotes, or ends with a tab)
    gets a diff of its own, asked for by literal path, whose hunks are its own whatever its
    header says. A file changed with no hunk to read (a mode change) counts
    as changed whole: a change is never left out for want of reading it."""
    found: dict[str, set[int] | None] = {}
    wanted: dict[str, _Entry] = {}
    for entry in _name_status(git.run(*_DIFF, "-z", "--name-status", base, "--")):
        path = _absolute(os.path.join(git.root, entry.new))
        if entry.status == "D" or entry.status == "R100" or entry.status == "C100":
            continue  # gone, or moved (copied) without an edit: no line of it changed
        if entry.status[0] in "MRC" and not os.path.islink(os.path.join(git.root, entry.new)):
            wanted[path] = entry
        else:  # A(dded), T(ype changed), U(nmerged), a symbolic link retargeted
            found[path] = None
    if not wanted:
        return found
    whole_tree = changed_lines(os.fsdecode(git.run(*_DIFF, *_HUNKS, base, "--")), git.root)
    for path, entry in wanted.items():
        changed = whole_tree.get(path)
        if changed is None:
            paths = dict.fromkeys((entry.old, entry.new))
            own = git.run("--literal-pathspecs", *_DIFF, *_HUNKS, base, "--", *paths)
            changed = set()
            for header, hunks in _sections(os.fsdecode(own)):
                if "+++ /dev/null" not in header:  # not the old side of an undetected rename
                    changed.update(_hunk_lines(hunks))
        found[path] = changed or None
    return found


def _name_status(output: bytes) -> list[_Entry]:
    """``git diff -z --name-status``: ``STATUS NUL NAME NUL``, and two names (from, to) for
    a rename or a copy (``R090``, ``C100``)."""
    fields = [os.fsdecode(field) for field in output.split(b"\0")]
    entries: list[_Entry] = []
    position = 0
    while position < len(fields) and fields[position]:
        status = fields[position]
        if status[0] in "RC":
            old, new = fields[position + 1], fields[position + 2]
            position += 3
        else:
            old = new = fields[position + 1]
            position += 2
        entries.append(_Entry(status, old, new))
    return entries


def changed_lines(diff: str, root: str) -> dict[str, set[int]]:
    """The new-side lines each file's hunks touch, from ``git diff --unified=0``, for the
    files whose ``+++ b/`` header names them plainly: a header git quoted, or one holding a
    tab or a control character (git ends a name with a space with a tab), names no file
    here; ``changes_since`` asks git about those files by name."""
    found: dict[str, set[int]] = {}
    for header, hunks in _sections(diff):
        name = next((t[6:] for t in header if t.startswith("+++ b/")), None)
        if name is None or any(c in name for c in '"\\') or _CONTROL.search(name):
            continue
        found.setdefault(_absolute(os.path.join(root, name)), set()).update(_hunk_lines(hunks))
    return found


def _sections(diff: str) -> Iterator[tuple[list[str], list[str]]]:
    """Each file of a diff: its header lines (``diff --git`` to the first ``@@``) and its
    hunk lines. A line of content starts with ``+``, ``-``, a space or a backslash, so a
    line starting ``diff --git `` or ``@@`` is git's own."""
    for part in ("\n" + diff).split("\ndiff --git ")[1:]:
        lines = part.split("\n")
        first = next((n for n, text in enumerate(lines) if text.startswith("@@")), len(lines))
        yield lines[:first], lines[first:]


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _hunk_lines(lines: Iterable[str]) -> set[int]:
    """The new-side lines the ``@@`` hunk headers among ``lines`` touch. A deletion touches
    the lines on either side of where it was."""
    changed: set[int] = set()
    for text in lines:
        match = _HUNK.match(text) if text.startswith("@@") else None
        if match is None:
            continue
        start, count = int(match.group(1)), int(match.group(2) or "1")
        if count:
            changed.update(range(start, start + count))
        else:
            changed.update((max(start, 1), start + 1))
    return changed
