"""``gpulint check-adapter``: lint with a prometheus-adapter config and a live Prometheus.

The command is ``gpulint lint`` with the adapter file read first: this module checks that
file and puts it in front of the paths; the command table in ``gpulint.cli`` then runs the
lint, so no command imports another."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from gpulint.cli.exitcodes import EXIT_USAGE

if TYPE_CHECKING:
    import argparse


def adapter_input(args: argparse.Namespace, stderr: TextIO) -> int | None:
    """``gpulint check-adapter --prometheus URL ADAPTER_FILE [PATHS...]``: put the adapter file
    first among the paths to lint; an exit code (after saying why on stderr) when it cannot be
    read or holds no prometheus-adapter configuration."""
    from gpulint.input.loader import InputError, load_file
    from gpulint.inventory import Inventory as _Inventory

    try:
        loaded = load_file(args.adapter_file)
    except (InputError, OSError) as error:
        stderr.write(f"gpulint: error: {error}\n")
        return EXIT_USAGE
    probe = _Inventory()
    probe.add_file(loaded)
    if not probe.adapter_configs and not probe.problems:
        stderr.write(
            f"gpulint: error: {args.adapter_file} holds no prometheus-adapter configuration "
            "(its config file, Helm values with rules:, or a ConfigMap whose data holds it)\n"
        )
        return EXIT_USAGE
    args.paths = [args.adapter_file, *args.paths]
    return None
