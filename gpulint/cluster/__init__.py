"""Cluster mode: the same inventory read from a live Kubernetes API server."""
