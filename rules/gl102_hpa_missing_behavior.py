"""An HPA or ScaledObject on a GPU workload leaves scale-up or scale-down to the defaults.

## What it checks
An HPA whose target asks for GPUs (followed through KServe and Knative like GL101) and whose
``behavior`` lacks ``scaleUp`` or ``scaleDown`` (or which has no ``behavior`` at all, including
autoscaling/v1 and v2beta1 HPAs, which cannot express one). A KEDA ScaledObject the same way:
KEDA copies ``spec.advanced.horizontalPodAutoscalerConfig.behavior`` into the HPA it makes, and
without it that HPA has Kubernetes' defaults. It also reports a scale-down whose stabilization
window is shorter than ``min-scale-down-stabilization-seconds`` (60 s by default), in an HPA's
``behavior`` and in a ScaledObject's alike; a scale-down that sets ``selectPolicy: Disabled``
is left alone, and so is a ScaledObject KEDA's annotations pause
(``autoscaling.keda.sh/paused`` or ``paused-replicas``: KEDA does not scale it;
``paused-scale-in``/``paused-scale-out``: KEDA disables that direction of its HPA, so only the
other is judged). Autoscalers that cannot scale out are not
judged: ``minReplicas`` equal to ``maxReplicas``, or at most one replica (KEDA's 0 to 1 is its
activation, not its HPA's). HPAs that KEDA, KServe or Knative generated (found in cluster
dumps) are not judged either: their behavior comes from their owner.

## Why is this bad?
Kubernetes' default behavior is tuned for pods that start in seconds:

* scale-up: no stabilization window, and every 15 s it may add 4 pods or 100% of the current
  replicas, whichever is more. A burst of requests can double the number of GPU pods every 15 s
  while the new ones are still pulling images and loading the model; each one holds a GPU (and
  may need a new GPU node) before it serves anything;
* scale-down: after a 300 s window it may remove every surplus pod at once (100% per 15 s).

A GPU inference pod typically needs minutes to schedule, start and load its model, so a pod
removed during a short lull is not back when the load returns. State the behavior explicitly,
in both directions, with the pace your GPUs and budget allow.

## Example
```yaml
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}   # nvidia.com/gpu: 1
  maxReplicas: 8
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 0
```

## Use instead
```yaml
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      policies:
      - {type: Pods, value: 2, periodSeconds: 60}
    scaleDown:
      stabilizationWindowSeconds: 300
      policies:
      - {type: Pods, value: 1, periodSeconds: 120}
```

## Options
* ``min-scale-down-stabilization-seconds`` (default 60): the shortest scale-down window accepted.
  Set it to about the time your GPU pods need to become ready; 0 turns the check off. When
  ``scaleDown`` sets no window the controller's 300 s applies, which is compared too.
* ``report-missing-scale-up`` (default true): report an HPA that relies on the default
  scale-up.
* ``report-missing-scale-down`` (default true): report an HPA that relies on the default
  scale-down.

## References
- Kubernetes HPA docs, "Default Behavior" (scale-up 4 pods / 100% per 15 s, no window;
  scale-down 300 s window, 100% per 15 s) and pkg/apis/autoscaling/v2/defaults.go.
- Kubernetes HPA docs, "Stabilization window".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpulint.ruleapi import (
    HPA,
    Context,
    Document,
    Finding,
    Inventory,
    Path,
    Related,
    ScaledObject,
    Severity,
    claim_links,
    edits,
    is_generated,
    is_unknown,
    related,
    scale_down_fix,
    scale_up_fix,
)

ID = "GL102"
NAME = "hpa-missing-behavior"
SEVERITY = Severity.WARNING
SCOPE = "autoscaler"
FIXES = ("safe",)

OPTIONS = {
    "min-scale-down-stabilization-seconds": {
        "type": "integer",
        "minimum": 0,
        "maximum": 3600,
        "default": 60,
        "description": "shortest behavior.scaleDown.stabilizationWindowSeconds accepted for a "
        "GPU workload (about the time its pods need to become ready); 0 disables the check",
    },
    "report-missing-scale-up": {
        "type": "boolean",
        "default": True,
        "description": "report an HPA on a GPU workload without behavior.scaleUp",
    },
    "report-missing-scale-down": {
        "type": "boolean",
        "default": True,
        "description": "report an HPA on a GPU workload without behavior.scaleDown",
    },
}

# Kubernetes' defaults (HPA docs "Default Behavior"; autoscaling/v2 defaults.go).
DEFAULT_SCALE_DOWN_WINDOW = 300
DEFAULT_SCALE_UP = (
    "scale-up adds 4 pods or 100% of the replicas, whichever is more, every 15 s with no "
    "stabilization window, so a burst can double the GPU pods every 15 s while the new ones "
    "are still loading the model"
)
DEFAULT_SCALE_DOWN = (
    f"scale-down waits {DEFAULT_SCALE_DOWN_WINDOW} s and then may remove every surplus pod "
    "at once (100% per 15 s), each of which needs minutes to come back"
)


def check(view: HPA | ScaledObject, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if view.target_ref is None or is_generated(view.manifest):
        return
    behavior_path = view.behavior_path
    if behavior_path is None:
        return  # its controller writes the behavior from settings of its own
    if not view.scaling_range().scales_out:
        return  # fixed, or 0 to 1: there is no scaling to pace
    target = inventory.resolve_target(view.namespace, view.target_ref, view.manifest)
    gpus = target.gpu_requests(inventory.gpu_names)
    if not gpus:
        return
    resources = ", ".join(sorted({g.resource for g in gpus}))
    owner = target.owner or target.manifest
    links: list[Related] = [related(owner)] if owner is not None else []
    links += claim_links(gpus)
    if isinstance(view, ScaledObject):
        yield from _check_scaled_object(view, target.describe(), resources, links, ctx)
        return
    hpa = view
    subject = f"{hpa.full_title} scales {target.describe()}, which asks for GPUs,"
    minimum = _minimum_window(ctx)
    suggested_window = max(minimum, DEFAULT_SCALE_DOWN_WINDOW)
    wanted = {
        "scaleUp": ctx.options.get("report-missing-scale-up", True) is not False,
        "scaleDown": ctx.options.get("report-missing-scale-down", True) is not False,
    }
    has_behavior = hpa.version in ("v2", "v2beta2")
    behavior = hpa.spec.get("behavior") if has_behavior else None
    if is_unknown(behavior):
        return  # `behavior: {{ toYaml .Values.behavior }}`
    directions: dict[str, Any] = behavior if isinstance(behavior, dict) else {}
    missing = [d for d in ("scaleUp", "scaleDown") if directions.get(d) is None and wanted[d]]
    if missing:
        defaults = {"scaleUp": DEFAULT_SCALE_UP, "scaleDown": DEFAULT_SCALE_DOWN}
        consequence = "; ".join(defaults[d] for d in missing)
        fixes = {"scaleUp": scale_up_fix(), "scaleDown": scale_down_fix(suggested_window)}
        if _indented_lists(hpa.manifest):
            fixes = {d: _indent_list_items(text) for d, text in fixes.items()}
        snippet = "behavior:\n" + "\n".join(fixes[d] for d in missing)
        path: Path = behavior_path if "behavior" in hpa.spec else hpa.spec_path
        plan = None
        if has_behavior and (not directions or isinstance(behavior, dict)):
            # The same text as the fix shown, inserted where it belongs.
            plan = edits.safe(
                edits.Insert(
                    hpa.manifest,
                    behavior_path,
                    _dedent("\n".join(fixes[d] for d in missing)),
                )
            )
        if not has_behavior:
            what = f"is written in {hpa.manifest.api_version}, which has no behavior field"
            fix = "apiVersion: autoscaling/v2\nspec:\n" + _indent(snippet)
        elif not directions:
            what = "sets no behavior"
            fix = snippet
        else:
            what = f"sets no behavior.{missing[0]}" if len(missing) == 1 else "sets no behavior"
            fix = snippet
        yield ctx.finding(
            hpa.manifest,
            path,
            f"{subject} but {what}. The pods ask for {resources}, and Kubernetes' defaults "
            f"apply: {consequence}.",
            fix,
            related=links,
            plan=plan,
        )
    yield from _short_window(
        hpa.manifest,
        hpa.full_title,
        behavior_path,
        directions,
        target.describe(),
        resources,
        links,
        ctx,
    )


def _short_window(
    manifest: Any,
    subject: str,
    behavior_path: Path,
    directions: dict[str, Any],
    target: str,
    resources: str,
    links: list[Related],
    ctx: Context,
) -> Iterator[Finding]:
    """A scale-down stabilization window shorter than the option allows (the HPA's own
    behavior, or the one KEDA copies into its HPA)."""
    minimum = _minimum_window(ctx)
    suggested_window = max(minimum, DEFAULT_SCALE_DOWN_WINDOW)
    down = directions.get("scaleDown")
    if minimum > 0 and isinstance(down, dict) and down.get("selectPolicy") != "Disabled":
        window = down.get("stabilizationWindowSeconds")
        down_path: Path
        if window is None:
            effective, down_path = DEFAULT_SCALE_DOWN_WINDOW, (*behavior_path, "scaleDown")
            said = f"sets no stabilizationWindowSeconds, so the default {effective} s applies"
        elif isinstance(window, int) and not isinstance(window, bool):
            effective = window
            down_path = (*behavior_path, "scaleDown", "stabilizationWindowSeconds")
            said = f"has stabilizationWindowSeconds {window}"
        else:
            return  # a template placeholder, or a value GL108 reports
        if effective < minimum:
            lull = (
                "as soon as the load dips"
                if effective == 0
                else f"once the load has been low for {effective} s"
            )
            yield ctx.finding(
                manifest,
                down_path,
                f"{subject} removes GPU pods of {target} {lull}. Its behavior.scaleDown "
                f"{said}, less than the {minimum} s of option "
                f"min-scale-down-stabilization-seconds, and bringing a pod ({resources}) back "
                "when the load returns takes minutes of scheduling and model loading.",
                f"stabilizationWindowSeconds: {suggested_window}",
                related=links,
                plan=edits.safe(
                    edits.Replace(manifest, down_path, str(suggested_window))
                    if window is not None
                    else edits.Insert(
                        manifest,
                        down_path,
                        edits.entries(stabilizationWindowSeconds=suggested_window),
                    )
                ),
            )


def _check_scaled_object(
    scaled: ScaledObject, target: str, resources: str, links: list[Related], ctx: Context
) -> Iterator[Finding]:
    """KEDA's HPA gets the ScaledObject's advanced.horizontalPodAutoscalerConfig.behavior; a
    direction KEDA's pause annotations disable has no behavior to judge."""
    behavior_path = scaled.behavior_path
    assert behavior_path is not None
    behavior = scaled.behavior
    pause = scaled.pause
    if is_unknown(behavior) or pause.scaling:
        return
    directions: dict[str, Any] = behavior if isinstance(behavior, dict) else {}
    wanted = {
        "scaleUp": ctx.options.get("report-missing-scale-up", True) is not False
        and not pause.scale_out,
        "scaleDown": ctx.options.get("report-missing-scale-down", True) is not False
        and not pause.scale_in,
    }
    missing = [d for d in ("scaleUp", "scaleDown") if directions.get(d) is None and wanted[d]]
    if missing:
        yield _missing_keda_directions(scaled, target, resources, links, ctx, missing)
    if pause.scale_in:
        return  # KEDA sets scaleDown.selectPolicy: Disabled (controllers/keda/hpa.go)
    yield from _short_window(
        scaled.manifest,
        scaled.title,
        behavior_path,
        directions,
        target,
        resources,
        links,
        ctx,
    )


