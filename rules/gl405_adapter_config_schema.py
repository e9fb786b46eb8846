"""A prometheus-adapter config has a key, a type or a rule the adapter refuses at start-up.

## What it checks
The adapter's own config (a file, or the file inside a ConfigMap) and the rules a
prometheus-adapter chart values file renders into it (``rules.custom``, ``rules.external``,
``rules.resource``), as the adapter reads them:

* unknown or misplaced keys at any level, such as ``namespaced`` written on the rule instead
  of under ``resources`` or ``seriesquery`` for ``seriesQuery``;
* values of the wrong shape: ``overrides: {pod: pod}`` instead of
  ``{pod: {resource: pod}}``, a string where a list of rules or filters belongs,
  ``namespaced: "false"`` (a string, not a boolean);
* a ``seriesFilters`` entry with both ``is`` and ``isNot``, or neither;
* ``name.matches`` with two or more capture groups and no ``as``;
* regular expressions in ``name.matches`` or ``seriesFilters`` that Go's RE2 does not
  compile (look-arounds and back-references included).

Chart values outside the rules (``prometheus``, ``replicas`` ...) are the chart's business,
not the adapter's schema, and are not judged.

## Why is this bad?
The adapter reads its config with ``yaml.UnmarshalStrict``: one unknown key anywhere and it
logs ``unable to load metrics discovery config`` and exits. The other mistakes are fatal a few
lines later, when it builds its rules (``unable to construct custom metrics provider``). The
pod crash-loops, the ``v1beta1.custom.metrics.k8s.io`` APIService goes unavailable and every
HPA that reads a custom or external metric stops scaling, not only the one whose rule is
wrong.

## Example
```yaml
rules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'
  namespaced: false              # belongs under resources
  resources:
    overrides:
      exported_pod: pod          # must be a mapping
  name:
    matches: "^(DCGM)_(.*)$"     # two groups and no `as`
```

## Use instead
```yaml
rules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'
  resources:
    namespaced: false
    overrides:
      exported_pod: {resource: pod}
  name:
    matches: "^DCGM_FI_DEV_(.*)$"
    as: "gpu_${1}"
```

## References
- kubernetes-sigs/prometheus-adapter#701: its maintainers propose deprecating the adapter in
  favour of KEDA's prometheus scaler (migration notes in #703).
- kubernetes-sigs/prometheus-adapter pkg/config/config.go (the schema) and
  pkg/config/loader.go (``yaml.UnmarshalStrict``).
- pkg/naming/metric_namer.go: "cannot have both an `is` ... and `isNot` ... expression in a
  single filter", "must have either an `is` or `isNot` expression in a filter", "must specify
  an 'as' value for name matcher".
- cmd/adapter/adapter.go: configuration and rule errors are fatal (``klog.Fatalf``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator
from typing import Any

from gpulint.ruleapi import (
    CONFIG_KEYS,
    FILTER_KEYS,
    NAME_KEYS,
    OVERRIDE_KEYS,
    RESOURCE_RULE_KEYS,
    RESOURCE_RULES_KEYS,
    RESOURCES_KEYS,
    RULE_KEYS,
    AdapterConfig,
    Context,
    Finding,
    Inventory,
    Path,
    Severity,
    abbreviated,
    as_dict,
    canonical_resource,
    compile_go_regex,
    edits,
    go_regex_problem,
)

ID = "GL405"
NAME = "adapter-config-schema"
SEVERITY = Severity.ERROR
SCOPE = "adapter-config"
FIXES = ("unsafe",)
STAGES = ("adapter-rule",)

STRICT = (
    "The adapter reads its config with yaml.UnmarshalStrict and exits at start-up: "
    '"unable to load metrics discovery config"'
)
# What the adapter logs when it cannot build the rules of each list (cmd/adapter/adapter.go).
FATAL = {
    "custom": '"unable to construct custom metrics provider"',
    "external": '"unable to construct external metrics provider"',
    "resource": '"unable to install resource metrics API"',
}


# Where each level's keys live, to name them in messages and to spot misplaced keys.
_LEVELS: dict[str, tuple[str, ...]] = {
    "the config's top level": CONFIG_KEYS,
    "a rule": RULE_KEYS,
    "resources": RESOURCES_KEYS,
    "an override": OVERRIDE_KEYS,
    "name": NAME_KEYS,
    "a seriesFilters entry": FILTER_KEYS,
    "resourceRules": RESOURCE_RULES_KEYS,
    "resourceRules.cpu/memory": RESOURCE_RULE_KEYS,
}


# Unknown keys reported one by one in one mapping; the rest are counted in one more finding.
UNKNOWN_KEYS_LISTED = 20


def check(config: AdapterConfig, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    schema = _Schema(config, ctx)
    if config.form == AdapterConfig.HELM_VALUES:
        base: Path = (*config.base, "rules")
        rules = as_dict(config.document.get(base))
        for key in ("custom", "external"):
            if key in rules and rules[key] is not None:
                yield from schema.rule_list(rules[key], (*base, key), f"rules.{key}")
        if rules.get("resource") is not None:
            yield from schema.resource_rules(
                rules["resource"], (*base, "resource"), "rules.resource"
            )
        return
    root = config.document.get(config.base) if config.base else config.document.data
    if not isinstance(root, dict):
        return
    yield from schema.unknown_keys(root, config.base, "the config's top level")
    for key in ("rules", "externalRules"):
        if root.get(key) is not None:
            yield from schema.rule_list(root[key], (*config.base, key), key)
    if root.get("resourceRules") is not None:
        yield from schema.resource_rules(
            root["resourceRules"], (*config.base, "resourceRules"), "resourceRules"
        )


class _Schema:
    def __init__(self, config: AdapterConfig, ctx: Context) -> None:
        self.config = config
        self.ctx = ctx
        self.api = "custom"  # the rule list being read: custom, external or resource

    def fatal(self) -> str:
        return f"The adapter exits at start-up while building its rules: {FATAL[self.api]}"

    def finding(
        self, path: Path, message: str, fix: str, plan: edits.FixPlan | None = None
    ) -> Finding:
        return self.ctx.finding(
            self.config.document, path, message, fix, obj=self.config.ref, plan=plan
        )

    def where(self) -> str:
        """The config, for a headline: its name cut when very long."""
        return abbreviated(self.config.describe_short(), 48)

    # --- keys and shapes ---------------------------------------------------------------

    def unknown_keys(self, data: dict[str, Any], path: Path, level: str) -> Iterator[Finding]:
        allowed = _LEVELS[level]
        unknown = [key for key in data if key not in allowed]
        if len(unknown) > UNKNOWN_KEYS_LISTED:
            # A mapping of thousands of unknown keys is not a config: name a few and count.
            rest = len(unknown) - UNKNOWN_KEYS_LISTED
            first = unknown[UNKNOWN_KEYS_LISTED]
            yield self.finding(
                (*path, first),
                f"{self.where()}: {rest:,} more keys that {level} does not have, from "
                f"{json.dumps(abbreviated(str(first), 32))} on. {STRICT}.",
                f"keep only {', '.join(allowed)} in {level}",
            )
            unknown = unknown[:UNKNOWN_KEYS_LISTED]
        for key in unknown:
            shown = json.dumps(key) if not isinstance(key, str) else f"`{abbreviated(key, 32)}`"
            home = [name for name, keys in _LEVELS.items() if key in keys and name != level]
            import difflib  # only for an unknown key: difflib costs start-up

            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            plan = None
            if home:
                detail = f"{shown} belongs in {home[0]}, not in {level}."
                fix = _move_fix(str(key), home[0], data[key])
            elif close:
                detail = f"{shown} is not a key of {level} (did you mean `{close[0]}`?)."
                fix = f"rename `{key}` to `{close[0]}`"
                if close[0] not in data:
                    # unsafe: the key takes effect once spelled right
                    plan = edits.unsafe(edits.Rename(self.config.document, (*path, key), close[0]))
            else:
                detail = f"{shown} is not a key of {level}. It has {', '.join(allowed)}."
                fix = f"delete `{key}`"
                plan = edits.unsafe(edits.Delete(self.config.document, (*path, key)))
            yield self.finding((*path, key), f"{self.where()}: {detail} {STRICT}.", fix, plan)

    def wrong_shape(self, path: Path, what: str, wanted: str, value: Any, fix: str) -> Finding:
        got = _yaml_kind(value)
        go_type = _GO_TYPES.get(wanted, wanted)
        return self.finding(
            path,
            f"{self.where()}: {what} must be {wanted}, not {got}. {STRICT} "
            f"(cannot unmarshal {got} into {go_type}).",
            fix,
        )

    def rule_list(self, items: Any, path: Path, label: str) -> Iterator[Finding]:
        self.api = "external" if label in ("externalRules", "rules.external") else "custom"
        if not isinstance(items, list):
            yield self.wrong_shape(
                path, label, "a list of rules", items, f"{path[-1]}:\n- seriesQuery: ..."
            )
            return
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                yield self.wrong_shape(
                    (*path, index),
                    f"{label}[{index}]",
                    "a rule (a mapping)",
                    item,
                    "- seriesQuery: ...\n  resources: ...\n  metricsQuery: ...",
                )
                continue
            yield from self.rule(item, (*path, index), f"{label}[{index}]")

    def rule(self, rule: dict[str, Any], path: Path, label: str) -> Iterator[Finding]:
        yield from self.unknown_keys(rule, path, "a rule")
        for key in ("seriesQuery", "metricsQuery"):
            if isinstance(rule.get(key), dict | list):
                yield self.wrong_shape(
                    (*path, key), f"{label}.{key}", "a string", rule[key], f"{key}: '...'"
                )
        if rule.get("resources") is not None:
            yield from self.resources(rule["resources"], (*path, "resources"), label)
        if rule.get("name") is not None:
            yield from self.name(rule["name"], (*path, "name"), label, rule.get("seriesQuery"))
        if rule.get("seriesFilters") is not None:
            yield from self.filters(rule["seriesFilters"], (*path, "seriesFilters"), label)

    def resources(self, data: Any, path: Path, label: str) -> Iterator[Finding]:
        if not isinstance(data, dict):
            yield self.wrong_shape(
                path,
                f"{label}.resources",
                "a mapping {template, overrides, namespaced}",
                data,
                "resources:\n  overrides:\n    namespace: {resource: namespace}\n"
                "    pod: {resource: pod}",
            )
            return
        yield from self.unknown_keys(data, path, "resources")
        if isinstance(data.get("template"), dict | list):
            yield self.wrong_shape(
                (*path, "template"),
                f"{label}.resources.template",
                "a string",
                data["template"],
                'template: "<<.Resource>>"',
            )
        namespaced = data.get("namespaced")
        if namespaced is not None and not isinstance(namespaced, bool):
            yield self.wrong_shape(
                (*path, "namespaced"),
                f"{label}.resources.namespaced",
                "a boolean",
                namespaced,
                f"namespaced: {'false' if str(namespaced).lower() == 'false' else 'true'}",
            )
        overrides = data.get("overrides")
        if overrides is None:
            return
        if not isinstance(overrides, dict):
            yield self.wrong_shape(
                (*path, "overrides"),
                f"{label}.resources.overrides",
                "a mapping of label to {group, resource}",
                overrides,
                "overrides:\n  namespace: {resource: namespace}\n  pod: {resource: pod}",
            )
            return
        for label_name, target in overrides.items():
            where = (*path, "overrides", label_name)
            if isinstance(target, dict):
                yield from self.unknown_keys(target, where, "an override")
                if not isinstance(target.get("resource"), str) or not target.get("resource"):
                    yield self.finding(
                        where,
                        f"{self.where()}: the override for label `{abbreviated(label_name, 32)}` "
                        f"names no `resource`. An empty resource cannot be mapped. "
                        f"{self.fatal()}.",
                        f"{label_name}: {{resource: pod}}"
                        + _namespace_line(str(label_name), "pod", overrides),
                    )
                continue
            resource = target if isinstance(target, str) and target else "pod"
            yield self.wrong_shape(
                where,
                f"the override for label `{abbreviated(label_name, 32)}`",
                "a mapping {group, resource}",
                target,
                f"{label_name}: {{resource: {resource}}}"
                + _namespace_line(str(label_name), resource, overrides),
            )

    def name(self, data: Any, path: Path, label: str, series_query: Any) -> Iterator[Finding]:
        if not isinstance(data, dict):
            yield self.wrong_shape(
                path,
                f"{label}.name",
                "a mapping {matches, as}",
                data,
                'name:\n  matches: "^(.*)$"\n  as: "${1}"',
            )
            return
        yield from self.unknown_keys(data, path, "name")
        matches = data.get("matches")
        if not isinstance(matches, str) or not matches:
            return
        compiled = yield from self.regex(matches, (*path, "matches"), "name.matches")
        as_value = data.get("as")
        if compiled is None or (isinstance(as_value, str) and as_value):
            return
        if compiled.groups >= 2:
            query = series_query if isinstance(series_query, str) else ""
            yield self.finding(
                (*path, "matches"),
                f"{self.where()}: name.matches has {compiled.groups} capture groups and no "
                "`as`. The adapter cannot tell which one is the name "
                f"(\"must specify an 'as' value for name matcher {json.dumps(matches)} "
                f'associated with series query {json.dumps(query)}"). {self.fatal()}.',
                f'{path[-1]}:\n  matches: {json.dumps(matches)}\n  as: "${{1}}_${{2}}"',
            )

    def filters(self, data: Any, path: Path, label: str) -> Iterator[Finding]:
        if not isinstance(data, list):
            yield self.wrong_shape(
                path,
                f"{label}.seriesFilters",
                "a list of {is|isNot} filters",
                data,
                'seriesFilters:\n- isNot: "^container_.*_total$"',
            )
            return
        for index, item in enumerate(data):
            where = (*path, index)
            if not isinstance(item, dict):
                yield self.wrong_shape(
                    where,
                    f"{label}.seriesFilters[{index}]",
                    "a mapping with `is` or `isNot`",
                    item,
                    f"- is: {json.dumps(str(item))}",
                )
                continue
            yield from self.unknown_keys(item, where, "a seriesFilters entry")
            is_value, is_not = item.get("is"), item.get("isNot")
            has_is = isinstance(is_value, str) and bool(is_value)
            has_not = isinstance(is_not, str) and bool(is_not)
            if has_is and has_not:
                yield self.finding(
                    where,
                    f"{self.where()}: seriesFilters[{index}] has both `is` and `isNot`. The "
                    f'adapter refuses it ("cannot have both an `is` ({json.dumps(is_value)}) '
                    f'and `isNot` ({json.dumps(is_not)}) expression in a single filter"). '
                    f"{self.fatal()}.",
                    f"- is: {json.dumps(is_value)}\n- isNot: {json.dumps(is_not)}",
                )
            elif not has_is and not has_not:
                yield self.finding(
                    where,
                    f"{self.where()}: seriesFilters[{index}] has neither `is` nor `isNot`. The "
                    'adapter refuses it ("must have either an `is` or `isNot` expression in a '
                    'filter"). '
                    f"{self.fatal()}.",
                    '- isNot: "^container_.*_total$"   # or delete the empty filter',
                )
            for key, value, ok in (("is", is_value, has_is), ("isNot", is_not, has_not)):
                if ok and isinstance(value, str):
                    yield from self.regex(value, (*where, key), f"seriesFilters {key}")

    def regex(
        self, pattern: str, path: Path, what: str
    ) -> Generator[Finding, None, re.Pattern[str] | None]:
        """Yield a finding if Go would not compile ``pattern``; return the compiled pattern."""
        problem = go_regex_problem(pattern)
        compiled = compile_go_regex(pattern) if problem is None else None
        if problem is not None:
            yield self.finding(
                path,
                f"{self.where()}: {what} is not a valid regular expression. Go cannot "
                f"compile {json.dumps(pattern)} ({problem}). {self.fatal()}.",
                f"rewrite {what} in RE2 syntax (https://github.com/google/re2/wiki/Syntax); "
                "to exclude names, add a seriesFilters `isNot` entry instead of a look-ahead",
            )
        return compiled

    def resource_rules(self, data: Any, path: Path, label: str) -> Iterator[Finding]:
        self.api = "resource"
        if not isinstance(data, dict):
            yield self.wrong_shape(
                path, label, "a mapping {cpu, memory, window}", data, f"{path[-1]}: {{}}"
            )
            return
        yield from self.unknown_keys(data, path, "resourceRules")
        for key in ("cpu", "memory"):
            part = data.get(key)
            if part is None:
                continue
            if not isinstance(part, dict):
                yield self.wrong_shape(
                    (*path, key),
                    f"{label}.{key}",
                    "a mapping {containerQuery, nodeQuery, resources, containerLabel}",
                    part,
                    f"{key}:\n  containerQuery: ...\n  nodeQuery: ...",
                )
                continue
            yield from self.unknown_keys(part, (*path, key), "resourceRules.cpu/memory")
            if part.get("resources") is not None:
                yield from self.resources(
                    part["resources"], (*path, key, "resources"), f"{label}.{key}"
                )


def _yaml_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "!!map"
    if isinstance(value, list):
        return "!!seq"
    if isinstance(value, bool):
        return f"!!bool `{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"!!{type(value).__name__} `{abbreviated(str(value), 32)}`"
    if value is None:
        return "!!null"
    return f"!!str `{abbreviated(str(value), 32)}`"


# Each shape as the adapter's Go type (pkg/config/config.go), for Go's own error wording.
_GO_TYPES = {
    "a list of rules": "[]config.DiscoveryRule",
    "a rule (a mapping)": "config.DiscoveryRule",
    "a string": "string",
    "a boolean": "bool",
    "a mapping {template, overrides, namespaced}": "config.ResourceMapping",
    "a mapping {containerQuery, nodeQuery, resources, containerLabel}": "config.ResourceRule",
    "a mapping of label to {group, resource}": "map[string]config.GroupResource",
    "a mapping {group, resource}": "config.GroupResource",
    "a mapping {matches, as}": "config.NameMapping",
    "a list of {is|isNot} filters": "[]config.RegexFilter",
    "a mapping with `is` or `isNot`": "config.RegexFilter",
    "a mapping {cpu, memory, window}": "config.ResourceRules",
}


def _move_fix(key: str, home: str, value: Any) -> str:
    shown = json.dumps(value) if not isinstance(value, dict | list) else "..."
    if home == "resources":
        return f"resources:\n  {key}: {shown}"
    if home == "name":
        return f"name:\n  {key}: {shown}"
    if home == "a rule":
        return f"move `{key}` up to the rule itself"
    return f"move `{key}` to {home}"


def _namespace_line(label: str, resource: str, overrides: dict[Any, Any]) -> str:
    """For a label mapped to pods in overrides that map no namespace, the namespace's line:
    pods live in a namespace, and once the config loads GL403 asks for it."""
    if canonical_resource(resource) != "pods":
        return ""
    for target in overrides.values():
        named = target.get("resource") if isinstance(target, dict) else target
        if isinstance(named, str) and canonical_resource(named) == "namespaces":
            return ""
    namespace = f"{label[: -len('pod')]}namespace" if label.endswith("pod") else "namespace"
    return f"\n{namespace}: {{resource: namespace}}   # pods live in a namespace"
