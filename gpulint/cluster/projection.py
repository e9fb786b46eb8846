"""What a cluster cache keeps of an object: the parts views and rules read, nothing else.

A cluster holds its objects whole (status, probes, volumes, security contexts, ...), and the
webhook's cache lives as long as the process: kept whole, 50,000 objects are most of its
memory (bench/RESULTS.md, "Webhook: cache memory"). So each listed or watched object is cut
down, once, as it is decoded, to its projection: the metadata rules read, and the parts its
kind's entry in the registry declares (``KindSpec.keeps``), with each pod template of a
workload cut to what ``gpulint.kinds.workload`` reads of pod templates. A kind that declares
nothing is kept whole (the CRDs of LLM serving stacks: few objects, read deeply).

Strings that repeat across objects (keys, label and annotation values, namespaces, images)
are shared (``sys.intern``), so that a hundred thousand copies of ``app.kubernetes.io/name``
are one.

tests/cluster/test_projection.py runs every rule's fixtures over projected and whole objects
and requires the same findings: a view that starts reading a part the projection drops fails
it until the kind's entry says so.
"""

from __future__ import annotations

import sys
from typing import Any

from gpulint.input.document import Path
from gpulint.kinds.registry import KINDS, WORKLOAD, KindSpec
from gpulint.kinds.workload import DEFAULT_TEMPLATE_PATHS, POD_TEMPLATE_READS

# What nothing reads of an object's metadata; the rest is kept: identity, labels and
# annotations (selectors, gpulint's own annotations, the classes and modes controllers read
# there), owners (``view.generator_of``), the resourceVersion the cache compares. Some rules
# read keys misplaced under metadata (GL301), which an API server prunes; kept all the same,
# so that a cluster's findings never depend on it.
METADATA_DROPS = ("managedFields", "creationTimestamp", "selfLink", "finalizers")

# A tree of keys to keep: each key maps to the tree of what to keep below it, or to WHOLE.
# Lists are transparent: a tree applies to each item.
Tree = dict[str, Any]
WHOLE: Any = None
_DROPPED = object()

# Strings longer than this are kept as they are: long values (a ConfigMap's config text, a
# query) rarely repeat, and interning them costs a table entry each.
_INTERN_UP_TO = 128


def tree_of(paths: tuple[Path, ...]) -> Tree:
    """The keep-tree of ``paths``: a path that is a prefix of another keeps its node whole."""
    tree: Tree = {}
    for path in sorted(paths, key=len):
        node: Tree | None = tree
        for index, step in enumerate(path):
            assert node is not None
            key = str(step)
            if index == len(path) - 1:
                node[key] = WHOLE
            elif key in node:
                node = node[key]
                if node is WHOLE:  # a shorter path keeps all of it already
                    break
            else:
                node = node.setdefault(key, {})
    return tree


def kind_paths(spec: KindSpec) -> tuple[Path, ...] | None:
    """Every path kept of an object of ``spec``'s kind; None: the object is kept whole."""
    if spec.keeps is None:
        return None
    paths = [("apiVersion",), ("kind",), ("metadata",), *spec.keeps]
    if spec.role == WORKLOAD:
        for template in spec.template_paths or DEFAULT_TEMPLATE_PATHS:
            paths.extend((*template, *read) for read in POD_TEMPLATE_READS)
    return tuple(paths)


_TREES: dict[tuple[str, str], Tree] = {}
for _spec in KINDS:
    _paths = kind_paths(_spec)
    if _paths is not None:
        _TREES[(_spec.group, _spec.kind)] = tree_of(_paths)


def projection_tree(api_version: str, kind: str) -> Tree | None:
    """The keep-tree of a kind, by the API group of ``api_version``; None: kept whole."""
    group = api_version.rpartition("/")[0]
    return _TREES.get((group, kind))


def project(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the cache keeps it: a new mapping holding only the kept parts, repeated
    strings shared. The kept parts are ``obj``'s own values (its strings replaced by shared
    ones in place): ``obj`` is the decoder's, used for nothing else. Objects of kinds kept
    whole are returned as they are. Values nest at most as deeply as the decoder allows
    (``decoding.MAX_OBJECT_DEPTH``), well within Python's recursion limit."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return obj
    tree = projection_tree(api_version, kind)
    if tree is None:
        return obj
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        for key in METADATA_DROPS:
            metadata.pop(key, None)
    return _kept(obj, tree)


def _kept(value: dict[str, Any], tree: Tree) -> dict[str, Any]:
    """The keys of ``value`` that ``tree`` keeps, in ``value``'s order (as a user wrote
    them: fixes quote parts of objects). Keys need no sharing: the decoder already shares
    them within a page."""
    kept: dict[str, Any] = {}
    for key, item in value.items():
        below = tree.get(key, _DROPPED)
        if below is _DROPPED:
            continue
        if below is None:  # WHOLE
            kept[key] = _shared(item)
        elif isinstance(item, dict):
            kept[key] = _kept(item, below)
        elif isinstance(item, list):
            kept[key] = [_kept(i, below) if isinstance(i, dict) else _shared(i) for i in item]
        else:
            kept[key] = _shared(item)
    return kept


def _shared(value: Any) -> Any:
    """``value`` with its short strings replaced by shared ones, in place."""
    if isinstance(value, str):
        return sys.intern(value) if len(value) <= _INTERN_UP_TO else value
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                if len(item) <= _INTERN_UP_TO:
                    value[key] = sys.intern(item)
            elif isinstance(item, dict | list):
                _shared(item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                if len(item) <= _INTERN_UP_TO:
                    value[index] = sys.intern(item)
            elif isinstance(item, dict | list):
                _shared(item)
    return value
