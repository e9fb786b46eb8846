"""Which rendered objects a kustomize patch targets (kind, group, name, namespace, label and
annotation selectors, as kustomize matches them) and how deep into an object it writes (a
strategic-merge patch walked beside the object, a JSON6902 operation's pointer)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpulint.core.selectors import selector_matches
from gpulint.input.document import Manifest, Path, has_step


def selects(target: dict[str, Any], rendered: Manifest, names: set[str]) -> bool:
    if not (
        _unset_or(target.get("kind"), lambda kind: _full_match(kind, rendered.kind))
        and _unset_or(target.get("group"), lambda group: _full_match(group, rendered.group))
        and _unset_or(target.get("name"), lambda name: any(_full_match(name, n) for n in names))
        and _unset_or(
            target.get("namespace"),
            lambda namespace: _full_match(namespace, rendered.namespace or ""),
        )
    ):
        return False
    labels = {k: str(v) for k, v in rendered.labels.items() if isinstance(k, str)}
    if not _unset_or(target.get("labelSelector"), lambda sel: selector_matches(sel, labels)):
        return False
    annotations = {k: str(v) for k, v in rendered.annotations.items() if isinstance(k, str)}
    return _unset_or(
        target.get("annotationSelector"), lambda sel: selector_matches(sel, annotations)
    )


def _unset_or(value: Any, test: Callable[[str], bool]) -> bool:
    """A target field that is not set (or empty) selects every object; a set one must pass."""
    return not (isinstance(value, str) and value) or test(value)


def _full_match(pattern: str, value: str) -> bool:
    try:
        return re.fullmatch(pattern, value) is not None
    except re.error:
        return pattern == value


def json_pointer(value: Any) -> Path | None:
    """A JSON pointer (``/spec/metrics/0``) as a path."""
    if not isinstance(value, str) or not value.startswith("/"):
        return None
    steps: list[str | int] = []
    for part in value[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        steps.append(int(part) if part.isdigit() else part)
    return tuple(steps)


def depth_in(source: Any, rendered: Any, path: Path, start: int) -> tuple[int, Path]:
    """How many steps of ``path[start:]`` exist in ``source`` (walked beside the rendered
    object, list items matched by ``name`` as strategic merge matches containers), and their
    path in ``source``."""
    node, shown = source, rendered
    for step in path[:start]:
        shown = shown[step] if has_step(shown, step) else None
    depth = 0
    inner: list[str | int] = []
    for step in path[start:]:
        if isinstance(node, dict) and isinstance(step, str):
            if step not in node:
                break
            node = node[step]
            inner.append(step)
        elif isinstance(node, list) and isinstance(step, int):
            item = (
                shown[step]
                if isinstance(shown, list) and -len(shown) <= step < len(shown)
                else None
            )
            index = _matching_item(node, item, step)
            if index is None:
                break
            node = node[index]
            inner.append(index)
        else:
            break
        shown = shown[step] if has_step(shown, step) else None
        depth += 1
    return depth, tuple(inner)


def _matching_item(items: list[Any], rendered_item: Any, index: int) -> int | None:
    name = rendered_item.get("name") if isinstance(rendered_item, dict) else None
    if isinstance(name, str):
        for i, item in enumerate(items):
            if isinstance(item, dict) and item.get("name") == name:
                return i
        return None
    return index if -len(items) <= index < len(items) else None
