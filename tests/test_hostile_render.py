"""Charts and kustomizations a pull request can commit that must not turn rendering against the
CI: no secret in any output, no network, nothing written or read outside the repository,
renderers killed at their limits, ``units:`` globs bounded. Real helm and real kustomize."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpulint.engine.config import ConfigError, Settings, settings_from_data
from gpulint.engine.files import build_units, plan_units
from gpulint.input.loader import InputError
from gpulint.input.units import RenderOptions, Unit
from gpulint.input.units.boundary import boundaries_of, inside, tree_problem
from gpulint.input.units.gofields import KUSTOMIZATION, fold
from gpulint.input.units.helm import chart_name, template_file
from gpulint.input.units.kustomize import Kustomization
from gpulint.input.units.references import is_remote, remote_reason
from gpulint.input.units.tools import Limits, RenderBudget, run_tool, scrub

from .tools import helm_command, kustomize_command

pytestmark = pytest.mark.slow

CANARY = "gpulint-canary-5f1e9a7c3b"
HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: NAME}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 3
  metrics:
    - type: Resource
      resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
"""


def _chart(directory: Path, name: str, templates: dict[str, str]) -> Path:
    (directory / "templates").mkdir(parents=True, exist_ok=True)
    (directory / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 1.0.0\n")
    (directory / "values.yaml").write_text("{}\n")
    for file, text in templates.items():
        (directory / "templates" / file).write_text(text)
    return directory


def _kustomization(directory: Path, data: dict[str, object]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(data))
    return directory


def _track(path: Path) -> None:
    """Stage every file of the git work tree holding ``path``, as a pull request's files are
    (gpulint hands renderers only what git tracks); nothing outside git."""
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        cwd=path if path.is_dir() else path.parent,
    )
    if top.returncode == 0:
        subprocess.run(["git", "add", "-A"], check=True, cwd=top.stdout.strip())


def _cli(*args: str, cwd: Path, stdin: str | None = None) -> tuple[str, float, int]:
    """``gpulint lint`` in every format with a canary secret in its environment; all the
    output (stdout and stderr of every format), the longest run's seconds, the text run's
    exit code."""
    _track(cwd)
    env = dict(os.environ, GPULINT_TEST_TOKEN=CANARY, AWS_SECRET_ACCESS_KEY=CANARY)
    output, slowest, code = "", 0.0, 0
    for fmt in ("text", "json", "sarif"):
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "gpulint", "lint", "-f", fmt, *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            input=stdin,
            timeout=60,
        )
        slowest = max(slowest, time.monotonic() - started)
        assert "Traceback" not in done.stderr, done.stderr
        output += done.stdout + done.stderr
        if fmt == "text":
            code = done.returncode
    return output, slowest, code


def _build(*paths: Path, options: RenderOptions) -> list[Unit]:
    for path in paths:
        _track(path)
    return build_units(plan_units([str(p) for p in paths], Settings()), options)


def _options(**kwargs: object) -> RenderOptions:
    return RenderOptions(" ".join(kustomize_command()), helm_command()[0], **kwargs)  # type: ignore[arg-type]


def _kustomized(units: list[Unit]) -> Unit:
    """The kustomize unit (a chart vendored under it is a unit of its own as well)."""
    (unit,) = [u for u in units if u.kind == "kustomize"]
    return unit


def _problems(units: list[Unit]) -> list[tuple[str, str]]:
    return [(p.rule, p.message) for u in units for p in u.render_problems]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree inside ``tmp_path``: ``tmp_path/outside`` is outside the repository."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (tmp_path / "outside").mkdir()
    return root


def _snapshot(directory: Path) -> dict[str, int]:
    """Every path below ``directory`` with its modification time (git's own ``.git`` aside:
    the test stages the files it writes)."""
    return {str(p): p.stat().st_mtime_ns for p in directory.rglob("*") if ".git" not in p.parts}


# --- 1. secrets -------------------------------------------------------------------------------

LEAK = '{{ fail (.Files.Get "files/s.txt") }}\n'


def test_a_chart_linking_to_environ_is_never_rendered_and_leaks_nothing(repo: Path) -> None:
    chart = _chart(repo / "chart", "evil", {"leak.yaml": LEAK})
    (chart / "files").mkdir()
    (chart / "files" / "s.txt").symlink_to("/proc/self/environ")
    output, _, _ = _cli("--helm", helm_command()[0], "chart", cwd=repo)
    assert CANARY not in output
    assert "GL705" in output and "files/s.txt is a link out of it" in output
    (unit,) = _build(chart, options=_options())
    assert unit.rendered_by == []  # helm never ran


