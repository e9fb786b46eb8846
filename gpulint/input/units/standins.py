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

An overlay often copies a value out of such a generated ConfigMap or Secret into its objects
with ``replacements`` (``source: {kind: ConfigMap, name: vllm, fieldPath:
data.CONTAINER_IMAGE_URL}``) or the legacy ``vars`` (``objref``/``fieldref``). Kustomize
refuses to build when the key is not in the generated object ("fieldPath ... is missing for
replacement source", api/filters/replacement/replacement.go; "field specified in var ... not
found", api/resmap/reswrangler.go), so the stand-in of the generator's first missing input
holds each key they read that no present input of the generator holds, set to a placeholder
the rules read as unknown (``${gpulint-stand-in:...}``, as chart stand-ins are), and the note
names the keys. Generator entries are matched by name through the chain's ``namePrefix`` and
``nameSuffix``, and every entry of that name (a base's and an overlay's ``behavior: merge``)
gets the key.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from typing import Any

from gpulint.core.paths import display_path
from gpulint.input.document import as_dict, as_list
from gpulint.input.loader import load_file, read_bounded
from gpulint.input.units.charts import STAND_IN
from gpulint.input.units.filetree import make_directories, remove_tree
from gpulint.input.units.kustomize import Kustomization, Reference
from gpulint.input.units.tracked import Spend, TrackedTree

GENERATORS = ("configMapGenerator", "secretGenerator")
_GENERATED_KIND = {"configMapGenerator": "ConfigMap", "secretGenerator": "Secret"}
_INPUT_LIMIT = 1 << 20  # an .env or a replacements file is a few lines
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
        self.keys: list[str] = []  # generated keys stood in for replacements and vars

    @classmethod
    def make(
        cls,
        chain: list[Kustomization],
        missing: list[str],
        tracked: TrackedTree,
        spend: Spend,
        keys: StoodInKeys | None = None,
    ) -> StandInTree | None:
        """The copy, or None when the chain reads something that cannot be copied safely
        (not a regular file, or more than the bounds allow). Only files git tracks are
        copied (``tracked``): ``missing`` holds the generator inputs that do not exist or
        that git does not track, stood in by empty files or by what ``keys`` writes in them.
        ``spend`` counts the copy against the run's budget (raises BudgetSpent)."""
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
        contents = keys.contents if keys is not None else {}
        tree.keys = keys.shown if keys is not None else []
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
                content = contents.get(os.path.realpath(path), b"")
                spend(1, len(content))
                target = tree.place(os.path.realpath(path))
                make_directories(os.path.dirname(target))
                with open(target, "wb") as handle:
                    handle.write(content)
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
        if not self.keys:
            return (
                f"kustomization {unit_name} was built with empty stand-ins for generator "
                f"inputs that are not in the repository ({shown}); what they would hold was "
                "not judged"
            )
        keys = ", ".join(self.keys[:8])
        if len(self.keys) > 8:
            keys += f" and {len(self.keys) - 8} more"
        return (
            f"kustomization {unit_name} was built with stand-ins for generator inputs that "
            f"are not in the repository ({shown}), holding placeholders for the keys its "
            f"replacements and vars read ({keys}); what they would hold was not judged"
        )

    def remove(self) -> None:
        remove_tree(self.root)


class StoodInKeys:
    """What the stand-ins of a chain's generator inputs hold: ``contents`` (real path ->
    bytes) and ``shown``, the keys as the note names them (``ConfigMap vllm
    CONTAINER_IMAGE_URL``)."""

    def __init__(self) -> None:
        self.contents: dict[str, bytes] = {}
        self.shown: list[str] = []

    @classmethod
    def read(
        cls, chain: list[Kustomization], stood_in: list[Reference], tracked: TrackedTree
    ) -> StoodInKeys:
        keys = cls()
        wanted = read_keys(chain, tracked)
        if not wanted:
            return keys
        entries = _generator_entries(chain)
        affixes = _affixes(chain)
        stood = {os.path.realpath(r.resolved): r for r in stood_in}
        lines: dict[str, list[str]] = {}
        for kind, name, key in wanted:
            matching = [
                e
                for e in entries
                if e.kind == kind and e.name and name in {f"{p}{e.name}{s}" for p, s in affixes}
            ]
            if not matching or any(e.holds(key, stood, tracked) for e in matching):
                continue
            placeholder = STAND_IN % f"{kind}/{name}/{key}"
            placed = False
            for entry in matching:
                target = entry.stand_in_for(key, stood)
                if target is None:
                    continue
                path, whole = target
                if whole:
                    keys.contents[path] = placeholder.encode()
                else:
                    lines.setdefault(path, []).append(f"{key}={placeholder}")
                placed = True
            if placed:
                keys.shown.append(f"{kind} {name} {key}")
        for path, written in lines.items():
            keys.contents[path] = ("\n".join(written) + "\n").encode()
        return keys


def read_keys(chain: list[Kustomization], tracked: TrackedTree) -> list[tuple[str, str, str]]:
    """(kind, name, key) of each generated ConfigMap or Secret key the chain's
    ``replacements`` (inline or in a file) and ``vars`` read, in order, each once."""
    found: dict[tuple[str, str, str], None] = {}
    for kustomization in chain:
        for item in as_list(kustomization.data.get("replacements")):
            item = as_dict(item)
            if "source" in item:
                sources: list[Any] = [item.get("source")]
            else:
                sources = [
                    as_dict(r).get("source")
                    for r in _replacements_file(item, kustomization, tracked)
                ]
            for written in sources:
                source = as_dict(written)
                read = _data_key(source.get("kind"), source.get("name"), source.get("fieldPath"))
                if read is not None:
                    found[read] = None
        for item in as_list(kustomization.data.get("vars")):
            item = as_dict(item)
            objref = as_dict(item.get("objref"))
            fieldpath = as_dict(item.get("fieldref")).get("fieldpath")
            read = _data_key(objref.get("kind"), objref.get("name"), fieldpath)
            if read is not None:
                found[read] = None
    return list(found)


def _replacements_file(
    item: dict[str, Any], kustomization: Kustomization, tracked: TrackedTree
) -> list[Any]:
    """The replacements of a ``replacements: [{path: r.yaml}]`` file (a list of them, or
    one), read only when a renderer may read it."""
    path = item.get("path")
    reference = next(
        (r for r in kustomization.files if r.field[:1] == ("replacements",) and r.path == path),
        None,
    )
    if reference is None or not tracked.readable(reference.resolved):
        return []
    try:
        text = read_bounded(reference.resolved, _INPUT_LIMIT)
    except OSError:
        return []  # kustomize reports what is wrong with it
    found: list[Any] = []
    for document in load_file(reference.resolved, text).documents:
        data = document.data
        found.extend(data if isinstance(data, list) else [data])
    return found


def _data_key(kind: Any, name: Any, field_path: Any) -> tuple[str, str, str] | None:
    """(kind, name, key) when a replacement source or var reads ``data.KEY`` of a ConfigMap
    or Secret (kustomize's default fieldPath is metadata.name, which a generator always
    writes)."""
    if kind not in ("ConfigMap", "Secret") or not isinstance(name, str) or not name:
        return None
    if not isinstance(field_path, str) or not field_path.startswith("data."):
        return None
    key = field_path[len("data.") :]
    if key.startswith("[") and key.endswith("]"):
        key = key[1:-1]
    if not key or "." in key or "=" in key or any(c.isspace() for c in key):
        return None
    return str(kind), name, key


def _affixes(chain: list[Kustomization]) -> list[tuple[str, str]]:
    """The ``namePrefix``/``nameSuffix`` pairs a generated object may be selected by
    besides its own name (replacements match any of an object's names,
    api/resource/resource.go ``GetMatchingResourcesByAnyId``)."""
    prefixes = {""} | {
        k.data["namePrefix"] for k in chain if isinstance(k.data.get("namePrefix"), str)
    }
    suffixes = {""} | {
        k.data["nameSuffix"] for k in chain if isinstance(k.data.get("nameSuffix"), str)
    }
    return [(p, s) for p in sorted(prefixes) for s in sorted(suffixes)]


class _GeneratorEntry:
    """One configMapGenerator or secretGenerator entry of a kustomization."""

    def __init__(self, owner: Kustomization, field: str, index: int, data: dict[str, Any]) -> None:
        self.owner = owner
        self.kind = _GENERATED_KIND[field]
        self.field = (field, index)
        name = data.get("name")
        self.name = name if isinstance(name, str) else ""
        self.literals = [v for v in as_list(data.get("literals")) if isinstance(v, str)]
        self.files_written = as_list(data.get("files"))

    def inputs(self) -> list[Reference]:
        return [r for r in self.owner.files if tuple(r.field[:2]) == self.field]

    def holds(self, key: str, stood: dict[str, Reference], tracked: TrackedTree) -> bool:
        """Does an input that is present (a literal, or a file a renderer may read) hold
        ``key``?"""
        if any(literal.partition("=")[0].strip() == key for literal in self.literals):
            return True
        for reference in self.inputs():
            if os.path.realpath(reference.resolved) in stood:
                continue
            if reference.field[2] == "files":
                if self.file_key(reference) == key:
                    return True
            elif tracked.readable(reference.resolved) and key in _env_keys(reference.resolved):
                return True
        return False

    def stand_in_for(self, key: str, stood: dict[str, Reference]) -> tuple[str, bool] | None:
        """Where the key is written: (the stand-in's real path, True when the file is the
        value) for a ``files:`` input named ``key``, else the first stood-in env file."""
        inputs = [r for r in self.inputs() if os.path.realpath(r.resolved) in stood]
        for reference in inputs:
            if reference.field[2] == "files" and self.file_key(reference) == key:
                return os.path.realpath(reference.resolved), True
        for reference in inputs:
            if reference.field[2] in ("envs", "env"):
                return os.path.realpath(reference.resolved), False
        return None

    def file_key(self, reference: Reference) -> str:
        """The key a ``files:`` input makes: ``key=path``'s key, else the file's name."""
        index = reference.field[3] if len(reference.field) > 3 else None
        written = self.files_written[index] if isinstance(index, int) else reference.path
        key, separator, _ = str(written).partition("=")
        return key if separator else os.path.basename(reference.path)


def _generator_entries(chain: list[Kustomization]) -> list[_GeneratorEntry]:
    return [
        _GeneratorEntry(kustomization, field, index, as_dict(item))
        for kustomization in chain
        for field in GENERATORS
        for index, item in enumerate(as_list(kustomization.data.get(field)))
    ]


def _env_keys(path: str) -> set[str]:
    """The keys of an env file as kustomize reads them (``KEY=value`` lines, ``#``
    comments)."""
    try:
        text = read_bounded(path, _INPUT_LIMIT).decode("utf-8", "replace")
    except OSError:
        return set()
    keys = set()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keys.add(line.partition("=")[0].strip())
    return keys
