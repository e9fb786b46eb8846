"""A suppression silences nothing.

## What it checks
A ``# gpulint: ignore=GL...`` comment, or a ``gpulint.dev/ignore`` annotation, that names a
rule which reported nothing where the suppression applies. Only rules that ran are judged.

## Why is this bad?
Stale suppressions hide future problems: once the original finding is fixed, the comment
silently swallows the next one.

## Example
```yaml
metadata:
  annotations:
    gpulint.dev/ignore: "GL101"   # this HPA scales on GPU metrics now
```

## Use instead
Delete the annotation (or the rule ID from it).

## References
- The same idea as ruff's RUF100 (unused noqa).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import Context, Finding, Inventory, Severity

ID = "GL703"
NAME = "unused-suppression"
SEVERITY = Severity.INFO
SCOPE = "inventory"


def check(inventory: Inventory, _: Inventory, ctx: Context) -> Iterator[Finding]:
    # The engine reports unused suppressions after every other rule has run.
    return iter(())
