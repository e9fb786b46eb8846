"""``check-adapter`` and ``lint --prometheus`` from the installed wheel and the image's
virtualenv, against a real Prometheus: the live extra as users install it."""

from __future__ import annotations

import json

import pytest

from .. import artifacts
from .conftest import LIVE_FIXTURES
from .world import World

pytestmark = [pytest.mark.live, pytest.mark.slow]

BROKEN = LIVE_FIXTURES / "GL804" / "fail_pod_label_of_exporter"


@pytest.mark.parametrize("name", ["wheel_install", "image_install"])
def test_check_adapter_from_the_install(
    world: World, request: pytest.FixtureRequest, name: str
) -> None:
    install: artifacts.Install = request.getfixturevalue(name)
    adapter, hpa = BROKEN / "adapter.yaml", BROKEN / "hpa.yaml"
    done = install.run(
        "check-adapter", "--prometheus", world.stack.url, "-f", "json", str(adapter), str(hpa)
    )
    assert done.returncode == 1, done.stderr
    rules = {f["rule"] for f in json.loads(done.stdout)["findings"]}
    assert {"GL802", "GL804"} <= rules
