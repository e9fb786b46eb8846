"""The lists in deploy/ that follow from the kinds registry, and the command that writes them.

Which API groups and resources gpulint lists and watches (the RBAC rules of the webhook's
ServiceAccount) and which the API server sends the webhook, with which operations (the
ValidatingWebhookConfiguration's rules), are facts ``gpulint.kinds.registry`` holds: a kind
marked ``watched`` there is granted get, list and watch; one marked ``evaluated`` is sent on
CREATE and UPDATE. Both ways of installing carry them, generated:

* deploy/base (kustomize): the lines between a ``# BEGIN <block>`` and its ``# END <block>``
  comment in rbac.yaml, validatingwebhookconfiguration.yaml and, for each namespace whose
  ConfigMaps gpulint reads by name alone (``gpulint.cluster.kinds.NAMED_CONFIGMAPS``: Knative's
  config-autoscaler), configmaps-<namespace>.yaml, whose Role grants them by resourceNames.
  Everything around them (the other ConfigMap roles, namespaceSelector, failurePolicy,
  matchConditions) is written by hand.
* deploy/chart (Helm): templates/_kinds.tpl, whole; rbac.yaml and
  validatingwebhookconfiguration.yaml include its named templates.

Run ``python -m gpulint.webhook.deploy`` from the repository's root after changing the
registry; tests/webhook/test_deploy_generated.py fails while a checked-in file differs from
what it writes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from gpulint.cluster.kinds import CLUSTER_SCOPED, NAMED_CONFIGMAPS
from gpulint.kinds import registry
from gpulint.kinds.registry import WORKLOAD, KindSpec

COMMAND = "python -m gpulint.webhook.deploy"
VERBS = ("get", "list", "watch")  # read-only: gpulint never writes to the cluster
# A deletion is not judged: admission evaluates what the cluster becomes with the object in it.
OPERATIONS = ("CREATE", "UPDATE")

BASE_RBAC = Path("deploy/base/rbac.yaml")
BASE_WEBHOOK = Path("deploy/base/validatingwebhookconfiguration.yaml")
CHART_KINDS = Path("deploy/chart/templates/_kinds.tpl")

# The blocks of deploy/base, by the name their marker comments carry.
WATCHED = "watched kinds"
WORKLOADS = "evaluated workloads"
SCALING = "evaluated kinds"
NAMED = "configmaps read by name"


def named_configmaps_file(namespace: str) -> Path:
    return Path(f"deploy/base/configmaps-{namespace}.yaml")


class DeployError(Exception):
    """The registry cannot be written into deploy/, or a file lacks a block's markers."""


class RbacRule(NamedTuple):
    """get/list/watch on resources of one API group, and why they are read when not judged."""

    group: str
    resources: tuple[str, ...]
    why: tuple[str, ...]


class WebhookRule(NamedTuple):
    """One entry of a webhook's ``rules``: resources sharing an API group, versions and scope."""

    group: str
    versions: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str  # Namespaced | Cluster


def watched_rules() -> list[RbacRule]:
    """One rule per API group of the watched kinds, in the registry's order. A kind watched
    but not evaluated must say why (``KindSpec.why_watched``): a reader of the ClusterRole
    otherwise sees a grant nothing explains."""
    resources: dict[str, list[str]] = {}
    why: dict[str, list[str]] = {}
    for spec in registry.watched_specs():
        if not spec.evaluated and not spec.why_watched:
            raise DeployError(
                f"{spec.kind} ({spec.resource}) is watched but not evaluated: give its KindSpec "
                "a why_watched, the comment its RBAC rule carries"
            )
        resources.setdefault(spec.group, []).append(spec.plural)
        reasons = why.setdefault(spec.group, [])
        if spec.why_watched and spec.why_watched not in reasons:
            reasons.append(spec.why_watched)
    return [
        RbacRule(group, tuple(dict.fromkeys(plurals)), tuple(why[group]))
        for group, plurals in resources.items()
    ]


def _evaluated(workloads: bool) -> list[KindSpec]:
    found = []
    for spec in registry.KINDS:
        if not spec.evaluated or (spec.role == WORKLOAD) != workloads:
            continue
        if workloads and spec.template_paths:
            # The workloads webhook's matchConditions read the pod template at spec.template
            # (gpulint.cel.asksForGpus in the chart, its copy in deploy/base): a kind that
            # keeps it elsewhere would never be sent.
            raise DeployError(
                f"{spec.kind} keeps its pod templates outside spec.template: the workloads "
                "webhook's matchConditions would never send it; extend them first"
            )
        found.append(spec)
    return found


def webhook_rules(workloads: bool) -> list[WebhookRule]:
    """The rules of the workloads webhook (evaluated workload kinds, sent when they ask for
    GPUs) or of the scaling webhook (every other evaluated kind), one per API group, versions
    and scope, in the registry's order."""
    resources: dict[tuple[str, tuple[str, ...], str], list[str]] = {}
    for spec in _evaluated(workloads):
        scope = "Cluster" if spec.kind in CLUSTER_SCOPED else "Namespaced"
        resources.setdefault((spec.group, spec.versions, scope), []).append(spec.plural)
    if not resources:
        # A webhook without rules is never called: say so rather than install one that
        # judges nothing.
        which = "workload" if workloads else "non-workload"
        raise DeployError(
            f"no {which} kind is evaluated: its webhook in deploy/ would have no rules; "
            "remove the webhook from deploy/ first"
        )
    return [
        WebhookRule(group, versions, tuple(dict.fromkeys(plurals)), scope)
        for (group, versions, scope), plurals in resources.items()
    ]


