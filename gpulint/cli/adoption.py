"""``--baseline``, ``--write-baseline``, ``--changed-since``, ``--report-only``,
``--new-since``: which findings of a lint are reported."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from gpulint.adoption.baseline import Baseline
    from gpulint.adoption.changed import Changes
    from gpulint.engine.result import Result


class Adoption:
    """``--baseline``, ``--write-baseline``, ``--changed-since``, ``--report-only``,
    ``--new-since``: which findings of a run are reported (gpulint.adoption.baseline,
    gpulint.adoption.changed, gpulint.adoption.since)."""

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
        self.new_since: str | None = getattr(args, "new_since", None)
        if self.new_since:
            if getattr(args, "cluster", False) or "-" in (args.paths or []):
                raise ValueError(
                    "--new-since lints files as git holds them: not a cluster or stdin"
                )
            if getattr(args, "prometheus", None):
                raise ValueError(
                    "--new-since judges what a change brings to files; the live findings "
                    "describe the cluster, which a commit does not change: drop --prometheus"
                )
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
        self.paths: list[str] = list(args.paths or ["."])
        self.options = _lint_options(args)
        if self.new_since:
            from gpulint.adoption.since import revision

            revision(self.new_since, self.paths)

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
        if self.new_since and findings:
            from gpulint.adoption.since import findings_at

            before, named = findings_at(self.new_since, self.paths, self.options, result.config)
            comparison = before.split(findings)
            findings = comparison.new
            if comparison.baselined:
                count = comparison.baselined
                result.notes.append(
                    f"{count} finding{'s' * (count != 1)} the input already had at {named} "
                    f"not reported: a change answers for what it brings"
                )
        if self.changes is not None:
            findings, outside = self.changes.narrow(findings)
            if outside:
                result.notes.append(
                    f"{outside} finding{'s' * (outside != 1)} outside the changes "
                    f"{self.changes.description} not reported"
                )
        result.findings = findings


def _lint_options(args: argparse.Namespace) -> list[str]:
    """This run's selection and renderers, as options of another ``gpulint lint`` (the files
    at the revision ``--new-since`` names are linted as these are)."""
    options: list[str] = []
    for value in getattr(args, "select", None) or []:
        options += ["--select", value]
    for value in getattr(args, "ignore", None) or []:
        options += ["--ignore", value]
    for name in ("kustomize", "helm"):
        value = getattr(args, name, None)
        if value:
            options += [f"--{name}", value]
    for value in getattr(args, "helm_values", None) or []:
        options += ["--helm-values", os.path.abspath(value)]
    size = getattr(args, "max_file_size", None)
    if size is not None:
        options += ["--max-file-size", str(size)]
    return options


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
