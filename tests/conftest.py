"""Shared helpers: lint YAML text or fixture paths through the real engine; fixtures for
the real kustomize and Helm (tests/tools.py)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from gpulint.config import Settings
from gpulint.engine import Result, Selection, inventory_from_paths, run
from gpulint.inventory import Inventory
from gpulint.lint import build_units, lint_units, plan_units
from gpulint.loader import load_file
from gpulint.model import Finding
from gpulint.units import RenderOptions

from .tools import helm_command, kustomize_command

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = (ROOT.parent / "shared" / "corpus").resolve()


def lint_text(
    text: str,
    name: str = "input.yaml",
    settings: Settings | None = None,
    select: list[str] | None = None,
) -> list[Finding]:
    """Lint one YAML text as if it were a file called ``name``."""
    inventory = Inventory(settings or Settings())
    data = textwrap.dedent(text).lstrip("\n").encode()
    loaded = load_file(name, data)
    loaded.path = name
    inventory.add_file(loaded)
    return run(inventory, Selection(select or []))


def lint_paths(
    *paths: str | os.PathLike[str],
    settings: Settings | None = None,
    select: list[str] | None = None,
) -> list[Finding]:
    """Lint paths as ``gpulint lint`` does: units planned, rendered and merged."""
    return lint_result(*paths, settings=settings, select=select).findings


def lint_result(
    *paths: str | os.PathLike[str],
    settings: Settings | None = None,
    select: list[str] | None = None,
    options: RenderOptions | None = None,
) -> Result:
    settings = settings or Settings()
    plans = plan_units([str(p) for p in paths], settings)
    units = build_units(plans, options or RenderOptions())
    return lint_units(units, settings, Selection(select or []))


def lint_one_inventory(
    *paths: str | os.PathLike[str],
    settings: Settings | None = None,
    select: list[str] | None = None,
) -> list[Finding]:
    """Every file in one inventory, as if it were one cluster (no units)."""
    inventory = inventory_from_paths([str(p) for p in paths], settings or Settings())
    return run(inventory, Selection(select or []))


def rules_of(findings: list[Finding]) -> list[str]:
    return [f.rule for f in findings]


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("the real-manifest corpus (../shared/corpus) is not present")
    return CORPUS


@pytest.fixture
def kustomize() -> list[str]:
    """The argv prefix of a kustomize build (tests/tools.py ``kustomize_command``): skips the
    test without kustomize, or fails it under CI=true."""
    return kustomize_command()


@pytest.fixture
def helm() -> list[str]:
    """The argv prefix of Helm (tests/tools.py ``helm_command``): skips the test without
    Helm, or fails it under CI=true."""
    return helm_command()
