"""``--prometheus``: the live check of a run, its options parsed and its snapshot taken for
each inventory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from gpulint.cli.extras import missing_extra

if TYPE_CHECKING:
    import argparse

    from gpulint.engine.config import Settings
    from gpulint.engine.registry import Selection
    from gpulint.inventory import Inventory


class LiveCheck:
    """The live check of a run: its options, and what it found in each unit."""

    def __init__(self, options: Any, progress: TextIO | None = None) -> None:
        from gpulint.live.snapshot import Checked

        self.options = options
        self.progress = progress  # where to say what a slow check waits for (None: nowhere)
        self._notes: list[str] = []
        self.failed_required = False
        # What the units' checks asked about, each thing once, and in how many units a check
        # was answered.
        self.checked = Checked()
        self.answered = 0

    @property
    def notes(self) -> list[str]:
        """What the run's check says: what it checked, over every unit, then the units'
        own notes."""
        if not self.answered:
            return list(self._notes)
        from gpulint.live.words import checked_note

        said = checked_note(self.checked, self.options.url, self.options.window, self.answered)
        return [said, *self._notes]

    def __call__(self, inventory: Inventory) -> None:
        """Collect what the live rules read, for one unit's inventory."""
        from gpulint.kinds.keda import prometheus_triggers
        from gpulint.live.collector import collect

        triggers = prometheus_triggers(inventory.store.views.values())
        pipeline = inventory.pipeline
        if (
            not inventory.adapter_configs
            and not inventory.hpas
            and not triggers
            and not pipeline.all_monitors()
            and not pipeline.all_exporters()
        ):
            return
        if self.progress is None:
            inventory.live = collect(inventory, self.options)
        else:
            from gpulint.live.progress import Progress
            from gpulint.report.escape import SafeStream

            # Past the escaping stream: the line's own carriage returns must reach the
            # terminal (Progress escapes the request it describes).
            raw = self.progress.stream if isinstance(self.progress, SafeStream) else self.progress
            terminal = _is_terminal(raw)
            with Progress(raw, self.options.timeout, terminal) as progress:
                inventory.live = collect(inventory, self.options, progress.waiting)
        live = inventory.live
        self._notes.extend(n for n in live.notes if n not in self._notes)
        if live.available:
            self.answered += 1
            self.checked.add(live.checked)
        elif self.options.required:
            self.failed_required = True


def live_check(
    args: argparse.Namespace, settings: Settings, selection: Selection, stderr: TextIO
) -> LiveCheck | list[str] | None:
    """The live check when ``--prometheus`` is given (``[]`` when it is not, a list of notes
    when it has nothing to do); None after a usage error, said on stderr.

    Only this path imports the Prometheus client (and with it requests).
    """
    url = getattr(args, "prometheus", None)
    if not url:
        if getattr(args, "require_prometheus", False) or getattr(args, "prometheus_header", None):
            stderr.write(
                "gpulint: error: --require-prometheus and --prometheus-header need "
                "--prometheus URL\n"
            )
            return None
        return []
    problem = missing_extra("live", "--prometheus")
    if problem is not None:
        stderr.write(f"gpulint: error: {problem}\n")
        return None
    from gpulint.live.options import (
        LiveOptions,
        OptionError,
        parse_duration,
        parse_fraction,
        parse_header,
        parse_url,
        written_duration,
    )

    try:
        if not args.prometheus_timeout > 0:
            raise OptionError("--prometheus-timeout must be a number of seconds above zero")
        options = LiveOptions(
            parse_url(url),
            dict(parse_header(h) for h in args.prometheus_header or []),
            args.prometheus_timeout,
            args.require_prometheus,
            parse_duration(args.lookback),
            min_history=parse_fraction(args.min_history),
            lookback_text=written_duration(args.lookback),
        )
    except OptionError as error:
        stderr.write(f"gpulint: error: {error}\n")
        return None
    from gpulint.engine.registry import rule_index

    if not any(
        info.requires == "live" and selection.allows(info) and settings.rule(info.id).enabled
        for info in rule_index()
    ):
        return ["--prometheus given, but no live rule (GL801-GL812) is selected"]
    wanted = getattr(args, "progress", "auto")
    shown = wanted == "always" or (wanted == "auto" and _is_terminal(stderr))
    return LiveCheck(options, stderr if shown else None)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
