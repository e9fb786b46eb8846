"""Generator inputs that a setup step makes, stood in by empty files so that the rest of the
kustomization is still judged.

A repository often keeps a kustomization whose configMapGenerator or secretGenerator reads
files that a script writes before ``kubectl apply -k`` (a certificate, an ``.env`` from a
configure step) and that git ignores. Kustomize refuses to build it without them, and the
objects of every base it includes would go unjudged. gpulint builds a private copy of exactly
the files the kustomization chain reads, with an empty file in place of each missing
generator input, and says so in a note. The copy is laid out at the files' real paths under a
temporary root, so that kustomize's origin annotations (paths relative to the wrapper
kustomization) read exactly as a build of the real tree writes them.

Only generator inputs are stood in: a missing resource, patch or base still means that no
cluster can get the kustomization (GL704).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile

from gpulint.core.paths import display_path
from gpulint.input.units.filetree import make_directories, remove_tree
from gpulint.input.units.kustomize import Kustomization, Reference
from gpulint.input.units.tracked import Spend, TrackedTree

GENERATORS = ("configMapGenerator", "secretGenerator")
# What a copy may hold: a kustomization chain reads tens of files, not thousands.
MAX_FILES = 2_000
MAX_BYTES = 64 * 1024 * 1024


def is_generator_input(reference: Reference) -> bool:
    return bool(reference.field) and reference.field[0] in GENERATORS


class StandInTree:
    """The private copy; ``stood_in`` lists the missing inputs it holds empty files for."""

    def __init__(self, root: str, stood_in: list[str]) -> None:
        self.root = root
        self.stood_in = stood_in

    @classmethod
    def make(
        cls, chain: list[Kustomization], missing: list[str], tracked: TrackedTree, spend: Spend
    ) -> StandInTree | None:
        """The copy, or None when the chain reads something that cannot be copied safely
        (not a regular file, or more than the bounds allow). Only files git tracks are
        copied (``tracked``): ``missing`` holds the generator inputs that do not exist or
        that git does not track. ``spend`` counts the copy against the run's budget (raises
        BudgetSpent)."""
        files = {os.path.realpath(k.file) for k in chain}
        for kustomization in chain:
            for reference in kustomization.files:
                if reference.resolved and os.path.isfile(reference.resolved):
                    files.add(os.path.realpath(reference.resolved))
        stood = {os.path.realpath(path) for path in missing}
        files = {f for f in files if f not in stood}
        if len(files) + len(missing) > MAX_FILES or not all(tracked.readable(f) for f in files):
            return None
        tree = cls(tempfile.mkdtemp(prefix="gpulint-standins-"), [])
        total = 0
        try:
            for real in sorted(files):
                info = os.stat(real, follow_symlinks=False)
                total += info.st_size
                if not stat.S_ISREG(info.st_mode) or total > MAX_BYTES:
                    tree.remove()
                    return None
                spend(1, info.st_size)
                target = tree.place(real)
                make_directories(os.path.dirname(target))
                shutil.copyfile(real, target, follow_symlinks=False)
            for path in missing:
                spend(1, 0)
                target = tree.place(os.path.realpath(path))
                make_directories(os.path.dirname(target))
                with open(target, "wb"):
                    pass
                tree.stood_in.append(path)
        except OSError:
            tree.remove()
            return None
        except BaseException:
            tree.remove()
            raise
        return tree

    def place(self, real: str) -> str:
        """Where a file or directory at the real absolute path ``real`` is in the copy."""
        return os.path.join(self.root, os.path.realpath(real).lstrip(os.sep))

    def mirror_wrapper(self, wrapper: str) -> str:
        """The wrapper kustomization, copied to its place in the copy; the directory to build."""
        target = self.place(wrapper)
        make_directories(target)
        shutil.copyfile(
            os.path.join(wrapper, "kustomization.yaml"), os.path.join(target, "kustomization.yaml")
        )
        return target

    def unmirrored(self, text: str) -> str:
        """A tool message with the copy's paths written as the real ones."""
        return text.replace(self.root.rstrip(os.sep), "")

    def note(self, unit_name: str) -> str:
        shown = ", ".join(display_path(p) for p in self.stood_in[:5])
        more = len(self.stood_in) - 5
        if more > 0:
            shown += f" and {more} more"
        return (
            f"kustomization {unit_name} was built with empty stand-ins for generator inputs "
            f"that are not in the repository ({shown}); what they would hold was not judged"
        )

    def remove(self) -> None:
        remove_tree(self.root)
