"""From the paths of a run to the units it lints (see ``gpulint.input.units``)."""

from __future__ import annotations

import fnmatch
import os
import re
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from gpulint.core.paths import display_path, normalized, within
from gpulint.engine.config import Settings, unit_pattern_problem
from gpulint.input.loader import (
    MAX_FILE_SIZE,
    InputError,
    LoadedFile,
    LoadProblem,
    load_file,
    read_bounded,
    read_problem,
)
from gpulint.input.units import FILES, HELM, KUSTOMIZATION_NAMES, KUSTOMIZE, STDIN
from gpulint.input.units.boundary import boundaries_of
from gpulint.input.units.chartvalues import ChartValues, chosen_values, unit_name
from gpulint.input.units.clusters import PathScan, declaration
from gpulint.input.units.parallel import load_all
from gpulint.input.units.roots import DirectoryTree, application_roots
from gpulint.input.units.scope import OWN_FILE, not_input, not_input_by_name
from gpulint.input.units.walk import walk

if TYPE_CHECKING:
    from gpulint.input.units.kustomize import Kustomization


class UnitPlan:
    """A unit before it is built: what to render and which files to read."""

    __slots__ = (
        "boundaries",
        "chart_values",
        "charts",
        "declared",
        "kind",
        "kustomizations",
        "loaded",
        "name",
        "origin",
        "problems",
        "root",
        "skipped",
    )

    def __init__(self, name: str, kind: str, root: str) -> None:
        self.name = name
        self.kind = kind
        self.root = root
        self.kustomizations: list[Kustomization] = []  # gpulint.input.units.kustomize
        self.charts: list[str] = []
        # The values files a chart is rendered with besides values.yaml, when its authors'
        # tests or the configuration name them (gpulint.input.units.chartvalues).
        self.chart_values: dict[str, ChartValues] = {}
        self.loaded: list[LoadedFile] = []  # plain files, already read
        self.problems: list[LoadProblem] = []
        self.skipped: list[tuple[str, str]] = []
        # The directories the unit's rendering may read (``gpulint.input.units.boundary``).
        self.boundaries: tuple[str, ...] = ()
        self.declared = False  # a ``units:`` entry of the configuration
        self.origin = ""  # the path of the command line it was found under

    def __repr__(self) -> str:
        return f"UnitPlan({self.name!r}, {self.kind})"


class Input:
    """Everything the walk of a run's paths found, before it is cut into units."""

    def __init__(self) -> None:
        self.files: dict[str, None] = {}
        self.kustomizations: dict[str, None] = {}
        self.charts: dict[str, None] = {}
        self.problems: list[LoadProblem] = []
        self.skipped: list[tuple[str, str]] = []
        self.stdin = False


def gather(paths: Iterable[str], settings: Settings, max_file_size: int = MAX_FILE_SIZE) -> Input:
    """Walk the paths (``-`` is stdin). Raises InputError for a path that does not exist.
    A file reached by two paths (``adapter.yaml .``, ``apps/ apps/llm``) is read once, as
    the first spelled it."""
    found = Input()
    seen: set[str] = set()
    paths_given = list(paths)
    for raw in paths_given:
        if raw == "-":
            found.stdin = True
            continue
        path = normalized(raw)
        if os.path.basename(path) in KUSTOMIZATION_NAMES and os.path.isfile(path):
            found.kustomizations[os.path.dirname(path) or "."] = None
            continue
        if os.path.basename(path) == "Chart.yaml" and os.path.isfile(path):
            found.charts[os.path.dirname(path) or "."] = None
            continue
        walked = walk(path, max_file_size, settings)
        for file in walked.files:
            if settings.excluded(file):
                continue
            if len(paths_given) < 2 or _first(file, seen):
                found.files[file] = None
        for directory in walked.kustomizations:
            if len(paths_given) < 2 or _first(directory, seen):
                found.kustomizations[directory] = None
        for directory in walked.charts:
            if len(paths_given) < 2 or _first(directory, seen):
                found.charts[directory] = None
        found.problems.extend(walked.problems)
        found.skipped.extend(walked.skipped)
    return found


def _first(path: str, seen: set[str]) -> bool:
    """Is this the first spelling of ``path`` the run meets?"""
    key = os.path.abspath(path)
    if key in seen:
        return False
    seen.add(key)
    return True


