"""``gpulint serve``: the validating admission webhook, when its extra is installed."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, TextIO

from gpulint.cli.exitcodes import EXIT_USAGE
from gpulint.cli.extras import missing_extra

if TYPE_CHECKING:
    import argparse


def run_serve(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    problem = missing_extra("webhook", "gpulint serve")
    if problem is not None:
        stderr.write(f"gpulint: error: {problem}\n")
        return EXIT_USAGE
    # gpulint.webhook is installed from webhook/ (pyproject package-dir), a mapping type
    # checkers do not follow: import it by name.
    code: int = import_module("gpulint.webhook.server").run_serve(args, stdout, stderr)
    return code
