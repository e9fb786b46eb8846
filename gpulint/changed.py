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
a Helm chart) also counts when any file under the overlay or chart directory changed: a patch,
``values.yaml`` or a helper template changes what every object of it renders to. A file
moved without edits changes no line, so its findings are not reported.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
from collections.abc import Iterable
from typing import NamedTuple

from gpulint.model import Finding, Location
from gpulint.paths import git_root, is_file_path

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
        if not is_file_path(location.file):
            return False
        path = _absolute(location.file)
        if path not in self.lines:
            return False
        changed = self.lines[path]
        if changed is None:
            return True
        start, end = self._document_span(path, location.line)
        return any(start <= line <= end for line in changed)

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
    rendered = location.rendered_from or ""
    for base in (os.getcwd(), git_root(os.getcwd())):
        if base is not None and os.path.isdir(os.path.join(base, rendered)):
            return _absolute(os.path.join(base, rendered))
    return None


def whole_files(paths: Iterable[str]) -> Changes:
    """``--report-only``: every line of these files counts as changed."""
    files = [p for p in paths if os.path.isfile(p)]
    return Changes(dict.fromkeys((_absolute(p) for p in files), None), "in the files given")


class _Git(NamedTuple):
    root: str

    def run(self, *args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-c", "core.quotePath=false", *args],
                cwd=self.root,
                capture_output=True,
                text=True,
                errors="surrogateescape",
                check=False,
            )
        except OSError as error:
            raise ChangedError(f"--changed-since needs git: {error.strerror}") from None
        if done.returncode != 0:
            message = done.stderr.strip().splitlines()
            raise ChangedError(f"git {args[0]}: {message[-1] if message else 'failed'}")
        return done.stdout


def changes_since(ref: str, directory: str = ".") -> Changes:
    """``--changed-since REF`` (see the module docstring). Raises ChangedError."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=directory,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as error:
        raise ChangedError(f"--changed-since needs git: {error.strerror}") from None
    if done.returncode != 0:
        raise ChangedError(
            f"--changed-since {ref}: {os.path.abspath(directory)} is not in a git repository"
        )
    git = _Git(done.stdout.strip())
    for name in (ref, "HEAD"):
        try:
            git.run("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
        except ChangedError:
            hint = " (in CI, fetch it: actions/checkout with fetch-depth: 0)" if name == ref else ""
            raise ChangedError(f"--changed-since {ref}: no commit {name!r}{hint}") from None
    try:
        base = git.run("merge-base", ref, "HEAD").strip()
    except ChangedError:
        raise ChangedError(f"--changed-since {ref}: {ref} and HEAD share no history") from None
    diff = git.run(
        "diff",
        "--unified=0",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--find-renames",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        base,
        "--",
    )
    lines = changed_lines(diff, git.root)
    untracked = git.run("ls-files", "--others", "--exclude-standard", "-z")
    for name in untracked.split("\0"):
        if name:
            lines[_absolute(os.path.join(git.root, name))] = None
    return Changes(lines, f"since {ref} (merge base {base[:12]})")


def changed_lines(diff: str, root: str) -> dict[str, set[int] | None]:
    """The new-side lines each file's hunks touch, from ``git diff --unified=0``. A deletion
    touches the lines on either side of where it was."""
    found: dict[str, set[int] | None] = {}
    current: set[int] | None = None
    for text in diff.splitlines():
        if text.startswith("diff --git "):
            current = None
        elif text.startswith("+++ "):
            name = _unquote(text[4:])
            if name.startswith("b/"):
                current = set()
                found[_absolute(os.path.join(root, name[2:]))] = current
        elif current is not None and text.startswith("@@"):
            match = _HUNK.match(text)
            if match is None:
                continue
            start, count = int(match.group(1)), int(match.group(2) or "1")
            if count:
                current.update(range(start, start + count))
            else:
                current.update((max(start, 1), start + 1))
    return found


def _unquote(name: str) -> str:
    """A path as git writes it in a diff header: C-quoted when it has unusual characters."""
    if not (name.startswith('"') and name.endswith('"')):
        return name
    raw = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1").decode("utf-8", "surrogateescape")
