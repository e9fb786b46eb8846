"""``--baseline``, ``--write-baseline``, ``--changed-since``, ``--report-only``: which
findings of a lint are reported."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from gpulint.adoption.baseline import Baseline
    from gpulint.adoption.changed import Changes
    from gpulint.engine.result import Result


class Adoption:
    """``--baseline``, ``--write-baseline``, ``--changed-since``, ``--report-only``: which
    findings of a run are reported (gpulint.adoption.baseline, gpulint.adoption.changed)."""

    def __init__(self, args: argparse.Namespace) -> None:
        """Raises ValueError (a BaselineError, a ChangedError) for a usage error."""
        self.write_to: str | None = getattr(args, "write_baseline", None)
        self.written: str | None = None  # what --write-baseline wrote, once it has
        self.baseline: Baseline | None = None
        self.changes: Changes | None = None
        path = getattr(args, "baseline", None)
        self.baseline_path: str = path or ""
        if path:
            from gpulint.adoption.baseline import load_baseline

            self.baseline = load_baseline(path)
        ref = getattr(args, "changed_since", None)
        report_only = getattr(args, "report_only", False)
        if (ref or report_only) and getattr(args, "cluster", False):
            raise ValueError("--changed-since and --report-only narrow a run over files")
        if ref and report_only:
            raise ValueError("give --changed-since or --report-only, not both")
        if ref:
            from gpulint.adoption.changed import changes_since

            self.changes = changes_since(ref, args.paths or ["."])
        elif report_only:
            from gpulint.adoption.changed import whole_files

            paths = args.paths or []
            if "-" in paths:
                raise ValueError("--report-only reports files: it cannot read stdin")
            directories = [p for p in paths if os.path.isdir(p)] or ["."]
            files = [p for p in paths if not os.path.isdir(p)]
            self.changes = whole_files(files)
            outside = [f for f in files if not any(_inside(f, d) for d in directories)]
            args.paths = directories + outside

    def narrow(self, result: Result) -> None:
        """Write the baseline, then keep the findings the baseline and the changes leave."""
        if self.write_to:
            from gpulint.adoption.baseline import Baseline
            from gpulint.core.paths import display_path

            Baseline.of(result.findings).write(self.write_to)
            self.written = (
                f"baseline of {_counted(result)} written to {display_path(self.write_to)}"
            )
            result.notes.append(self.written)
        findings = result.findings
        if self.baseline is not None:
            from gpulint.adoption.baseline import unread_by

            unread = unread_by(result.inputs, self.baseline_path)
            comparison = self.baseline.split(findings, unread)
            findings = comparison.new
            result.baseline = (comparison.baselined, comparison.stale, comparison.not_evaluated)
        if self.changes is not None:
            findings, outside = self.changes.narrow(findings)
            if outside:
                result.notes.append(
                    f"{outside} finding{'s' * (outside != 1)} outside the changes "
                    f"{self.changes.description} not reported"
                )
        result.findings = findings


def _counted(result: Result) -> str:
    """``16 findings (11 errors, 5 warnings)``."""
    from gpulint.core.model import Severity

    total = len(result.findings)
    counts = [
        f"{count} {word}{'s' * (count != 1)}"
        for severity, word in ((Severity.ERROR, "error"), (Severity.WARNING, "warning"))
        if (count := result.count(severity))
    ]
    infos = result.count(Severity.INFO)
    if infos:
        counts.append(f"{infos} info")
    shown = f" ({', '.join(counts)})" if counts else ""
    return f"{total} finding{'s' * (total != 1)}{shown}"


def _inside(path: str, directory: str) -> bool:
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(directory))
    return relative != ".." and not relative.startswith(".." + os.sep)
