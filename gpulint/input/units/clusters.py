"""The clusters a repository declares through its GitOps objects, and the directories each
deploys.

* Flux: a ``Kustomization`` (kustomize.toolkit.fluxcd.io) applies ``spec.path``; a
  ``HelmRelease`` (helm.toolkit.fluxcd.io) whose chart comes from a ``GitRepository``
  installs the chart at ``spec.chart.spec.chart``. Both paths are relative to the
  repository's root (fluxcd/kustomize-controller and helm-controller API docs). A declaration
  under ``clusters/<name>/`` is cluster ``<name>``, the layout Flux documents ("Ways of
  structuring your repositories"); elsewhere its directory names the cluster.
* Argo CD: an ``Application`` deploys ``spec.source.path`` (and each ``spec.sources[].path``)
  to ``spec.destination.name`` or ``server``; an ``ApplicationSet`` deploys the directories
  its git generators list (``spec.generators[].git.directories[].path``, globs allowed) with
  its ``spec.template``. A destination that is a template expression (``{{name}}``) is
  unknown before Argo CD generates the Applications: each directory is then a cluster of its
  own, never joined with another.
"""

from __future__ import annotations

import fnmatch
import os
import time
from typing import Any, NamedTuple, TypeGuard

from gpulint.input.document import as_dict, as_list

FLUX_KUSTOMIZE = "kustomize.toolkit.fluxcd.io"
FLUX_HELM = "helm.toolkit.fluxcd.io"
ARGO = "argoproj.io"
MAX_LEVELS = 12  # directories above a declaration its paths are tried against
# Directory entries one path's globs may look at (a path is the repository's text: ``*/*/*``
# tried from a high directory would otherwise walk the machine).
MAX_ENTRIES = 10_000
# ... and what every path of a run may cost together: an ApplicationSet of thousands of
# paths (or a List of thousands of Applications) is bounded as one path is.
RUN_ENTRIES = 100_000
RUN_SECONDS = 5.0
RUN_PATHS = 20_000


class PathScan:
    """What resolving the GitOps paths of one run may spend (directory entries listed, paths
    tried, seconds), with each directory listed once and each path resolved once. When it is
    spent, the paths left resolve to nothing and ``spent`` says why."""

    def __init__(
        self,
        entries: int = RUN_ENTRIES,
        seconds: float = RUN_SECONDS,
        paths: int = RUN_PATHS,
    ) -> None:
        self.entries = entries
        self.paths = paths
        self.entry_limit = entries
        self.path_limit = paths
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.spent: str | None = None
        self.spent_by: str | None = None  # the file whose paths spent it
        self._listings: dict[str, list[str]] = {}  # directory -> its subdirectories
        self._resolved: dict[tuple[str, str], list[str]] = {}

    def resolved(self, relative: str, directory: str) -> list[str] | None:
        return self._resolved.get((relative, directory))

    def keep(self, relative: str, directory: str, found: list[str]) -> list[str]:
        self.paths -= 1
        if self.paths < 0:
            self._spend(f"resolved more than {self.path_limit:,} paths")
        self._resolved[(relative, directory)] = found
        return found

    def subdirectories(self, directory: str) -> list[str] | None:
        """The names of the directories in ``directory`` (sorted, links followed), listed
        once per run; each call counts what it looks at against the run's bound. None once
        the scan is spent or when it cannot be listed."""
        if self.spent is not None:
            return None
        if time.monotonic() > self.deadline:
            self._spend(f"took more than {self.seconds:g} s")
            return None
        found = self._listings.get(directory)
        if found is None:
            try:
                with os.scandir(directory) as entries:
                    found = sorted(e.name for e in entries if _is_directory(e))
            except OSError:
                return None
            self._listings[directory] = found
        self.entries -= max(len(found), 1)
        if self.entries < 0:
            self._spend(f"looked at more than {self.entry_limit:,} directory entries")
            return None
        return found

    def looks(self, count: int) -> bool:
        """Count ``count`` paths looked up one by one; False once the scan is spent."""
        self.entries -= count
        if self.entries < 0:
            self._spend(f"looked at more than {self.entry_limit:,} directory entries")
        elif time.monotonic() > self.deadline:
            self._spend(f"took more than {self.seconds:g} s")
        return self.spent is None

    def _spend(self, what: str) -> None:
        if self.spent is None:
            self.spent = (
                f"resolving the paths Flux and Argo CD objects deploy {what}: the paths left "
                "were not resolved, and the directories they name are not units of their "
                "clusters"
            )


class Declared(NamedTuple):
    """One directory a GitOps object deploys, and to which cluster."""

    cluster: str
    directory: str  # real path
    by: str  # "Kustomization apps (clusters/prod/apps.yaml)"