def plan(
    paths: Iterable[str], settings: Settings, max_file_size: int = MAX_FILE_SIZE
) -> list[UnitPlan]:
    """The units of a run, in a stable order."""
    paths = list(paths)
    found = gather(paths, settings, max_file_size)
    boundaries = boundaries_of(paths)
    charts = _top_charts(list(found.charts))
    chart_dirs = _Directories(charts)
    if found.kustomizations:
        from gpulint.input.units.kustomize import Kustomization
    kustomizations = {
        directory: Kustomization(directory, boundaries)
        for directory in found.kustomizations
        if chart_dirs.holding(directory) is None
    }
    referenced, owned = _referenced_and_owned(kustomizations)
    given = {normalized(p) for p in paths}
    loose = _input_by_name(_loose_files(found.files, owned, chart_dirs), found, given)
    roots = [
        k for d, k in kustomizations.items() if _key(d) not in referenced and not k.is_component
    ]
    plans: list[UnitPlan] = []
    declared = _DeclaredUnits(settings)
    declared_plan = declared.plan_for
    for kustomization in roots:
        target = declared_plan(kustomization.directory)
        if target is None:
            target = UnitPlan(
                display_path(kustomization.directory), KUSTOMIZE, kustomization.directory
            )
            plans.append(target)
        target.kustomizations.append(kustomization)
    plans.extend(_unused_components(kustomizations, referenced))
    base = os.path.dirname(os.path.abspath(settings.source)) if settings.source else os.getcwd()
    for chart in charts:
        chosen = chosen_values(chart, settings.chart_values, base)
        target = declared_plan(chart)
        if target is not None:
            # One unit of the repository: rendered with the configuration's values, never
            # split per test case.
            target.charts.append(chart)
            if chosen and chosen[0].found_in == "config":
                target.chart_values[chart] = chosen[0]
            continue
        if not chosen:
            target = UnitPlan(display_path(chart), HELM, chart)
            target.charts.append(chart)
            plans.append(target)
        for values in chosen:
            target = UnitPlan(unit_name(chart, values), HELM, chart)
            target.charts.append(chart)
            target.chart_values[chart] = values
            plans.append(target)
    remaining: list[LoadedFile] = []
    for loaded in load_all(loose, lambda file: _load(file, max_file_size)):
        file = loaded.path
        reason = not_input(loaded)
        if reason is not None:
            # Before units are cut: a file nothing judges neither joins nor splits one.
            if reason != OWN_FILE or file in given:
                found.skipped.append((file, reason))
            continue
        target = declared_plan(file)
        if target is not None:
            target.loaded.append(loaded)
        else:
            remaining.append(loaded)
    plans.extend(declared.plans())
    scan = PathScan()
    plans.extend(_split(remaining, scan))
    if scan.spent is not None:
        found.skipped.append((scan.spent_by or ".", scan.spent))
    if found.stdin:
        plans.append(UnitPlan("<stdin>", STDIN, "-"))
    _place_problems(plans, found)
    for unit_plan in plans:
        unit_plan.boundaries = boundaries
        unit_plan.origin = _origin(unit_plan.root, paths)
    return plans


def _origin(root: str, paths: list[str]) -> str:
    """The path of the command line a unit's root is under (the deepest, when they nest)."""
    if root == "-":
        return "-"
    holding = [p for p in paths if p != "-" and (_under(root, p) or _under(p, root))]
    return max(holding, key=lambda p: len(_key(p)), default="")


def _input_by_name(files: list[str], found: Input, given: set[str]) -> list[str]:
    """The loose files whose name does not say another tool reads them (``scope``); the
    others skipped unread, and listed but for gpulint's own files in a directory walked (one
    named on the command line is listed: pre-commit passes every staged file)."""
    kept = []
    for file in files:
        reason = not_input_by_name(file)
        if reason is None:
            kept.append(file)
        elif reason != OWN_FILE or file in given:
            found.skipped.append((file, reason))
    return kept


def _loose_files(files: Iterable[str], owned: set[str], chart_dirs: _Directories) -> list[str]:
    """The files no kustomization owns and no chart holds: linted as plain files."""
    return [
        f
        for f in files
        if (not owned or _key(f) not in owned) and (not chart_dirs or chart_dirs.holding(f) is None)
    ]


def _referenced_and_owned(kustomizations: dict[str, Kustomization]) -> tuple[set[str], set[str]]:
    """The directories the kustomizations include (bases, components) and the files they
    own, as keys."""
    referenced: set[str] = set()
    for kustomization in kustomizations.values():
        for reference in kustomization.directories:
            referenced.add(_key(reference.resolved))
    owned: set[str] = set()
    for kustomization in kustomizations.values():
        owned.update(_key(f) for f in kustomization.owned_files())
    return referenced, owned


