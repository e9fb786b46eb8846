"""The one engine: rule modules, their registry, configuration, and the run."""