def declaration(data: Any, file: str, root: str, scan: PathScan | None = None) -> list[Declared]:
    """What a GitOps object deploys where; [] for any other object or a path not found.
    ``root`` stands in for the object's file when that is not on disk (rendered output);
    ``scan`` is what the run's paths may spend together (one of its own when None)."""
    if not isinstance(data, dict):
        return []
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return []
    group = api_version.rpartition("/")[0]
    if group not in (FLUX_KUSTOMIZE, FLUX_HELM, ARGO):
        return []  # most documents: decided before any file is looked at
    name = as_dict(data.get("metadata")).get("name")
    name = name if isinstance(name, str) and name else kind
    spec = as_dict(data.get("spec"))
    where = file if os.path.isfile(file) else os.path.join(root, kind)
    by = f"{kind} {name} ({os.path.relpath(where) if os.path.isfile(file) else root})"
    if group == FLUX_KUSTOMIZE and kind == "Kustomization":
        path = spec.get("path")
        paths = [path] if isinstance(path, str) else []
        return _each(paths, where, _flux_cluster(where), by, scan)
    if group == FLUX_HELM and kind == "HelmRelease":
        chart = as_dict(as_dict(spec.get("chart")).get("spec"))
        source = as_dict(chart.get("sourceRef")).get("kind")
        paths = [chart["chart"]] if source == "GitRepository" and _text(chart.get("chart")) else []
        return _each(paths, where, _flux_cluster(where), by, scan)
    if group == ARGO and kind in ("Application", "ApplicationSet"):
        return _argo(spec, kind, name, where, by, scan)
    return []


def _argo(
    spec: dict[str, Any], kind: str, name: str, where: str, by: str, scan: PathScan | None
) -> list[Declared]:
    template = spec
    paths: list[str] = []
    if kind == "ApplicationSet":
        template = as_dict(as_dict(spec.get("template")).get("spec"))
        for generator in as_list(spec.get("generators")):
            for entry in as_list(as_dict(as_dict(generator).get("git")).get("directories")):
                path = as_dict(entry).get("path")
                if _text(path) and not as_dict(entry).get("exclude"):
                    paths.append(path)
    sources = [as_dict(template.get("source"))] + [
        as_dict(s) for s in as_list(template.get("sources"))
    ]
    paths.extend(s["path"] for s in sources if _text(s.get("path")))
    destination = as_dict(template.get("destination"))
    target = destination.get("name") or destination.get("server")
    if _text(target):
        return _each(paths, where, target, by, scan)
    # The destination is generated: one cluster per directory, named after it.
    return [
        Declared(f"{name}/{os.path.basename(d.directory)}", d.directory, by)
        for d in _each(paths, where, name, by, scan)
    ]


def _text(value: Any) -> TypeGuard[str]:
    """A plain string: not empty and not an Argo CD template expression."""
    return isinstance(value, str) and bool(value.strip()) and "{{" not in value


def _each(
    paths: list[str], where: str, cluster: str, by: str, scan: PathScan | None
) -> list[Declared]:
    scan = scan if scan is not None else PathScan(MAX_ENTRIES)
    return [Declared(cluster, d, by) for p in paths for d in resolve(p, where, scan)]


def _flux_cluster(where: str) -> str:
    parts = os.path.normpath(os.path.abspath(where)).split(os.sep)
    if "clusters" in parts[:-1]:
        index = len(parts) - 1 - parts[::-1].index("clusters")
        if index + 1 < len(parts) - 1:
            return parts[index + 1]
    return os.path.relpath(os.path.dirname(os.path.abspath(where)))


def resolve(path: str, where: str, scan: PathScan | None = None) -> list[str]:
    """A repository path (``./apps/prod``, ``apps/*``) as the real directories it names. The
    repository's root is not known: the path is tried against each directory above ``where``,
    nearest first, and the first that has it wins. ``scan`` bounds what the run's paths
    spend together."""
    relative = "/".join(p for p in path.strip().split("/") if p not in ("", "."))
    if not relative or ".." in relative.split("/"):
        return []
    scan = scan if scan is not None else PathScan(MAX_ENTRIES)
    start = os.path.dirname(os.path.realpath(where))
    known = scan.resolved(relative, start)
    if known is not None:
        return known
    if scan.spent is not None:
        return []
    directory = start
    budget = [MAX_ENTRIES]
    for _ in range(MAX_LEVELS):
        if not scan.looks(relative.count("/") + 1):
            return []
        matched = _matching(directory, relative, budget, scan)
        if matched or os.path.isdir(os.path.join(directory, ".git")):
            return scan.keep(relative, start, matched)  # not above the repository's root
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return scan.keep(relative, start, [])


def _matching(base: str, relative: str, budget: list[int], scan: PathScan) -> list[str]:
    current = [base]
    for part in relative.split("/"):
        following: list[str] = []
        for directory in current:
            if not any(c in part for c in "*?["):
                candidate = os.path.join(directory, part)
                if os.path.isdir(candidate):
                    following.append(candidate)
                continue
            names = scan.subdirectories(directory)
            if names is None:
                continue
            budget[0] -= len(names)
            if budget[0] < 0:
                return []  # too wide to be a repository path: no cluster from it
            following.extend(
                os.path.join(directory, n)
                for n in names
                if not n.startswith(".") and fnmatch.fnmatchcase(n, part)
            )
        current = following
    return current


def _is_directory(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False
