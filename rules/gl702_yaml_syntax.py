"""A file (or an embedded config) is not valid YAML.

## What it checks
Files that do not parse, and prometheus-adapter configurations embedded in a ConfigMap that
do not parse. The parser's line and column are reported; the documents before the error and
after the next ``---`` are still linted. Files full of Helm/Go or Terraform template syntax
are not reported here: they are skipped with advice to render them first. A document whose
aliases would expand to millions of nodes ("billion laughs") is refused here too.

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

from gpulint.inventory import Inventory
from gpulint.model import Finding, Location, Severity
from gpulint.rule import Context

ID = "GL702"
NAME = "yaml-syntax"
SEVERITY = Severity.ERROR
SCOPE = "inventory"


def check(inventory: Inventory, _: Inventory, ctx: Context) -> Iterator[Finding]:
    for problem in inventory.problems:
        yield ctx.at(
            Location(problem.file, problem.line, problem.column),
            f"not valid YAML: {problem.message}",
            "fix the syntax at this line (indentation, quoting, an unclosed bracket)",
        )