def _unused_components(
    kustomizations: dict[str, Kustomization], referenced: set[str]
) -> list[UnitPlan]:
    """Components built only inside the kustomizations that use them, when none of those is
    in the input: skipped, with the reason."""
    unused_plans = []
    for directory, kustomization in kustomizations.items():
        if kustomization.is_component and _key(directory) not in referenced:
            unused = UnitPlan(display_path(directory), KUSTOMIZE, directory)
            unused.skipped.append(
                (
                    kustomization.file,
                    "a kustomize Component no kustomization of the input uses: it is judged "
                    "through the kustomizations that include it",
                )
            )
            unused_plans.append(unused)
    return unused_plans


def _place_problems(plans: list[UnitPlan], found: Input) -> None:
    """Each problem and skipped file of the input in the unit whose root holds it (else the
    first unit, or a unit of its own when there is none)."""
    homes = {_key(p.root): p for p in plans if p.kind != STDIN}
    home_dirs = _Directories([p.root for p in plans if p.kind != STDIN])
    fallback = plans[0] if plans else None
    for path, item in [(p.file, p) for p in found.problems] + [(s[0], s) for s in found.skipped]:
        root = home_dirs.holding(path)
        target = homes[_key(root)] if root is not None else fallback
        if target is None:
            target = UnitPlan(display_path(path), FILES, path)
            plans.append(target)
            fallback = target
        if isinstance(item, LoadProblem):
            target.problems.append(item)
        else:
            target.skipped.append(item)


class _DeclaredUnits:
    """The units the configuration declares (a directory linted as one unit of files)."""

    def __init__(self, settings: Settings) -> None:
        self.declared = _Directories(_declared_roots(settings))
        self.by_root: dict[str, UnitPlan] = {}

    def plan_for(self, path: str) -> UnitPlan | None:
        """The declared unit that holds ``path``, made on first use; None outside them."""
        root = self.declared.holding(path) if self.declared else None
        if root is None:
            return None
        if root not in self.by_root:
            self.by_root[root] = UnitPlan(display_path(root), FILES, root)
            self.by_root[root].declared = True
        return self.by_root[root]

    def plans(self) -> list[UnitPlan]:
        return [self.by_root[root] for root in sorted(self.by_root)]


class _Directories:
    """Some directories; for any path, the deepest of them that holds it, in O(depth)."""

    def __init__(self, directories: Iterable[str]) -> None:
        self.by_key = {_key(d): d for d in directories}

    def __bool__(self) -> bool:
        return bool(self.by_key)

    def holding(self, path: str, strict: bool = False) -> str | None:
        current = _key(path)
        if strict:
            current = os.path.dirname(current)
        while True:
            found = self.by_key.get(current)
            if found is not None:
                return found
            parent = os.path.dirname(current)
            if parent == current:
                return None
            current = parent


def _load(file: str, max_file_size: int) -> LoadedFile:
    try:
        data = read_bounded(file, max_file_size)
    except OSError as error:
        loaded = LoadedFile(file)
        loaded.problems.append(read_problem(file, error))
        return loaded
    return load_file(file, data)


def _key(path: str) -> str:
    # Paths of one run are spelled from the same arguments: the absolute path compares them
    # (resolving every link would cost a system call per path component and file).
    return os.path.abspath(path)


def _under(path: str, root: str) -> bool:
    return within(_key(path), _key(root))


def _top_charts(charts: list[str]) -> list[str]:
    """Chart directories that are not subcharts of another (``charts/`` of a chart)."""
    every = _Directories(charts)
    return sorted(chart for chart in charts if every.holding(chart, strict=True) is None)


# ``units:`` globs are matched by a bounded walk: at most this many directory entries looked
# at and this many seconds, for every pattern of the configuration together.
UNIT_SCAN_LIMIT = 200_000
UNIT_SCAN_SECONDS = 5.0
UNIT_MATCH_LIMIT = 10_000
_MAGIC = re.compile(r"[*?[]")


def _declared_roots(settings: Settings) -> list[str]:
    """The directories ``units:`` globs of the configuration match."""
    return declared_directories(settings, settings.units, "units")


