"""The rule pack: what each rule declares about itself, read from its module, and which run.

Everything the engine, the CLI, the webhook, cluster mode and the trace know about a rule
before running it comes from the constants at the top of its module (``ID``, ``NAME``,
``SEVERITY``, ``SCOPE``, ``REQUIRES``, ``PROBES_CLUSTER``, ``STAGES``, ``STAGE_REACH``,
``FIXES``, ``EXPLAINS``; see ``gpulint.engine.rule``), never from lists kept elsewhere.

Importing every rule costs more than linting a small file, so the index reads those
constants from the source without importing the modules: each declaration is a top-level
assignment of a literal (``SEVERITY = Severity.WARNING``: a member of ``Severity``), parsed
on its own with ``ast``. A declaration that is missing, repeated or not a literal is an
error naming the rule module; the engine imports a rule only when its scope has something
to check, and then checks that the module says what the index read.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from gpulint.core.model import Severity
from gpulint.engine.rule import (
    FIX_KINDS,
    REQUIREMENTS,
    SCOPES,
    STAGE_REACHES,
    TRACE_STAGES,
    RuleSpec,
)


class RuleDeclarationError(ValueError):
    """A rule module declares something about itself that the engine cannot read."""


class RuleInfo(NamedTuple):
    """What the engine knows about a rule before importing it."""

    id: str
    name: str
    severity: Severity
    scope: str
    requires: str | None  # "live", "cluster" or "replay": data only that front door collects
    module: str
    probes_cluster: bool = False  # needs cluster mode to ask the cluster's metrics APIs
    stages: tuple[str, ...] = ()  # the links of ``gpulint trace`` its findings break
    fixes: tuple[str, ...] = ()  # "safe", "unsafe": the fix plans its findings can carry
    stage_reach: str = "object"  # "unit": its findings break its stages on every trace
    # The rules whose findings about the same item follow from one of its own
    # (gpulint.engine.causes).
    explains: tuple[str, ...] = ()
    # The offline rules whose finding at the same place one of its own findings settles with
    # what it observed (gpulint.engine.settled): the two are reported as one finding.
    settles: tuple[str, ...] = ()


# A declaration starts a line (a top-level statement); its value may span lines. The
# pattern starts with the newline before it (the source is searched with one put in front),
# a literal the regex engine scans for quickly: a multiline ``^`` is tried at every character.
_DECLARATION = re.compile(
    r"\n(ID|NAME|SEVERITY|SCOPE|REQUIRES|PROBES_CLUSTER|STAGES|STAGE_REACH|FIXES|EXPLAINS|SETTLES)"
    r"\s*(?::[^=\n]*)?="
)
_REQUIRED = ("ID", "NAME", "SEVERITY", "SCOPE")
_RULE_ID = re.compile(r"GL\d{3}")
_RULE_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")

_index: list[RuleInfo] | None = None
_explained: dict[str, frozenset[str]] | None = None
_settled: dict[str, frozenset[str]] | None = None
_stages: dict[str, frozenset[str]] | None = None
_loaded: dict[str, RuleSpec] = {}
_by_id: tuple[list[RuleInfo], dict[str, RuleInfo]] | None = None  # rule_by_id: ID or name


def rule_index() -> list[RuleInfo]:
    """The rule pack, ordered by ID, read from the modules' source without importing them.

    Raises RuleDeclarationError naming the module whose declarations cannot be read."""
    global _index
    if _index is None:
        found = []
        # The package's folders, as imports see them (the rules/ folder installs as it).
        package = importlib.import_module("gpulint.rules")
        for directory in list(getattr(package, "__path__", [])):
            for entry in sorted(os.listdir(directory)):
                if not (entry.startswith("gl") and entry.endswith(".py")):
                    continue
                with open(os.path.join(directory, entry), encoding="utf-8") as handle:
                    source = handle.read()
                found.append(read_declarations(f"gpulint.rules.{entry[:-3]}", source))
        seen: dict[str, str] = {}
        for info in found:
            for key in (info.id, info.name):
                if key in seen:
                    raise RuleDeclarationError(
                        f"{info.module}: {key} is already declared by {seen[key]}"
                    )
                seen[key] = info.module
        _check_explains(found)
        _check_settles(found)
        _index = sorted(found, key=lambda info: info.id)
    return _index


def _check_explains(found: list[RuleInfo]) -> None:
    """Every rule an ``EXPLAINS`` names exists, and no rule explains itself through others:
    a finding that follows from another must lead back to one that follows from none."""
    known = {info.id: info for info in found}
    for info in found:
        for explained in info.explains:
            if explained not in known:
                raise RuleDeclarationError(f"{info.module}: EXPLAINS names no rule {explained}")
            if explained == info.id:
                raise RuleDeclarationError(f"{info.module}: EXPLAINS names the rule itself")
    for info in found:
        reached: set[str] = set()
        waiting = list(info.explains)
        while waiting:
            rule = waiting.pop()
            if rule == info.id:
                raise RuleDeclarationError(
                    f"{info.module}: EXPLAINS leads back to {info.id} through the rules it names"
                )
            if rule not in reached:
                reached.add(rule)
                waiting.extend(known[rule].explains)


def _check_settles(found: list[RuleInfo]) -> None:
    """A rule settles only rules that exist and run without the data it needs: a finding
    with evidence takes the place of one judged from the input alone."""
    known = {info.id: info for info in found}
    for info in found:
        if info.settles and info.requires is None:
            raise RuleDeclarationError(
                f"{info.module}: SETTLES needs REQUIRES (the data that settles the findings)"
            )
        for settled in info.settles:
            other = known.get(settled)
            if other is None:
                raise RuleDeclarationError(f"{info.module}: SETTLES names no rule {settled}")
            if other.requires is not None:
                raise RuleDeclarationError(
                    f"{info.module}: SETTLES names {settled}, which needs {other.requires} "
                    "data too; only a rule judged from the input alone is settled"
                )


def settled_by() -> dict[str, frozenset[str]]:
    """Rule ID -> the rules whose findings settle its findings at the same place
    (``SETTLES``)."""
    global _settled
    if _settled is None:
        found: dict[str, set[str]] = {}
        for info in rule_index():
            for settled in info.settles:
                found.setdefault(settled, set()).add(info.id)
        _settled = {rule: frozenset(by) for rule, by in found.items()}
    return _settled


def explained_by() -> dict[str, frozenset[str]]:
    """Rule ID -> the rules whose findings explain its findings (``EXPLAINS``)."""
    global _explained
    if _explained is None:
        found: dict[str, set[str]] = {}
        for info in rule_index():
            for explained in info.explains:
                found.setdefault(explained, set()).add(info.id)
        _explained = {rule: frozenset(by) for rule, by in found.items()}
    return _explained


def forget_index() -> None:
    """Read the rule modules again at the next ``rule_index()`` (a rule was added)."""
    global _index, _stages, _explained, _settled
    _index = _stages = _explained = _settled = None
    _loaded.clear()


def read_declarations(module: str, source: str) -> RuleInfo:
    """A rule module's declarations, validated; ``module`` names it in errors."""
    values: dict[str, tuple[Any, int]] = {}
    # In "\n" + source, the newline before a line that starts at index i of the source is at
    # index i: match.start() is where the declaration starts in the source.
    matches = list(_DECLARATION.finditer("\n" + source, _after_docstring(source)))
    statements = _statements(source, [match.start() for match in matches])
    line, counted = 1, 0
    for match, statement in zip(matches, statements, strict=True):
        name = match.group(1)
        line += source.count("\n", counted, match.start())
        counted = match.start()
        if name in values:
            raise RuleDeclarationError(
                f"{module}:{line}: {name} is declared twice (first at line {values[name][1]})"
            )
        values[name] = (_literal(module, name, line, statement), line)
    missing = [name for name in _REQUIRED if name not in values]
    if missing:
        raise RuleDeclarationError(
            f"{module}: no {', '.join(missing)} declared (top-level assignments of literals)"
        )
    return _validated(module, values)


