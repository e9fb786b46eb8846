"""The Go behaviour prometheus-adapter's configuration is read with: ``Regexp.Expand`` of a
name's ``as``, the RE2 syntax its regular expressions accept, and Go template truthiness."""

from __future__ import annotations

import re
from typing import Any

_GO_VAR = re.compile(r"\$(\$|\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")


def go_expand(template: str, match: re.Match[str]) -> str:
    """Go's Regexp.Expand: ``$1``/``${1}``/``$name``; ``$1x`` means the group named ``1x``."""

    def replace(found: re.Match[str]) -> str:
        if found.group(1) == "$":
            return "$"
        name = found.group(2) or found.group(3)
        if name.isdigit():
            index = int(name)
            if index > (match.re.groups or 0):
                return ""
            return match.group(index) or ""
        try:
            return match.group(name) or ""
        except IndexError:
            return ""

    return _GO_VAR.sub(replace, template)


# Constructs Go's RE2 refuses although Python's re accepts them.
_RE2_UNSUPPORTED = re.compile(r"\(\?(=|!|<=|<!)|\\[1-9]|\(\?P=")


_GO_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")


def go_regex_problem(pattern: str) -> str | None:
    """Why Go's regexp (RE2) would refuse ``pattern``; None when it compiles."""
    unsupported = _RE2_UNSUPPORTED.search(pattern)
    if unsupported:
        return f"Go's RE2 has no look-arounds or back-references: `{unsupported.group(0)}`"
    try:
        re.compile(_GO_NAMED_GROUP.sub("(?P<", pattern))
    except re.error as error:
        return str(error)
    return None


def compile_go_regex(pattern: str) -> re.Pattern[str] | None:
    """``pattern`` as Go compiles it (``(?<name>...)`` named groups included), as a Python
    pattern; None when Go would refuse it."""
    if _RE2_UNSUPPORTED.search(pattern):
        return None
    try:
        return re.compile(_GO_NAMED_GROUP.sub("(?P<", pattern))
    except re.error:
        return None


def go_truthy(value: Any) -> bool:
    """Go template truth (``{{ if .Values.x }}``): false, 0, nil and empty values are false."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True
