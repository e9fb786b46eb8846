"""How gpulint spells the paths it reports.

One rule for every report format: a file inside a git repository is shown relative to the
repository's top level (the directory holding ``.git``); any other file relative to the
working directory. Paths that are not files (``cluster://ns/Kind/name``, ``<stdin>``) are
shown as they are. SARIF gets the same relative paths as URIs under the ``%SRCROOT%`` base
(``sarif_root``).

Inside a run, files keep the spelling they were found under (the path given on the command
line joined with what was walked), so that every part of a run agrees on one name per file.
"""

from __future__ import annotations

import functools
import os

NOT_FILES = ("cluster://", "<")


def is_file_path(path: str) -> bool:
    return not path.startswith(NOT_FILES)


@functools.lru_cache(maxsize=4096)
def git_root(directory: str) -> str | None:
    """The top level of the git work tree holding ``directory`` (absolute), if any."""
    current = directory
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def report_base(path: str) -> str:
    """The directory a file's reported path is relative to."""
    absolute = os.path.abspath(path)
    root = git_root(os.path.dirname(absolute))
    return root if root is not None else os.getcwd()


def display_path(path: str) -> str:
    """A file as every report shows it (see the module docstring)."""
    if not is_file_path(path):
        return path
    return _display(path, os.getcwd())


@functools.lru_cache(maxsize=65536)
def _display(path: str, cwd: str) -> str:
    absolute = os.path.normpath(os.path.join(cwd, path))
    root = git_root(os.path.dirname(absolute))
    relative = os.path.relpath(absolute, root if root is not None else cwd)
    return relative.replace(os.sep, "/")


def sarif_root(paths: list[str]) -> str:
    """The directory SARIF's ``%SRCROOT%`` stands for: the git top level of the files (the
    working directory's when they are in none, or in several)."""
    bases = {report_base(p) for p in paths if is_file_path(p)}
    if len(bases) == 1:
        return bases.pop()
    cwd = os.getcwd()
    return git_root(cwd) or cwd


def normalized(path: str) -> str:
    """``a/b/../c.yaml`` as ``a/c.yaml``, keeping a relative path relative."""
    return os.path.normpath(path) if path not in ("", "-") else path


def within(path: str, tree: str) -> bool:
    """Is ``path`` ``tree`` or below it? Both spelled alike (both absolute, or both real);
    nothing is resolved here."""
    return path == tree or path.startswith(tree.rstrip(os.sep) + os.sep)
