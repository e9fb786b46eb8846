"""gpulint: catches GPU autoscaling on Kubernetes that silently does not work."""

__version__ = "0.1.0"
