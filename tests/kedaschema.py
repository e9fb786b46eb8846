"""KEDA ScaledObjects validated against KEDA's own API types: the npm registry's
``@kubernetes-models/keda`` (MIT), whose validators are generated from kedacore/keda's Go API
types, the ones its CRD (config/crd/bases/keda.sh_scaledobjects.yaml) is generated from.
Installed once into the user's cache with npm and run with node; without them or the
registry the test is skipped, and fails under CI=true."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

PACKAGE = "@kubernetes-models/keda@2.0.0"

_VALIDATE = """
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import { readFileSync } from "node:fs";
const objects = JSON.parse(readFileSync(0, "utf8"));
const problems = [];
for (const data of objects) {
  try { new ScaledObject(data).validate(); }
  catch (error) { problems.push(`${data.metadata && data.metadata.name}: ${error.message}`); }
}
process.stdout.write(JSON.stringify(problems));
"""


def _home() -> Path | None:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpulint-tests"
    home = cache / "keda-models"
    marker = home / "node_modules" / "@kubernetes-models" / "keda" / "package.json"
    if marker.exists():
        return home
    npm = shutil.which("npm")
    if npm is None:
        return None
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(home), PACKAGE],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return home if marker.exists() else None


def scaled_object_problems(objects: list[dict[str, Any]]) -> list[str]:
    """What KEDA's types refuse in each ScaledObject (empty: all valid)."""
    home = _home()
    node = shutil.which("node")
    if home is None or node is None:
        message = f"cannot install {PACKAGE} with npm, or run node"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    script = home / "validate.mjs"
    script.write_text(_VALIDATE, encoding="utf-8")
    done = subprocess.run(
        [node, str(script)],
        input=json.dumps(objects),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=home,
    )
    problems: list[str] = json.loads(done.stdout)
    return problems
