"""Charts as Helm would install them, prepared offline: dependencies, library charts, and the
values a user must supply.

``helm template`` refuses a chart whose ``dependencies:`` are not in its ``charts/``
directory (Helm: pkg/action/dependency.go ``CheckDependencies``), although many are
buildable offline or never rendered:

* a ``file://`` dependency is a chart in the repository: gpulint copies the chart into a
  private temporary directory and puts the dependency (and its own ``file://`` ones) into
  the copy's ``charts/``, as ``helm dependency build`` would, without writing to the
  repository or reaching the network;
* a remote dependency (``https://``, ``oci://``, a repository alias) that ``charts/`` does not
  hold is left out of the copy's ``Chart.yaml``. When the values disable it (its
  ``condition:``, Helm: pkg/chartutil/dependencies.go ``processDependencyConditions``) Helm
  would not render it either; otherwise the chart is rendered without it and a note names it.

A ``type: library`` chart (Helm: "Library Charts") holds only helpers and cannot be installed:
it is not rendered, and a note says so.

A template that ``required``s a value the user supplies at install (``required "set
image.repository" .Values.image.repository``, or ``(index .Values "image" "repository")``
for keys that are not Go identifiers) is rendered with a stand-in for it, a placeholder
gpulint's rules treat as unknown (``${...}``), and a note names the values stood in.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from collections.abc import Callable
from typing import Any

from gpulint.core.paths import display_path, within
from gpulint.input.document import as_dict, as_list, position_of
from gpulint.input.units.boundary import inside, real, tree_problem
from gpulint.input.units.filetree import remove_tree
from gpulint.input.units.gofields import CHART, REQUIREMENTS, misspelled
from gpulint.input.units.tools import BudgetSpent
from gpulint.input.units.tracked import Spend, TrackedTree
from gpulint.input.yamlparse import YamlError, parse_documents

# What a private copy may hold: charts hold hundreds of files, not tens of thousands.
MAX_FILES = 20_000
MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 5  # file:// dependencies of dependencies
_CHART_NAME = re.compile(r"[A-Za-z0-9_.-]{1,253}")
REQUIRED_RETRIES = 5  # renders with stand-ins for `required` values, at most
STAND_IN = "${gpulint-stand-in:%s}"
_META_LIMIT = 1 << 20


def chart_metadata(chart: str) -> dict[str, Any]:
    """Chart.yaml of ``chart`` (with ``requirements.yaml``'s dependencies for a v1 chart)."""
    data = _read_yaml(os.path.join(chart, "Chart.yaml"))
    if "dependencies" not in data:
        requirements = _read_yaml(os.path.join(chart, "requirements.yaml"))
        if requirements.get("dependencies"):
            data = {**data, "dependencies": requirements["dependencies"]}
    return data


def folded_chart_key(chart: str) -> tuple[int, int, str, str] | None:
    """The first key of ``chart``'s Chart.yaml (or requirements.yaml) that Helm takes for a
    field it does not spell exactly (``Dependencies:``, a dependency's ``Repository:``:
    ``gpulint.input.units.gofields``): (line, column, the key, the field); None when every
    key is spelled as Helm documents it."""
    for name, struct in (("Chart.yaml", CHART), ("requirements.yaml", REQUIREMENTS)):
        data = _read_yaml(os.path.join(chart, name))
        for found in misspelled(data, struct):
            line, column = position_of(data, found.path)
            return line, column, found.key, found.field
    return None


def is_library(chart: str) -> bool:
    return chart_metadata(chart).get("type") == "library"


def _read_yaml(path: str, confined: bool = True) -> dict[str, Any]:
    """The first document of a chart's YAML file, as a mapping; ``confined``: only when the
    file really is in its directory (a link out of the chart is never read)."""
    if confined:
        found, home = real(path), real(os.path.dirname(path) or ".")
        if found is None or home is None or not within(found, home):
            return {}
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _META_LIMIT:
            return {}
        with open(path, "rb") as handle:
            documents = list(parse_documents(handle.read(_META_LIMIT)))
    except (OSError, YamlError, RecursionError, ValueError):
        return {}
    value = documents[0].value if documents else None
    return value if isinstance(value, dict) else {}


class Dependency:
    """One entry of ``dependencies:``."""

    def __init__(self, data: dict[str, Any]) -> None:
        name = data.get("name")
        self.name = name if isinstance(name, str) else ""
        alias = data.get("alias")
        self.key = alias if isinstance(alias, str) and alias else self.name  # its values key
        repository = data.get("repository")
        self.repository = repository if isinstance(repository, str) else ""
        condition = data.get("condition")
        self.condition = condition if isinstance(condition, str) else ""
        self.tags = [t for t in as_list(data.get("tags")) if isinstance(t, str)]

    @property
    def local_path(self) -> str | None:
        if self.repository.startswith("file://"):
            return self.repository[len("file://") :]
        return None

    def shown(self) -> str:
        where = self.repository or "no repository"
        return f"{self.key} ({where})"


def vendored_names(chart: str, tracked: TrackedTree | None = None) -> set[str]:
    """The chart names ``charts/`` holds (directories and ``.tgz`` archives); with
    ``tracked``, only those git tracks: an archive ``helm dependency build`` wrote and git
    ignores is not handed to Helm, so its dependency counts as absent."""
    found: set[str] = set()
    directory = os.path.join(chart, "charts")
    try:
        entries = sorted(os.listdir(directory))
    except OSError:
        return found
    for entry in entries:
        path = os.path.join(directory, entry)
        if os.path.isdir(path):
            if tracked is not None and not tracked.readable(os.path.join(path, "Chart.yaml")):
                continue
            name = chart_metadata(path).get("name")
            found.add(name if isinstance(name, str) else entry)
        elif entry.endswith(".tgz"):
            if tracked is not None and not tracked.readable(path):
                continue
            # name-1.2.3.tgz: the name is everything before the version.
            found.add(re.sub(r"-v?\d[\w.+-]*\.tgz$", "", entry))
    return found


def enabled(dependency: Dependency, values: dict[str, Any]) -> bool:
    """Would Helm render the dependency with these values? Its ``condition:`` (the first of
    its comma-separated paths that holds a boolean decides), else its ``tags:`` (any true
    tag enables it, all false disable it), else yes."""
    for path in dependency.condition.split(","):
        path = path.strip()
        if not path:
            continue
        node: Any = values
        for step in path.split("."):
            node = node.get(step) if isinstance(node, dict) else None
        if isinstance(node, bool):
            return node
    tags = as_dict(values.get("tags"))
    states = [tags[t] for t in dependency.tags if isinstance(tags.get(t), bool)]
    if states:
        return any(states)
    return True


def merged_values(chart: str, values_files: list[str]) -> dict[str, Any]:
    """The chart's values.yaml with the user's values files over it (maps merged)."""
    values = _read_yaml(os.path.join(chart, "values.yaml"))
    for file in values_files:
        values = _merge(values, _read_yaml(file, confined=False))  # given by the user
    return values


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class Prepared:
    """A chart ready for ``helm template``: the directory to render (the chart itself, or a
    private copy), what the copy vendored, and what it left out."""

    def __init__(self, chart: str) -> None:
        self.chart = chart
        self.directory = chart
        self.copy: str | None = None
        # Where a vendored dependency is in the rendered chart (``charts/a/charts/b``) -> its
        # real directory.
        self.vendored: dict[str, str] = {}
        self.left_out: list[Dependency] = []  # remote, absent, and enabled
        self.disabled: list[Dependency] = []  # remote, absent, and turned off by the values
        self.problem: str | None = None  # why it cannot be prepared (GL705)

    def remove(self) -> None:
        if self.copy is not None:
            remove_tree(self.copy)
            self.copy = None

    def unmirrored(self, text: str) -> str:
        if self.copy is None:
            return text
        return text.replace(os.path.join(self.copy, "chart"), display_path(self.chart)).replace(
            self.copy, "<gpulint temp>"
        )

    def note(self, unit: str) -> str | None:
        if not self.left_out:
            return None
        shown = ", ".join(d.shown() for d in self.left_out[:5])
        more = len(self.left_out) - 5
        if more > 0:
            shown += f" and {more} more"
        return (
            f"chart {unit} was rendered without its remote dependencies {shown}: gpulint does "
            "not download charts, so what they would install was not judged"
        )


def prepare(
    chart: str,
    values_files: list[str],
    boundaries: tuple[str, ...],
    tracked: TrackedTree,
    spend: Spend,
    scan: Callable[[str], str | None] = tree_problem,
) -> Prepared:
    """The chart to render, always a copy of what git tracks (``tracked``): the run's copy
    of the chart when every dependency is in ``charts/``, else a private copy with its
    ``file://`` dependencies vendored and absent remote ones left out. ``spend`` counts what
    is copied against the run's budget; ``scan`` looks at a dependency's tree (once per run)."""
    prepared = Prepared(chart)
    dependencies = [
        Dependency(as_dict(d)) for d in as_list(chart_metadata(chart).get("dependencies"))
    ]
    vendored = vendored_names(chart, tracked)
    absent = [d for d in dependencies if d.name and d.name not in vendored]
    try:
        if not absent:
            prepared.directory = tracked.directory(chart, spend)
            return prepared
        expected = _expected_entries(chart, boundaries, tracked, spend)
        if expected > MAX_FILES:
            raise _Refused(_too_large())
        copy = tempfile.mkdtemp(prefix="gpulint-chart-")
        prepared.copy = copy
        target = os.path.join(copy, "chart")
        counter = _Counter(spend)
        source = real(chart)
        if source is None:
            raise _Refused(f"{display_path(chart)} cannot be resolved")
        tracked.copy(source, target, counter.spend)
        values = merged_values(chart, values_files)
        _vendor(prepared, chart, target, values, boundaries, tracked, counter, scan)
    except _Refused as refused:
        prepared.remove()
        prepared.problem = str(refused)
        return prepared
    except BudgetSpent as spent:
        prepared.remove()
        prepared.problem = str(spent)
        return prepared
    except OSError as error:
        prepared.remove()
        prepared.problem = f"its copy could not be made ({error.strerror})"
        return prepared
    except BaseException:
        prepared.remove()
        raise
    prepared.directory = target
    return prepared


class _Refused(Exception):
    pass


class _Counter:
    """What one chart's copy holds (files, directories and links, and bytes), within its own
    bounds and the run's budget."""

    def __init__(self, spend: Spend) -> None:
        self.entries = 0
        self.bytes = 0
        self._spend = spend

    def spend(self, entries: int, size: int) -> None:
        self.entries += entries
        self.bytes += size
        if self.entries > MAX_FILES or self.bytes > MAX_BYTES:
            raise _Refused(_too_large())
        self._spend(entries, size)


def _too_large() -> str:
    return (
        f"it and its dependencies hold more than {MAX_FILES:,} files, directories and links, "
        f"or {MAX_BYTES >> 20} MiB"
    )


def _expected_entries(
    chart: str, boundaries: tuple[str, ...], tracked: TrackedTree, spend: Spend
) -> int:
    """How many files the private copy of ``chart`` with its file:// dependencies would
    hold (each vendored where it is needed, as Helm nests them), counted from git's listing
    before anything is copied; past ``MAX_FILES`` it stops counting."""
    total = 0
    stack: list[tuple[str, int]] = [(chart, 0)]
    while stack and total <= MAX_FILES:
        source, depth = stack.pop()
        location = real(source)
        if location is None:
            continue
        total += tracked.count(location, spend)
        names = vendored_names(source, tracked)  # in charts/ already: counted with the chart
        for raw in as_list(chart_metadata(source).get("dependencies")):
            dependency = Dependency(as_dict(raw))
            local = dependency.local_path
            if local is None or depth >= MAX_DEPTH or dependency.name in names:
                continue
            names.add(dependency.name)
            path = os.path.normpath(os.path.join(source, local))
            if inside(path, boundaries) and os.path.isfile(os.path.join(path, "Chart.yaml")):
                stack.append((path, depth + 1))
    return total


def _vendor(
    prepared: Prepared,
    chart: str,
    copied: str,
    values: dict[str, Any],
    boundaries: tuple[str, ...],
    tracked: TrackedTree,
    counter: _Counter,
    scan: Callable[[str], str | None],
) -> None:
    """Put the chart's absent ``file://`` dependencies (and theirs, ``MAX_DEPTH`` levels)
    into the copy's charts/ directories, and rewrite each copied Chart.yaml without the
    absent remote ones: a loop over a stack of charts, not a recursion."""
    stack: list[tuple[str, str, dict[str, Any], int]] = [(chart, copied, values, 0)]
    while stack:
        source, target, scope, depth = stack.pop()
        metadata = chart_metadata(source)
        raws = as_list(metadata.get("dependencies"))
        vendored = vendored_names(source, tracked)
        kept: list[Any] = []
        children: list[tuple[str, str, dict[str, Any], int]] = []
        for raw in raws:
            dependency = Dependency(as_dict(raw))
            if not dependency.name or dependency.name in vendored:
                kept.append(raw)
                continue
            local = dependency.local_path
            if local is None:
                if enabled(dependency, scope):
                    prepared.left_out.append(dependency)
                else:
                    prepared.disabled.append(dependency)
                continue
            path = _dependency_directory(dependency, source, local, boundaries, tracked, depth)
            problem = scan(path)
            if problem is not None:
                raise _Refused(f"in its dependency {dependency.name}, {problem}")
            name = chart_metadata(path).get("name")
            name = name if isinstance(name, str) and name else dependency.name
            if not _CHART_NAME.fullmatch(name) or name in (".", ".."):
                # The directory it is copied to is named after it: never a path.
                raise _Refused(f"its dependency {dependency.name} has the chart name {name!r}")
            sub = os.path.join(target, "charts", name)
            kept.append(raw)
            if os.path.exists(sub):
                continue  # the same chart twice (two aliases): one copy serves both
            location = real(path)
            if location is None:
                raise _Refused(f"its dependency {dependency.name} cannot be resolved")
            tracked.copy(location, sub, counter.spend)
            if prepared.copy is not None:
                shown = os.path.relpath(sub, os.path.join(prepared.copy, "chart"))
                prepared.vendored[shown.replace(os.sep, "/")] = path
            children.append((path, sub, as_dict(scope.get(dependency.key)), depth + 1))
        _rewrite(target, metadata, kept)
        stack.extend(reversed(children))  # the first dependency's own ones next


def _dependency_directory(
    dependency: Dependency,
    source: str,
    local: str,
    boundaries: tuple[str, ...],
    tracked: TrackedTree,
    depth: int,
) -> str:
    """The directory of a ``file://`` dependency, refused when it is outside the repository,
    not a chart git tracks, or nested too deep."""
    path = os.path.normpath(os.path.join(source, local))
    if not inside(path, boundaries):
        raise _Refused(
            f"its dependency {dependency.name} ({dependency.repository}) is outside the repository"
        )
    if not os.path.isfile(os.path.join(path, "Chart.yaml")):
        raise _Refused(
            f"its dependency {dependency.name} ({dependency.repository}) is not a chart directory"
        )
    unreadable = tracked.unreadable(os.path.join(path, "Chart.yaml"))
    if unreadable is not None:
        raise _Refused(
            f"its dependency {dependency.name} ({dependency.repository}) cannot be handed to "
            f"Helm: {unreadable}"
        )
    if depth >= MAX_DEPTH:
        raise _Refused(f"its file:// dependencies nest more than {MAX_DEPTH} deep")
    return path


def _rewrite(target: str, metadata: dict[str, Any], dependencies: list[Any]) -> None:
    """The copy's Chart.yaml with only ``dependencies`` (JSON is YAML), and no lock file
    (it describes the dependencies as they were)."""
    data = {key: value for key, value in metadata.items() if key != "dependencies"}
    if dependencies:
        data["dependencies"] = dependencies
    for name in ("Chart.lock", "requirements.lock", "requirements.yaml"):
        path = os.path.join(target, name)
        if os.path.lexists(path):
            os.remove(path)
    with open(os.path.join(target, "Chart.yaml"), "w", encoding="utf-8") as handle:
        json.dump(data, handle, default=str)


# --- values a user supplies at install ----------------------------------------------------

# `required "message" .Values.a.b` and `.Values.a.b | required "message"`, and the same with
# the value written `index .Values "a" "b"` (keys that are not Go identifiers).
_VALUE = r"\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)"
_MESSAGE = r"(\"(?:[^\"\\]|\\.)*\"|`[^`]*`)"
_REQUIRED_CALL = re.compile(r"required\s+" + _MESSAGE + r"\s+\(?" + _VALUE)
_REQUIRED_PIPE = re.compile(_VALUE + r"\s*\|\s*required\s+" + _MESSAGE)
_INDEX = (
    r"index\s+\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
    r"((?:\s+(?:\"(?:[^\"\\]|\\.)*\"|`[^`]*`))+)"
)
_REQUIRED_INDEX_CALL = re.compile(r"required\s+" + _MESSAGE + r"\s+\(\s*" + _INDEX)
_REQUIRED_INDEX_PIPE = re.compile(_INDEX + r"\s*\)?\s*\|\s*required\s+" + _MESSAGE)
_INDEX_KEY = re.compile(r"\"(?:[^\"\\]|\\.)*\"|`[^`]*`")
# Helm: `execution error at (chart/templates/x.yaml:7:20): <the message>`.
_EXECUTION_ERROR = re.compile(r"execution error at \(([^():]+):(\d+):\d+\): (.*)")
# ... or, when a parent of the value is missing too, Go's nil pointer before `required` runs:
# `template: chart/templates/x.yaml:7:20: executing "..." at <.Values.a.b>: nil pointer ...`,
# and for `index`: `... at <index .Values "a" "b">: error calling index: index of nil pointer`.
_NIL_POINTER = re.compile(
    r"template: ([^():\s]+):(\d+):\d+: executing \"[^\"]*\" at "
    r"<(?:\$?\.Values((?:\.[\w]+)+)>: nil pointer|" + _INDEX + r">: error calling index: "
    r"index of nil pointer)"
)


def _index_path(dotted: str, keys: str) -> str | None:
    """The value path of ``index .Values.a "b" "c"`` (``a.b.c``); None when a key is not a
    string gpulint can write back as a values path (empty, or holding a dot)."""
    steps = [step for step in dotted.split(".") if step]
    for quoted in _INDEX_KEY.findall(keys):
        key = _go_string(quoted)
        if not isinstance(key, str) or not key or "." in key:
            return None
        steps.append(key)
    return ".".join(steps) if steps else None


def required_value(message: str, chart: str, rendered: str) -> str | None:
    """The value path (``image.repository``, ``sub.token`` for a subchart's) a ``required``
    that failed asks for, found at the template line Helm's error names; None when the
    error is not a ``required`` failure gpulint can place."""
    match = _EXECUTION_ERROR.search(message)
    nil = _NIL_POINTER.search(message) if match is None else None
    nil_path: str | None = None
    if match is not None:
        source, line, said = match.group(1), int(match.group(2)), match.group(3)
    elif nil is not None:
        source, line, said = nil.group(1), int(nil.group(2)), ""
        if nil.group(3) is not None:
            nil_path = nil.group(3).strip(".")
        else:
            nil_path = _index_path(nil.group(4), nil.group(5))
            if nil_path is None:
                return None
    else:
        return None
    placed = _template_of(source, rendered)
    if placed is None:
        return None
    file, prefix = placed
    try:
        with open(file, "rb") as handle:
            lines = handle.read(_META_LIMIT).decode("utf-8", "replace").split("\n")
    except OSError:
        return None
    candidates: list[tuple[str, str]] = []
    for text in lines[max(line - 1, 0) : line]:
        for call in _REQUIRED_CALL.finditer(text):
            candidates.append((call.group(1), call.group(2).strip(".")))
        for pipe in _REQUIRED_PIPE.finditer(text):
            candidates.append((pipe.group(2), pipe.group(1).strip(".")))
        for call in _REQUIRED_INDEX_CALL.finditer(text):
            path = _index_path(call.group(2), call.group(3))
            if path is not None:
                candidates.append((call.group(1), path))
        for pipe in _REQUIRED_INDEX_PIPE.finditer(text):
            path = _index_path(pipe.group(1), pipe.group(2))
            if path is not None:
                candidates.append((pipe.group(3), path))
    for quoted, path in candidates:
        if nil_path is not None:
            chosen = path == nil_path
        else:
            text = _go_string(quoted)
            chosen = len(candidates) == 1 or (isinstance(text, str) and bool(text) and text in said)
        if chosen:
            return ".".join([*prefix, path])
    return None


def _template_of(source: str, rendered: str) -> tuple[str, list[str]] | None:
    """The template file a ``chart/templates/x.yaml`` (or a subchart's
    ``chart/charts/sub/templates/x.yaml``) of Helm's error names, inside ``rendered``, and the
    subcharts on the way; None for a name that leaves it."""
    head, _, rest = source.partition("/")
    prefix: list[str] = []
    parts = rest.split("/")
    while len(parts) > 2 and parts[0] == "charts":
        prefix.append(parts[1])
        parts = parts[2:]
    file = os.path.join(rendered, *[p for q in prefix for p in ("charts", q)], *parts)
    if not head or ".." in parts or not within(os.path.realpath(file), os.path.realpath(rendered)):
        return None
    return file, prefix


def _go_string(quoted: str) -> Any:
    """A Go string literal's text (interpreted or raw); as written when it does not parse."""
    try:
        return json.loads(quoted) if quoted.startswith('"') else quoted.strip("`")
    except ValueError:
        return quoted


def stand_in_values(paths: list[str], directory: str) -> str:
    """A values file (in ``directory``, gpulint's own temporary one) setting each path to a
    placeholder; its name."""
    values: dict[str, Any] = {}
    for path in paths:
        node = values
        steps = path.split(".")
        for step in steps[:-1]:
            child = node.get(step)
            if not isinstance(child, dict):
                child = node[step] = {}
            node = child
        node[steps[-1]] = STAND_IN % path
    file = os.path.join(directory, "gpulint-stand-ins.yaml")
    with open(file, "w", encoding="utf-8") as handle:
        json.dump(values, handle)
    return file
