"""A VerticalPodAutoscaler may evict GPU pods with no PodDisruptionBudget to bound it.

## What it checks
Each ``autoscaling.k8s.io`` VerticalPodAutoscaler whose ``updatePolicy.updateMode`` lets its
updater evict pods: ``Recreate`` (the default when none is written), ``Auto`` (deprecated,
the same as ``Recreate``) and ``InPlaceOrRecreate`` (which falls back to eviction when a pod
cannot be resized in place). It reports when all of these hold:

* the workload its ``targetRef`` names is in the input and its pods ask for GPUs;
* VPA sets some resource of a container of those pods (no ``mode: "Off"`` policy covers
  them all);
* the workload can run as many pods as the updater needs before it evicts anything:
  ``updatePolicy.minReplicas``, else the updater's ``--min-replicas`` (option
  ``updater-min-replicas``, 2 as the updater ships), is at most the most replicas the
  workload can have (its autoscaler's maximum, else its ``replicas``);
* no PodDisruptionBudget of the namespace selects the pods.

``InPlace`` (never evicts), ``Initial`` and ``Off`` are not reported.

## Why is this bad?
The updater evicts a pod whenever its requests stray far enough from the recommendation,
and may evict up to half of the workload's replicas at once (``--eviction-tolerance``
0.5; with ``minReplicas: 1`` even the only one). A GPU inference pod is not back in
seconds: the replacement must find a node with a free GPU, pull a large image and load the
model into GPU memory, often minutes during which its share of the traffic queues or fails.
The updater evicts through the Eviction API, so a PodDisruptionBudget is what bounds how
many GPU pods it takes down at a time; without one nothing does.

## Options
- ``updater-min-replicas`` (default 2): the ``--min-replicas`` flag of the cluster's
  VPA updater, used when the VPA sets no ``updatePolicy.minReplicas``.

## Example
```yaml
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {name: llm}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}   # 2 GPU replicas
  # no updatePolicy: Recreate, evicting up to 1 of the 2 pods at a time
```

## Use instead
```yaml
  updatePolicy:
    updateMode: "Initial"    # requests set when pods are created, never evicted for it
```
or keep the mode and bound the evictions:
```yaml
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: llm}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: llm}}
```

## References
- kubernetes/autoscaler vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1/types.go
  (``UpdateMode``; ``PodUpdatePolicy.MinReplicas`` overrides ``--min-replicas``).
- kubernetes/autoscaler vertical-pod-autoscaler/pkg/updater/restriction/
  pods_restriction_factory.go (no eviction below ``minReplicas``; up to
  ``eviction-tolerance`` of the configured replicas at once) and pods_eviction_restriction.go
  (``Evict`` calls the Eviction API, which honours PodDisruptionBudgets).
- kubernetes/autoscaler vertical-pod-autoscaler/docs/flags.md (``min-replicas`` 2,
  ``eviction-tolerance`` 0.5) and docs/quickstart.md (``Recreate`` "respecting the Pod
  Disruption Budget, if defined").
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    PDB_KIND,
    UPDATER_MIN_REPLICAS,
    VPA,
    Context,
    Finding,
    Inventory,
    Severity,
    abbreviated,
    budgets_covering,
    claim_links,
    edits,
    related,
)

ID = "GL112"
NAME = "vpa-evicts-gpu-pods"
SEVERITY = Severity.WARNING
SCOPE = "vpa"
FIXES = ("unsafe",)

OPTIONS = {
    "updater-min-replicas": {
        "type": "integer",
        "minimum": 1,
        "default": UPDATER_MIN_REPLICAS,
        "description": "the VPA updater's --min-replicas, for VPAs without minReplicas",
    }
}


def check(vpa: VPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if not vpa.may_evict or vpa.target_ref is None:
        return
    target = inventory.resolve_target(vpa.namespace, vpa.target_ref, vpa.manifest)
    gpus = target.gpu_requests(inventory.gpu_names)
    if not target.found or not gpus:
        return
    if not any(vpa.resized_in(target.templates).values()):
        return  # every container is left alone
    needed = vpa.min_replicas
    if needed is None:
        needed = int(ctx.options.get("updater-min-replicas", UPDATER_MIN_REPLICAS))
    scaling = inventory.scaling_range(target.key)
    most = scaling.maximum if scaling is not None else None
    if most is not None and most < needed:
        return  # the updater never has enough live pods to evict one
    budgets = inventory.of_kind(PDB_KIND)
    namespace = target.key[1] or vpa.namespace
    if any(budgets_covering(t, namespace, budgets) for t in target.templates):
        return
    if vpa.min_replicas is not None:
        source = "its updatePolicy.minReplicas"
    elif needed == UPDATER_MIN_REPLICAS:
        source = f"the updater's --min-replicas, {needed} unless the cluster sets another"
    else:
        source = f"the updater's --min-replicas, {needed} per option updater-min-replicas"
    can = f"up to {most}" if most is not None else "more"
    one = " (the only one when it runs alone)" if needed <= 1 else ""
    message = (
        f"VerticalPodAutoscaler {abbreviated(vpa.name, 40)} may evict GPU pods, and no "
        f"PodDisruptionBudget bounds it. {vpa.describe()} ({vpa.describe_mode()}) resizes "
        f"the pods of {target.describe()}, which ask for GPUs and can number {can}. The "
        f"updater evicts once {needed} or more of them run ({source}): pods whose requests "
        f"stray from its recommendation, up to half of the replicas at a time{one}. Each "
        "replacement must get a GPU node, pull its image and load the model again, minutes "
        "in which its share of the load queues or fails."
    )
    labels = {}
    for template in target.templates:
        labels.update({k: v for k, v in template.labels.items() if isinstance(v, str)})
    pairs = ", ".join(f"{k}: {v}" for k, v in sorted(labels.items()))
    selector = (
        f"selector: {{matchLabels: {{{pairs}}}}}" if labels else "selector: the labels of its pods"
    )
    fix = (
        'updatePolicy:\n  updateMode: "Initial"   # requests set when pods are created, '
        "never by eviction\n"
        "# or bound the evictions with a PodDisruptionBudget:\n"
        "# apiVersion: policy/v1\n"
        "# kind: PodDisruptionBudget\n"
        f"# metadata: {{name: {target.key[2]}}}\n"
        f"# spec: {{maxUnavailable: 1, {selector}}}"
    )
    plan = edits.unsafe(_initial(vpa))
    # The workload as a related object: admitting it (new labels a budget no longer selects,
    # GPUs added) is judged with this finding.
    workload = target.template_document or target.manifest
    pods = [related(workload, target.templates[0].path, "GPU pods")] if workload else []
    yield ctx.finding(
        vpa.manifest,
        vpa.mode_path,
        message,
        fix,
        related=[*pods, *claim_links(gpus)],
        plan=plan,
    )


def _initial(vpa: VPA) -> edits.Op:
    if vpa.written_mode is not None:
        return edits.Replace(vpa.manifest, ("spec", "updatePolicy", "updateMode"), '"Initial"')
    return edits.Insert(vpa.manifest, ("spec", "updatePolicy"), edits.entries(updateMode="Initial"))
