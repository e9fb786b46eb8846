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
from typing import Any, NamedTuple, TypeGuard

from gpulint.input.document import as_dict, as_list

FLUX_KUSTOMIZE = "kustomize.toolkit.fluxcd.io"
FLUX_HELM = "helm.toolkit.fluxcd.io"
ARGO = "argoproj.io"
MAX_LEVELS = 12  # directories above a declaration its paths are tried against
# Directory entries one path's globs may look at (a path is the repository's text: ``*/*/*``
# tried from a high directory would otherwise walk the machine).
MAX_ENTRIES = 10_000


class Declared(NamedTuple):
    """One directory a GitOps object deploys, and to which cluster."""

    cluster: str
    directory: str  # real path
    by: str  # "Kustomization apps (clusters/prod/apps.yaml)"


def declaration(data: Any, file: str, root: str) -> list[Declared]:
    """What a GitOps object deploys where; [] for any other object or a path not found.
    ``root`` stands in for the object's file when that is not on disk (rendered output)."""
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
        return _each(paths, where, _flux_cluster(where), by)
    if group == FLUX_HELM and kind == "HelmRelease":
        chart = as_dict(as_dict(spec.get("chart")).get("spec"))
        source = as_dict(chart.get("sourceRef")).get("kind")
        paths = [chart["chart"]] if source == "GitRepository" and _text(chart.get("chart")) else []
        return _each(paths, where, _flux_cluster(where), by)
    if group == ARGO and kind in ("Application", "ApplicationSet"):
        return _argo(spec, kind, name, where, by)
    return []


def _argo(spec: dict[str, Any], kind: str, name: str, where: str, by: str) -> list[Declared]:
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
        return _each(paths, where, target, by)
    # The destination is generated: one cluster per directory, named after it.
    return [
        Declared(f"{name}/{os.path.basename(d.directory)}", d.directory, by)
        for d in _each(paths, where, name, by)
    ]


def _text(value: Any) -> TypeGuard[str]:
    """A plain string: not empty and not an Argo CD template expression."""
    return isinstance(value, str) and bool(value.strip()) and "{{" not in value


def _each(paths: list[str], where: str, cluster: str, by: str) -> list[Declared]:
    return [Declared(cluster, d, by) for p in paths for d in resolve(p, where)]


def _flux_cluster(where: str) -> str:
    parts = os.path.normpath(os.path.abspath(where)).split(os.sep)
    if "clusters" in parts[:-1]:
        index = len(parts) - 1 - parts[::-1].index("clusters")
        if index + 1 < len(parts) - 1:
            return parts[index + 1]
    return os.path.relpath(os.path.dirname(os.path.abspath(where)))


def resolve(path: str, where: str) -> list[str]:
    """A repository path (``./apps/prod``, ``apps/*``) as the real directories it names. The
    repository's root is not known: the path is tried against each directory above ``where``,
    nearest first, and the first that has it wins."""
    relative = "/".join(p for p in path.strip().split("/") if p not in ("", "."))
    if not relative or ".." in relative.split("/"):
        return []
    directory = os.path.dirname(os.path.realpath(where))
    budget = [MAX_ENTRIES]
    for _ in range(MAX_LEVELS):
        matched = _matching(directory, relative, budget)
        if matched or os.path.isdir(os.path.join(directory, ".git")):
            return matched  # not above the repository's root
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return []


def _matching(base: str, relative: str, budget: list[int]) -> list[str]:
    current = [base]
    for part in relative.split("/"):
        following: list[str] = []
        for directory in current:
            if not any(c in part for c in "*?["):
                candidate = os.path.join(directory, part)
                if os.path.isdir(candidate):
                    following.append(candidate)
                continue
            try:
                names = sorted(os.listdir(directory))
            except OSError:
                continue
            budget[0] -= len(names)
            if budget[0] < 0:
                return []  # too wide to be a repository path: no cluster from it
            following.extend(
                os.path.join(directory, n)
                for n in names
                if not n.startswith(".")
                and fnmatch.fnmatchcase(n, part)
                and os.path.isdir(os.path.join(directory, n))
            )
        current = following
    return current