def _statements(source: str, starts: list[int]) -> list[ast.stmt | None]:
    """The top-level statements that start at ``starts``, parsed: all at once when each
    ends where its brackets close (one parse per module costs less than one per line),
    else one by one."""
    texts = []
    for start in starts:
        end = source.find("\n", start)
        end = len(source) if end < 0 else end
        while _open_brackets(source[start:end]) > 0 and end < len(source):
            following = source.find("\n", end + 1)
            end = len(source) if following < 0 else following
        texts.append(source[start:end])
    try:
        body = ast.parse("\n".join(texts)).body
    except SyntaxError:
        body = []
    if len(body) == len(starts):
        return list(body)
    return [_statement(source, start) for start in starts]


def _open_brackets(text: str) -> int:
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


def _after_docstring(source: str) -> int:
    """Where the module docstring ends (an example in it is not a declaration)."""
    stripped = source.lstrip()
    for quote in ('"""', "'''"):
        if stripped.startswith(quote):
            opened = len(source) - len(stripped)
            closed = source.find(quote, opened + 3)
            return len(source) if closed < 0 else closed + 3
    return 0


def _statement(source: str, start: int) -> ast.stmt | None:
    """The top-level statement that starts at ``start`` (it may span lines), parsed."""
    end = start
    while True:
        newline = source.find("\n", end)
        end = len(source) if newline < 0 else newline + 1
        try:
            body = ast.parse(source[start:end]).body
        except SyntaxError:
            if end >= len(source):
                return None
            continue
        return body[0] if len(body) == 1 else None


