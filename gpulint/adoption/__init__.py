"""Adopting gpulint in a repository: fixes, edits, baselines, changed-only reports."""
