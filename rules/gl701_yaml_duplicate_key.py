"""A mapping key is written twice.

## What it checks
Any YAML mapping (in a manifest, a Helm values file, an embedded adapter config) with the
same key twice.

## Why is this bad?
YAML parsers keep one of the two silently: PyYAML and Helm keep the last, so a values file
with ``prometheusOperator:`` written twice loses everything under the first one. kubectl's
strict decoding rejects the manifest outright.

## Example
```yaml
prometheusOperator:
  nodeSelector: {nodepool: gpu}
prometheusOperator:            # the first block is silently dropped
  admissionWebhooks: {patch: {nodeSelector: {nodepool: gpu}}}
```

## Use instead
```yaml
prometheusOperator:
  nodeSelector: {nodepool: gpu}
  admissionWebhooks: {patch: {nodeSelector: {nodepool: gpu}}}
```

## References
- YAML 1.2 spec, 3.2.1.1: mapping keys are unique.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Location, Severity

ID = "GL701"
NAME = "yaml-duplicate-key"
SEVERITY = Severity.ERROR
SCOPE = "inventory"


def check(inventory: Inventory, _: Inventory, ctx: Context) -> Iterator[Finding]:
    for document, duplicate in inventory.duplicates:
        file = document.file if document is not None else ""
        rendered = document.rendered_from if document is not None else None
        yield ctx.at(
            Location(file, duplicate.line, duplicate.column, rendered),
            f"key {duplicate.key!r} is written twice (first at line {duplicate.first_line}); "
            "YAML keeps only this one, so everything under the first is silently lost",
            f"merge the two {duplicate.key!r} blocks into one",
        )