def _flow(values: Iterable[str]) -> str:
    """``["a", "b"]``: a YAML flow sequence of double-quoted strings (JSON is YAML)."""
    return json.dumps(list(values))


def rbac_lines(rules: list[RbacRule]) -> list[str]:
    lines = []
    for rule in rules:
        lines += [f"# {why}" for why in rule.why]
        lines += [
            f"- apiGroups: {_flow([rule.group])}",
            f"  resources: {_flow(rule.resources)}",
            f"  verbs: {_flow(VERBS)}",
        ]
    return lines


def named_configmap_lines(names: Iterable[str]) -> list[str]:
    """A Role's rule that reads these ConfigMaps alone: RBAC lets a list or watch through
    when its fieldSelector is metadata.name=<one of them> (kubernetes.io RBAC, "Referring to
    resources")."""
    return [
        '- apiGroups: [""]',
        '  resources: ["configmaps"]',
        f"  resourceNames: {_flow(names)}",
        f"  verbs: {_flow(VERBS)}",
    ]


def webhook_lines(rules: list[WebhookRule]) -> list[str]:
    lines = []
    for rule in rules:
        lines += [
            f"- apiGroups: {_flow([rule.group])}",
            f"  apiVersions: {_flow(rule.versions)}",
            f"  resources: {_flow(rule.resources)}",
            f"  operations: {_flow(OPERATIONS)}",
            f"  scope: {rule.scope}",
        ]
    return lines


def blocks() -> dict[str, list[str]]:
    """What each marked block of deploy/base holds, by block name."""
    return {
        WATCHED: rbac_lines(watched_rules()),
        WORKLOADS: webhook_lines(webhook_rules(workloads=True)),
        SCALING: webhook_lines(webhook_rules(workloads=False)),
    }


def begin_marker(name: str) -> str:
    return f"# BEGIN {name}: generated by {COMMAND}"


def end_marker(name: str) -> str:
    return f"# END {name}"


def splice(text: str, name: str, lines: list[str], where: Path) -> str:
    """``text`` with the block ``name`` holding ``lines``, indented as its BEGIN marker is."""
    old = text.splitlines(keepends=True)
    begin = [i for i, line in enumerate(old) if line.strip() == begin_marker(name)]
    end = [i for i, line in enumerate(old) if line.strip() == end_marker(name)]
    if len(begin) != 1 or len(end) != 1 or end[0] < begin[0]:
        raise DeployError(
            f"{where}: needs one line `{begin_marker(name)}` and, below it, one line "
            f"`{end_marker(name)}` (found {len(begin)} and {len(end)})"
        )
    marker = old[begin[0]]
    indent = marker[: len(marker) - len(marker.lstrip())]
    body = [f"{indent}{line}\n" for line in lines]
    return "".join(old[: begin[0] + 1] + body + old[end[0] :])


def _define(name: str, lines: list[str]) -> list[str]:
    return [f'{{{{- define "{name}" -}}}}', *lines, "{{- end }}"]


def chart_kinds() -> str:
    """deploy/chart/templates/_kinds.tpl."""
    lines = [
        f"{{{{/* Written by {COMMAND} from gpulint.kinds.registry:",
        "edit the registry, not this file. */}}",
        "",
        "{{/* The ClusterRole's (or serve.namespace's Role's) rules: the watched kinds. */}}",
        *_define("gpulint.watchedRules", rbac_lines(watched_rules())),
        "",
        "{{/* The workloads webhook's rules: the evaluated workload kinds. */}}",
        *_define("gpulint.workloadWebhookRules", webhook_lines(webhook_rules(workloads=True))),
        "",
        "{{/* The scaling webhook's rules: every other evaluated kind. */}}",
        *_define("gpulint.scalingWebhookRules", webhook_lines(webhook_rules(workloads=False))),
        "",
        "{{/* Namespace -> the ConfigMaps read there by name alone, as JSON. */}}",
        *_define("gpulint.namedConfigMaps", [json.dumps(NAMED_CONFIGMAPS, sort_keys=True)]),
    ]
    return "\n".join(lines) + "\n"


def generated_files(root: Path) -> dict[Path, str]:
    """Each generated file (relative to ``root``, the repository) as it should read."""
    named = {named_configmaps_file(ns): names for ns, names in NAMED_CONFIGMAPS.items()}
    texts = {}
    for path in (BASE_RBAC, BASE_WEBHOOK, *named):
        if not (root / path).is_file():
            raise DeployError(f"{path}: missing (its Role reads ConfigMaps by name)")
        texts[path] = (root / path).read_text(encoding="utf-8")
    content = blocks()
    placed = {WATCHED: BASE_RBAC, WORKLOADS: BASE_WEBHOOK, SCALING: BASE_WEBHOOK}
    for name, path in placed.items():
        texts[path] = splice(texts[path], name, content[name], path)
    for path, names in named.items():
        texts[path] = splice(texts[path], NAMED, named_configmap_lines(names), path)
    texts[CHART_KINDS] = chart_kinds()
    return texts


def update(root: Path, say: Callable[[str], object] = print) -> list[Path]:
    """Write the generated files under ``root``; returns those whose text changed."""
    changed = []
    for path, text in generated_files(root).items():
        target = root / path
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            changed.append(path)
            say(f"wrote {path}")
    return changed


def main() -> int:
    root = Path.cwd()
    if not (root / BASE_RBAC).is_file():
        print(
            f"{COMMAND}: run it from the repository's root (no {BASE_RBAC} here)", file=sys.stderr
        )
        return 2
    try:
        update(root)
    except DeployError as error:
        print(f"{COMMAND}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
