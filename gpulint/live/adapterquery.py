"""The query prometheus-adapter sends for an HPA, built the way the adapter builds it.

prometheus-adapter v0.12 pkg/naming/metrics_query.go: for a custom metric the label matchers
are ``<namespace label>="<ns>"``, then ``<resource label>="<name>"`` (``=~"a|b"`` for several
objects), then the HPA's metric selector; ``.GroupBy`` is the resource label. For an external
metric they are the namespace matcher (unless ``resources.namespaced: false``) and the
selector; ``.GroupBy`` is empty. Values are quoted with Go's ``%q``.

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


def selector_matchers(selector: Mapping[str, Any] | None) -> list[str]:
    """An HPA ``metric.selector`` as the adapter turns it into Prometheus matchers."""
    found: list[str] = []
    data = as_dict(selector)
    for key, value in as_dict(data.get("matchLabels")).items():
        if isinstance(key, str) and isinstance(value, str | int | float | bool):
            found.append(label_eq(key, str(value)))
    for item in as_list(data.get("matchExpressions")):
        expression = as_dict(item)
        label, operator = expression.get("key"), expression.get("operator")
        values = [str(v) for v in as_list(expression.get("values"))]
        if not isinstance(label, str):
            continue
        key = label
        if operator == "In":
            found.append(label_matches(key, "|".join(values)))
        elif operator == "NotIn":
            found.append(f"{key}!~{go_quote('|'.join(values))}")
        elif operator == "Exists":
            found.append(f'{key}!=""')
        elif operator == "DoesNotExist":
            found.append(f'{key}=""')
    return found


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
    matchers = object_matchers(mapping, namespace, objects, pattern)
    matchers.extend(selector_matchers(selector))
    group_by = [mapping.object_label] if mapping.object_label else []
    values: dict[str, list[str]] = {}
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
    # Object names are DNS labels or subdomains: only the dot needs escaping.
    return pattern.format(name=name.replace(".", "\\.")), human.format(name=name)


def matches_pattern(pattern: str, value: str) -> bool:
    try:
        return re.fullmatch(pattern, value) is not None
    except re.error:
        return False
