"""How gpulint spells the paths it reports.

One rule for every format and message (text, json, github, markdown, the ``--diff`` headers,
the ``--fix`` notes, trace): a file is shown relative to the working directory, as ruff and
eslint show it, so that every path printed opens from where gpulint was run (``../x.yaml``
for a file above it). Paths that are not files (``cluster://ns/Kind/name``, ``<stdin>``) are
shown as they are.

Two spellings do not depend on the working directory, because what reads them does not run
there:

* SARIF: URIs relative to the repository's top level (the directory holding ``.git``) under
  the ``%SRCROOT%`` base (``sarif_root``), because GitHub code scanning matches a result to a
  file of the repository by its path from the repository root;
* baselines: ``repository_path``, so that a baseline written from the top level matches a
  run from a subdirectory (``stable_words`` re-spells the paths inside a message).

Inside a run, files keep the spelling they were found under (the path given on the command
line joined with what was walked), so that every part of a run agrees on one name per file.
"""

from __future__ import annotations

import functools
import os
import re

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
    """The directory a file's SARIF URI is relative to: its git top level, or the working
    directory outside any."""
    absolute = os.path.abspath(path)
    root = git_root(os.path.dirname(absolute))
    return root if root is not None else os.getcwd()


def display_path(path: str) -> str:
    """A file as every report and message shows it: relative to the working directory."""
    if not is_file_path(path):
        return path
    return _display(path, os.getcwd())


@functools.lru_cache(maxsize=65536)
def _display(path: str, cwd: str) -> str:
    absolute = os.path.normpath(os.path.join(cwd, path))
    return os.path.relpath(absolute, cwd).replace(os.sep, "/")


def repository_path(path: str) -> str:
    """A file as baselines key it, whatever the working directory: relative to the top level
    of its git repository, or to the working directory outside any."""
    if not is_file_path(path):
        return path
    return _repository(path, os.getcwd())


@functools.lru_cache(maxsize=65536)
def _repository(path: str, cwd: str) -> str:
    absolute = os.path.normpath(os.path.join(cwd, path))
    # A directory (a lint unit) belongs to the repository it is in, its top level included.
    root = git_root(absolute if os.path.isdir(absolute) else os.path.dirname(absolute))
    relative = os.path.relpath(absolute, root if root is not None else cwd)
    return relative.replace(os.sep, "/")


# A word of a message that may be a path: letters, digits and ``._-/``, with at least one
# ``/`` or a YAML suffix (``overlays/prod``, ``../base/hpa.yaml``, ``hpa.yaml``).
_PATH_WORD = re.compile(r"(?<![\w./-])(?:[\w.-]*/[\w./-]*[\w]|[\w.-]+\.ya?ml)(?![\w/-])")


def stable_words(text: str) -> str:
    """``text`` with each word that names an existing file or directory, spelled relative to
    the working directory (``display_path``), re-spelled as ``repository_path`` does: a
    message gpulint wrote with a path in it then reads the same from any directory."""

    def respell(match: re.Match[str]) -> str:
        word = match.group(0)
        return repository_path(word) if os.path.exists(word) else word

    return _PATH_WORD.sub(respell, text)


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
