"""A kustomization or Helm chart does not render, so no cluster can get what it describes.

## What it checks
Every kustomization directory and Helm chart gpulint lints as a unit is rendered with the
real tools (``kustomize build`` or ``kubectl kustomize``, ``helm template``). When the tool
refuses the input, this rule reports it at the ``kustomization.yaml`` or ``Chart.yaml``, with
the tool's own message: a resource file that does not exist, a patch whose target is not in
the resources, a template that does not render, a kustomization that does not parse, or a
chart that needs more memory or CPU than a renderer may use (2 GiB of address space and
120 s of CPU per process: a loop or ``tpl`` recursion that builds ever larger strings).

The message is the tool's, bounded (2,000 characters) and scrubbed: the tools run with a
clean environment, and anything that looks like environment data (NUL-separated text, runs
of ``NAME=value`` words, a value of gpulint's own environment) is cut out, so a template
that prints a file it should not have read cannot put a CI secret into the report.

When an overlay does not build, the bases it includes that build on their own (and that no
other kustomization of the run judges) are judged as units of their own, at their real lines;
a note on the overlay's finding names them. When the cause is in a base (it does not build
alone either), the finding is at the base, once, naming the overlays that include it.

A Helm chart is rendered as Helm would install it: ``file://`` dependencies are built from
the repository, remote ones that ``charts/`` does not hold are left out (a note names those
the values enable), a value a template ``required``s is stood in by a placeholder (a note
names it), and a library chart (``type: library``), which cannot be installed, is not
rendered.

## Why is this bad?
``kubectl apply -k`` and Argo CD or Flux fail on the same input, so the overlay or chart never
reaches a cluster, and none of its other problems can be judged: gpulint cannot know what the
cluster would get.

## Example
```yaml
# overlays/prod/kustomization.yaml
resources:
  - ../../base
patches:
  - path: gpu-patch.yaml       # patches Deployment vllm-llama, which the base calls vllm
```

## Use instead
```yaml
patches:
  - path: gpu-patch.yaml
    target: {kind: Deployment, name: vllm}
```

## References
- kustomize: a strategic-merge patch must match exactly one resource
  ("no resource matches strategic merge patch").
- Helm: `helm template` renders exactly what `helm install` would send.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Location, Severity

ID = "GL704"
NAME = "render-failed"
SEVERITY = Severity.ERROR
SCOPE = "inventory"


def check(inventory: Inventory, _: Inventory, ctx: Context) -> Iterator[Finding]:
    for problem in inventory.render_problems:
        if problem.rule == ID:
            yield ctx.at(
                Location(problem.file, problem.line, problem.column, note=problem.note),
                problem.message,
                problem.fix,
            )