def test_kustomize_helm_inflation_of_a_chart_with_a_link_out_is_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay = repo / "overlay"
    chart = _chart(overlay / "charts" / "evil", "evil", {"leak.yaml": LEAK})
    (chart / "files").mkdir()
    (chart / "files" / "s.txt").symlink_to("/proc/self/environ")
    _kustomization(overlay, {"helmCharts": [{"name": "evil", "releaseName": "evil"}]})
    output, _, _ = _cli("--helm", helm_command()[0], "overlay", cwd=repo)
    assert CANARY not in output
    assert "GL705" in output and "link out of it" in output
    monkeypatch.chdir(repo)  # paths in messages are spelled from the working directory
    units = _build(overlay, options=_options())
    assert [u.rendered_by for u in units] == [[], []]  # neither kustomize nor helm ran
    assert (
        "that gpulint does not hand to Helm. In overlay/charts, evil/files/s.txt is a link"
        in _problems([_kustomized(units)])[0][1]
    )


def test_a_renderer_gets_no_variable_of_the_callers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox itself, without the link check in front: a tool that prints its whole
    environment prints no secret."""
    monkeypatch.setenv("GPULINT_TEST_TOKEN", CANARY)
    script = "import os, sys; sys.stdout.write(open('/proc/self/environ').read())"
    output = run_tool([sys.executable, "-c", script], 1 << 20)
    assert output.ok, output.message
    names = {item.split("=", 1)[0] for item in output.stdout.decode().split("\0") if item}
    assert CANARY not in output.stdout.decode()
    assert "GPULINT_TEST_TOKEN" not in names and "PATH" in names
    home = dict(item.split("=", 1) for item in output.stdout.decode().split("\0") if item)
    assert home["HOME"].startswith(tempfile.gettempdir()) and "gpulint-render-" in home["HOME"]
    assert not os.path.exists(home["HOME"])  # the private directory is gone


def test_what_a_tool_prints_on_failure_is_bounded_and_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPULINT_TEST_TOKEN", CANARY)
    environ = tmp_path / "environ"
    environ.write_bytes(f"A=1\0SECRET={CANARY[::-1]}\0B=2\0".encode())
    script = (
        "import sys; sys.stderr.buffer.write(b'Error: x ' + open(sys.argv[1], 'rb').read() "
        f"+ b' KEY1=a KEY2=b KEY3=c {CANARY} ' + b'y' * 100000); sys.exit(1)"
    )
    output = run_tool([sys.executable, "-c", script, str(environ)], 1 << 20)
    assert not output.ok
    assert CANARY not in output.message and CANARY[::-1] not in output.message
    assert "KEY2=b" not in output.message
    assert "\0" not in output.message and len(output.message) <= 2000
    assert output.message.startswith("Error: x [removed")
    # A secret of gpulint's own environment is removed wherever it appears.
    assert CANARY not in scrub(f"token is {CANARY}.")
    assert scrub("spec.replicas: Invalid value") == "spec.replicas: Invalid value"


# --- 2. network ------------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.setblocking(False)
    try:
        yield server, server.getsockname()[1]
    finally:
        server.close()


def _no_connection(server: socket.socket) -> None:
    time.sleep(0.2)
    with pytest.raises(BlockingIOError):
        server.accept()


REMOTE_RESOURCES = [
    "foo@127.0.0.1:org/repo",
    "gh:org/repo",
    "github.com:org/repo",
    "github.com/org/repo",
    "GitHub.com/org/repo?ref=v1",
    "http://127.0.0.1:{port}/org/repo",
    "HTTPS://127.0.0.1:{port}/x.yaml",
    "ssh://git@127.0.0.1:{port}/org/repo",
    "git::http://127.0.0.1:{port}/org/repo",
    "file:///tmp/repo",
    "127.0.0.1:org/repo",
    "org/repo//path?ref=main",
]


@pytest.mark.parametrize("reference", REMOTE_RESOURCES)
def test_a_remote_resource_is_never_fetched(
    repo: Path, listener: tuple[socket.socket, int], reference: str
) -> None:
    server, port = listener
    reference = reference.format(port=port)
    overlay = _kustomization(repo / "overlay", {"resources": [reference]})
    (unit,) = _build(overlay, options=_options())
    assert unit.rendered_by == []  # kustomize never ran
    ((rule, message),) = _problems([unit])
    assert rule == "GL705" and reference in message
    _no_connection(server)


def test_helm_charts_with_a_repository_are_never_pulled(
    repo: Path, listener: tuple[socket.socket, int]
) -> None:
    server, port = listener
    charts = f"http://127.0.0.1:{port}/charts"
    overlay = _kustomization(
        repo / "overlay",
        {
            "helmCharts": [{"name": "evil", "repo": charts, "version": "1.0.0"}],
            "resources": ["foo@127.0.0.1:org/repo", "gh:org/repo", "github.com:org/repo"],
        },
    )
    generator = _kustomization(repo / "generator", {"generators": ["inflate.yaml"]})
    (generator / "inflate.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "builtin",
                "kind": "HelmChartInflationGenerator",
                "metadata": {"name": "evil"},
                "name": "evil",
                "repo": charts,
                "version": "1.0.0",
            }
        )
    )
    helm_only = _kustomization(
        repo / "helm-only", {"helmCharts": [{"name": "evil", "repo": charts, "version": "1"}]}
    )
    output, _, _ = _cli("--helm", helm_command()[0], ".", cwd=repo)
    assert output.count("GL705") >= 3
    units = _build(overlay, generator, helm_only, options=_options())
    assert [u.rendered_by for u in units] == [[], [], []]
    assert all(rule == "GL705" for rule, _ in _problems(units))
    assert any("a chart repository to download" in m for _, m in _problems(units))
    _no_connection(server)


def test_a_renderer_has_no_network_where_the_kernel_gives_it_a_namespace(
    listener: tuple[socket.socket, int],
) -> None:
    """The second fence behind the refusals: a renderer that connects anyway reaches nothing
    (skipped where neither a network namespace nor an unprivileged user namespace may be
    made, as in some containers)."""
    server, port = listener
    script = (
        "import os, socket, sys\n"
        "print(os.readlink('/proc/self/ns/net'))\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "    print('connected')\n"
        "except OSError as error:\n"
        "    print('refused', error.errno)\n"
    )
    output = run_tool([sys.executable, "-c", script], 1 << 20)
    assert output.ok, output.message
    namespace, result = output.stdout.decode().split()[:2]
    if namespace == os.readlink("/proc/self/ns/net"):
        pytest.skip("this kernel or container gives no network namespace to an unprivileged child")
    assert result == "refused"
    _no_connection(server)


# --- 3. writes outside ---------------------------------------------------------------------


def test_a_chart_home_outside_the_repository_is_refused(repo: Path) -> None:
    outside = repo.parent / "outside"
    before = _snapshot(outside)
    escape = os.path.relpath(outside, repo / "overlay")
    overlay = _kustomization(
        repo / "overlay",
        {
            "helmGlobals": {"chartHome": f"{escape}/../../../../../../{outside.relative_to('/')}"},
            "helmCharts": [{"name": "evil", "repo": "https://charts.invalid", "version": "1.0.0"}],
        },
    )
    up = _kustomization(
        repo / "up",
        {"helmGlobals": {"chartHome": "../../../.."}, "helmCharts": [{"name": "evil"}]},
    )
    config = _kustomization(
        repo / "config",
        {"helmGlobals": {"configHome": "/tmp"}, "helmCharts": [{"name": "c"}]},
    )
    units = _build(overlay, up, config, options=_options())
    assert [u.rendered_by for u in units] == [[], [], []]
    messages = [m for _, m in _problems(units)]
    assert all("outside the repository" in m for m in messages), messages
    assert _snapshot(outside) == before
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"], capture_output=True, text=True, cwd=repo
    )
    assert {line[3:].rstrip("/") for line in status.stdout.splitlines()} == {
        "config/kustomization.yaml",
        "overlay/kustomization.yaml",
        "up/kustomization.yaml",
    }


def test_a_local_chart_home_renders_and_writes_nothing(repo: Path) -> None:
    """The legitimate case still works: a vendored chart under the kustomization."""
    overlay = repo / "overlay"
    _chart(overlay / "charts" / "web", "web", {"hpa.yaml": HPA.replace("NAME", "web")})
    _kustomization(overlay, {"helmCharts": [{"name": "web", "releaseName": "web"}]})
    before = _snapshot(repo.parent)
    unit = _kustomized(_build(overlay, options=_options()))
    assert unit.render_problems == [] and unit.rendered_by
    assert _snapshot(repo.parent) == before


# --- 8. exhausting the runner ----------------------------------------------------------------

HOG = """\
{{- $s := "xxxxxxxxxxxxxxxx" }}
{{- range until 40 }}{{ $s = printf "%s%s" $s $s }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata: {name: hog}
data: {size: {{ $s | len | quote }}}
"""
SPIN = """\
{{- range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata: {name: spin}
"""


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if text.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_a_chart_that_allocates_without_end_is_killed_at_the_memory_limit(repo: Path) -> None:
    _chart(repo / "hog", "hog", {"cm.yaml": HOG})
    tpl = _chart(repo / "tpl", "tpl", {"x.yaml": "{{ tpl .Values.a . }}\n"})
    (tpl / "values.yaml").write_text('a: "{{ tpl .Values.a . }}"\n')
    output, _, _ = _cli("--helm", helm_command()[0], "hog", "tpl", cwd=repo)
    for chart in ("hog", "tpl"):
        assert f"GL704 [error] Chart {chart} does not render" in output
    # Both charts, in every format (the text one wrapped at 80 columns).
    assert " ".join(output.split()).count("stopped at its limits") >= 2 * 3
    assert "goroutine" not in output  # Go's stack is cut
    assert _processes_mentioning(str(repo)) == []


def test_kustomize_inflating_a_chart_that_allocates_without_end_is_killed(repo: Path) -> None:
    overlay = repo / "overlay"
    _chart(overlay / "charts" / "hog", "hog", {"cm.yaml": HOG})
    _kustomization(overlay, {"helmCharts": [{"name": "hog", "releaseName": "hog"}]})
    unit = _kustomized(_build(overlay, options=_options()))
    ((rule, message),) = _problems([unit])
    assert rule == "GL704" and "does not build within gpulint's memory and CPU limits" in message
    assert _processes_mentioning(str(overlay)) == []


def test_a_timed_out_kustomize_takes_its_helm_child_with_it(repo: Path) -> None:
    overlay = repo / "spin-overlay"
    _chart(overlay / "charts" / "spin", "spin", {"cm.yaml": SPIN})
    _kustomization(overlay, {"helmCharts": [{"name": "spin", "releaseName": "spin"}]})
    started = time.monotonic()
    unit = _kustomized(_build(overlay, options=_options(timeout=3.0)))
    assert time.monotonic() - started < 30
    ((rule, message),) = _problems([unit])
    assert rule == "GL705" and "did not finish within 3 s" in message
    assert _processes_mentioning(str(overlay)) == []  # neither kubectl nor its helm


def test_the_render_budget_is_for_the_whole_run(repo: Path) -> None:
    for name in ("a", "b", "c"):
        _chart(repo / name, name, {"cm.yaml": SPIN})
    started = time.monotonic()
    units = _build(repo / "a", repo / "b", repo / "c", options=_options(render_budget=3.0))
    assert time.monotonic() - started < 30
    problems = _problems(units)
    assert [rule for rule, _ in problems] == ["GL705"] * 3
    assert all("render budget of 3 s" in message for _, message in problems)
    assert any("ran out while it rendered" in message for _, message in problems)
    assert any("ran out before it started" in message for _, message in problems)


def test_cpu_limit_kills_a_renderer_that_spins(tmp_path: Path) -> None:
    output = run_tool([sys.executable, "-c", "while True: pass"], 1 << 20, 30, limits=Limits(cpu=1))
    assert not output.ok and output.limited and "1 s of CPU" in output.message


def test_an_exhausted_budget_starts_no_tool(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    budget = RenderBudget(0.0)
    output = run_tool(["touch", str(marker)], 1 << 20, budget=budget)
    assert output.budget_spent and not marker.exists()


# --- 8. the kustomize fallback and # Source: -------------------------------------------------


def test_the_fallback_reads_no_file_outside_the_repository(repo: Path) -> None:
    outside = repo.parent / "outside"
    (outside / "secret.yaml").write_text(HPA.replace("NAME", CANARY))
    overlay = _kustomization(
        repo / "overlay",
        {
            "resources": [str(outside / "secret.yaml"), "../../outside/secret.yaml", "hpa.yaml"],
            "configMapGenerator": [{"name": "c", "files": ["/proc/self/environ"]}],
        },
    )
    (overlay / "hpa.yaml").write_text(HPA.replace("NAME", "inside"))
    for options in (_options(), RenderOptions(kustomize=str(repo / "no-such-kustomize"))):
        (unit,) = _build(overlay, options=options)
        assert unit.rendered_by == []
        assert all("outside" not in f for f in unit.files)
        assert [Path(f.path).name for f in unit.loaded] == ["hpa.yaml"]
    output, _, _ = _cli("--kustomize", "/nonexistent/kustomize", "overlay", cwd=repo)
    assert CANARY not in output and "outside the repository" in output


def test_a_kustomization_file_linked_out_of_the_repository_is_never_read(repo: Path) -> None:
    outside = repo.parent / "outside"
    (outside / "kustomization.yaml").write_text(f"resources: [{CANARY}.yaml]\n")
    (repo / "k").mkdir()
    (repo / "k" / "kustomization.yaml").symlink_to(outside / "kustomization.yaml")
    (unit,) = _build(repo / "k", options=_options())
    assert unit.rendered_by == []
    ((rule, message),) = _problems([unit])
    assert rule == "GL705" and "outside the repository" in message and CANARY not in message


def test_a_source_comment_leaving_the_chart_maps_nothing_outside(repo: Path) -> None:
    outside = repo.parent / "outside"
    (outside / "x.yaml").write_text("# gpulint: ignore=GL102\n" + HPA.replace("NAME", "x"))
    _chart(repo / "c", "c", {"hpa.yaml": HPA.replace("NAME", "web")})
    piped = "---\n# Source: c/../../outside/x.yaml\n" + HPA.replace("NAME", "web")
    output, _, _ = _cli("-", cwd=repo, stdin=piped)
    assert "GL102" in output  # reported at the piped input, not in a file outside
    assert "outside/x.yaml" not in output.replace("c/../../outside/x.yaml", "")
    assert template_file(str(repo / "c"), "c", "c/../../outside/x.yaml") is None
    assert template_file(str(repo / "c"), "c", "c/templates/hpa.yaml") is not None
    (repo / "c" / "templates" / "link.yaml").symlink_to(outside / "x.yaml")
    assert template_file(str(repo / "c"), "c", "c/templates/link.yaml") is None
    assert tree_problem(str(repo / "c")) == "templates/link.yaml is a link out of it"


def test_piped_build_annotations_naming_files_outside_read_nothing(repo: Path) -> None:
    """``kustomize build`` output piped in keeps annotations a resource brought along: an
    origin or a transformer's kustomization outside the repository is never opened."""
    outside = repo.parent / "outside"
    (outside / "hpa.yaml").write_text(HPA.replace("NAME", "web"))
    (outside / "kustomization.yaml").write_text(
        "patches:\n  - patch: |\n      kind: HorizontalPodAutoscaler\n"
        "      metadata: {name: web}\n      spec: {maxReplicas: 3}\n"
    )
    (repo / "kustomization.yaml").write_text("resources: [hpa.yaml]\n")
    annotations = (
        "  annotations:\n"
        '    config.kubernetes.io/origin: "path: ../outside/hpa.yaml"\n'
        '    alpha.config.kubernetes.io/transformations: "- configuredIn: '
        '../outside/kustomization.yaml\\n  configuredBy: {kind: PatchTransformer}"\n'
    )
    piped = HPA.replace("metadata: {name: NAME}\n", "metadata:\n  name: web\n" + annotations)
    done = subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "-f", "json", "-"],
        input=piped,
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=60,
    )
    report = json.loads(done.stdout)
    assert report["summary"]["files"] == 1, report["summary"]
    assert "outside" not in done.stdout.replace("../outside/", "")


# --- .gpulint.yaml units: ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        ("/*/*/*/*/*/*/*/*/*/*/*/*", "an absolute pattern"),
        ("*/*/*/*/*/*/*/*/*/*/*/*", "12 levels deep"),
        ("../*", "leaves the repository"),
        ("clusters/../../*", "leaves the repository"),
    ],
)
def test_a_units_glob_out_of_the_repository_is_a_config_error(
    repo: Path, pattern: str, said: str
) -> None:
    (repo / ".gpulint.yaml").write_text(f"units: [clusters/*, {json.dumps(pattern)}]\n")
    (repo / "a.yaml").write_text(HPA.replace("NAME", "a"))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "."],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=60,
    )
    assert time.monotonic() - started < 30
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert ".gpulint.yaml:1:" in done.stderr and "units.1" in done.stderr and said in done.stderr
    with pytest.raises(ConfigError):
        settings_from_data({"units": [pattern]}, ".gpulint.yaml", {})


