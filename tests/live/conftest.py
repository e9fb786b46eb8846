"""Live tests: a real Prometheus (the Debian package ``prometheus``) scraping fixture exporters.

Without the binary the live tests skip, telling how to install it; under CI (``CI=true``)
they fail instead, so a CI machine without Prometheus cannot pass silently.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection
from gpulint.engine.runner import inventory_from_paths, run
from gpulint.live.collector import collect
from gpulint.live.options import LiveOptions, parse_duration, parse_fraction, written_duration
from gpulint.live.snapshot import LiveSnapshot

from .harness import INSTALL_HINT, free_port, prometheus_binary, promtool_binary
from .world import World, start_world

LIVE_FIXTURES = Path(__file__).resolve().parent / "fixtures"
_DIRECTIVE = re.compile(r"#\s*(live|lookback|min-history):\s*(\S+)")


def require_prometheus() -> None:
    if prometheus_binary() is None or promtool_binary() is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but no prometheus/promtool binary: {INSTALL_HINT}")
        pytest.skip(INSTALL_HINT)


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_prometheus()
    started = start_world(tmp_path_factory.mktemp("prometheus"))
    yield started
    started.stop()


@pytest.fixture(scope="session")
def down_url() -> str:
    """A loopback port nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


def lint_live(
    paths: Sequence[str | os.PathLike[str]],
    url: str,
    lookback: str = "24h",
    timeout: float = 20.0,
    required: bool = False,
    select: list[str] | None = None,
    min_history: str = "90%",
) -> tuple[list[Finding], LiveSnapshot]:
    """Lint ``paths`` with the live check against ``url``, through the real engine."""
    inventory = inventory_from_paths([str(p) for p in paths], Settings())
    options = LiveOptions(
        url,
        {},
        timeout,
        required,
        parse_duration(lookback),
        min_history=parse_fraction(min_history),
        # As gpulint lint says it (gpulint/cli/livecheck.py): the look-back as written.
        lookback_text=written_duration(lookback),
    )
    inventory.live = collect(inventory, options)
    return run(inventory, Selection(select or [])), inventory.live


def directives(case: Path) -> dict[str, str]:
    """``# live: stack`` / ``# lookback: 72h`` comments of a fixture file or directory."""
    files = [case] if case.is_file() else sorted(p for p in case.rglob("*") if p.is_file())
    found: dict[str, str] = {}
    for file in files:
        for match in _DIRECTIVE.finditer(file.read_text()):
            found.setdefault(match.group(1), match.group(2))
    return found


def server_url(world: World, down_url: str, case: Path) -> tuple[str, str]:
    """(url, lookback) a fixture asks for."""
    settings = directives(case)
    name = settings.get("live", "stack")
    url = down_url if name == "down" else world.url(name)
    return url, settings.get("lookback", "24h")


def min_history(case: Path) -> str:
    """The ``# min-history: 0`` a fixture asks for: the world's Prometheus holds seconds of
    scraped data, so a fixture of a whole-window verdict judges on any history."""
    return directives(case).get("min-history", "90%")


def live_findings(findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.rule.startswith("GL8")]


def show(findings: Sequence[Finding]) -> str:
    return "\n".join(f"{f.location}: {f.rule} {f.message}\n    fix: {f.fix}" for f in findings)
