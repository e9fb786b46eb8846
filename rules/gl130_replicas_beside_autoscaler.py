"""A controller writes an object's ``replicas`` to a workload that is autoscaled.

## What it checks
Objects whose controller makes the model server's workload and writes a replica count written
in the object to it on every reconcile, when something autoscales that workload:

* an LLMInferenceService that sets ``replicas`` (or ``prefill.replicas``) for a workload KServe
  makes (``<name>-kserve``, ``<name>-kserve-prefill``);
* a NIMService that sets ``spec.replicas`` (the NIM operator's Deployment ``<name>``);
* a VLLMRuntime (the production-stack operator's Deployment ``<name>`` gets
  ``deploymentConfig.replicas``, 0 when unset).

The autoscaler is either the object's own (an LLMInferenceService's ``scaling`` beside
``replicas`` in the same workload, a NIMService's ``scale.enabled: true`` beside
``spec.replicas``), or an HPA or KEDA ScaledObject of yours (or another controller's) whose
target is that workload.

## Why is this bad?
With the object's own autoscaling, the API server refuses the object: both CRDs declare the
two exclusive (``replicas and scaling are mutually exclusive``; ``spec.replicas cannot be set
when spec.scale.enabled is true``), so the model is not deployed or not updated at all.

With an autoscaler of yours, the controller and the autoscaler both set the workload's
replicas: KServe keeps the replicas a workload has only when ``replicas`` is unset, the NIM
operator writes ``spec.replicas`` back whenever the Deployment's differ (checking again every
5 s), the production-stack operator whenever they differ from ``deploymentConfig.replicas``.
Each scale-out is undone at the next reconcile: GPU pods are started, load their model for
minutes and are killed, over and over.

## Example
```yaml
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata: {name: qwen}
spec:
  replicas: 2
  scaling:
    maxReplicas: 4
    wva: {hpa: {}}
```

## Use instead
```yaml
spec:
  scaling:          # no replicas: KServe leaves them to the autoscaler
    minReplicas: 2
    maxReplicas: 4
    wva: {hpa: {}}
```
With an autoscaler of your own, drop ``replicas`` from the object (the NIM operator and
KServe then leave the workload's replicas alone), or let the object scale the workload itself
(``spec.scaling``, ``spec.scale``) and delete your autoscaler. A VLLMRuntime always writes its
replicas: scale it through ``autoscalingConfig`` or through its ``/scale`` (an HPA or
ScaledObject whose target is the VLLMRuntime), not its Deployment.

## References
- kserve/kserve@aaac4e2 pkg/apis/serving/v1alpha2/llm_inference_service_types.go
  (``WorkloadSpec`` validation); pkg/controller/v1alpha2/llmisvc/workload.go
  (``PreserveDeploymentReplicas``: kept only "when the owner doesn't explicitly set it").
- NVIDIA/k8s-nim-operator@f63f74d api/apps/v1alpha1/nimservice_types.go (``NIMServiceSpec``
  validation); internal/controller/platform/standalone/nimservice.go
  (``deploymentReplicasOutOfSync``, ``autoscalingDisableRequeue``).
- vllm-project/production-stack@a6c01db operator/internal/controller/vllmruntime_controller.go
  (``deploymentNeedsUpdate``: "Compare replicas").
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    Autoscaler,
    Context,
    Finding,
    Inventory,
    KindView,
    Manifest,
    ReplicaClaim,
    Severity,
    TargetGroup,
    WrittenReplicas,
    edits,
    related,
)

ID = "GL130"
NAME = "replicas-beside-autoscaler"
SEVERITY = Severity.ERROR
SCOPE = "target-group"
FIXES = ("unsafe",)
STAGES = ("autoscaler",)


def check(group: TargetGroup, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    kind, namespace, name = group.target
    if kind != "Deployment":
        return
    found = inventory.generated_workload(namespace or None, name)
    if found is None:
        return
    owner, workload = found
    written = owner.written_replicas(workload.name)
    if written is None:
        return
    own = [a for a in group.autoscalers if _same_object(a.manifest, owner.manifest)]
    if own:
        # The object autoscales the workload itself: the two settings cannot stand together
        # (another autoscaler beside its own is GL103's). Copies of the object (the same
        # model in two sample files of a directory) are one object: each is judged with its
        # own settings, never with another copy's.
        for copy in inventory.of_kind(owner.manifest.kind):
            view = inventory.view_of(copy) if _same_object(copy, owner.manifest) else None
            says = view.written_replicas(workload.name) if view is not None else None
            if view is None or says is None or says.refused is None:
                continue
            claim = next((c for c in view.replica_claims() if _claims(c, workload.name)), None)
            if claim is not None:
                yield _refused(view, claim, says, ctx)
        return
    for autoscaler in group.autoscalers:
        where = f"{namespace}/" if namespace else ""
        yield _overwritten(owner, autoscaler, written, f"{kind} {where}{name}", ctx)


def _same_object(one: Manifest, other: Manifest) -> bool:
    return (one.kind, one.group, one.namespace, one.name) == (
        other.kind,
        other.group,
        other.namespace,
        other.name,
    )


def _claims(claim: ReplicaClaim, workload: str) -> bool:
    """Does the object's own autoscaling (``claim``) scale the workload it makes?"""
    named = claim.ref.name if claim.ref is not None else claim.workload
    return named == workload


