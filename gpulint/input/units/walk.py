"""Walking the paths of a run: only regular files, only inside the tree, nothing unbounded.

A repository is written by others (a pull request), so the walk trusts nothing it finds:

* only regular files are read; FIFOs, sockets and devices are never opened (noted as skipped);
* symbolic links are followed only when they stay inside the tree given on the command line
  (a link to ``/etc/shadow`` or ``/dev/zero`` is skipped, not read);
* a file over the size limit (``--max-file-size``, 64 MiB by default) is a GL702 finding,
  not read into memory;
* a file or directory that cannot be read is a finding, not silence.

It also notes the directories that are kustomizations or Helm charts, for the lint units.
"""

from __future__ import annotations

import operator
import os
import stat
from typing import NamedTuple

from gpulint.core.paths import within
from gpulint.input.loader import (
    MAX_FILE_SIZE,
    YAML_SUFFIXES,
    InputError,
    LoadProblem,
    read_problem,
    special_file_kind,
)
from gpulint.input.units import KUSTOMIZATION_NAMES

CONFIG_NAMES = (".gpulint.yaml", ".gpulint.yml")  # gpulint's own configuration, not input

_NAME = operator.attrgetter("name")  # a directory entry's, for sorting a listing
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".tox"}


class Walked(NamedTuple):
    """What the walk found under one path of the command line."""

    files: list[str]  # regular YAML/JSON files, in a stable order
    kustomizations: list[str]  # directories holding a kustomization file
    charts: list[str]  # directories holding Chart.yaml
    problems: list[LoadProblem]  # unreadable, too large
    skipped: list[tuple[str, str]]  # not regular files, links leaving the tree


def walk(path: str, max_file_size: int = MAX_FILE_SIZE, exclude: object = None) -> Walked:
    """Every YAML file under ``path`` (a file or a directory). Raises InputError when
    ``path`` does not exist."""
    found = Walked([], [], [], [], [])
    if not os.path.lexists(path):
        raise InputError(f"no such file or directory: {path}")
    excluded = getattr(exclude, "excluded", None)
    if not os.path.isdir(path):
        _consider_file(path, None, max_file_size, found, explicit=True)
        return found
    tree = os.path.realpath(path)
    seen: set[tuple[int, int]] = set()
    stack = [path]
    while stack:
        directory = stack.pop()
        try:
            info = os.stat(directory)
            identity = (info.st_dev, info.st_ino)
            if identity in seen:
                continue
            seen.add(identity)
            with os.scandir(directory) as entries:
                listing = sorted(entries, key=_NAME)
        except OSError as error:
            found.problems.append(read_problem(directory, error, "directory"))
            continue
        names = {entry.name for entry in listing}
        if any(name in names for name in KUSTOMIZATION_NAMES):
            found.kustomizations.append(directory)
        if "Chart.yaml" in names:
            found.charts.append(directory)
        subdirectories: list[str] = []
        for entry in listing:
            child = os.path.join(directory, entry.name)
            if excluded is not None and excluded(child):
                continue
            _consider_entry(entry, child, tree, max_file_size, found, subdirectories)
        stack.extend(reversed(subdirectories))
    found.files.sort()
    return found


def _consider_entry(
    entry: os.DirEntry[str],
    child: str,
    tree: str,
    max_file_size: int,
    found: Walked,
    subdirectories: list[str],
) -> None:
    """One entry of a directory: a subdirectory to walk, a YAML file, a link out of the tree
    (skipped), or a problem."""
    try:
        is_link = entry.is_symlink()
        if is_link and not _inside(child, tree):
            if entry.name.endswith(YAML_SUFFIXES) or os.path.isdir(child):
                found.skipped.append((child, "a symbolic link out of the linted tree"))
            return
        if entry.is_dir():
            if entry.name not in SKIP_DIRS:
                subdirectories.append(child)
            return
    except OSError as error:
        found.problems.append(read_problem(child, error, "path"))
        return
    if entry.name.endswith(YAML_SUFFIXES) and entry.name not in CONFIG_NAMES:
        try:
            regular = not is_link and entry.is_file(follow_symlinks=False)
        except OSError:
            regular = False
        if regular:
            # The directory entry says it is a regular file; its size and access are
            # checked when it is opened (loader.read_bounded), one system call less.
            found.files.append(child)
        else:
            _consider_file(child, tree, max_file_size, found, explicit=False)


def _inside(path: str, tree: str) -> bool:
    return within(os.path.realpath(path), tree)


def _consider_file(
    path: str, tree: str | None, max_file_size: int, found: Walked, explicit: bool
) -> None:
    try:
        info = os.stat(path)
    except OSError as error:
        found.problems.append(read_problem(path, error))
        return
    if not stat.S_ISREG(info.st_mode):
        kind = special_file_kind(info.st_mode)
        found.skipped.append((path, f"not a regular file ({kind}); never opened"))
        return
    if info.st_size > max_file_size:
        found.problems.append(
            LoadProblem(
                path,
                1,
                1,
                f"file too large: {info.st_size:,} bytes, over the limit of {max_file_size:,} "
                "(--max-file-size)",
                "too-large",
            )
        )
        return
    if not os.access(path, os.R_OK):
        found.problems.append(
            LoadProblem(path, 1, 1, "cannot read file: Permission denied", "unreadable")
        )
        return
    found.files.append(path)


# The most entries a walk of one chart or search for kustomizations looks at (the walk of
# the command line's paths above has its own bounds: every file it finds is read).
TREE_LIMIT = 20_000


def tree_files(
    top: str, max_depth: int | None = None, limit: int = TREE_LIMIT
) -> list[tuple[str, list[str]]]:
    """(directory, its file names) for ``top`` and every directory below it, as ``os.walk``
    gives them top-down with names sorted, but from a loop over a stack (``os.walk``
    recurses, and a tree 1,000 directories deep ends in RecursionError), without hidden
    directories or ``SKIP_DIRS``, without following links to directories, ``max_depth``
    levels at most and ``limit`` entries in all (what is past them is left out)."""
    found: list[tuple[str, list[str]]] = []
    seen = 0
    stack = [(top, 0)]
    while stack:
        directory, depth = stack.pop()
        try:
            with os.scandir(directory) as entries:
                listing = sorted(entries, key=_NAME)
        except OSError:
            continue
        files: list[str] = []
        subdirectories: list[str] = []
        for entry in listing:
            seen += 1
            if seen > limit:
                found.append((directory, files))
                return found
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not entry.name.startswith(".") and entry.name not in SKIP_DIRS:
                        subdirectories.append(entry.path)
                elif not entry.is_symlink() or not os.path.isdir(entry.path):
                    files.append(entry.name)
            except OSError:
                continue
        found.append((directory, files))
        if max_depth is None or depth < max_depth:
            stack.extend((d, depth + 1) for d in reversed(subdirectories))
    return found
