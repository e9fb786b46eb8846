"""The query prometheus-adapter sends for an HPA, built the way the adapter builds it.

prometheus-adapter v0.12 (kubernetes-sigs/prometheus-adapter@01919d0:pkg/naming/
metrics_query.go ``Build``, ``BuildExternal``, ``processQueryParts``): for a custom metric the
label matchers are the HPA's metric selector, requirement by requirement in the order of
their keys (a ``labels.Selector`` keeps them sorted), then ``<namespace label>="<ns>"``, then
``<resource label>="<name>"`` (``=~"a|b"`` for several objects); ``.GroupBy`` is the resource
label. For an external metric they are the selector and the namespace matcher (unless
``resources.namespaced: false``); ``.GroupBy`` is empty. ``.LabelValuesByName`` holds every
label matched, the selector's included, its values joined with ``|``. Values are quoted with
Go's ``%q``; a requirement's values are a sorted set (``Values().List()``).

Pod names follow their controllers: a Deployment's pods are ``<deployment>-<pod-template-hash>-
<5 characters>``, a StatefulSet's ``<statefulset>-<ordinal>`` (kubernetes pkg/controller).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpulint.chain.adapter import EXTERNAL, AdapterRule, canonical_resource
from gpulint.input.document import as_dict, as_list
from gpulint.metrics.querytemplate import render

# Resources without a namespace: the adapter adds no namespace matcher for them.
CLUSTER_SCOPED = ("namespaces", "nodes", "persistentvolumes")


def go_quote(value: str) -> str:
    """Go's ``%q`` for the strings that occur in label values (JSON escapes agree for ASCII)."""
    return json.dumps(value, ensure_ascii=False)


def label_eq(label: str, value: str) -> str:
    return f"{label}={go_quote(value)}"


def label_matches(label: str, value: str) -> str:
    return f"{label}=~{go_quote(value)}"


def _requirements(selector: Mapping[str, Any] | None) -> list[tuple[str, str, list[str]]]:
    """An HPA ``metric.selector`` as a ``labels.Selector`` holds it: (key, operator, values)
    sorted by key, each requirement's values a sorted set."""
    found: list[tuple[str, str, list[str]]] = []
    data = as_dict(selector)
    for key, value in as_dict(data.get("matchLabels")).items():
        if isinstance(key, str) and isinstance(value, str | int | float | bool):
            found.append((key, "Equals", [str(value)]))
    for item in as_list(data.get("matchExpressions")):
        expression = as_dict(item)
        label, operator = expression.get("key"), expression.get("operator")
        if isinstance(label, str) and operator in ("In", "NotIn", "Exists", "DoesNotExist"):
            values = sorted({str(v) for v in as_list(expression.get("values"))})
            found.append((label, str(operator), values))
    return sorted(found, key=lambda requirement: requirement[0])


def _matcher(key: str, operator: str, values: list[str]) -> str:
    """``selectMatcher`` and ``selectTargetValue``: one value is = or !=, several a regex;
    In and NotIn are always regexes; Exists is != "", DoesNotExist = ""."""
    joined = "|".join(values)
    if operator == "Exists":
        return f"{key}!={go_quote('')}"
    if operator == "DoesNotExist":
        return f"{key}={go_quote('')}"
    if operator == "Equals":
        return label_eq(key, joined) if len(values) == 1 else label_matches(key, joined)
    if operator == "In":
        return label_matches(key, joined)
    return f"{key}!~{go_quote(joined)}"


def selector_matchers(selector: Mapping[str, Any] | None) -> list[str]:
    """An HPA ``metric.selector`` as the adapter turns it into Prometheus matchers."""
    return [_matcher(key, op, values) for key, op, values in _requirements(selector)]


