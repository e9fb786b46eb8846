"""The one exception a time-bounded lint raises: the webhook answers within its budget."""

from __future__ import annotations


class DeadlineExceeded(Exception):
    """A lint passed its deadline (a ``time.monotonic()`` value): between two rules, or
    inside a PromQL query's analysis."""

    def __init__(self, rule: str) -> None:
        super().__init__(f"deadline passed before rule {rule}")
        self.rule = rule
