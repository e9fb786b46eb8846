"""A KEDA ScaledJob has a cpu or memory trigger, which KEDA never reads for jobs.

## What it checks
Every trigger of ``type: cpu`` or ``type: memory`` of a ``keda.sh`` ScaledJob. A ScaledJob
whose triggers are all of these types is an error (it starts no job beyond
``minReplicaCount``); one that has other triggers too gets a warning (the trigger is dead
weight and reads as if it mattered). The jobs' GPUs do not change the verdict, only the
advice: a GPU job is started on a queue or a GPU series.

## Why is this bad?
KEDA sizes ScaledJobs from its scalers' external metrics. The cpu and memory scalers give
Kubernetes Resource metrics instead, which ``getScaledJobMetrics`` skips ("skip cpu/memory
resource scaler"), and the KEDA documentation of both scalers says they apply "only to
ScaledObject, not to Scaling Jobs". A job also has no CPU usage before it runs: usage of
running jobs says nothing about how many more to start. KEDA accepts the object without
complaint, so nothing tells the author that their jobs will never start.

## Example
```yaml
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata: {name: render}
spec:
  jobTargetRef:
    template:
      spec:
        containers:
        - name: render
          resources: {limits: {nvidia.com/gpu: 1}}
  triggers:
  - type: cpu
    metricType: Utilization
    metadata: {value: "60"}
```

## Use instead
A trigger on the work waiting (a queue) or a series of it:
```yaml
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus-operated.monitoring.svc:9090
      query: sum(render_queue_pending)
      threshold: "1"
```

## References
- kedacore/keda pkg/scaling/scale_handler.go (``getScaledJobMetrics``: "skip cpu/memory
  resource scaler").
- KEDA docs scalers/cpu.md and scalers/memory.md ("This scaler only applies to ScaledObject,
  not to Scaling Jobs").
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
)

ID = "GL114"
NAME = "scaledjob-resource-trigger"
SEVERITY = Severity.ERROR
SCOPE = "scaledjob"


def check(job: ScaledJob, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    dead = job.resource_triggers()
    if not dead:
        return
    alone = len(dead) == len(job.typed_triggers())
    gpus = [r for t in job.pod_templates() for r in t.gpu_requests(inventory.gpu_names)]
    minimum = job.scaling_range().minimum or 0
    for trigger in dead:
        if alone:
            outcome = "its triggers are all cpu or memory, so KEDA never starts a job" + (
                f" beyond minReplicaCount {minimum}" if minimum else ""
            )
        else:
            outcome = "KEDA starts jobs on its other triggers alone"
        message = (
            f"ScaledJob {abbreviated(job.name, 40)} has a {trigger.type} trigger, which KEDA "
            f"never reads for jobs. In {job.describe()}, trigger {trigger.number} is of type "
            f"{trigger.type}: that scaler gives a Resource metric and KEDA sizes ScaledJobs "
            f"from external metrics only; {outcome}."
        )
        why = (
            "GPU use of running jobs says nothing of the work waiting"
            if gpus
            else "usage of running jobs says nothing of the work waiting"
        )
        fix = (
            f"# remove the {trigger.type} trigger and start jobs on the work waiting\n"
            f"# ({why}):\n"
            "# a queue scaler (rabbitmq, kafka, aws-sqs-queue ...), or a prometheus trigger\n"
            "- type: prometheus\n"
            "  metadata:\n"
            "    serverAddress: http://prometheus-operated.monitoring.svc:9090\n"
            "    query: sum(queue_pending)   # items waiting, from the queue's exporter\n"
            '    threshold: "1"              # one job per item'
        )
        yield ctx.finding(
            job.manifest,
            (*trigger.path, "type"),
            message,
            fix,
            related=claim_links(gpus),
            severity=None if alone else Severity.WARNING,
        )
