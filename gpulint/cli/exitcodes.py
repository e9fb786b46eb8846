"""The exit codes every command shares: 0 nothing at or above the fail-on level, 1 findings
at or above it, 2 usage error, bad configuration or no readable input."""

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
