"""``--new-since REF``: the findings the input already had at a git revision, which a change
did not bring and so does not answer for.

The admission webhook refuses an UPDATE only for findings the object did not have before
it (``webhook.evaluator``): a problem already in the cluster does not block an image bump.
The changed-only pre-commit hooks ask the same of a commit, with ``HEAD`` as the revision:
the files the run lints are linted again as they were at REF, and their findings there are
a baseline for this run's (``gpulint.adoption.baseline``: matched by rule, object and node,
not by line, so an edit above a finding keeps it old).

The revision's files come from ``git archive`` into a private directory, and gpulint lints
them there in a process of its own, from that directory's top (so its baseline spells files
and units from the repository's top level, as this run's does), with this run's
configuration, selection and renderers. A path that did not exist at REF had no findings
there; a repository with no commit yet (the first commit) had none at all.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence

from gpulint.adoption.baseline import Baseline, BaselineError, load_baseline
from gpulint.core.paths import within

# A revision's tree is read whole into memory before it is unpacked; a repository larger
# than this is refused rather than exhausting the machine.
MAX_ARCHIVE_BYTES = 512 * 1024 * 1024
# How long linting the revision may take, rendering included.
TIMEOUT_S = 600.0


class SinceError(ValueError):
    """A revision that cannot be read or linted (exit code 2)."""


def findings_at(
    ref: str, paths: Sequence[str], options: Sequence[str], config: str | None
) -> tuple[Baseline, str]:
    """The findings ``gpulint lint`` reports for ``paths`` as they were at ``ref``, with
    ``options`` (selection and renderers, as given to this run) and the configuration file
    ``config`` (None: none); and how to name the revision (``HEAD (1a2b3c4d5e6f)``).
    Raises SinceError."""
    top, commit = revision(ref, paths)
    if commit is None:
        return Baseline(), f"{ref} (no commit yet)"
    named = f"{ref} ({commit[:12]})"
    inside = [os.path.relpath(os.path.abspath(p), top) for p in paths if p != "-"]
    existing = _existing(top, commit, inside)
    if not existing:
        return Baseline(), named
    workspace = tempfile.mkdtemp(prefix="gpulint-since-")
    try:
        tree = os.path.join(workspace, "tree")
        os.mkdir(tree)
        _unpack(_archive(top, commit), tree)
        written = os.path.join(workspace, "findings.json")
        argv = [sys.executable, "-m", "gpulint", "lint", "--fail-on", "never"]
        argv += ["--config", config] if config else ["--no-config"]
        argv += [*options, "--write-baseline", written, "--", *existing]
        try:
            done = subprocess.run(
                argv, cwd=tree, capture_output=True, timeout=TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise SinceError(
                f"--new-since {ref}: linting the files as they were took over {TIMEOUT_S:g} s"
            ) from None
        if done.returncode != 0 or not os.path.isfile(written):
            said = os.fsdecode(done.stderr).strip().splitlines()
            why = said[-1] if said else f"exit code {done.returncode}"
            raise SinceError(f"--new-since {ref}: linting the files as they were failed: {why}")
        try:
            return load_baseline(written), named
        except BaselineError as error:
            raise SinceError(f"--new-since {ref}: {error}") from None
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def revision(ref: str, paths: Sequence[str]) -> tuple[str, str | None]:
    """The top level of the git repository holding ``paths``, and the commit ``ref`` names
    there (None for HEAD before the first commit). Raises SinceError: asked before the lint,
    so that a misspelt revision is an error whatever the lint finds."""
    directories = {
        (p if os.path.isdir(p) else os.path.dirname(p)) or "." for p in paths if p != "-"
    }
    tops = {_top_level(ref, d) for d in directories or {"."}}
    if len(tops) != 1:
        raise SinceError(f"--new-since {ref}: the paths are in {len(tops)} git repositories")
    top = tops.pop()
    return top, _commit(top, ref)


def _git(top: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-c", "core.quotePath=false", *args],
            cwd=top,
            capture_output=True,
            check=False,
        )
    except OSError as error:
        raise SinceError(f"--new-since needs git: {error.strerror}") from None


def _top_level(ref: str, directory: str) -> str:
    done = _git(directory, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise SinceError(f"--new-since {ref}: {directory} is not in a git repository")
    return os.fsdecode(done.stdout.removesuffix(b"\n"))


def _commit(top: str, ref: str) -> str | None:
    """The commit ``ref`` names; None for HEAD in a repository with no commit yet. Raises
    SinceError for any other name git does not know."""
    done = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if done.returncode == 0:
        return os.fsdecode(done.stdout).strip()
    if ref == "HEAD" and _git(top, "rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
        return None  # an unborn branch: the repository's first commit is being made
    raise SinceError(f"--new-since {ref}: no commit {ref!r}")


def _existing(top: str, commit: str, paths: list[str]) -> list[str]:
    """Those of ``paths`` (relative to the top) that were in the tree at ``commit``."""
    done = _git(top, "ls-tree", "-z", "--name-only", "--full-tree", commit, "--", *paths)
    if done.returncode != 0:
        raise SinceError(f"git ls-tree {commit[:12]}: {os.fsdecode(done.stderr).strip()}")
    listed = {os.fsdecode(name) for name in done.stdout.split(b"\0") if name}
    found = []
    for path in paths:
        clean = os.path.normpath(path)
        if clean == "." or clean in listed or any(n.startswith(clean + "/") for n in listed):
            found.append(clean)
    return found


def _archive(top: str, commit: str) -> bytes:
    try:
        process = subprocess.Popen(
            ["git", "archive", "--format=tar", commit],
            cwd=top,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError as error:
        raise SinceError(f"--new-since needs git: {error.strerror}") from None
    assert process.stdout is not None
    data = process.stdout.read(MAX_ARCHIVE_BYTES + 1)
    if len(data) > MAX_ARCHIVE_BYTES:
        process.kill()
        process.wait()
        raise SinceError(
            f"--new-since: the repository at {commit[:12]} is over "
            f"{MAX_ARCHIVE_BYTES // 1024 // 1024} MiB"
        )
    if process.wait() != 0:
        raise SinceError(f"git archive {commit[:12]} failed")
    return data


def _unpack(data: bytes, tree: str) -> None:
    """The archive's files, directories and symbolic links under ``tree``; a member whose
    name, or a link whose target, would leave ``tree`` is left out, as the lint of the
    working tree leaves out links that leave it (git writes no devices or hard links)."""
    root = os.path.realpath(tree)
    # Members are checked here; Python >= 3.12 asks that no filter of its own be added.
    trusted: dict[str, str] = {"filter": "fully_trusted"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive.getmembers():
            if not (member.isfile() or member.isdir() or member.issym()):
                continue
            target = os.path.realpath(os.path.join(root, member.name))
            if not within(target, root):
                continue
            if member.issym():
                pointed = os.path.realpath(os.path.join(os.path.dirname(target), member.linkname))
                if os.path.isabs(member.linkname) or not within(pointed, root):
                    continue
            archive.extract(member, root, set_attrs=False, **trusted)  # type: ignore[arg-type]
