"""``gpulint replay`` from the installed wheel (tests/artifacts.py), against the recorded
day in a real Prometheus: the command as users install it."""

from __future__ import annotations

import json

import pytest

from .. import artifacts
from .conftest import Recorded
from .test_replay_e2e import replay_args

pytestmark = [pytest.mark.live, pytest.mark.slow]


def test_replay_from_the_wheel(recorded: Recorded, wheel_install: artifacts.Install) -> None:
    done = wheel_install.run(*replay_args(recorded), "--fail-on", "never")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["version"] == 1 and report["replays"]
    assert all(r["series"] for r in report["replays"])
