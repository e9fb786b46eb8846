"""From paths to YAML documents and lint units: loading, parsing, rendering."""