def _literal(module: str, name: str, line: int, statement: ast.stmt | None) -> Any:
    value = None
    if (isinstance(statement, ast.Assign) and len(statement.targets) == 1) or isinstance(
        statement, ast.AnnAssign
    ):
        value = statement.value
    if name == "SEVERITY":
        if (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id == "Severity"
            and value.attr in Severity.__members__
        ):
            return Severity[value.attr]
        raise RuleDeclarationError(
            f"{module}:{line}: SEVERITY must be a member of Severity "
            f"({', '.join('Severity.' + s for s in Severity.__members__)})"
        )
    if value is None:
        raise RuleDeclarationError(f"{module}:{line}: {name} must be one assignment of a literal")
    try:
        return ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise RuleDeclarationError(
            f"{module}:{line}: {name} must be a literal (a string, a tuple of strings or a bool)"
        ) from None


def _validated(module: str, declared: dict[str, tuple[Any, int]]) -> RuleInfo:
    values = {name: value for name, (value, _) in declared.items()}

    def where(name: str) -> str:
        """``module:line`` of a declaration (the module alone for one left out)."""
        return f"{module}:{declared[name][1]}" if name in declared else module

    def text(name: str, pattern: re.Pattern[str] | None, allowed: Iterable[str] = ()) -> str:
        value = values[name]
        choices = tuple(allowed)
        if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
            shape = f" matching {pattern.pattern}" if pattern is not None else ""
            raise RuleDeclarationError(
                f"{where(name)}: {name} must be a string{shape}, not {value!r}"
            )
        if choices and value not in choices:
            raise RuleDeclarationError(
                f"{where(name)}: unknown {name} {value!r} (one of {', '.join(choices)})"
            )
        return value

    def words(name: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
        value = values.get(name, ())
        if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
            raise RuleDeclarationError(f"{where(name)}: {name} must be a tuple of strings")
        unknown = [v for v in value if v not in allowed]
        if unknown:
            raise RuleDeclarationError(
                f"{where(name)}: unknown {name} {', '.join(unknown)} (any of {', '.join(allowed)})"
            )
        return value

    probes = values.get("PROBES_CLUSTER", False)
    if not isinstance(probes, bool):
        raise RuleDeclarationError(
            f"{where('PROBES_CLUSTER')}: PROBES_CLUSTER must be True or False"
        )
    requires = text("REQUIRES", None, REQUIREMENTS) if "REQUIRES" in values else None
    if probes and requires != "cluster":
        raise RuleDeclarationError(
            f'{where("PROBES_CLUSTER")}: PROBES_CLUSTER needs REQUIRES = "cluster"'
        )
    stages = words("STAGES", TRACE_STAGES)
    reach = text("STAGE_REACH", None, STAGE_REACHES) if "STAGE_REACH" in values else "object"
    if reach == "unit" and not stages:
        raise RuleDeclarationError(
            f'{where("STAGE_REACH")}: STAGE_REACH = "unit" needs STAGES (the links its '
            "findings break on every trace of the unit)"
        )
    return RuleInfo(
        text("ID", _RULE_ID),
        text("NAME", _RULE_NAME),
        values["SEVERITY"],
        text("SCOPE", None, SCOPES),
        requires,
        module,
        probes,
        stages,
        words("FIXES", FIX_KINDS),
        reach,
        _rule_ids(values.get("EXPLAINS", ()), where("EXPLAINS"), "EXPLAINS"),
        _rule_ids(values.get("SETTLES", ()), where("SETTLES"), "SETTLES"),
    )


def _rule_ids(value: Any, where: str, name: str) -> tuple[str, ...]:
    if not isinstance(value, tuple) or not all(
        isinstance(v, str) and _RULE_ID.fullmatch(v) for v in value
    ):
        raise RuleDeclarationError(f"{where}: {name} must be a tuple of rule IDs (GL802)")
    return value


def load_rule(info: RuleInfo) -> RuleSpec:
    """The rule, imported; its module must say what the index read from its source."""
    spec = _loaded.get(info.id)
    if spec is None:
        spec = RuleSpec.from_module(importlib.import_module(info.module))
        imported = (spec.id, spec.name, spec.severity, spec.scope, spec.fixes)
        if imported != (info.id, info.name, info.severity, info.scope, info.fixes):
            raise RuleDeclarationError(f"{info.module}: constants do not match what the index read")
        _loaded[info.id] = spec
    return spec


def all_rules() -> list[RuleSpec]:
    """Every rule, imported (for documentation, SARIF descriptors and configuration)."""
    return [load_rule(info) for info in rule_index()]


def rule_by_id(rule_id: str) -> RuleSpec | None:
    """The rule with that ID or name, imported; None when there is none."""
    index = rule_index()
    global _by_id
    if _by_id is None or _by_id[0] is not index:
        names = {info.id: info for info in index}
        names.update((info.name, info) for info in index)
        _by_id = (index, names)
    info = _by_id[1].get(rule_id.upper()) or _by_id[1].get(rule_id.lower())
    return load_rule(info) if info is not None else None


def rules_requiring(requirement: str) -> frozenset[str]:
    """The IDs of the rules that run only with that data (``REQUIRES``)."""
    return frozenset(info.id for info in rule_index() if info.requires == requirement)


def stage_rules() -> dict[str, frozenset[str]]:
    """Trace stage -> the IDs of the rules whose findings break it (``STAGES``)."""
    global _stages
    if _stages is None:
        _stages = {
            stage: frozenset(info.id for info in rule_index() if stage in info.stages)
            for stage in TRACE_STAGES
        }
    return _stages


def unit_rules() -> dict[str, tuple[str, ...]]:
    """Rule ID -> the stages its findings break on every trace of the unit, wherever they are
    placed (``STAGE_REACH = "unit"``: findings about the unit's Prometheus)."""
    return {info.id: info.stages for info in rule_index() if info.stage_reach == "unit"}


def unknown_rule_patterns(patterns: Iterable[str]) -> list[tuple[str, str | None]]:
    """The patterns that name no rule: (pattern, the nearest rule ID or name, if any).

    A pattern is a rule ID (GL101), a rule name (hpa-cpu-on-gpu-workload), a prefix of IDs
    (GL1, GL10), or ALL."""
    index = rule_index()
    ids = [info.id for info in index]
    names = [info.name for info in index]
    unknown = []
    for pattern in patterns:
        upper = pattern.upper()
        if upper == "ALL" or pattern.lower() in names:
            continue
        if re.fullmatch(r"GL\d{1,3}", upper) and any(i.startswith(upper) for i in ids):
            continue
        import difflib  # only for a pattern that names no rule: difflib costs start-up

        near = difflib.get_close_matches(upper.replace("O", "0"), ids, n=1, cutoff=0.6)
        if not near:
            near = difflib.get_close_matches(pattern.lower(), names, n=1, cutoff=0.6)
        if not near:
            near = difflib.get_close_matches(upper, ids, n=1, cutoff=0.5)
        unknown.append((pattern, near[0] if near else None))
    return unknown


def rule_names() -> dict[str, str]:
    """Rule name -> rule ID (read from the sources, nothing imported)."""
    return {info.name: info.id for info in rule_index()}


def rule_option_schemas() -> dict[str, dict[str, Any]]:
    return {spec.id: spec.options for spec in all_rules()}


class Selection:
    """Which rules run: ``--select``/``--ignore`` take IDs or prefixes (GL1 = GL1xx)."""

    __slots__ = ("ignore", "select")

    def __init__(
        self,
        select: list[str] | None = None,
        ignore: list[str] | None = None,
    ) -> None:
        self.select: list[str] = [] if select is None else select
        self.ignore: list[str] = [] if ignore is None else ignore

    def __repr__(self) -> str:
        return f"Selection(select={self.select!r}, ignore={self.ignore!r})"

    def allows(self, spec: RuleSpec | RuleInfo) -> bool:
        if not self.select and not self.ignore:
            return True  # the usual case, asked once per rule of every review

        def hit(patterns: list[str]) -> bool:
            return any(
                p.upper() == "ALL" or spec.id.startswith(p.upper()) or spec.name == p.lower()
                for p in patterns
            )

        if self.select and not hit(self.select):
            return False
        return not hit(self.ignore)
