"""Loose files cut where the repository holds separate applications.

Files that no kustomization, chart or ``units:`` entry claims used to be one unit. In a
repository of examples that joins applications no cluster ever holds together: the HPA of one
tutorial and the ScaledObject of another on the same Deployment name drew GL103, and the
Prometheus of one example became the evidence for another's query URL.

A directory that holds a workload (an object that owns pods and serves: Deployment,
StatefulSet, InferenceService, Knative Service ...) and is not inside another such directory
is the root of one application. When the files hold two or more roots, each root with
everything beneath it is a unit, a file outside every root joins the root whose workload it
names (an HPA's ``scaleTargetRef``), and the files left are one unit, as before. With one root
or none nothing changes, nor when a file lies in a directory above two or more roots (a
cluster directory with its adapter values above ``apps/<name>/``): what the applications
share makes them one cluster's. DaemonSets are node agents (dcgm-exporter, the device plugin), not
applications: they make no root.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from typing import Any

from gpulint.input.loader import LoadedFile

# Kinds whose objects are an application's serving pods (DaemonSet left out: see above).
WORKLOAD_KINDS = {
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "ReplicaSet"),
    ("", "Pod"),
    ("serving.kserve.io", "InferenceService"),
    ("serving.knative.dev", "Service"),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
    ("ray.io", "RayService"),
}


def application_roots(
    loaded: list[LoadedFile], tree: DirectoryTree | None = None
) -> list[tuple[str, list[LoadedFile]]]:
    """The files cut into applications: (root directory, files) per root, and ("", files)
    for the files no root takes. One group with root "" when there are fewer than two roots.
    ``tree`` may bring the directories a caller has worked out already."""
    tree = tree if tree is not None else DirectoryTree()
    directories = [tree.directory(f.path) for f in loaded]
    holding = {
        directory
        for directory, f in zip(directories, loaded, strict=True)
        if any(_is_workload(d.data) for d in f.documents)
    }
    # A root is a holding directory under no other.
    roots = sorted(d for d in holding if not any(a in holding for a in tree.ancestors(d)))
    if len(roots) < 2 or _shared_above(tree, directories, roots):
        return [("", loaded)] if loaded else []
    workloads: dict[str, set[str]] = defaultdict(set)  # workload name -> roots holding it
    groups: dict[str, list[LoadedFile]] = {root: [] for root in roots}
    outside: list[LoadedFile] = []
    root_set = set(roots)
    for directory, file in zip(directories, loaded, strict=True):
        root = tree.root_of(directory, root_set)
        if root is None:
            outside.append(file)
            continue
        groups[root].append(file)
        for document in file.documents:
            name = _workload_name(document.data)
            if name is not None:
                workloads[name].add(root)
    rest: list[LoadedFile] = []
    for file in outside:
        named = {
            root for d in file.documents for name in _targets(d.data) for root in workloads[name]
        }
        if len(named) == 1:
            groups[named.pop()].append(file)
        else:
            rest.append(file)
    cut = [(root, groups[root]) for root in roots]
    if rest:
        cut.append(("", rest))
    return cut


def _shared_above(tree: DirectoryTree, directories: list[str], roots: list[str]) -> bool:
    """A file outside every root, in a directory above two or more of them (a cluster
    directory's adapter values above its ``apps/<name>/``): the applications share it, so
    they are one cluster's and stay one unit."""
    below = Counter(a for root in roots for a in tree.ancestors(root))  # directory -> roots
    root_set = set(roots)
    return any(
        below[directory] >= 2 and tree.root_of(directory, root_set) is None
        for directory in dict.fromkeys(directories)
    )


class DirectoryTree:
    """Directories of the files of one run, each worked out once: a repository has many files
    per directory and many directories per ancestor, so per-file path arithmetic repeats
    itself (``os.path.abspath`` of a relative path asks the system for the working directory
    every time)."""

    def __init__(self) -> None:
        self._of_file: dict[str, str] = {}  # a file -> its absolute directory
        self._absolute: dict[str, str] = {}  # a directory as spelled -> its absolute form
        self._ancestors: dict[str, tuple[str, ...]] = {}
        self._roots_of: set[str] = set()  # the roots ``_roots`` answers for
        self._roots: dict[str, str | None] = {}

    def directory(self, path: str) -> str:
        """The absolute directory of the file ``path`` (``dirname(abspath(path))``)."""
        found = self._of_file.get(path)
        if found is None:
            found = self._of_file[path] = self._absolute_of(os.path.dirname(path))
        return found

    def _absolute_of(self, directory: str) -> str:
        """``os.path.abspath(directory)``: a directory named by a plain name under one already
        known is that one joined with the name (abspath asks the system for the working
        directory and normalizes the whole path, every time)."""
        found = self._absolute.get(directory)
        if found is not None:
            return found
        # Up through plain names to a directory known or spelled otherwise ("", ".", "..",
        # the root), then down again.
        below: list[tuple[str, str]] = []  # (directory as spelled, its name), deepest first
        current = directory
        while True:
            found = self._absolute.get(current)
            if found is not None:
                break
            name = os.path.basename(current)
            parent = os.path.dirname(current)
            if name in ("", ".", "..") or parent == current:
                found = self._absolute[current] = os.path.abspath(current)
                break
            below.append((current, name))
            current = parent
        for spelled, name in reversed(below):
            found = self._absolute[spelled] = os.path.join(found, name)
        return found

    def ancestors(self, directory: str) -> tuple[str, ...]:
        """The directories above ``directory`` (an absolute path), nearest first."""
        found = self._ancestors.get(directory)
        if found is not None:
            return found
        # Up to the nearest directory already known (or the top), then down again: each
        # directory's ancestors are its parent and the parent's.
        climbed = [directory]
        while True:
            current = climbed[-1]
            parent = os.path.dirname(current)
            if parent == current:
                found = ()
                break
            known = self._ancestors.get(parent)
            if known is not None:
                found = (parent, *known)
                break
            climbed.append(parent)
        self._ancestors[climbed[-1]] = found
        for child, parent in zip(climbed[-2::-1], climbed[:0:-1], strict=True):
            found = self._ancestors[child] = (parent, *found)
        return found

    def root_of(self, directory: str, roots: set[str]) -> str | None:
        """The root ``directory`` is in (roots are never inside each other), or None."""
        if roots is not self._roots_of:
            self._roots_of, self._roots = roots, {}
        if directory in self._roots:
            return self._roots[directory]
        found = (
            directory
            if directory in roots
            else next((a for a in self.ancestors(directory) if a in roots), None)
        )
        self._roots[directory] = found
        return found


def _kind(data: Any) -> tuple[str, str] | None:
    if not isinstance(data, dict):
        return None
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    return (group, kind)


def _is_workload(data: Any) -> bool:
    return _kind(data) in WORKLOAD_KINDS


def _workload_name(data: Any) -> str | None:
    if not _is_workload(data):
        return None
    name = data.get("metadata", {}).get("name") if isinstance(data.get("metadata"), dict) else None
    return name if isinstance(name, str) and name else None


def _targets(data: Any) -> list[str]:
    """The workload names an autoscaler names (HPA, ScaledObject, VPA: ``scaleTargetRef`` or
    ``targetRef``)."""
    if not isinstance(data, dict) or not isinstance(data.get("spec"), dict):
        return []
    found = []
    for key in ("scaleTargetRef", "targetRef"):
        ref = data["spec"].get(key)
        if isinstance(ref, dict) and isinstance(ref.get("name"), str):
            found.append(ref["name"])
    return found
