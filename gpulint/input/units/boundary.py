"""The repository a run may read: nothing a kustomization, chart or ``# Source:`` names
outside it is ever opened.

A pull request controls every path its files spell (``resources: [/etc/passwd]``,
``../../../../home/runner/.ssh``, ``files: [/proc/self/environ]``, a template's
``# Source: c/../../x.yaml``). gpulint reads a path only when its real location (links
resolved) is inside a boundary of the run:

* the top level of the git work tree that holds a path given on the command line (where a
  kustomize overlay's ``../../base`` lives);
* outside git: the working directory when the path is below it (and the working directory is
  not ``/``), else the path itself.

A repository nested in another is its own boundary: a ``.git`` that a pull request adds can
only narrow what is read, never widen it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from gpulint.core.paths import git_root, within


def real(path: str) -> str | None:
    """The real, absolute location of ``path``; None for a path no system call accepts
    (a NUL byte, a loop of links)."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return None


def boundary_of(path: str) -> str:
    """The directory a run given ``path`` may read (see the module docstring)."""
    resolved = real(path) or os.path.abspath(path)
    tree = resolved if os.path.isdir(resolved) else os.path.dirname(resolved)
    root = git_root(tree)
    if root is not None:
        return real(root) or root
    cwd = real(os.getcwd()) or os.getcwd()
    return cwd if cwd != os.sep and within(tree, cwd) else tree


def boundaries_of(paths: Iterable[str]) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for path in paths:
        found[boundary_of("." if path == "-" else path)] = None
    return tuple(found)


def inside(path: str, boundaries: Iterable[str]) -> bool:
    """Is ``path`` (links resolved) inside one of ``boundaries`` (real paths)?"""
    location = real(path)
    return location is not None and any(within(location, b) for b in boundaries)


# A chart or chart home with more entries than this is not scanned (nor rendered): real
# charts hold hundreds of files.
SCAN_LIMIT = 20_000


def tree_problem(tree: str, limit: int = SCAN_LIMIT) -> str | None:
    """Why a tool may not read ``tree`` (a Helm chart, or a chart home: Helm loads every file
    in it, following links): a link whose target is outside the tree, a file that is not a
    regular file or directory (a FIFO blocks Helm forever), or too many entries to check.
    None when the tree is safe to hand to Helm."""
    root = real(tree)
    if root is None:
        return "its path cannot be resolved"
    if not os.path.isdir(root):
        return None
    seen = 0
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                listing = list(entries)
        except OSError as error:
            return f"{os.path.relpath(directory, root)} cannot be read ({error.strerror})"
        for entry in listing:
            seen += 1
            if seen > limit:
                return f"it holds more than {limit:,} files and directories"
            shown = os.path.relpath(entry.path, root)
            try:
                if entry.is_symlink():
                    target = real(entry.path)
                    if target is None or not within(target, root):
                        return f"{shown} is a link out of it"
                    continue  # inside the tree: its target is scanned where it lives
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif not entry.is_file(follow_symlinks=False):
                    return f"{shown} is not a regular file"
            except OSError as error:
                return f"{shown} cannot be read ({error.strerror})"
    return None