def _missing_keda_directions(
    scaled: ScaledObject,
    target: str,
    resources: str,
    links: list[Related],
    ctx: Context,
    missing: list[str],
) -> Finding:
    behavior, behavior_path = scaled.behavior, scaled.behavior_path
    assert behavior_path is not None
    directions: dict[str, Any] = behavior if isinstance(behavior, dict) else {}
    minimum = _minimum_window(ctx)
    defaults = {"scaleUp": DEFAULT_SCALE_UP, "scaleDown": DEFAULT_SCALE_DOWN}
    consequence = "; ".join(defaults[d] for d in missing)
    fixes = {
        "scaleUp": scale_up_fix(),
        "scaleDown": scale_down_fix(max(minimum, DEFAULT_SCALE_DOWN_WINDOW)),
    }
    snippet = "behavior:\n" + "\n".join(fixes[d] for d in missing)
    plan = None
    if behavior is None or isinstance(behavior, dict):
        body = _dedent("\n".join(fixes[d] for d in missing))
        plan = edits.safe(edits.Insert(scaled.manifest, behavior_path, body))
    under = ".".join(str(step) for step in scaled.spec_path)
    fix = f"# under {under}:\nadvanced:\n  horizontalPodAutoscalerConfig:\n" + _indent(
        _indent(snippet)
    )
    if directions:
        fix = snippet
    what = "sets no behavior" if not directions else f"sets no behavior.{missing[0]}"
    if len(missing) == 2:
        what = "sets no behavior"
    return ctx.finding(
        scaled.manifest,
        behavior_path,  # placed at the deepest part of it that is written
        f"{scaled.title} scales {target}, which asks for GPUs, but {what}. The pods ask for "
        f"{resources}, and KEDA's HPA, which takes its behavior from "
        f"advanced.horizontalPodAutoscalerConfig, has Kubernetes' defaults: {consequence}.",
        fix,
        related=links,
        plan=plan,
    )


