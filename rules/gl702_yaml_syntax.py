"""A file (or an embedded config) is not valid YAML, or cannot be read at all.

## What it checks
Files that do not parse, and prometheus-adapter configurations embedded in a ConfigMap that
do not parse. The parser's line and column are reported; the documents before the error and
after the next ``---`` are still linted. Files full of Helm/Go or Terraform template syntax
are not reported here: they are skipped with advice to render them first. Nor are files
whose name says another tool reads them (``tsconfig.json`` with comments, ``.vscode/``,
``package.json``, GitHub workflows, Compose files ...): they are no Kubernetes input, and are
skipped unread and listed. A document whose
aliases would expand to millions of nodes ("billion laughs"), or that is nested too deeply,
is refused here too, as is a file or directory that cannot be read (permissions) and a file
over the size limit (``--max-file-size``, 64 MiB by default).

## Why is this bad?
kubectl and Helm refuse the file. An adapter ConfigMap whose embedded ``config.yaml`` does
not parse makes prometheus-adapter crash at start ("unable to load metrics discovery
config"), so no HPA gets any custom metric.

## Example
```yaml
data:
  config.yaml: |
    rules:
    - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL'
       metricsQuery: avg(<<.Series>>)     # indented one column too far
```

## Use instead
```yaml
    rules:
    - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL'
      metricsQuery: avg(<<.Series>>)
```

## References
- prometheus-adapter pkg/config/loader.go: the config is parsed strictly at start.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Location, Severity

ID = "GL702"
NAME = "yaml-syntax"
SEVERITY = Severity.ERROR
SCOPE = "inventory"


def check(inventory: Inventory, _: Inventory, ctx: Context) -> Iterator[Finding]:
    for problem in inventory.problems:
        where = Location(problem.file, problem.line, problem.column)
        if problem.kind == "unreadable":
            yield ctx.at(
                where,
                f"{problem.message}; it was not linted",
                "make it readable by the user gpulint runs as, or exclude it (exclude: in "
                ".gpulint.yaml)",
            )
        elif problem.kind == "too-large":
            yield ctx.at(
                where,
                f"{problem.message}; it was not read",
                "split it, raise --max-file-size if it really is a manifest, or exclude it",
            )
        else:
            yield ctx.at(
                where,
                f"not valid YAML: {problem.message}",
                "fix the syntax at this line (indentation, quoting, an unclosed bracket)",
            )
