"""An HPA or KEDA ScaledObject scales a KubeAI Model that KubeAI autoscales itself.

## What it checks
An HPA, a KEDA ScaledObject or an AIBrix PodAutoscaler whose ``scaleTargetRef`` is a KubeAI
``Model`` (``kubeai.org/v1``) of the input that does not set ``autoscalingDisabled: true``.

## Why is this bad?
A Model serves a ``/scale`` subresource on ``spec.replicas``, so an HPA can name it. But
unless ``autoscalingDisabled`` is true, KubeAI's own autoscaler writes ``spec.replicas``
through the same ``/scale`` from the active requests it counts (``targetRequests`` per pod,
``scaleDownDelaySeconds``), and its proxy scales a Model at zero back to one when a request
arrives. The two overwrite each other's replica count at every sync: GPU pods are started and
killed while they load their model, and neither the HPA's metric nor KubeAI's target holds.

## Example
```yaml
apiVersion: kubeai.org/v1
kind: Model
metadata: {name: llama-8b}
spec:
  engine: VLLM
  url: hf://meta-llama/Llama-3.1-8B-Instruct
  resourceProfile: nvidia-gpu-l4:1
  minReplicas: 1
  maxReplicas: 4
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llama-8b}
spec:
  scaleTargetRef: {apiVersion: kubeai.org/v1, kind: Model, name: llama-8b}
  maxReplicas: 4
```

## Use instead
```yaml
spec:
  autoscalingDisabled: true   # KubeAI leaves spec.replicas to the HPA
```
or delete the HPA and tune KubeAI's own autoscaling (``targetRequests``,
``scaleDownDelaySeconds``, ``minReplicas``, ``maxReplicas``).

## References
- kubeai-project/kubeai@f442a2c api/k8s/v1/model_types.go (``autoscalingDisabled``: "will
  stop the controller from managing the replicas"; the scale subresource);
  internal/modelclient/scale.go (``Scale``, ``ScaleAtLeastOneReplica``).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    Context,
    Finding,
    Inventory,
    KubeAIModel,
    Severity,
    TargetGroup,
    edits,
    related,
)

ID = "GL132"
NAME = "kubeai-model-beside-autoscaler"
SEVERITY = Severity.ERROR
SCOPE = "target-group"
FIXES = ("unsafe",)
STAGES = ("autoscaler",)

MODEL = "Model"


def check(group: TargetGroup, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    own = [a for a in group.autoscalers if a.kind == MODEL and a.implicit]
    others = [a for a in group.autoscalers if not a.implicit]
    if not own or not others:
        return
    model = inventory.view_of(own[0].manifest)
    if not isinstance(model, KubeAIModel):
        return
    where = f"{model.namespace}/" if model.namespace else ""
    for other in others:
        yield ctx.finding(
            other.manifest,
            other.path,
            f"{other.manifest.kind} {other.manifest.name} scales KubeAI Model "
            f"{where}{model.name}, which KubeAI's own autoscaler scales too. Both write "
            f"spec.replicas through the Model's /scale ({other.describe()}; KubeAI's "
            f"{model.settings()}, autoscalingDisabled is not set), and each overwrites the "
            "other's count at every sync, so GPU pods are started and killed while they load "
            "their model.",
            f"# on Model {model.name}: KubeAI leaves spec.replicas to {other.describe()}\n"
            "spec:\n  autoscalingDisabled: true",
            related=[related(model.manifest, ("spec",), f"KubeAI Model {model.name}")],
            plan=edits.unsafe(
                edits.Insert(model.manifest, ("spec",), edits.entries(autoscalingDisabled=True))
            ),
            writes=[model.manifest],
            fix_at_path=False,
        )
