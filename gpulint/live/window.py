"""The live check's look-back window and the two options that set it, worded once for every
command that runs the check (``gpulint lint --prometheus``, ``gpulint serve --prometheus``).

Kept apart from ``gpulint.live.options`` so that building the command line imports nothing
the live check alone needs.
"""

from __future__ import annotations

from typing import Any

# One daily cycle of load: a metric that disappeared yesterday, or a target that is reached
# only at the daily peak, is still in view.
DEFAULT_LOOKBACK_TEXT = "24h"
# The share of the look-back window the query's history must cover before a live rule says a
# target is never reached or always exceeded. Those verdicts are claims about the whole window
# (one daily cycle of load by default); a window seen in part may miss the peak or the night,
# so nine tenths are asked for, leaving room for retention edges and scrape gaps.
DEFAULT_MIN_HISTORY = 0.9
DEFAULT_MIN_HISTORY_TEXT = f"{DEFAULT_MIN_HISTORY * 100:g}%"


def add_window_options(group: Any, *, defaults: bool) -> None:
    """``--lookback`` and ``--min-history`` on an argparse group. ``defaults=False`` leaves
    them None when not given, for a command that also reads them from a file and must tell
    "not given" apart."""
    group.add_argument(
        "--lookback",
        default=DEFAULT_LOOKBACK_TEXT if defaults else None,
        metavar="DURATION",
        help="how far back to look for metrics that disappeared and for observed values "
        f"(default: {DEFAULT_LOOKBACK_TEXT})",
    )
    group.add_argument(
        "--min-history",
        default=DEFAULT_MIN_HISTORY_TEXT if defaults else None,
        metavar="SHARE",
        help="share of --lookback the observed values must cover before a live rule calls a "
        "target never reached or always exceeded; on less, its finding is info (default: "
        f"{DEFAULT_MIN_HISTORY_TEXT.replace('%', '%%')}; 0 judges on any history)",
    )
