"""Live checks against a real Prometheus: series, label mapping, rendered adapter queries."""
