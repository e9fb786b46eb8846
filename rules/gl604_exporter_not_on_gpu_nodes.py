"""dcgm-exporter cannot run on the nodes the unit's GPU workloads run on.

## What it checks
Each dcgm-exporter DaemonSet of the unit (written out, or made by gpu-operator or
dcgm-exporter chart values) against the pod templates of the unit that ask for GPUs:

* the GPU workloads tolerate a ``NoSchedule``/``NoExecute`` taint (``nvidia.com/gpu``, a
  node pool's own), which tells their nodes carry it, and the exporter does not tolerate it.
  The dcgm-exporter chart tolerates only the control-plane taint by default; gpu-operator
  uses ``daemonsets.tolerations`` (default ``nvidia.com/gpu`` Exists);
* the exporter's ``nodeSelector`` (or required node affinity) asks for a label value the GPU
  workloads' ``nodeSelector`` gives another value (``nodepool: cpu-pool`` against
  ``nodepool: gpu-pool``);
* gpu-operator values that set ``dcgm.nodeSelector``, ``dcgmExporter.nodeSelector``,
  ``daemonsets.nodeSelector`` (or ``affinity``/``tolerations`` beside them): gpu-operator's
  ClusterPolicy has no such field, so they place nothing. gpu-operator puts dcgm-exporter on
  every node it labels ``nvidia.com/gpu.deploy.dcgm-exporter=true`` (every node with an NVIDIA
  GPU); ``dcgm`` is the standalone DCGM host engine, off by default, not the exporter.

Taints of the ``node.kubernetes.io/`` family (not-ready, unreachable ...) and node roles are
not counted. Labels gpulint cannot see on the nodes are not guessed.

## Why is this bad?
dcgm-exporter reports the GPUs of the node it runs on. Where no exporter pod runs, the GPUs
of the workload have no ``DCGM_FI_*`` series, and its HPA gets "no metrics returned from
custom metrics API" for exactly those pods, while other nodes look fine. GPU node pools are
tainted (GKE adds ``nvidia.com/gpu=present:NoSchedule``; many clusters do the same), so an
exporter without that toleration never lands on them.

## Example
```yaml
# dcgm-exporter chart values (tolerations: the chart's control-plane default)
nodeSelector:
  nodepool: gpu-pool
---
# the workload
tolerations:
- {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
```

## Use instead
```yaml
tolerations:
- {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
nodeSelector:
  nodepool: gpu-pool
```

## References
- NVIDIA/gpu-operator assets/state-dcgm-exporter/0800_daemonset.yaml (nodeSelector
  ``nvidia.com/gpu.deploy.dcgm-exporter: "true"``), controllers/state_manager.go,
  controllers/object_controls.go ``applyCommonDaemonsetConfig`` (``daemonsets.tolerations``),
  api/nvidia/v1/clusterpolicy_types.go (``DCGMSpec``, ``DCGMExporterSpec``,
  ``DaemonsetsSpec``: no node selector), deployments/gpu-operator/values.yaml.
- NVIDIA/dcgm-exporter deployment/values.yaml (``tolerations``, ``nodeSelector``,
  ``affinity``).
- Kubernetes docs, "Taints and Tolerations", "Assigning Pods to Nodes".
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, DcgmExporter, Finding, Inventory, Severity, placement_problems

ID = "GL604"
NAME = "exporter-not-on-gpu-nodes"
SEVERITY = Severity.WARNING
SCOPE = "exporter"
STAGES = ("exporter",)


def check(exporter: DcgmExporter, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    for problem in placement_problems(exporter, inventory):
        yield ctx.finding(
            problem.document, problem.path, problem.message, problem.fix, related=problem.related
        )