def _describe(owner: KindView) -> str:
    where = f"{owner.namespace}/" if owner.namespace else ""
    return f"{owner.manifest.kind} {where}{owner.name}"


def _field(written: WrittenReplicas) -> str:
    return ".".join(str(step) for step in written.path)


def _refused(owner: KindView, own: ReplicaClaim, written: WrittenReplicas, ctx: Context) -> Finding:
    return ctx.finding(
        owner.manifest,
        written.path,
        f"{_describe(owner)} sets {_field(written)} beside its own autoscaling "
        f"({own.note}), which the API server refuses. Its CRD allows one or the other "
        f"('{written.refused}'), so the object is not created or updated and the model is not "
        "served as written.",
        f"# delete {_field(written)}: {own.note} sets the replicas (its minReplicas is the floor)",
        related=[related(owner.manifest, own.path, own.note)],
        plan=edits.unsafe(edits.Delete(owner.manifest, written.path)),
    )


def _overwritten(
    owner: KindView,
    autoscaler: Autoscaler,
    written: WrittenReplicas,
    workload: str,
    ctx: Context,
) -> Finding:
    shown = autoscaler.describe()
    scale = written.scale_ref
    deletes: list[Manifest] = []
    writes: list[Manifest] = []
    plan: edits.FixPlan | None = None
    if scale is not None and owner.generated_autoscalers():
        # The object scales itself through its own /scale already: the other autoscaler goes.
        fix = (
            f"# delete {shown}: {_describe(owner)} scales itself (its own autoscaling), and "
            f"{written.controller} writes the replicas that sets to {workload}"
        )
        deletes = [autoscaler.manifest]
    elif scale is not None:
        # The count is written even when unset (a default): scale the object through its /scale.
        fix = (
            f"# scale {_describe(owner)} through its /scale, which sets {_field(written)}, "
            "not its workload:\n"
            f"scaleTargetRef:\n  apiVersion: {scale.api_version}\n  kind: {scale.kind}\n"
            f"  name: {scale.name}"
        )
    else:
        fix = (
            f"# on {_describe(owner)}: delete {_field(written)}, so that "
            f"{written.controller} leaves the replicas to {shown}"
        )
        plan = edits.unsafe(edits.Delete(owner.manifest, written.path))
        writes = [owner.manifest]
    return ctx.finding(
        autoscaler.manifest,
        autoscaler.path,
        f"{autoscaler.manifest.kind} {autoscaler.manifest.name} scales {workload}, whose "
        f"replicas {written.controller} writes on every reconcile. It writes "
        f"{_field(written)} of {_describe(owner)} there, so each scale-out of {shown} is "
        "undone at the next reconcile: the GPU pods it starts are killed again while they "
        "load their model, and the workload never keeps the replicas either side wants.",
        fix,
        related=[related(owner.manifest, written.path, f"{_field(written)} of {_describe(owner)}")],
        plan=plan,
        writes=writes,
        deletes=deletes,
        fix_at_path=scale is not None and not deletes,
    )
