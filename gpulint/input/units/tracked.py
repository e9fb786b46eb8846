"""What a renderer may read: the files git tracks, in a private copy.

Helm loads every file of a chart and a template can print any of them (``{{ fail
(.Files.Get ".git/config" | b64enc) }}``); kustomize reads whatever a kustomization names
below its directory. A CI workspace holds more than the pull request: ``.git/config`` with
the token ``actions/checkout`` persists (``http.<url>.extraheader``), and files other steps
leave there untracked (cloud credentials, ``.env``). So renderers never run on the work
tree. They run on a private copy of the files a unit renders, made of:

* inside a git work tree, the files git tracks (``git ls-files``: the index, checked-out
  submodules included), read from the work tree: never ``.git``, never an untracked file;
* outside one, every file under the directory except ``.git`` (the boundary of the run,
  ``gpulint.input.units.boundary``, still keeps it inside the run's directory).

A link is copied as the file or directory it points to when that is inside the run's
boundaries and may be read itself, and left out otherwise. One copy serves the whole run
(``TrackedTree``): each directory a unit needs is copied when it is first asked for, at its
real path under a temporary root, so that kustomize's origin annotations and the tools'
messages read as they would in the real tree; an overlay's shared bases are copied once.
Every file, directory and byte copied counts against the run's budget
(``gpulint.input.units.tools.RenderBudget.spend``), and every walk is a loop over a stack of
directories, never a recursion.
"""

from __future__ import annotations

import bisect
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator

from gpulint.core.paths import display_path, git_root, within
from gpulint.input.units.boundary import real
from gpulint.input.units.filetree import make_directories, remove_tree
from gpulint.input.units.tools import BudgetSpent

# (entries, bytes) copied: raises gpulint.input.units.tools.BudgetSpent past the bound.
Spend = Callable[[int, int], None]
GIT_TIMEOUT = 30.0  # seconds for `git ls-files` of one repository
GIT_OUTPUT_LIMIT = 256 << 20  # bytes of its output: names of a few million files
# What one directory's copy may hold (a kustomization's, a chart's, a chart home's).
DIRECTORY_ENTRIES = 50_000


class Listing:
    """The files of one git work tree a renderer may read, or why they are not known."""

    def __init__(self, top: str, files: list[str] | None, problem: str | None = None) -> None:
        self.top = top  # the work tree's top level (real path)
        self.files = files  # sorted, relative to ``top``, "/"-separated
        self.known = frozenset(files or ())
        self.problem = problem

    def count(self, directory: str) -> int:
        """How many tracked files are below ``directory``, without listing them."""
        if self.files is None:
            return 0
        relative = os.path.relpath(directory, self.top)
        if relative == ".":
            return len(self.files)
        prefix = relative.replace(os.sep, "/")
        # Every name below it sorts between "<prefix>/" and "<prefix>0" ("0" follows "/").
        return bisect.bisect_left(self.files, prefix + "0") - bisect.bisect_left(
            self.files, prefix + "/"
        )

    def under(self, directory: str) -> Iterator[str]:
        """The tracked files below ``directory`` (a real path inside the work tree), relative
        to it."""
        if self.files is None:
            return
        relative = os.path.relpath(directory, self.top)
        if relative == ".":
            yield from self.files
            return
        prefix = relative.replace(os.sep, "/") + "/"
        start = bisect.bisect_left(self.files, prefix)
        for name in self.files[start:]:
            if not name.startswith(prefix):
                break
            yield name[len(prefix) :]


