"""A VerticalPodAutoscaler's controlledResources names a GPU or another resource VPA cannot set.

## What it checks
Each container policy of an ``autoscaling.k8s.io`` VerticalPodAutoscaler whose
``spec.resourcePolicy.containerPolicies[].controlledResources`` names anything but ``cpu``
and ``memory``:
``nvidia.com/gpu`` and the other GPU resources, ``ephemeral-storage``, any extended
resource, whatever the ``updateMode``. The finding points at the first such name.

## Why is this bad?
VPA recommends and sets CPU and memory only. Its admission controller refuses any other
name in a new or changed VerticalPodAutoscaler (``Unsupported value``: supported values
are ``cpu`` and ``memory``), so the object is not created; an object from before that check
keeps it with a warning, and the recommender drops the name ("Cannot translate resource
name"): nothing ever sizes the GPUs. GPUs are whole devices the scheduler counts; more of
them per pod is a change of the pod template (and of the model's parallelism), and more
GPU capacity is more replicas, which an HPA or KEDA scales on a GPU metric.

## Example
```yaml
spec:
  resourcePolicy:
    containerPolicies:
    - containerName: server
      controlledResources: [cpu, memory, nvidia.com/gpu]
```

## Use instead
```yaml
    - containerName: server
      controlledResources: [cpu, memory]
```
and an HPA or KEDA ScaledObject on a GPU metric for the GPU capacity.

## References
- kubernetes/autoscaler vertical-pod-autoscaler/pkg/admission-controller/resource/vpa/
  validation.go (``validateVPASpecResourcePolicy``: only ``cpu`` and ``memory``).
- kubernetes/autoscaler vertical-pod-autoscaler/pkg/recommender/model/types.go
  (``ResourceNamesApiToModel`` drops every other name) and pkg/apis/autoscaling.k8s.io/v1/
  types.go (``controlledResources`` default ``[cpu, memory]``).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    RESIZABLE,
    VPA,
    Context,
    Finding,
    Inventory,
    Severity,
    abbreviated,
    edits,
)

ID = "GL113"
NAME = "vpa-extended-resource"
SEVERITY = Severity.ERROR
SCOPE = "vpa"
FIXES = ("safe",)


def check(vpa: VPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    for policy in vpa.container_policies:
        if policy.controlled is None:
            continue
        wrong = [r for r in policy.controlled if r.name not in RESIZABLE]
        if not wrong:
            continue
        kept = [r.name for r in policy.controlled if r.name in RESIZABLE]
        names = ", ".join(r.name for r in wrong)
        gpu = any(inventory.gpu_names.is_gpu(r.name) for r in wrong)
        what = "GPUs are whole devices it cannot resize" if gpu else "it sets no other resource"
        container = policy.container or "(no containerName)"
        message = (
            f"VerticalPodAutoscaler {abbreviated(vpa.name, 40)} controls "
            f"{abbreviated(wrong[0].name, 40)}, which VPA cannot set. "
            f"{vpa.describe()} lists {names} in controlledResources of container policy "
            f"{container}, but VPA sets only cpu and memory ({what}): its admission controller "
            "refuses the object, and an older one keeps it while the recommender drops the "
            "name, so nothing ever sizes it."
        )
        path = (*policy.path, "controlledResources")
        plan = None
        if kept:
            fix = f"controlledResources: [{', '.join(kept)}]"
            plan = edits.safe(edits.Set(vpa.manifest, path, kept))
        else:
            fix = (
                f'mode: "Off"   # in place of controlledResources: VPA cannot size {names}\n'
                "# GPU capacity: more replicas, from an HPA or KEDA on a GPU metric"
            )
            # The recommender already sizes nothing for this container: "Off" says so.
            mode: edits.Op = (
                edits.Replace(vpa.manifest, (*policy.path, "mode"), '"Off"')
                if policy.mode_written
                else edits.Insert(vpa.manifest, policy.path, edits.entries(mode="Off"))
            )
            plan = edits.safe(edits.Delete(vpa.manifest, path), mode)
        yield ctx.finding(vpa.manifest, wrong[0].path, message, fix, plan=plan)
