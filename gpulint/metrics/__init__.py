"""GPU metric names and the query languages that name them (PromQL, adapter templates)."""