def declared_directories(settings: Settings, patterns: Iterable[str], key: str) -> list[str]:
    """The directories globs of the configuration (``units:``, a cluster's ``applications:``
    or ``platform:``, named by ``key`` in errors) match: inside the configuration's directory
    (links out of it are not followed), found by a walk bounded in entries, time and matches.
    Raises InputError for a pattern that is refused, matches too much or matches nothing."""
    patterns = list(patterns)
    if not patterns:
        return []
    base = os.path.dirname(os.path.abspath(settings.source)) if settings.source else os.getcwd()
    tree = os.path.realpath(base)
    shown_config = display_path(settings.source) if settings.source else ".gpulint.yaml"
    scan = _Scan(shown_config)
    roots: dict[str, None] = {}
    for pattern in patterns:
        problem = unit_pattern_problem(pattern)
        if problem is not None:
            raise InputError(f"{shown_config}: {key}: {problem}")
        parts = [p for p in re.split(r"[/\\]", pattern) if p not in ("", ".")]
        matches = _matching_directories(base, tree, parts, pattern, scan)
        if not matches:
            raise InputError(
                f"{shown_config}: {key}: {pattern!r} matches no directory under "
                f"{display_path(base)}; correct it or remove it"
            )
        for match in matches:
            relative = os.path.relpath(match)
            roots[relative if not relative.startswith("..") else match] = None
    return sorted(roots)


class _Scan:
    """What the matching of ``units:`` globs has spent."""

    def __init__(self, config: str) -> None:
        self.config = config
        self.entries = 0
        self.deadline = time.monotonic() + UNIT_SCAN_SECONDS

    def spend(self, pattern: str) -> None:
        self.entries += 1
        if self.entries > UNIT_SCAN_LIMIT:
            spent = f"looked at more than {UNIT_SCAN_LIMIT:,} directory entries"
        elif self.entries % 1024 == 0 and time.monotonic() > self.deadline:
            spent = f"took more than {UNIT_SCAN_SECONDS:g} s"
        else:
            return
        raise InputError(
            f"{self.config}: units: matching {pattern!r} {spent}; name the unit directories "
            "more narrowly (for example clusters/*)"
        )


def _matching_directories(
    base: str, tree: str, parts: list[str], pattern: str, scan: _Scan
) -> list[str]:
    current = [base]
    for part in parts:
        following: list[str] = []
        for directory in current:
            if not _MAGIC.search(part):
                scan.spend(pattern)
                candidate = os.path.join(directory, part)
                if os.path.isdir(candidate) and within(os.path.realpath(candidate), tree):
                    following.append(candidate)
                continue
            try:
                with os.scandir(directory) as entries:
                    listing = sorted(entries, key=lambda e: e.name)
            except OSError:
                continue
            for entry in listing:
                scan.spend(pattern)
                if entry.name.startswith(".") and not part.startswith("."):
                    continue  # as glob: a wildcard does not match hidden names
                if not fnmatch.fnmatchcase(entry.name, part):
                    continue
                try:
                    if not entry.is_dir():
                        continue
                    if entry.is_symlink() and not within(os.path.realpath(entry.path), tree):
                        continue
                except OSError:
                    continue
                following.append(entry.path)
        if len(following) > UNIT_MATCH_LIMIT:
            raise InputError(
                f"{scan.config}: units: {pattern!r} matches more than {UNIT_MATCH_LIMIT:,} "
                "directories; name the unit directories more narrowly"
            )
        current = following
    return current


# --- plain files: one unit, or one per directory holding its own copy of an object ------------


