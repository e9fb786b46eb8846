"""The ``gpulint`` command.

Exit codes: 0 nothing at or above the fail-on level, 1 findings at or above it, 2 usage error,
bad configuration or no readable input.
"""

from __future__ import annotations

import contextlib
import os
import sys
from importlib import import_module
from typing import TYPE_CHECKING, TextIO, cast

from gpulint.cli.check_adapter import adapter_input
from gpulint.cli.context import run_context
from gpulint.cli.exitcodes import EXIT_OK, EXIT_USAGE
from gpulint.cli.lint import run_lint
from gpulint.cli.parser import build_parser
from gpulint.cli.rules import run_explain, run_rules
from gpulint.cli.serve import run_serve
from gpulint.cli.trace import run_trace

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["build_parser", "entry", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from gpulint.report.escape import SafeStream

    stdout = sys.stdout
    stderr = cast("TextIO", SafeStream(sys.stderr))
    try:
        if args.command == "lint":
            return run_lint(args, stdout, stderr)
        if args.command == "check-adapter":
            refused = adapter_input(args, stderr)
            return refused if refused is not None else run_lint(args, stdout, stderr)
        if args.command == "trace":
            return run_trace(args, stdout, stderr)
        if args.command == "replay":
            replayed: int = import_module("gpulint.replay.command").run_replay(args, stdout, stderr)
            return replayed
        if args.command == "migrate":
            migrated: int = import_module("gpulint.migrate.command").run_migrate(
                args, stdout, stderr
            )
            return migrated
        if args.command == "context":
            return run_context(args, stdout, stderr)
        if args.command == "rules":
            return run_rules(args, stdout)
        if args.command == "explain":
            return run_explain(args, stdout, stderr)
        if args.command == "serve":
            return run_serve(args, stdout, stderr)
        parser.print_help(stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `gpulint lint . | head`: the reader went away; nothing left to say.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


def entry() -> None:
    """The ``gpulint`` command: ``main``, then out of the process at once. A large run holds
    hundreds of megabytes of small objects that the interpreter would otherwise free one by
    one on the way out, for nothing; ``gpulint serve`` returns only when it has stopped."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