def git_tracked(top: str) -> Listing:
    """The files git tracks in the work tree ``top``. git runs with no configuration but the
    repository's own, an fsmonitor never started (the repository's configuration could name
    a program), and any owner accepted (CI containers check out as another user)."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": top,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "LANG": "C",
    }
    argv = [
        "git",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "safe.directory=*",
        "-C",
        top,
        "ls-files",
        "-z",
        "--cached",
        "--recurse-submodules",
    ]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=env,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        return Listing(top, None, "git is not installed to list the files it tracks")
    except (OSError, subprocess.SubprocessError) as error:
        return Listing(top, None, f"`git ls-files` failed ({error})")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = said[-1][:200] if said else f"exit code {done.returncode}"
        return Listing(top, None, f"`git ls-files` failed ({reason})")
    if len(done.stdout) > GIT_OUTPUT_LIMIT:
        return Listing(top, None, "git tracks too many files to list")
    names = sorted({os.fsdecode(n) for n in done.stdout.split(b"\0") if n})
    return Listing(top, names)


class TrackedTree:
    """The run's private copy of what its renderers may read (see the module docstring).
    ``boundaries`` is the run's (a live view: units add theirs as they are built). Safe to
    use from the threads that build units side by side; removed with ``remove``."""

    def __init__(self, boundaries: Iterable[str] = ()) -> None:
        self._boundaries = boundaries
        self._root: str | None = None
        self._listings: dict[str, Listing] = {}
        self._copied: set[str] = set()  # real directories copied whole
        self._files: set[str] = set()  # real files copied one by one
        self._lock = threading.RLock()

    # --- what may be read -------------------------------------------------------------------

    def listing(self, directory: str) -> Listing | None:
        """The listing of the work tree holding ``directory`` (real); None outside git."""
        top = git_root(directory)
        if top is None:
            return None
        top = real(top) or top
        with self._lock:
            found = self._listings.get(top)
            if found is None:
                found = self._listings[top] = git_tracked(top)
        return found

    def unreadable(self, path: str) -> str | None:
        """Why a renderer may not read the file ``path`` (links resolved): it does not
        exist, git does not track it, or it is in ``.git``; None when it may."""
        location = real(path)
        if location is None or not os.path.isfile(location):
            return "it does not exist"
        if ".git" in location.split(os.sep):
            return "it is in .git"
        listing = self.listing(os.path.dirname(location))
        if listing is None:
            return None
        if listing.files is None:
            return listing.problem
        relative = os.path.relpath(location, listing.top).replace(os.sep, "/")
        return None if relative in listing.known else "git does not track it"

    def readable(self, path: str) -> bool:
        return self.unreadable(path) is None

    def _inside(self, path: str) -> bool:
        return any(within(path, boundary) for boundary in tuple(self._boundaries))

    # --- the run's copy ---------------------------------------------------------------------

    @property
    def root(self) -> str:
        with self._lock:
            if self._root is None:
                self._root = tempfile.mkdtemp(prefix="gpulint-tracked-")
            return self._root

    def place(self, path: str) -> str:
        """Where the real path ``path`` is in the copy."""
        return os.path.join(self.root, (real(path) or os.path.abspath(path)).lstrip(os.sep))

    def directory(self, path: str, spend: Spend) -> str:
        """The copy of the directory ``path``, made on first use; its place in the copy.
        Raises BudgetSpent (and OSError) when it cannot be made, or when it would hold more
        than ``DIRECTORY_ENTRIES`` (one unit does not spend the whole run's budget)."""
        source = real(path) or os.path.abspath(path)
        with self._lock:
            if not any(within(source, done) for done in self._copied):
                self.copy(source, self.place(source), _bounded(spend, display_path(source)))
                self._copied.add(source)
        return self.place(source)

    def file(self, path: str, spend: Spend) -> None:
        """Copy the file ``path`` to its place in the copy, when a renderer may read it."""
        source = real(path)
        if source is None or not self.readable(source) or not self._inside(source):
            return
        with self._lock:
            if source in self._files or any(within(source, done) for done in self._copied):
                return
            target = self.place(source)
            _make_parents(target, self.root, spend)
            size = os.stat(source).st_size
            spend(1, size)
            shutil.copyfile(source, target)
            self._files.add(source)

    def mirror_wrapper(self, wrapper: str) -> str:
        """The wrapper kustomization, copied to its place in the copy; the directory to build
        (the caller removes it)."""
        target = self.place(wrapper)
        make_directories(target)
        shutil.copyfile(
            os.path.join(wrapper, "kustomization.yaml"), os.path.join(target, "kustomization.yaml")
        )
        return target

    def unmirrored(self, text: str) -> str:
        """A tool's message with paths in the copy written as the real ones."""
        if self._root is None:
            return text
        return text.replace(self._root.rstrip(os.sep), "")

    def remove(self) -> None:
        with self._lock:
            if self._root is not None:
                remove_tree(self._root)
            self._root = None
            self._copied.clear()
            self._files.clear()

    # --- copying ----------------------------------------------------------------------------

    def copy(self, source: str, target: str, spend: Spend) -> None:
        """The files a renderer may read below the directory ``source`` (real), copied to
        ``target``: a link to a file as the file it points to, a link to a directory below
        ``source`` as a link (counted as all it holds: the renderer reads through it), any
        other link left out. Raises BudgetSpent or OSError."""
        for relative in self._entries(source, spend):
            path = os.path.join(source, relative)
            destination = os.path.join(target, relative)
            try:
                info = os.lstat(path)
            except OSError:
                continue  # tracked but deleted in the work tree
            if stat.S_ISLNK(info.st_mode):
                pointed = real(path)
                if pointed is None or not self._inside(pointed):
                    continue
                if os.path.isdir(pointed):
                    # Out of the copy, or a directory holding the link (a loop): left out.
                    if within(pointed, source) and not within(path, pointed):
                        _make_parents(destination, target, spend)
                        spend(1 + self.count(pointed, spend), 0)
                        inside = os.path.join(target, os.path.relpath(pointed, source))
                        os.symlink(
                            os.path.relpath(inside, os.path.dirname(destination)), destination
                        )
                    continue
                if not self.readable(pointed):
                    continue
                path, info = pointed, os.stat(pointed)
            if not stat.S_ISREG(info.st_mode):
                continue  # a FIFO, socket or device is never opened
            _make_parents(destination, target, spend)
            spend(1, info.st_size)
            shutil.copyfile(path, destination)

    def count(self, directory: str, spend: Spend) -> int:
        """How many files and links below ``directory`` (real) a renderer may read: from
        git's listing, or (outside git) a walk of at most ``DIRECTORY_ENTRIES`` entries."""
        listing = self.listing(directory)
        if listing is not None:
            return listing.count(directory)
        found = 0
        for _ in _walk_files(directory, spend):
            found += 1
            if found > DIRECTORY_ENTRIES:
                break
        return found

    def _entries(self, directory: str, spend: Spend) -> Iterator[str]:
        """The files and links below ``directory`` a renderer may read, relative to it."""
        listing = self.listing(directory)
        if listing is not None:
            if listing.files is None:
                raise OSError(0, listing.problem or "the files git tracks cannot be listed")
            yield from (name.replace("/", os.sep) for name in listing.under(directory))
            return
        yield from _walk_files(directory, spend)


def _bounded(spend: Spend, shown: str) -> Spend:
    """``spend``, and BudgetSpent once one directory's copy holds more than
    ``DIRECTORY_ENTRIES`` files, directories and links."""
    count = [0]

    def bounded(entries: int, size: int) -> None:
        count[0] += entries
        if count[0] > DIRECTORY_ENTRIES:
            raise BudgetSpent(
                f"{shown} holds more than {DIRECTORY_ENTRIES:,} files, directories and links "
                "to copy for its renderer"
            )
        spend(entries, size)

    return bounded


def _walk_files(top: str, spend: Spend) -> Iterator[str]:
    """Outside git: every file and link below ``top`` but ``.git``, relative to it; a loop
    over a stack of directories, each counted as it is listed."""
    stack = [""]
    while stack:
        relative = stack.pop()
        spend(1, 0)
        try:
            with os.scandir(os.path.join(top, relative)) as entries:
                listing = sorted(entries, key=lambda e: e.name)
        except OSError:
            continue
        for entry in listing:
            if entry.name == ".git":
                continue
            name = os.path.join(relative, entry.name)
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(name)
                else:
                    yield name
            except OSError:
                continue


def _make_parents(path: str, top: str, spend: Spend) -> None:
    """The directories of ``path`` from ``top`` down that do not exist yet, made and counted
    (those above ``top`` are the way to a real path, made without counting)."""
    missing = []
    parent = os.path.dirname(path)
    while len(parent) >= len(top) and not os.path.isdir(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    if missing:
        spend(len(missing), 0)
        make_directories(missing[0])
    elif not os.path.isdir(os.path.dirname(path)):
        make_directories(os.path.dirname(path))