def _minimum_window(ctx: Context) -> int:
    value = ctx.options.get("min-scale-down-stabilization-seconds", 60)
    return value if isinstance(value, int) and not isinstance(value, bool) else 60


def _indented_lists(document: Document) -> bool:
    """Does the file indent its block lists under their key (``metrics:`` then ``  - type``),
    as the inserted ``policies:`` should? Read from the first block list of the document with
    entries; without one, lists stay where kubectl writes them (at the key's column)."""
    pending: list[tuple[tuple[str | int, ...], Any]] = [((), document.data)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, dict):
            pending.extend(((*path, key), inner) for key, inner in reversed(value.items()))
        elif isinstance(value, list) and value and isinstance(value[0], dict) and path:
            key = document.location(path, key=True)
            item = document.location((*path, 0))
            if item.line > key.line:  # a block list; a flow one ([...]) tells nothing
                # The item's location is its first key, two columns right of its dash.
                return item.column - 2 > key.column
    return False


def _indent_list_items(text: str) -> str:
    """``text`` with each block list that starts at its key's column (``policies:`` then
    ``- type``) moved two columns right of the key."""
    lines = text.splitlines()
    out: list[str] = []
    key_depth: int | None = None  # while inside a list that is moved: its key's column
    for number, line in enumerate(lines):
        depth = len(line) - len(line.lstrip(" "))
        if key_depth is not None and (
            depth > key_depth or (depth == key_depth and line.lstrip(" ").startswith("- "))
        ):
            out.append("  " + line)
            continue
        key_depth = None
        out.append(line)
        following = lines[number + 1] if number + 1 < len(lines) else ""
        if line.rstrip().endswith(":") and following.startswith(" " * depth + "- "):
            key_depth = depth
    return "\n".join(out)


def _dedent(text: str) -> str:
    """The two-space-indented directions of the fix, written as at the top level."""
    return "\n".join(line[2:] for line in text.splitlines())


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
