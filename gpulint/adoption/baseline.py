"""A baseline: the findings a repository already had when it adopted gpulint.

``gpulint lint --write-baseline FILE`` records every finding of a run (after suppressions);
``--baseline FILE`` then reports only findings that are not in it, so a team can turn
gpulint on today and fix the old findings at its own pace.

A finding is recorded by what it is about, not where it happens to be written, so that a
renamed file, a block moved within or between files, or an edit above it does not make an
old finding new:

* the rule ID;
* the object: kind (without apiVersion, so an upgrade from ``autoscaling/v2beta2`` to
  ``autoscaling/v2`` keeps matching), namespace and name, and the lint units it was found in
  when the run has several (overlays/prod, clusters/us);
* the offending node's path inside the object (``spec.metrics[0].resource.name``).

A finding about no object (a YAML syntax error, a file that cannot be read) falls back to its
file, rule and a hash of its message.

Files and units are recorded relative to the repository's top level, and paths inside a
message are re-spelled so before it is hashed (``gpulint.core.paths.repository_path``,
``stable_words``): reports spell paths from the working directory, but a baseline written
from the top level must match a run from a subdirectory.

Identical fingerprints are counted: a baseline with two findings of one fingerprint absorbs
two, and a third is reported. Entries that matched nothing in a run are *stale*: their
finding was fixed, and the baseline can be rewritten.

The file is JSON (``version: 1``), one entry per fingerprint with its count, sorted, so that
rewriting it after a fix shows as a small diff.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple

from gpulint.core.model import Finding
from gpulint.core.paths import repository_path, stable_words

VERSION = 1

_OBJECT_FIELDS = ("rule", "kind", "namespace", "name", "units", "path")
_FILE_FIELDS = ("rule", "file", "message")


class BaselineError(ValueError):
    """A baseline file that cannot be read or is not a gpulint baseline (exit code 2)."""


class Fingerprint(NamedTuple):
    """What a finding is, independent of its line: see the module docstring."""

    rule: str
    kind: str | None
    namespace: str | None
    name: str | None
    units: tuple[str, ...]
    path: str
    file: str | None  # only for findings about no object
    message: str | None  # the message's hash, only for findings about no object

    def to_entry(self, count: int) -> dict[str, Any]:
        if self.kind is None:
            return {"rule": self.rule, "file": self.file, "message": self.message, "count": count}
        return {
            "rule": self.rule,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "units": list(self.units),
            "path": self.path,
            "count": count,
        }

    def sort_key(self) -> tuple[str, ...]:
        return tuple("" if value is None else str(value) for value in self)


def node_path(path: Iterable[str | int]) -> str:
    """``("spec", "metrics", 0, "resource")`` as ``spec.metrics[0].resource``."""
    text = ""
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += f".{step}" if text else str(step)
    return text


def message_hash(message: str) -> str:
    return hashlib.sha256(message.encode("utf-8")).hexdigest()[:16]


def fingerprint(finding: Finding) -> Fingerprint:
    ref = finding.object
    if ref is None:
        return Fingerprint(
            finding.rule,
            None,
            None,
            None,
            (),
            "",
            repository_path(finding.location.file),
            message_hash(stable_words(finding.message)),
        )
    return Fingerprint(
        finding.rule,
        ref.kind,
        ref.namespace,
        ref.name,
        tuple(sorted(repository_path(unit) for unit in finding.units)),
        node_path(finding.path),
        None,
        None,
    )


class Baseline:
    """Fingerprints and how many findings of each the baseline holds."""

    def __init__(self, counts: Counter[Fingerprint] | None = None) -> None:
        self.counts: Counter[Fingerprint] = Counter() if counts is None else counts

    @classmethod
    def of(cls, findings: Iterable[Finding]) -> Baseline:
        return cls(Counter(fingerprint(f) for f in findings))

    def to_dict(self) -> dict[str, Any]:
        ordered = sorted(self.counts.items(), key=lambda item: item[0].sort_key())
        return {
            "version": VERSION,
            "tool": "gpulint",
            "entries": [fp.to_entry(count) for fp, count in ordered],
        }

    def write(self, path: str) -> None:
        """Write the baseline next to its final name, then rename: an interrupted run never
        leaves half a baseline behind."""
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        partial = f"{path}.partial"
        try:
            with open(partial, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(partial, path)
        except OSError as error:
            raise BaselineError(f"cannot write baseline {path}: {error.strerror}") from None

    def split(self, findings: Iterable[Finding]) -> Comparison:
        """The findings the baseline does not absorb, and how many entries it had to spare."""
        left = Counter(self.counts)
        new: list[Finding] = []
        baselined = 0
        for finding in findings:
            key = fingerprint(finding)
            if left[key] > 0:
                left[key] -= 1
                baselined += 1
            else:
                new.append(finding)
        return Comparison(new, baselined, sum(left.values()))


class Comparison(NamedTuple):
    new: list[Finding]
    baselined: int  # findings the baseline absorbed
    stale: int  # baseline entries (counted) that matched no finding: fixed since


def load_baseline(path: str) -> Baseline:
    """Read a baseline file; raises BaselineError naming the file and what is wrong where."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise BaselineError(f"cannot read baseline {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise BaselineError(f"baseline {path}: not UTF-8 text (byte {error.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise BaselineError(
            f"baseline {path}:{error.lineno}:{error.colno}: not valid JSON: {error.msg}"
        ) from None
    if not isinstance(data, dict) or data.get("tool") != "gpulint":
        raise BaselineError(
            f"baseline {path}: not a gpulint baseline (write one with --write-baseline)"
        )
    if data.get("version") != VERSION:
        raise BaselineError(
            f"baseline {path}: version {data.get('version')!r} is not supported "
            f"(this gpulint reads version {VERSION}; rewrite it with --write-baseline)"
        )
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise BaselineError(f"baseline {path}: entries must be a list")
    counts: Counter[Fingerprint] = Counter()
    for index, entry in enumerate(entries):
        where = f"baseline {path}: entries[{index}]"
        key, count = _entry(entry, where)
        counts[key] += count
    return Baseline(counts)


def _entry(entry: Any, where: str) -> tuple[Fingerprint, int]:
    if not isinstance(entry, dict):
        raise BaselineError(f"{where}: must be an object")
    count = entry.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise BaselineError(f"{where}: count must be a whole number of at least 1")
    fields = _FILE_FIELDS if "file" in entry else _OBJECT_FIELDS
    unknown = sorted(set(entry) - {*fields, "count"})
    if unknown:
        raise BaselineError(f"{where}: unknown key {unknown[0]!r}")
    for field in fields:
        if field not in entry:
            raise BaselineError(f"{where}: {field} is missing")
    if fields is _FILE_FIELDS:
        for field in fields:
            if not isinstance(entry[field], str):
                raise BaselineError(f"{where}: {field} must be a string")
        return Fingerprint(
            entry["rule"], None, None, None, (), "", entry["file"], entry["message"]
        ), count
    for field in ("rule", "kind", "name", "path"):
        if not isinstance(entry[field], str):
            raise BaselineError(f"{where}: {field} must be a string")
    namespace, units = entry["namespace"], entry["units"]
    if namespace is not None and not isinstance(namespace, str):
        raise BaselineError(f"{where}: namespace must be a string or null")
    if not isinstance(units, list) or not all(isinstance(u, str) for u in units):
        raise BaselineError(f"{where}: units must be a list of strings")
    return Fingerprint(
        entry["rule"],
        entry["kind"],
        namespace,
        entry["name"],
        tuple(sorted(units)),
        entry["path"],
        None,
        None,
    ), count
