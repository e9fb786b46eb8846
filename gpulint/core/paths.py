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


# directory -> its git top level (or None), for every directory asked about and every one
# walked through on the way up: the files of a repository live in many directories with the
# same few ancestors, so each new directory costs one look for ``.git``, not one per level.
_roots: dict[str, str | None] = {}
_MAX_ROOTS = 65536  # a long-running process (the webhook) starts over rather than grow


def git_root(directory: str) -> str | None:
    """The top level of the git work tree holding ``directory`` (absolute), if any."""
    walked = []
    current = directory
    while True:
        if current in _roots:
            root = _roots[current]
            break
        walked.append(current)
        if os.path.exists(os.path.join(current, ".git")):
            root = current
            break
        parent = os.path.dirname(current)
        if parent == current:
            root = None
            break
        current = parent
    if len(_roots) + len(walked) > _MAX_ROOTS:
        _roots.clear()
    for seen in walked:
        _roots[seen] = root
    return root


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