def test_a_units_glob_over_a_huge_tree_stops_at_its_bound(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpulint.input.units.plan as plan_module

    for i in range(60):
        (repo / f"d{i}" / "e").mkdir(parents=True)
    (repo / "a.yaml").write_text(HPA.replace("NAME", "a"))
    settings = Settings(units=["*/*/*"], source=str(repo / ".gpulint.yaml"))
    monkeypatch.setattr(plan_module, "UNIT_SCAN_LIMIT", 50)
    with pytest.raises(InputError, match="looked at more than 50 directory entries"):
        plan_units([str(repo)], settings)
    monkeypatch.setattr(plan_module, "UNIT_SCAN_LIMIT", 10_000)
    monkeypatch.setattr(plan_module, "UNIT_MATCH_LIMIT", 10)
    with pytest.raises(InputError, match="matches more than 10 directories"):
        plan_units([str(repo)], settings)


def test_a_units_glob_follows_no_link_out_of_the_repository(repo: Path) -> None:
    (repo.parent / "outside" / "cluster").mkdir()
    (repo.parent / "outside" / "cluster" / "hpa.yaml").write_text(HPA.replace("NAME", "o"))
    (repo / "clusters").mkdir()
    (repo / "clusters" / "out").symlink_to(repo.parent / "outside" / "cluster")
    (repo / "clusters" / "in").mkdir()
    (repo / "clusters" / "in" / "hpa.yaml").write_text(HPA.replace("NAME", "i"))
    settings = Settings(units=["clusters/*"], source=str(repo / ".gpulint.yaml"))
    plans = plan_units([str(repo)], settings)
    assert [Path(p.root).name for p in plans] == ["in"]


# --- kustomize's other spellings of helm and of its fields ------------------------------------


def test_the_deprecated_helm_chart_inflation_generator_is_judged_as_helm(
    repo: Path, listener: tuple[socket.socket, int]
) -> None:
    """kustomize v5 still converts helmChartInflationGenerator into helmCharts and
    helmGlobals (api/types/kustomization.go FixKustomization): its chart home is checked
    like helmGlobals.chartHome, its chartRepoUrl like a repo."""
    server, port = listener
    outside = repo.parent / "outside"
    (outside / "secret.txt").write_text(CANARY)
    linked = _kustomization(
        repo / "linked",
        {"helmChartInflationGenerator": [{"chartName": "evil", "chartHome": "home"}]},
    )
    chart = _chart(linked / "home" / "evil", "evil", {"leak.yaml": LEAK})
    (chart / "files").mkdir()
    (chart / "files" / "s.txt").symlink_to(outside / "secret.txt")
    pulled = _kustomization(
        repo / "pulled",
        {
            "helmChartInflationGenerator": [
                {
                    "chartName": "evil",
                    "chartRepoUrl": f"http://127.0.0.1:{port}/charts",
                    "chartHome": f"../../{outside.name}",
                    "values": "/etc/passwd",
                }
            ]
        },
    )
    output, _, _ = _cli("--helm", helm_command()[0], "linked", "pulled", cwd=repo)
    assert CANARY not in output
    every = _build(linked, pulled, options=_options())
    assert all(u.rendered_by == [] for u in every)  # neither kustomize nor helm ran
    units = [u for u in every if u.kind == "kustomize"]
    (first,), (second,) = (u.render_problems for u in units)
    assert first.rule == "GL705" and "home, evil/files/s.txt is a link out of it" in first.message
    assert second.rule == "GL705" and "a chart repository to download" in second.message
    assert "outside the repository" in second.message
    assert (second.line, second.column) == (2, 3)  # at chartHome, the first of them
    _no_connection(server)


# Spellings kubectl kustomize v5.5.0 (Go's encoding/json) takes for its fields.
FOLDED = ["HelmCharts", "HELMCHARTS", "helmChart\u017f", "Resources", "re\u017fources"]


@pytest.mark.parametrize("spelling", FOLDED)
def test_a_folded_spelling_of_a_field_is_refused_before_kustomize_runs(
    repo: Path, listener: tuple[socket.socket, int], spelling: str
) -> None:
    server, port = listener
    outside = repo.parent / "outside"
    (outside / "secret.txt").write_text(CANARY)
    overlay = repo / "overlay"
    chart = _chart(overlay / "charts" / "evil", "evil", {"leak.yaml": LEAK})
    (chart / "files").mkdir()
    (chart / "files" / "s.txt").symlink_to(outside / "secret.txt")
    value: object = (
        [{"name": "evil", "releaseName": "evil"}]
        if fold(spelling) == fold("helmCharts")
        else [f"http://127.0.0.1:{port}/x.yaml"]
    )
    (overlay / "kustomization.yaml").write_text(
        "namespace: x\n" + json.dumps({spelling: value}, ensure_ascii=False)[1:-1] + "\n"
    )
    output, _, _ = _cli("--helm", helm_command()[0], "overlay", cwd=repo)
    assert CANARY not in output
    (unit,) = [u for u in _build(overlay, options=_options()) if u.kind == "kustomize"]
    assert unit.rendered_by == []
    ((rule, message),) = _problems([unit])
    assert rule == "GL705" and repr(spelling) in message
    problem = unit.render_problems[0]
    assert (problem.line, problem.column) == (2, 1)  # at the key
    _no_connection(server)


@pytest.mark.parametrize(
    ("spelling", "honoured"),
    [
        ("Resources", True),
        ("RESOURCES", True),
        ("re\u017fources", True),  # LATIN SMALL LETTER LONG S folds to S
        ("re\u0455ources", False),  # CYRILLIC SMALL LETTER DZE does not
        ("resource\u0455", False),
    ],
)
def test_the_fold_agrees_with_kustomize(repo: Path, spelling: str, honoured: bool) -> None:
    """The oracle for ``fold``: the kustomize on this machine builds a folded spelling as
    the field and refuses any other as an unknown field."""
    directory = repo / "k"
    directory.mkdir()
    (directory / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
    (directory / "kustomization.yaml").write_text(f"{spelling}: [cm.yaml]\n", encoding="utf-8")
    done = subprocess.run(
        [*kustomize_command(), str(directory)], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode == 0 and "name: cm" in done.stdout) is honoured, done.stderr
    assert (fold(spelling) == fold("resources")) is honoured
    kustomization = Kustomization(str(directory), boundaries_of([str(repo)]))
    assert bool(kustomization.misspelled) is honoured
    assert bool(kustomization.unknown_keys) is not honoured


def test_a_kelvin_sign_and_unknown_fields_are_refused_at_their_keys(repo: Path) -> None:
    overlay = _kustomization(repo / "overlay", {"resources": ["cm.yaml"]})
    (overlay / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
    (overlay / "kustomization.yaml").write_text(
        "resources: [cm.yaml]\n\u212aind: Kustomization\n", encoding="utf-8"
    )
    (unit,) = _build(overlay, options=_options())
    assert unit.rendered_by == []
    (problem,) = unit.render_problems
    assert problem.rule == "GL705" and "for kind" in problem.message
    assert (problem.line, problem.column) == (2, 1)
    (overlay / "kustomization.yaml").write_text("resources: [cm.yaml]\nresource: [x.yaml]\n")
    (unit,) = _build(overlay, options=_options())
    assert unit.rendered_by == []
    (problem,) = unit.render_problems
    assert problem.rule == "GL705" and "'resource'" in problem.message
    assert (problem.line, problem.column) == (2, 1)
    assert [Path(f.path).name for f in unit.loaded] == ["cm.yaml"]  # linted one by one


def test_a_helm_generator_configuration_with_a_folded_field_is_refused(
    repo: Path, listener: tuple[socket.socket, int]
) -> None:
    """A HelmChartInflationGenerator among generators: is configured with yaml.Unmarshal,
    case-insensitive too."""
    server, port = listener
    overlay = _kustomization(repo / "overlay", {"generators": ["inflate.yaml"]})
    (overlay / "inflate.yaml").write_text(
        "apiVersion: builtin\nkind: HelmChartInflationGenerator\nmetadata: {name: evil}\n"
        f"name: evil\nRepo: http://127.0.0.1:{port}/charts\nversion: 1.0.0\n"
    )
    (unit,) = _build(overlay, options=_options())
    assert unit.rendered_by == []
    ((rule, message),) = _problems([unit])
    assert rule == "GL705" and "field repo spelled 'Repo'" in message
    _no_connection(server)


@pytest.mark.parametrize(
    ("chart_yaml", "key", "line"),
    [
        (
            "Dependencies:\n  - {name: d, version: 1.0.0, repository: 'file://../d'}\n",
            "Dependencies",
            4,
        ),
        (
            "dependencies:\n  - {name: d, version: 1.0.0, Repository: 'file://../d'}\n",
            "Repository",
            5,
        ),
        (
            "dependencies:\n  - {name: d, version: 1.0.0, repo\u017fitory: 'file://../d'}\n",
            "repo\u017fitory",
            5,
        ),
    ],
)
def test_chart_yaml_fields_helm_reads_case_insensitively_are_refused(
    repo: Path, chart_yaml: str, key: str, line: int
) -> None:
    """Helm reads Chart.yaml with sigs.k8s.io/yaml: ``Dependencies:`` is its dependencies, and
    a dependency's ``Repository:`` its repository."""
    chart = _chart(repo / "c", "c", {"hpa.yaml": HPA.replace("NAME", "c")})
    _chart(repo / "d", "d", {"hpa.yaml": HPA.replace("NAME", "d")})
    with (chart / "Chart.yaml").open("a", encoding="utf-8") as handle:
        handle.write(chart_yaml)
    (unit,) = _build(chart, options=_options())
    assert unit.rendered_by == []
    (problem,) = unit.render_problems
    assert problem.rule == "GL705" and repr(key) in problem.message
    assert problem.line == line


# --- fuzz -----------------------------------------------------------------------------------


def _kustomize_fetches(reference: str) -> bool:
    """What kustomize itself would fetch (api/internal/git/repospec.go and
    api/internal/loader/fileloader.go), written from its documented behaviour as the oracle
    the parser must never contradict."""
    text = reference
    lowered = text.lower()
    if lowered.startswith(("http://", "https://")):
        return True  # IsRemoteFile, and a repository URL
    text = text.split("?", 1)[0]
    if text.lower().startswith("git::"):
        text = text[5:]
    lowered = text.lower()
    if lowered.startswith(("ssh://", "https://", "http://", "file://")):
        return True
    user = text.split("@", 1)
    if len(user) == 2 and user[0][:1].isalpha() and all(c.isalnum() or c == "-" for c in user[0]):
        return True
    return lowered.startswith(("github.com/", "github.com:"))


_ALPHABET = st.sampled_from([*"ab.:/@?=-_~ gGhHtTpPsSfFiIlLeE:/\\\x00\n", "://", "git::"])
_PIECES = st.sampled_from(
    [
        "https://",
        "HTTP://",
        "ssh://",
        "file://",
        "git::",
        "git@",
        "foo@",
        "github.com",
        "GitHub.COM",
        "gh:",
        "127.0.0.1",
        ":",
        "/",
        "//",
        "..",
        ".",
        "?ref=v1",
        "org",
        "repo.git",
        "_git/",
        " ",
    ]
)
REFERENCES = st.lists(st.one_of(_PIECES, _ALPHABET), max_size=12).map("".join) | st.text()


@settings(max_examples=3000, deadline=None)
@given(REFERENCES)
def test_the_reference_parser_never_judges_remote_local(reference: str) -> None:
    reason = remote_reason(reference)
    assert reason is None or isinstance(reason, str)
    if _kustomize_fetches(reference) or _kustomize_fetches(reference.strip()):
        assert is_remote(reference), reference


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20) | REFERENCES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
KEYS = st.sampled_from(
    [
        "resources",
        "bases",
        "components",
        "patches",
        "patchesStrategicMerge",
        "patchesJson6902",
        "configMapGenerator",
        "secretGenerator",
        "generators",
        "transformers",
        "helmCharts",
        "helmGlobals",
        "openapi",
        "replacements",
        "crds",
        "kind",
        "helmChartInflationGenerator",
    ]
)


def _spelled(name: str, flips: list[bool], odd: list[bool]) -> str:
    """``name`` with the case of some letters flipped and, where ``odd`` says, an s or k
    written as the rune Go folds into it (U+017F, U+212A)."""
    out = []
    for i, c in enumerate(name):
        if odd[i % len(odd)] and c in "sS":
            out.append("\u017f")
        elif odd[i % len(odd)] and c in "kK":
            out.append("\u212a")
        else:
            out.append(c.swapcase() if flips[i % len(flips)] else c)
    return "".join(out)


# Kustomization keys as kustomize reads them: exact, folded spellings of a field (Go's
# encoding/json takes them for it), and near misses that are no field at all.
SPELLED_KEYS = KEYS | st.builds(
    _spelled,
    KEYS,
    st.lists(st.booleans(), min_size=1, max_size=6),
    st.lists(st.booleans(), min_size=1, max_size=6),
)
NEAR_KEYS = SPELLED_KEYS | st.builds(
    lambda k, tail: k + tail, KEYS, st.sampled_from(["x", "ı", "_"])
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.dictionaries(NEAR_KEYS, JSON, max_size=6))
def test_reading_any_kustomization_stays_inside_the_repository(
    repo: Path, data: dict[str, object]
) -> None:
    directory = repo / "k"
    directory.mkdir(exist_ok=True)
    (directory / "kustomization.yaml").write_text(
        yaml.safe_dump(data, allow_unicode=True), encoding="utf-8"
    )
    boundaries = boundaries_of([str(repo)])
    kustomization = Kustomization(str(directory), boundaries)
    # Every key kustomize would read under another spelling, and every key that is no
    # field, is found (and refused before kustomize runs); exact fields are neither.
    misspelled = {m.key for m in kustomization.misspelled if len(m.path) == 1}
    unknown = {key for _, key in kustomization.unknown_keys}
    fields = {fold(f): f for f in KUSTOMIZATION.fields}
    for key in data:
        if key in KUSTOMIZATION.fields:
            assert key not in misspelled and key not in unknown
        elif fold(key) in fields:
            assert key in misspelled and key not in unknown, key
        else:
            assert key in unknown and key not in misspelled, key
    for reference in kustomization.directories + kustomization.files:
        assert inside(reference.resolved, boundaries), reference.path
        assert not is_remote(reference.path)
    for file in kustomization.owned_files():
        assert inside(file, boundaries)
    for home in kustomization.chart_homes:
        assert inside(home, boundaries)
    kustomization.patches()


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(chart=JSON, source=REFERENCES)
def test_reading_any_chart_maps_nothing_outside_it(repo: Path, chart: object, source: str) -> None:
    directory = repo / "c"
    (directory / "templates").mkdir(parents=True, exist_ok=True)
    (directory / "templates" / "a.yaml").write_text("kind: A\n")
    (directory / "Chart.yaml").write_text(yaml.safe_dump(chart))
    name = chart_name(str(directory))
    for candidate in (source, f"{name}/{source}", f"{name}/templates/{source}"):
        found = template_file(str(directory), name, candidate)
        assert found is None or inside(found, (os.path.realpath(directory),))


@settings(max_examples=500, deadline=None)
@example("=A=1 A=1 A=1")  # a run of assignments behind punctuation
@example("Error:A=1 A=1 A=1")  # ... or glued to the word before it
@given(
    st.lists(
        st.sampled_from(["A=1", "KEY=v", " ", "\n", "\x00", "x", "=", "Error:", CANARY]),
        max_size=30,
    ).map("".join)
)
def test_scrubbed_text_holds_no_nul_and_no_secret(text: str) -> None:
    os.environ["GPULINT_TEST_TOKEN"] = CANARY
    try:
        cleaned = scrub(text)
    finally:
        del os.environ["GPULINT_TEST_TOKEN"]
    assert "\x00" not in cleaned and CANARY not in cleaned
    assert "A=1 A=1 A=1" not in cleaned


def test_a_process_group_is_gone_after_a_normal_run(tmp_path: Path) -> None:
    """A renderer that leaves a child behind (as a tool that forks a helper might): the
    child dies with the group when the renderer exits."""
    pid_file = tmp_path / "child.pid"
    script = (
        "import os, subprocess, sys; "
        "p = subprocess.Popen(['sleep', '300']); "
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))"
    )
    output = run_tool([sys.executable, "-c", script], 1 << 20)
    assert output.ok, output.message
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as handle:
            if handle.read().split(")")[-1].split()[0] == "Z":
                break  # killed; its parent (init here) has yet to reap it
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the renderer's child outlived it")


@pytest.mark.parametrize("pattern", ["/srv/charts/*", "../charts/*"])
def test_a_chart_values_glob_out_of_the_repository_is_a_config_error(pattern: str) -> None:
    with pytest.raises(ConfigError, match="chart-values: "):
        settings_from_data({"chart-values": {pattern: ["values.yaml"]}}, ".gpulint.yaml", {})
    accepted = settings_from_data(
        {"chart-values": {"charts/*": ["values-prod.yaml", "../common.yaml"]}}, ".gpulint.yaml", {}
    )
    assert accepted.chart_values == {"charts/*": ["values-prod.yaml", "../common.yaml"]}
