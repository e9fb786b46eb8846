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
two, and a third is reported. Each entry also says which files its findings were in
(``files``, relative to the top level as well), which is not part of what it matches: it tells
an entry that matched nothing because its finding was fixed (*stale*: the baseline can be
rewritten) from one that matched nothing because none of its files was in the run's input
(*not evaluated*: a run over part of the repository, or a file gpulint no longer reads). A
file that no longer exists counts as evaluated: its findings are gone with it.

The file is JSON (``version: 2``), one entry per fingerprint with its count, sorted, so that
rewriting it after a fix shows as a small diff. Version 1 (the same without ``files``) is
still read; its entries that match nothing are all counted stale, as before.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from gpulint.core.model import Finding
from gpulint.core.paths import git_root, is_file_path, repository_path, stable_words

VERSION = 2
READS = (1, 2)  # the versions load_baseline accepts

_OBJECT_FIELDS = ("rule", "kind", "namespace", "name", "units", "path")
_OPTIONAL_FIELDS = ("files",)
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
    """Fingerprints, how many findings of each the baseline holds, and the files they were
    in (repository paths; none known for a version 1 entry)."""

    def __init__(
        self,
        counts: Counter[Fingerprint] | None = None,
        files: dict[Fingerprint, tuple[str, ...]] | None = None,
    ) -> None:
        self.counts: Counter[Fingerprint] = Counter() if counts is None else counts
        self.files: dict[Fingerprint, tuple[str, ...]] = {} if files is None else files

    @classmethod
    def of(cls, findings: Iterable[Finding]) -> Baseline:
        counts: Counter[Fingerprint] = Counter()
        files: dict[Fingerprint, set[str]] = {}
        for finding in findings:
            key = fingerprint(finding)
            counts[key] += 1
            if key.file is None and is_file_path(finding.location.file):
                files.setdefault(key, set()).add(repository_path(finding.location.file))
        return cls(counts, {key: tuple(sorted(found)) for key, found in files.items()})

    def to_dict(self) -> dict[str, Any]:
        ordered = sorted(self.counts.items(), key=lambda item: item[0].sort_key())
        entries = []
        for fp, count in ordered:
            entry = fp.to_entry(count)
            if fp.file is None:
                entry["files"] = list(self.files.get(fp, ()))
            entries.append(entry)
        return {"version": VERSION, "tool": "gpulint", "entries": entries}

    def files_of(self, key: Fingerprint) -> tuple[str, ...]:
        """The files an entry's findings were in (repository paths); () when not known."""
        return (key.file,) if key.file is not None else self.files.get(key, ())

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

    def split(
        self, findings: Iterable[Finding], unevaluated: Callable[[str], bool] | None = None
    ) -> Comparison:
        """The findings the baseline does not absorb, and how many entries it had to spare:
        fixed since, or not evaluated (``unevaluated`` says so of a repository path; an entry
        is not evaluated when it says so of every file the entry names)."""
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
        stale = not_evaluated = 0
        for key, count in left.items():
            files = self.files_of(key) if unevaluated is not None else ()
            if files and unevaluated is not None and all(unevaluated(f) for f in files):
                not_evaluated += count
            else:
                stale += count
        return Comparison(new, baselined, stale, not_evaluated)


class Comparison(NamedTuple):
    new: list[Finding]
    baselined: int  # findings the baseline absorbed
    stale: int  # baseline entries (counted) that matched no finding: fixed since
    # Entries (counted) that matched no finding because none of their files was read.
    not_evaluated: int = 0


def unread_by(inputs: Iterable[str] | None, baseline: str) -> Callable[[str], bool] | None:
    """Whether a file a baseline entry names (a repository path) was left out of a run that
    read ``inputs``: it still exists, under the top level of the repository holding the
    ``baseline`` file (else the working directory, as ``repository_path`` keys it), and the
    run did not read it. None when the run read no files (cluster mode): nothing can tell."""
    if inputs is None:
        return None
    read = {repository_path(file) for file in inputs if is_file_path(file)}
    home = os.path.dirname(os.path.abspath(baseline))
    root = git_root(home) or os.getcwd()

    def unread(file: str) -> bool:
        return file not in read and os.path.exists(os.path.join(root, file))

    return unread


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
    version = data.get("version")
    if version not in READS or isinstance(version, bool):
        raise BaselineError(
            f"baseline {path}: version {version!r} is not supported "
            f"(this gpulint reads versions {READS[0]} to {READS[-1]}; rewrite it with "
            "--write-baseline)"
        )
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise BaselineError(f"baseline {path}: entries must be a list")
    counts: Counter[Fingerprint] = Counter()
    files: dict[Fingerprint, set[str]] = {}
    for index, entry in enumerate(entries):
        where = f"baseline {path}: entries[{index}]"
        key, count = _entry(entry, where)
        counts[key] += count
        found = _files(entry, where) if key.file is None else []
        if found:
            files.setdefault(key, set()).update(found)
    return Baseline(counts, {key: tuple(sorted(found)) for key, found in files.items()})


def _files(entry: dict[str, Any], where: str) -> list[str]:
    found = entry.get("files", [])
    if not isinstance(found, list) or not all(isinstance(f, str) for f in found):
        raise BaselineError(f"{where}: files must be a list of strings")
    return found


def _entry(entry: Any, where: str) -> tuple[Fingerprint, int]:
    if not isinstance(entry, dict):
        raise BaselineError(f"{where}: must be an object")
    count = entry.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise BaselineError(f"{where}: count must be a whole number of at least 1")
    fields = _FILE_FIELDS if "file" in entry else _OBJECT_FIELDS
    optional = _OPTIONAL_FIELDS if fields is _OBJECT_FIELDS else ()
    unknown = sorted(set(entry) - {*fields, *optional, "count"})
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
