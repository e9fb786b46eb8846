"""A KEDA ScaledJob of GPU jobs has no maxReplicaCount, so KEDA may start 100 of them at once.

## What it checks
A ``keda.sh`` ScaledJob whose job pods ask for GPUs (``spec.jobTargetRef.template``) and
whose ``spec`` writes no ``maxReplicaCount``.

## Why is this bad?
``maxReplicaCount`` defaults to 100: the most jobs KEDA creates in one polling interval,
running ones deducted. A burst of work on the queue starts up to 100 jobs (times
``parallelism`` pods, times the GPUs each asks for). The cluster has far fewer free GPUs:
the rest sit Pending, a cluster autoscaler may add GPU nodes for all of them, and the jobs
that do run compete with the other GPU workloads of the cluster. The right number is the
GPUs this queue may take divided by the GPUs per job, and only its author knows it.

## Example
```yaml
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata: {name: finetune}
spec:
  jobTargetRef:
    template:
      spec:
        containers:
        - name: train
          resources: {limits: {nvidia.com/gpu: 2}}
  triggers:
  - type: rabbitmq
    metadata: {queueName: finetune, mode: QueueLength, value: "1"}
```

## Use instead
```yaml
spec:
  maxReplicaCount: 4   # 8 GPUs for this queue / 2 per job
```

## References
- kedacore/keda apis/keda/v1alpha1/scaledjob_types.go (``defaultScaledJobMaxReplicaCount``
  100).
- KEDA docs reference/scaledjob-spec.md (``maxReplicaCount``: "The max number of pods that
  is created within a single polling period").
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    Context,
    Finding,
    Inventory,
    ScaledJob,
    Severity,
    abbreviated,
    claim_links,
    edits,
)

ID = "GL115"
NAME = "scaledjob-gpu-max-missing"
SEVERITY = Severity.WARNING
SCOPE = "scaledjob"
FIXES = ("unsafe",)

# What the fix proposes: a handful of jobs, for the author to set to the GPUs they may take.
SUGGESTED_MAX = 4


def check(job: ScaledJob, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    if "maxReplicaCount" in job.spec:
        return
    templates = job.pod_templates()
    gpus = [r for t in templates for r in t.gpu_requests(inventory.gpu_names)]
    if not gpus:
        return
    per_pod = templates[0].gpus_per_pod(inventory.gpu_names) if templates else None
    per_job = per_pod * job.parallelism if per_pod else None
    asked = f" asking for {per_job} GPU{'s' * (per_job != 1)} each" if per_job else ""
    most = f", {100 * per_job} GPUs" if per_job else ""
    message = (
        f"ScaledJob {abbreviated(job.name, 40)} starts GPU jobs with no maxReplicaCount "
        f"(KEDA's default: 100). {job.describe()} starts GPU jobs{asked}, so KEDA may "
        f"create up to 100 jobs (its default) in one polling interval{most}: the jobs the "
        "cluster has no GPUs for wait Pending, and a cluster autoscaler may add GPU nodes "
        "for all of them."
    )
    per = f" / {per_job} per job" if per_job else ""
    fix = f"maxReplicaCount: {SUGGESTED_MAX}   # jobs at once: the GPUs this queue may take{per}"
    plan = edits.unsafe(
        edits.Insert(job.manifest, ("spec",), edits.entries(maxReplicaCount=SUGGESTED_MAX))
    )
    yield ctx.finding(job.manifest, ("spec",), message, fix, related=claim_links(gpus), plan=plan)
