"""``.gpulint.yaml``: which rules run, at what severity, with which options.

Example::

    rules:
      GL102:
        severity: error
        min-scale-down-stabilization-seconds: 600
      GL110: off
    gpu-resources: ["example.com/gpu", "vendor.example/*"]
    gpu-device-classes: ["gpu.example.com"]
    metric-aliases:
      gpu_busy_percent: DCGM_FI_DEV_GPU_UTIL
    kserve:
      default-deployment-mode: Standard
      version: "0.15"           # how fixes spell deployment modes (Standard from 0.16)
    kubernetes-version: "1.35"  # the releases the clusters run (gpulint.engine.versions);
    keda-version: "2.18"        # each defaults to the newest when gpulint was made
    knative-version: "1.22"
    exclude: ["charts/*/templates/**"]
    units: ["clusters/*"]       # one lint unit per matching directory ("." : the whole tree)
    chart-values:               # the values files a chart is rendered with (paths in the chart)
      charts/inference: [values-prod.yaml]
    clusters:                   # which directories one cluster runs (docs/context.md)
      prod:
        applications: ["apps/*/overlays/prod"]
        platform: ["platform/prod", "monitoring"]

The file is validated with JSON Schema; mistakes are reported with their line and column.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from typing import Any

from gpulint.core.model import Severity
from gpulint.engine.versions import (
    CONFIG,
    KEDA,
    KNATIVE,
    KSERVE,
    KUBERNETES,
    RELEASE,
    SETTINGS,
    Release,
    Versions,
    parse_release,
)
from gpulint.input.document import position_of
from gpulint.input.yamlparse import YamlError, parse_documents, rebuilt_map

CONFIG_NAMES = (".gpulint.yaml", ".gpulint.yml")
KSERVE_VERSION = RELEASE
# The top-level keys that name a project's release (``kserve.version`` is under kserve:).
VERSION_KEYS = {SETTINGS[p]: p for p in (KUBERNETES, KEDA, KNATIVE)}


def parse_kserve_version(text: str) -> tuple[int, int] | None:
    """``v0.15.2`` -> (0, 15)."""
    release = parse_release(text)
    return (release.major, release.minor) if release else None


class ConfigError(Exception):
    """The mistakes of a configuration, each with where it is: all of them, so that one run
    shows everything to correct (``file``, ``line``, ``column`` and ``message`` are the
    first's; the text is one ``file:line:col: message`` line per mistake)."""

    def __init__(
        self,
        file: str,
        line: int,
        column: int,
        message: str,
        more: Sequence[tuple[int, int, str]] = (),
    ) -> None:
        self.problems = [(line, column, message), *more]
        super().__init__("\n".join(f"{file}:{ln}:{col}: {text}" for ln, col, text in self.problems))
        self.file, self.line, self.column, self.message = file, line, column, message

    @classmethod
    def of(cls, file: str, problems: Sequence[tuple[int, int, str]]) -> ConfigError:
        (line, column, message), *more = sorted(problems)
        return cls(file, line, column, message, more)


class RuleSettings:
    __slots__ = ("enabled", "options", "severity")

    def __init__(
        self,
        enabled: bool = True,
        severity: Severity | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.enabled = enabled
        self.severity = severity
        self.options: dict[str, Any] = {} if options is None else options

    def __repr__(self) -> str:
        return f"RuleSettings(enabled={self.enabled!r}, severity={self.severity!r})"


class ClusterDeclaration:
    """One entry of ``clusters:``: the directories (globs relative to the configuration) whose
    units one cluster runs, as applications and as its platform."""

    __slots__ = ("applications", "name", "platform")

    def __init__(
        self, name: str, applications: Sequence[str] = (), platform: Sequence[str] = ()
    ) -> None:
        self.name = name
        self.applications = list(applications)
        self.platform = list(platform)

    def __repr__(self) -> str:
        return f"ClusterDeclaration({self.name!r}, {self.applications!r}, {self.platform!r})"


class Settings:
    """The resolved configuration every front door hands to the engine."""

    __slots__ = (
        "chart_values",
        "clusters",
        "exclude",
        "gpu_device_classes",
        "gpu_resources",
        "kserve_default_mode",
        "metric_aliases",
        "rules",
        "source",
        "units",
        "versions",
    )

    def __init__(
        self,
        rules: dict[str, RuleSettings] | None = None,
        gpu_resources: list[str] | None = None,
        metric_aliases: dict[str, str] | None = None,
        kserve_default_mode: str = "Knative",
        exclude: list[str] | None = None,
        source: str | None = None,
        units: list[str] | None = None,
        gpu_device_classes: list[str] | None = None,
    ) -> None:
        self.rules: dict[str, RuleSettings] = {} if rules is None else rules
        self.gpu_resources: list[str] = [] if gpu_resources is None else gpu_resources
        # DRA device classes of GPUs, besides gpu.nvidia.com and mig.nvidia.com.
        self.gpu_device_classes: list[str] = (
            [] if gpu_device_classes is None else gpu_device_classes
        )
        self.metric_aliases: dict[str, str] = {} if metric_aliases is None else metric_aliases
        self.kserve_default_mode = kserve_default_mode
        # The releases of Kubernetes, KEDA, Knative and KServe the clusters run.
        self.versions = Versions()
        self.exclude: list[str] = [] if exclude is None else exclude
        self.source = source
        # Globs (relative to the configuration's directory) of directories that are one
        # lint unit each.
        self.units: list[str] = [] if units is None else units
        # Named clusters and the directories each runs (gpulint.engine.context).
        self.clusters: list[ClusterDeclaration] = []
        # Chart directory globs (relative to the configuration's directory) -> the values
        # files (relative to the chart) it is rendered with (gpulint.input.units.plan).
        self.chart_values: dict[str, list[str]] = {}

    def __repr__(self) -> str:
        return f"Settings(rules={self.rules!r}, gpu_resources={self.gpu_resources!r})"

    def with_versions(self, versions: Versions) -> Settings:
        """A copy judging for ``versions`` (what a cluster says it runs)."""
        import copy

        copied = copy.copy(self)
        copied.versions = versions
        return copied

    @property
    def kserve_version(self) -> tuple[int, int] | None:
        """The KServe release (major, minor): decides how deployment modes are spelled."""
        release = self.versions.kserve
        return (release.major, release.minor)

    @kserve_version.setter
    def kserve_version(self, version: tuple[int, int] | None) -> None:
        if version is not None:
            self.versions = self.versions.with_release(KSERVE, Release(*version), CONFIG)

    def rule(self, rule_id: str) -> RuleSettings:
        return self.rules.get(rule_id) or RuleSettings()

    def excluded(self, path: str) -> bool:
        if not self.exclude:
            return False  # asked of every file and directory a walk meets
        normalized = path.replace(os.sep, "/")
        return any(
            fnmatch.fnmatch(normalized, pattern) or fnmatch.fnmatch(normalized, f"*/{pattern}")
            for pattern in self.exclude
        )


def find_config(start: str | None = None) -> str | None:
    """``.gpulint.yaml`` in the working directory or the nearest parent."""
    directory = os.path.realpath(start or os.getcwd())
    while True:
        for name in CONFIG_NAMES:
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate):
                return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def config_schema(rule_options: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The JSON Schema of the file; each rule contributes the schema of its options."""
    severity = {"enum": ["error", "warning", "info"]}
    directories = {"type": "array", "items": {"type": "string", "minLength": 1}}
    rule_entries: dict[str, Any] = {}
    for rule_id, options in sorted(rule_options.items()):
        rule_entries[rule_id] = {
            "oneOf": [
                {"type": "boolean"},
                {"enum": ["off", "on"]},
                {
                    "type": "object",
                    "properties": {"enabled": {"type": "boolean"}, "severity": severity, **options},
                    "additionalProperties": False,
                },
            ]
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "rules": {"type": "object", "properties": rule_entries, "additionalProperties": False},
            "gpu-resources": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "gpu-device-classes": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "metric-aliases": {
                "type": "object",
                "additionalProperties": {"type": "string", "minLength": 1},
            },
            "kserve": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "default-deployment-mode": {
                        "enum": ["Knative", "Standard", "Serverless", "RawDeployment", "ModelMesh"]
                    },
                    "version": _release_schema(),
                },
            },
            **{key: _release_schema() for key in VERSION_KEYS},
            "exclude": {"type": "array", "items": {"type": "string"}},
            "units": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "chart-values": {
                "type": "object",
                "additionalProperties": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string", "minLength": 1},
                },
            },
            "clusters": {
                "type": "object",
                "propertyNames": {"pattern": CLUSTER_NAME.pattern},
                "additionalProperties": {
                    "type": "object",
                    "additionalProperties": False,
                    "minProperties": 1,
                    "properties": {
                        "applications": directories,
                        "platform": directories,
                    },
                },
            },
        },
    }


def _release_schema() -> dict[str, Any]:
    """A release, quoted: ``"1.35"``, ``v2.18.1`` (an unquoted 1.30 is the number 1.3)."""
    return {"type": "string", "pattern": RELEASE.pattern}


def load_settings(
    path: str,
    rule_options: dict[str, dict[str, Any]],
    rule_names: dict[str, str] | None = None,
) -> Settings:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise ConfigError(path, 1, 1, f"cannot read configuration: {error.strerror}") from None
    try:
        documents = list(parse_documents(raw))
    except YamlError as error:
        raise ConfigError(path, error.line, error.column, error.message) from None
    data = documents[0].value if documents else None
    if data is None:
        return Settings(source=path)
    duplicates = [
        (dup.line, dup.column, f"key {dup.key!r} is written twice")
        for dup in documents[0].duplicates
    ]
    try:
        settings = settings_from_data(data, path, rule_options, rule_names)
    except ConfigError as error:
        raise ConfigError.of(path, duplicates + error.problems) from None
    if duplicates:
        raise ConfigError.of(path, duplicates)
    return settings


def _rule_keys(data: Any, rule_names: dict[str, str], problems: list[tuple[int, int, str]]) -> Any:
    """``rules:`` keyed by rule IDs: names (``hpa-missing-behavior``) become their IDs, and a
    key that is neither is a problem at the key, with the nearest rule (added to
    ``problems``, the key left out)."""
    if not isinstance(data, dict) or not isinstance(data.get("rules"), dict) or not rule_names:
        return data
    import difflib

    rules = data["rules"]
    ids = set(rule_names.values())
    kept: list[tuple[Any, Any, int]] = []
    seen: set[str] = set()
    for index, (key, value) in enumerate(rules.items()):
        rule_id = key.upper() if isinstance(key, str) and key.upper() in ids else None
        if rule_id is None and isinstance(key, str):
            rule_id = rule_names.get(key.lower())
        if rule_id is None:
            line, column = position_of(data, ("rules", key))
            text = str(key)
            near = difflib.get_close_matches(text.upper().replace("O", "0"), sorted(ids), n=1)
            near = near or difflib.get_close_matches(text.lower(), sorted(rule_names), n=1)
            hint = f"; did you mean {near[0]}?" if near else " (see `gpulint rules`)"
            problems.append((line, column, f"rules: no rule {text!r}{hint}"))
            continue
        if rule_id in seen:
            line, column = position_of(data, ("rules", key))
            problems.append((line, column, f"rules: {rule_id} is configured twice"))
            continue
        seen.add(rule_id)
        kept.append((rule_id, value, index))
    renamed = rebuilt_map(rules, kept)
    return rebuilt_map(
        data,
        (
            (key, renamed if key == "rules" else value, index)
            for index, (key, value) in enumerate(data.items())
        ),
    )


def settings_from_data(
    data: Any,
    path: str,
    rule_options: dict[str, dict[str, Any]],
    rule_names: dict[str, str] | None = None,
) -> Settings:
    """Settings from a parsed configuration; ``rule_names`` maps rule names to IDs (names
    are accepted wherever IDs are). Raises ConfigError at the offending key or value."""
    import jsonschema  # only when a configuration exists: it costs start-up time

    problems: list[tuple[int, int, str]] = []
    data = _rule_keys(data, rule_names or {}, problems)

    validator = jsonschema.Draft202012Validator(config_schema(rule_options))
    # One problem per place: the errors under one key are alternatives of one mistake.
    by_place: dict[tuple[str, ...], list[Any]] = {}
    for error in validator.iter_errors(data):
        top = tuple(str(p) for p in list(error.absolute_path)[:3])
        by_place.setdefault(top, []).append(error)
    for errors in by_place.values():
        error = jsonschema.exceptions.best_match(errors) or errors[0]
        where = list(error.absolute_path)
        line, column = position_of(data, where)
        location = ".".join(str(p) for p in where) or "(top level)"
        problems.append((line, column, f"{location}: {_describe(error)}"))
    for where, patterns in _directory_patterns(data):
        for index, pattern in enumerate(patterns):
            problem = unit_pattern_problem(pattern) if isinstance(pattern, str) else None
            if problem is not None:
                line, column = position_of(data, [*where, index])
                shown = ".".join(str(p) for p in where)
                problems.append((line, column, f"{shown}.{index}: {problem}"))
    chart_values = data.get("chart-values")
    for pattern in chart_values if isinstance(chart_values, dict) else ():
        # A chart directory glob, as units: are; its values files are checked where they
        # are read (inside the repository, tracked by git: gpulint.input.units.render_helm).
        problem = unit_pattern_problem(pattern) if isinstance(pattern, str) else None
        if problem is not None:
            line, column = position_of(data, ["chart-values", pattern])
            problems.append((line, column, f"chart-values: {problem}"))
    if problems:
        raise ConfigError.of(path, problems)
    settings = Settings(source=path)
    for rule_id, entry in (data.get("rules") or {}).items():
        if entry is False or entry == "off":
            settings.rules[rule_id] = RuleSettings(enabled=False)
        elif entry is True or entry == "on":
            settings.rules[rule_id] = RuleSettings()
        else:
            options = {k: v for k, v in entry.items() if k not in ("enabled", "severity")}
            severity = Severity.parse(entry["severity"]) if "severity" in entry else None
            settings.rules[rule_id] = RuleSettings(entry.get("enabled", True), severity, options)
    settings.gpu_resources = list(data.get("gpu-resources") or [])
    settings.gpu_device_classes = list(data.get("gpu-device-classes") or [])
    settings.metric_aliases = dict(data.get("metric-aliases") or {})
    version = (data.get("kserve") or {}).get("version")
    if isinstance(version, str):
        settings.kserve_version = parse_kserve_version(version)
    for key, project in VERSION_KEYS.items():
        release = parse_release(data[key]) if isinstance(data.get(key), str) else None
        if release is not None:
            settings.versions = settings.versions.with_release(project, release, CONFIG)
    mode = (data.get("kserve") or {}).get("default-deployment-mode")
    if mode:
        settings.kserve_default_mode = {"Serverless": "Knative", "RawDeployment": "Standard"}.get(
            mode, mode
        )
    settings.exclude = list(data.get("exclude") or [])
    settings.units = list(data.get("units") or [])
    settings.chart_values = {
        pattern: list(files) for pattern, files in (data.get("chart-values") or {}).items()
    }
    for name, entry in (data.get("clusters") or {}).items():
        settings.clusters.append(
            ClusterDeclaration(name, entry.get("applications") or (), entry.get("platform") or ())
        )
    return settings


def _directory_patterns(data: Any) -> list[tuple[list[str], list[Any]]]:
    """Every list of directory globs of the configuration, with where it is written."""
    if not isinstance(data, dict):
        return []
    found: list[tuple[list[str], list[Any]]] = []
    if isinstance(data.get("units"), list):
        found.append((["units"], data["units"]))
    clusters = data.get("clusters")
    for name, entry in clusters.items() if isinstance(clusters, dict) else ():
        for key in ("applications", "platform"):
            patterns = entry.get(key) if isinstance(entry, dict) else None
            if isinstance(patterns, list):
                found.append((["clusters", name, key], patterns))
    return found


# Cluster names: what reports print and `gpulint context` lists.
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
# ``units:`` globs name directories of the repository: ``clusters/*``, ``envs/*/regions/*``,
# or ``.`` for the configuration's own directory.
MAX_UNIT_PATTERN_DEPTH = 8
MAX_UNIT_PATTERN_LENGTH = 512


def unit_pattern_problem(pattern: str) -> str | None:
    """Why a ``units:`` glob is refused, or None: it must be relative to the configuration's
    directory, stay inside it, and name at most ``MAX_UNIT_PATTERN_DEPTH`` levels, so that
    matching it is a bounded walk of the repository, never of the filesystem."""
    shown = repr(pattern[:80])
    if len(pattern) > MAX_UNIT_PATTERN_LENGTH:
        return f"{shown}...: a pattern longer than {MAX_UNIT_PATTERN_LENGTH} characters"
    if any(ord(c) < 32 for c in pattern):
        return f"{shown}: a pattern with control characters"
    if pattern.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[/\\]", pattern):
        return (
            f"{shown}: an absolute pattern; units are directories of the repository, "
            "written relative to .gpulint.yaml (for example clusters/*)"
        )
    parts = [p for p in re.split(r"[/\\]", pattern) if p not in ("", ".")]
    if ".." in parts:
        return f"{shown}: a pattern that leaves the repository (..)"
    if len(parts) > MAX_UNIT_PATTERN_DEPTH:
        return (
            f"{shown}: {len(parts)} levels deep; unit patterns may name at most "
            f"{MAX_UNIT_PATTERN_DEPTH} (for example clusters/*/regions/*)"
        )
    return None


def _describe(error: Any) -> str:
    path = list(error.absolute_path)
    names_release = bool(path) and (
        path[-1] in VERSION_KEYS or (len(path) == 2 and path == ["kserve", "version"])
    )
    if names_release and error.validator in ("type", "pattern"):
        shown = error.instance if isinstance(error.instance, str) else repr(error.instance)
        if isinstance(error.instance, int | float) and not isinstance(error.instance, bool):
            return (
                f'write the release quoted, as "1.35": unquoted, YAML reads it as the number '
                f"{shown} (and 1.30 as 1.3)"
            )
        return f'{shown!r} is not a release such as "1.35" or v1.35.2'
    if error.validator == "additionalProperties":
        return str(error.message).replace("Additional properties are not allowed", "unknown key")
    if error.validator == "oneOf" and isinstance(error.instance, dict):
        for sub in error.context or []:
            if sub.validator == "additionalProperties":
                return str(sub.message).replace(
                    "Additional properties are not allowed", "unknown option"
                )
            if sub.validator in ("enum", "type", "minimum", "maximum") and sub.absolute_path:
                return f"{'.'.join(str(p) for p in sub.absolute_path)}: {sub.message}"
        return "expected true, false, off, on or a mapping of enabled/severity/options"
    return str(error.message)
