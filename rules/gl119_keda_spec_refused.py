"""A KEDA ScaledObject that KEDA refuses, or whose triggers fail, on the KEDA release in use.

## What it checks
What KEDA's admission webhook and scalers refuse (``keda-version`` in ``.gpulint.yaml``, default
the newest release):

* a ``cpu`` or ``memory`` trigger without ``metricType``: before KEDA 2.18 the deprecated
  ``metadata.type`` stood in for it (a warning: it stops working in 2.18); from 2.18
  ``metadata.type`` is ignored and the trigger fails with "unknown metric type" (the fix moves
  it to ``metricType``); with neither it fails on every release. ``metricType`` must be
  ``Utilization`` or ``AverageValue``;
* replica bounds: ``minReplicaCount`` greater than ``maxReplicaCount`` (default 100), or
  ``idleReplicaCount`` not below ``minReplicaCount`` (unset, that is 0: an idle count needs a
  ``minReplicaCount``; 0 counts as 1 there);
* ``fallback``: ``replicas`` and ``failureThreshold`` are required and not negative; a fallback
  needs a trigger other than ``cpu``/``memory`` (unless ``scalingModifiers`` is used), and
  ``behavior: scalingModifiers`` needs a ``scalingModifiers.formula`` and KEDA 2.20;
* ``advanced.scalingModifiers``: ``formula`` is mandatory once anything is set, ``target`` is
  required with it and must be a number above 0, ``metricType`` cannot be ``Utilization``, and
  every name in the formula must be the ``name`` of a trigger other than ``cpu``/``memory``
  (those stay plain HPA metrics and are unknown to the formula).

## Why is this bad?
A ScaledObject the webhook refuses is never applied; one whose trigger fails to build leaves
KEDA's HPA without that metric (the ScaledObject is not Ready), so the workload does not scale
on it. The cpu/memory change is a trap of upgrades: a manifest that worked on 2.17 breaks on
2.18 without a word in the manifest.

## Example
```yaml
triggers:
- type: cpu
  metadata: {type: Utilization, value: "70"}
```

## Use instead
```yaml
triggers:
- type: cpu
  metricType: Utilization
  metadata: {value: "70"}
```

## References
- kedacore/keda@8b4f083 (v2.20.2): pkg/scalers/cpu_memory_scaler.go ``parseResourceMetadata``
  ("unknown metric type"); v2.17.0 read ``metadata.type``; CHANGELOG v2.18.0 (#6698: "The
  ``type`` setting is deprecated and removed, use ``metricType`` instead").
- apis/keda/v1alpha1/scaledobject_types.go ``CheckReplicaCountBoundsAreValid``,
  ``CheckFallbackValid``, ``GetHPAMinReplicas``; scaledobject_webhook.go
  ``ValidateAndCompileScalingModifiers``, ``validateScalingModifiersTarget``, the
  scalingModifiers fallback check; the ScaledObject CRD (``fallback.failureThreshold`` and
  ``replicas`` required, minimum 0).
- keda-docs 2.20 reference/scaledobject-spec.md, "scalingModifiers".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpulint.ruleapi import (
    Context,
    Finding,
    Inventory,
    Path,
    Release,
    ScaledObject,
    Severity,
    abbreviated,
    as_dict,
    edits,
    is_generated,
    is_unknown,
    yaml_text,
)

ID = "GL119"
NAME = "keda-spec-refused"
SEVERITY = Severity.ERROR
SCOPE = "scaledobject"
FIXES = ("safe", "unsafe")
STAGES = ("autoscaler",)

RESOURCE_TRIGGERS = ("cpu", "memory")
METRIC_TYPES = ("Utilization", "AverageValue")
# KEDA 2.18 stopped reading a cpu/memory trigger's metadata.type (kedacore/keda#6698).
TYPE_REMOVED_IN = Release(2, 18)
# fallback.behavior: scalingModifiers appears in KEDA 2.20 (kedacore/keda#7366).
MODIFIERS_FALLBACK_IN = Release(2, 20)
DEFAULT_MAX = 100
# Words of KEDA's formula language (expr-lang) that are not trigger names.
_EXPR_WORDS = frozenset(
    [
        "and",
        "or",
        "not",
        "in",
        "matches",
        "contains",
        "startsWith",
        "endsWith",
        "nil",
        "true",
        "false",
        "let",
        "if",
        "else",
        "float",
        "int",
        "abs",
        "ceil",
        "floor",
        "round",
        "max",
        "min",
        "len",
        "sum",
        "mean",
        "median",
        "all",
        "any",
        "none",
        "one",
        "filter",
        "map",
        "count",
        "first",
        "last",
    ]
)
_NAME = re.compile(r"(?<![.\w])([A-Za-z_][A-Za-z0-9_]*)(?![\w(])(?!\s+\()")
_STRING = re.compile(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'")


def check(scaled: ScaledObject, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if is_generated(scaled.manifest):
        return
    name = abbreviated(scaled.name)
    yield from _resource_triggers(scaled, name, inventory, ctx)
    yield from _replica_bounds(scaled, name, ctx)
    yield from _fallback(scaled, name, inventory, ctx)
    yield from _modifiers(scaled, name, ctx)


def _resource_triggers(
    scaled: ScaledObject, name: str, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    versions = inventory.settings.versions
    for index, trigger in enumerate(scaled.triggers):
        kind = trigger.get("type")
        if kind not in RESOURCE_TRIGGERS:
            continue
        path: Path = ("spec", "triggers", index)
        written = trigger.get("metricType")
        old = as_dict(trigger.get("metadata")).get("type")
        if is_unknown(written) or is_unknown(old):
            continue
        where = f"KEDA ScaledObject {name}: trigger {index} ({kind})"
        if written is not None:
            if written not in METRIC_TYPES:
                yield ctx.finding(
                    scaled.manifest,
                    (*path, "metricType"),
                    f"{where} has metricType {abbreviated(str(written))}, which the {kind} "
                    "scaler refuses ('unknown metric type'). It must be Utilization or "
                    "AverageValue; KEDA's HPA goes without the metric.",
                    "metricType: Utilization",
                    plan=edits.unsafe(
                        edits.Replace(scaled.manifest, (*path, "metricType"), "Utilization")
                    ),
                )
            continue
        if old in METRIC_TYPES:
            yield _old_type(scaled, where, path, str(old), versions, ctx)
            continue
        yield ctx.finding(
            scaled.manifest,
            path,
            f"{where} has no metricType, so the scaler fails on every KEDA release. It reports "
            "'unknown metric type' and KEDA's HPA goes without the metric.",
            "metricType: Utilization   # or AverageValue, with value a quantity",
            plan=edits.unsafe(
                edits.Insert(scaled.manifest, path, edits.entries(metricType="Utilization"))
            ),
        )


def _old_type(
    scaled: ScaledObject, where: str, path: Path, old: str, versions: Any, ctx: Context
) -> Finding:
    hint = versions.setting_hint("keda")
    named = f"{versions.named('keda')}{' ' + hint if hint else ''}"
    plan = edits.safe(
        edits.Insert(scaled.manifest, path, edits.entries(metricType=old)),
        edits.Delete(scaled.manifest, (*path, "metadata", "type")),
    )
    fix = f"metricType: {old}   # beside type and metadata, and delete metadata.type"
    if versions.keda >= TYPE_REMOVED_IN:
        return ctx.finding(
            scaled.manifest,
            (*path, "metadata", "type"),
            f"{where} says its metric type in metadata.type, which KEDA stopped reading in "
            f"{TYPE_REMOVED_IN}. On {named} the scaler fails with 'unknown metric type' and "
            "KEDA's HPA goes without the metric.",
            fix,
            plan=plan,
        )
    return ctx.finding(
        scaled.manifest,
        (*path, "metadata", "type"),
        f"{where} says its metric type in metadata.type, which {named} still reads but KEDA "
        f"{TYPE_REMOVED_IN} no longer does: after that upgrade the trigger fails with "
        "'unknown metric type'.",
        fix,
        severity=Severity.WARNING,
        plan=plan,
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _replica_bounds(scaled: ScaledObject, name: str, ctx: Context) -> Iterator[Finding]:
    spec = scaled.spec
    written_min, written_max = spec.get("minReplicaCount"), spec.get("maxReplicaCount")
    if any(is_unknown(v) for v in (written_min, written_max, spec.get("idleReplicaCount"))):
        return
    if written_min is not None and _count(written_min) is None:
        return
    # CheckReplicaCountBoundsAreValid: 0 when unset, else GetHPAMinReplicas (at least 1).
    minimum = 0 if written_min is None else max(_count(written_min) or 0, 1)
    maximum = _count(written_max) if written_max is not None else DEFAULT_MAX
    if maximum is not None and minimum > maximum:
        yield ctx.finding(
            scaled.manifest,
            ("spec", "minReplicaCount"),
            f"KEDA ScaledObject {name}: minReplicaCount {minimum} is greater than "
            f"maxReplicaCount {maximum}"
            + ("" if written_max is not None else " (the default)")
            + "; KEDA's webhook refuses the ScaledObject.",
            f"maxReplicaCount: {max(minimum, 1) * 2}",
        )
    idle = _count(spec.get("idleReplicaCount"))
    if idle is not None and idle >= minimum:
        said = "is not set (0)" if written_min is None else f"is {written_min}"
        yield ctx.finding(
            scaled.manifest,
            ("spec", "idleReplicaCount"),
            f"KEDA ScaledObject {name}: idleReplicaCount {idle} is not below minReplicaCount, "
            f"which {said}. KEDA's webhook refuses the ScaledObject: an idle count must be "
            "less than the minimum, and needs one written.",
            "idleReplicaCount: 0\nminReplicaCount: 1",
        )


def _fallback(
    scaled: ScaledObject, name: str, inventory: Inventory, ctx: Context
) -> Iterator[Finding]:
    fallback = scaled.spec.get("fallback")
    if not isinstance(fallback, dict) or is_unknown(fallback):
        return
    where = f"KEDA ScaledObject {name}: fallback"
    for key in ("failureThreshold", "replicas"):
        value = fallback.get(key)
        if value is None:
            yield ctx.finding(
                scaled.manifest,
                ("spec", "fallback"),
                f"{where} has no {key}, which the ScaledObject CRD requires: the API server "
                "refuses the object.",
                f"{key}: {3 if key == 'failureThreshold' else 1}",
            )
        elif not is_unknown(value) and _count(value) is not None and value < 0:
            yield ctx.finding(
                scaled.manifest,
                ("spec", "fallback", key),
                f"{where}.{key} is {value}; it must be 0 or more, and the object is refused.",
                f"{key}: {3 if key == 'failureThreshold' else 1}",
            )
    modifiers = scaled.scaling_modifiers
    if modifiers is None and all(t.get("type") in RESOURCE_TRIGGERS for t in scaled.triggers):
        yield ctx.finding(
            scaled.manifest,
            ("spec", "fallback"),
            f"{where} needs a trigger other than cpu or memory. A fallback replaces a failing "
            "external metric, which this ScaledObject does not have, and KEDA's webhook refuses "
            "it.",
            "# delete fallback: cpu and memory come from the metrics API, not from a scaler",
            plan=edits.unsafe(edits.Delete(scaled.manifest, ("spec", "fallback"))),
        )
    versions = inventory.settings.versions
    if fallback.get("behavior") == "scalingModifiers" and versions.keda < MODIFIERS_FALLBACK_IN:
        hint = versions.setting_hint("keda")
        yield ctx.finding(
            scaled.manifest,
            ("spec", "fallback", "behavior"),
            f"{where}.behavior is scalingModifiers, which KEDA has from "
            f"{MODIFIERS_FALLBACK_IN}; the CRD of {versions.named('keda')}"
            f"{' ' + hint if hint else ''} refuses the value.",
            "behavior: static",
        )
    elif fallback.get("behavior") == "scalingModifiers" and not (modifiers or {}).get("formula"):
        yield ctx.finding(
            scaled.manifest,
            ("spec", "fallback", "behavior"),
            f"{where}.behavior is scalingModifiers, which needs advanced.scalingModifiers."
            "formula; KEDA's webhook refuses the ScaledObject.",
            "behavior: static",
        )


def _modifiers(scaled: ScaledObject, name: str, ctx: Context) -> Iterator[Finding]:
    modifiers = scaled.scaling_modifiers
    if modifiers is None or any(is_unknown(v) for v in modifiers.values()):
        return
    base: Path = ("spec", "advanced", "scalingModifiers")
    where = f"KEDA ScaledObject {name}: scalingModifiers"
    formula = modifiers.get("formula")
    if not isinstance(formula, str) or not formula.strip():
        yield ctx.finding(
            scaled.manifest,
            base,
            f"{where} has no formula, which KEDA requires once scalingModifiers says "
            "anything; its webhook refuses the ScaledObject.",
            "formula: <an expression of the triggers' names>",
        )
        return
    target = modifiers.get("target")
    if target is None or (isinstance(target, str) and not target.strip()):
        yield ctx.finding(
            scaled.manifest,
            base,
            f"{where} has a formula but no target; KEDA's webhook refuses the ScaledObject.",
            'target: "10"   # what the formula\'s value is compared with',
        )
    elif _float(target) is None:
        yield ctx.finding(
            scaled.manifest,
            (*base, "target"),
            f"{where}.target {abbreviated(str(target))} is not a number above 0; KEDA's webhook "
            "refuses the ScaledObject.",
            'target: "10"',
        )
    if modifiers.get("metricType") == "Utilization":
        yield ctx.finding(
            scaled.manifest,
            (*base, "metricType"),
            f"{where}.metricType is Utilization, which a composite (external) metric cannot "
            "have; KEDA's webhook refuses the ScaledObject.",
            "metricType: AverageValue",
            plan=edits.unsafe(
                edits.Replace(scaled.manifest, (*base, "metricType"), "AverageValue")
            ),
        )
    yield from _formula_names(scaled, where, base, formula, ctx)


def _formula_names(
    scaled: ScaledObject, where: str, base: Path, formula: str, ctx: Context
) -> Iterator[Finding]:
    named = {
        str(t.get("name")): t.get("type") for t in scaled.triggers if isinstance(t.get("name"), str)
    }
    usable = {n for n, kind in named.items() if kind not in RESOURCE_TRIGGERS}
    used = formula_names(formula)
    unknown = [n for n in used if n not in usable]
    if not unknown:
        return
    resource = [n for n in unknown if n in named]
    unnamed = [n for n in unknown if n not in named]
    reasons = []
    if resource:
        are = "is a cpu/memory trigger" if len(resource) == 1 else "are cpu/memory triggers"
        reasons.append(
            f"{', '.join(resource)} {are}, which stay plain HPA metrics outside the formula"
        )
    if unnamed:
        reasons.append(
            f"no trigger is named {' or '.join(unnamed)} (a trigger the formula reads needs a name)"
        )
    why = "; ".join(reasons)
    listed = ", ".join(sorted(usable)) or "none"
    yield ctx.finding(
        scaled.manifest,
        (*base, "formula"),
        f"{where}.formula names {', '.join(abbreviated(n) for n in unknown)}, which KEDA "
        f"cannot resolve. In the formula {why}, so KEDA cannot compile it and its webhook "
        f"refuses the ScaledObject (names it knows: {listed}).",
        yaml_text({"formula": formula}).rstrip() + f"   # with names among: {listed}",
    )


def formula_names(formula: str) -> list[str]:
    """The trigger names a formula reads (identifiers that are not expr-lang's words)."""
    text = _STRING.sub('""', formula)
    found = []
    for match in _NAME.finditer(text):
        word = match.group(1)
        if word not in _EXPR_WORDS and word not in found:
            found.append(word)
    return found


def _float(value: Any) -> float | None:
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if number > 0 and number == number and number != float("inf") else None