def _split(loaded: list[LoadedFile], scan: PathScan) -> list[UnitPlan]:
    """Plain files as units: directories that each hold their own copy of one object
    (same kind, namespace and name) are separate units; the rest is cut into applications
    (``gpulint.input.units.roots``)."""
    if not loaded:
        return []
    places: dict[tuple[str, str, str], set[tuple[str, ...]]] = defaultdict(set)
    tree = DirectoryTree()
    parts_of: dict[str, tuple[str, ...]] = {}  # absolute directory -> its parts

    def parts_of_file(path: str) -> tuple[str, ...]:
        directory = tree.directory(path)
        found = parts_of.get(directory)
        if found is None:
            found = parts_of[directory] = tuple(directory.split(os.sep))
        return found

    for file in loaded:
        parts = parts_of_file(file.path)
        for document in file.documents:
            key = _object_key(document.data)
            if key is not None:
                places[key].add(parts)
    roots: set[tuple[str, ...]] = set()
    for directories in places.values():
        if len(directories) < 2:
            continue
        common = _common_prefix(directories)
        if any(len(d) == len(common) for d in directories):
            continue  # a copy in the common directory itself: not one per environment
        roots.update(d[: len(common) + 1] for d in directories)
    groups: dict[tuple[str, ...] | None, list[LoadedFile]] = defaultdict(list)
    homes: dict[tuple[str, ...], tuple[str, ...] | None] = {}  # directory -> its root
    for file in loaded:
        parts = parts_of_file(file.path)
        if parts in homes:
            home = homes[parts]
        else:
            home = homes[parts] = (
                next(
                    (parts[:depth] for depth in range(len(parts), 0, -1) if parts[:depth] in roots),
                    None,
                )
                if roots
                else None
            )
        groups[home].append(file)
    plans = []
    rest = groups.pop(None, [])
    for root in sorted((r for r in groups if r is not None), key=lambda r: r):
        directory = _spelled(groups[root][0].path, root)
        unit = UnitPlan(display_path(directory), FILES, directory)
        unit.loaded = groups[root]
        plans.append(unit)
    declared, rest = _declared_directories(loaded, rest, scan)
    for directory, files in declared:
        unit = UnitPlan(display_path(directory), FILES, directory)
        unit.loaded = files
        plans.append(unit)
    for application, files in application_roots(rest, tree):
        if application:
            directory = _spelled(files[0].path, _parts(application))
        else:
            directory = _common_directory([f.path for f in files], tree)
        unit = UnitPlan(display_path(directory), FILES, directory)
        unit.loaded = files
        plans.append(unit)
    return plans


def _declared_directories(
    every: list[LoadedFile], loaded: list[LoadedFile], scan: PathScan
) -> tuple[list[tuple[str, list[LoadedFile]]], list[LoadedFile]]:
    """The files of ``loaded`` under a directory a GitOps object of ``every`` deploys (a Flux
    Kustomization's ``spec.path``, an Argo CD Application's source path ...), one unit per
    directory (the deepest that holds a file), and the files under none."""
    directories: set[str] = set()
    for file in every:
        for document in file.documents:
            found = declaration(document.data, file.path, os.path.dirname(file.path) or ".", scan)
            directories.update(d.directory for d in found)
        if scan.spent is not None and scan.spent_by is None:
            scan.spent_by = file.path
    if not directories:
        return [], loaded
    holding = _Directories(directories)
    groups: dict[str, list[LoadedFile]] = defaultdict(list)
    rest = []
    real: dict[str, str] = {}
    for file in loaded:
        parent = os.path.dirname(file.path) or "."
        if parent not in real:
            real[parent] = os.path.realpath(parent)
        directory = holding.holding(real[parent])
        if directory is None:
            rest.append(file)
        else:
            groups[directory].append(file)
    spelled = [
        (_spelled(files[0].path, _parts(directory)), files)
        for directory, files in sorted(groups.items())
    ]
    return spelled, rest


def _object_key(data: object) -> tuple[str, str, str] | None:
    if not isinstance(data, dict):
        return None
    kind, metadata = data.get("kind"), data.get("metadata")
    if not isinstance(kind, str) or not isinstance(metadata, dict):
        return None
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if not isinstance(name, str) or not name:
        return None
    return (kind, namespace if isinstance(namespace, str) else "", name)


def _parts(directory: str) -> tuple[str, ...]:
    return tuple(os.path.abspath(directory).split(os.sep))


def _common_prefix(directories: set[tuple[str, ...]]) -> tuple[str, ...]:
    items = list(directories)
    common = items[0]
    for other in items[1:]:
        length = 0
        for a, b in zip(common, other, strict=False):
            if a != b:
                break
            length += 1
        common = common[:length]
    return common


def _spelled(file: str, parts: tuple[str, ...]) -> str:
    """The directory ``parts`` (absolute) in the spelling of ``file`` (relative or not)."""
    absolute = os.sep.join(parts) or os.sep
    if os.path.isabs(file):
        return absolute
    relative = os.path.relpath(absolute)
    return relative


def _common_directory(files: list[str], tree: DirectoryTree) -> str:
    if len(files) == 1:
        return os.path.dirname(files[0]) or "."
    # The common path of their directories, each taken once (many files share one): the
    # files' own common path is that or, for files of one directory, a file in it.
    try:
        common = os.path.commonpath(list(dict.fromkeys(tree.directory(f) for f in files)))
    except ValueError:
        return "."
    return common if os.path.isabs(files[0]) else os.path.relpath(common)
