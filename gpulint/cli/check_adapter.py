"""``gpulint check-adapter``: lint with a prometheus-adapter config and a live Prometheus."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from gpulint.cli.exitcodes import EXIT_USAGE
from gpulint.cli.lint import run_lint

if TYPE_CHECKING:
    import argparse


def run_check_adapter(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """``gpulint check-adapter --prometheus URL ADAPTER_FILE [PATHS...]``."""
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
    return run_lint(args, stdout, stderr)