def selector_values(selector: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """What the selector adds to ``.LabelValuesByName``: each label and its values."""
    return {key: values for key, _, values in _requirements(selector)}


@dataclass(frozen=True, slots=True)
class QueryLabels:
    """Which Prometheus labels a rule uses for the objects a query is about."""

    resource: str | None  # canonical ("pods"); None for external rules
    object_label: str | None
    namespace_label: str | None
    namespaced: bool


def mapping_for(rule: AdapterRule, resource: str | None = None) -> QueryLabels:
    """The labels the adapter would use for ``resource`` (default: pods, else the first one
    the rule maps other than namespaces)."""
    resources = rule.resources
    namespace_label = resources.label_for("namespaces")
    if rule.kind == EXTERNAL:
        return QueryLabels(None, None, namespace_label, resources.namespaced is not False)
    if resource is None:
        if resources.label_for("pods"):
            resource = "pods"
        else:
            mapped = [r for r in resources.overrides.values() if r != "namespaces"]
            resource = mapped[0] if mapped else ("namespaces" if namespace_label else "pods")
    resource = canonical_resource(resource)
    object_label = resources.label_for(resource)
    namespaced = resource not in CLUSTER_SCOPED
    return QueryLabels(resource, object_label, namespace_label if namespaced else None, namespaced)


def object_matchers(
    mapping: QueryLabels, namespace: str | None, objects: Sequence[str], pattern: str | None = None
) -> list[str]:
    """``.LabelMatchers`` without the selector part: namespace, then the objects."""
    found: list[str] = []
    if mapping.namespaced and namespace and mapping.namespace_label:
        found.append(label_eq(mapping.namespace_label, namespace))
    if mapping.object_label:
        if objects:
            if len(objects) == 1:
                found.append(label_eq(mapping.object_label, objects[0]))
            else:
                found.append(label_matches(mapping.object_label, "|".join(objects)))
        elif pattern:
            # The pods are not known without the cluster; a pattern that matches exactly the
            # names their controller gives them asks Prometheus the same question.
            found.append(label_matches(mapping.object_label, pattern))
    return found


def render_query(
    rule: AdapterRule,
    mapping: QueryLabels,
    series: str,
    namespace: str | None,
    objects: Sequence[str],
    pattern: str | None = None,
    selector: Mapping[str, Any] | None = None,
) -> str:
    """The metricsQuery as the adapter renders it (raises querytemplate errors)."""
    template = rule.metrics_query or ""
    # The selector's matchers first, then the namespace and the objects (metrics_query.go).
    matchers = selector_matchers(selector)
    matchers += object_matchers(mapping, namespace, objects, pattern)
    group_by = [mapping.object_label] if mapping.object_label else []
    values: dict[str, list[str]] = selector_values(selector)
    if mapping.namespaced and namespace and mapping.namespace_label:
        values[mapping.namespace_label] = [namespace]
    if mapping.object_label and (objects or pattern):
        values[mapping.object_label] = list(objects) or [pattern or ""]
    return render(template, series, matchers, group_by, values)


# --- pod names ------------------------------------------------------------------------------

# Deployment pods: <name>-<pod-template-hash>-<random>: the hash is rand.SafeEncodeString of a
# 32-bit FNV hash (up to 10 characters), the suffix 5 characters of the same alphabet.
_DEPLOYMENT = "{name}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}"
_PATTERNS = {
    "Deployment": (_DEPLOYMENT, "{name}-<hash>-<id>"),
    "Rollout": (_DEPLOYMENT, "{name}-<hash>-<id>"),
    "DeploymentConfig": ("{name}-[0-9]+-[a-z0-9]{{5}}", "{name}-<version>-<id>"),
    "ReplicaSet": ("{name}-[a-z0-9]{{5}}", "{name}-<id>"),
    "ReplicationController": ("{name}-[a-z0-9]{{5}}", "{name}-<id>"),
    "StatefulSet": ("{name}-[0-9]+", "{name}-<n>"),
    # LeaderWorkerSet: leaders <lws>-<group>, workers <lws>-<group>-<index>.
    "LeaderWorkerSet": ("{name}-[0-9]+(-[0-9]+)?", "{name}-<group>[-<index>]"),
    "CloneSet": ("{name}-[a-z0-9]{{5}}", "{name}-<id>"),
}


def pod_name_pattern(kind: str, name: str) -> tuple[str, str]:
    """(RE2 pattern, human form) of the pod names a controller gives its pods."""
    pattern, human = _PATTERNS.get(kind or "Deployment", _PATTERNS["Deployment"])
    return pattern.format(name=regex_literal(name)), human.format(name=name)


# RE2's metacharacters (re2/syntax.txt). Object names the API server accepts are DNS labels or
# subdomains, whose only one is the dot; a name from a file that no API server checked can
# hold any of them, and must still match only itself.
_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


def regex_literal(text: str) -> str:
    """``text`` as an RE2 pattern that matches exactly it (a dot stays ``\\.``, as before)."""
    return _RE2_SPECIAL.sub(r"\\\1", text)


def matches_pattern(pattern: str, value: str) -> bool:
    try:
        return re.fullmatch(pattern, value) is not None
    except re.error:
        return False
