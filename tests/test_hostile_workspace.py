"""A CI workspace holds more than the pull request: the token ``actions/checkout`` persists in
``.git/config`` and files other steps leave untracked (cloud credentials, ``.env``). Charts
and kustomizations the pull request commits are rendered from a copy of what git tracks, so
neither ever reaches a report. Real git, helm and kustomize."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from gpulint.engine.config import Settings
from gpulint.engine.files import build_units, plan_units
from gpulint.input.units import RenderOptions, Unit

from .tools import helm_command, kustomize_command

pytestmark = pytest.mark.slow

TOKEN = "ghs_gpulintCheckoutToken7d3e9b1f0a"
CREDENTIAL = "gpulint-cloud-credential-4c8e2a"
FORMATS = ("text", "json", "sarif", "github", "markdown")
# Every template Helm renders prints what the chart can read of the workspace: .git/config
# and the untracked files, plain and in base64, and the names of every file it was handed.
NAMES = (
    '{{- $n := "" }}{{ range $p, $_ := .Files.Glob "**" }}{{ $n = printf "%s%s," $n $p }}{{ end }}'
)
LEAK = (
    NAMES + '{{ fail (printf "%s|%s|%s|%s|%s" (.Files.Get ".git/config" | b64enc) '
    '(.Files.Get ".git/config") (.Files.Get "gha-creds-1a2b.json" | b64enc) '
    '(.Files.Get ".env") $n) }}\n'
)


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], check=True, cwd=cwd, capture_output=True)


def _workspace(root: Path) -> Path:
    """A checkout as actions/checkout leaves it (the token persisted as an extra header),
    with the pull request's files tracked and a credential file and an .env untracked."""
    root.mkdir(parents=True)
    _git("init", "-q", cwd=root)
    header = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    _git(
        "config",
        "--local",
        "http.https://github.com/.extraheader",
        f"AUTHORIZATION: basic {header}",
        cwd=root,
    )
    (root / "gha-creds-1a2b.json").write_text(
        f'{{"type": "service_account", "private_key": "{CREDENTIAL}"}}\n'
    )
    (root / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={CREDENTIAL}\n")
    return root


def _secrets(root: Path) -> list[str]:
    config = (root / ".git" / "config").read_bytes()
    creds = (root / "gha-creds-1a2b.json").read_bytes()
    return [
        TOKEN,
        CREDENTIAL,
        base64.b64encode(TOKEN.encode()).decode(),
        base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()[:24],
        base64.b64encode(config).decode()[:16],
        base64.b64encode(creds).decode()[:16],
        "repositoryformatversion",
        "extraheader",
    ]


def _lint_every_format(root: Path, tmp: Path, *paths: str) -> str:
    """``gpulint lint`` in every format, in a private TMPDIR that must be empty after each
    run; everything printed."""
    env = dict(os.environ, TMPDIR=str(tmp))
    printed = ""
    for fmt in FORMATS:
        started = time.monotonic()
        done = subprocess.run(
            [
                *(sys.executable, "-m", "gpulint", "lint", "-f", fmt),
                *("--helm", helm_command()[0], "--kustomize", " ".join(kustomize_command())),
                *paths,
            ],
            capture_output=True,
            text=True,
            cwd=root,
            env=env,
            timeout=60,
        )
        assert time.monotonic() - started < 10
        assert "Traceback" not in done.stderr, done.stderr
        printed += done.stdout + done.stderr
        assert os.listdir(tmp) == [], f"left in TMPDIR by -f {fmt}"
    return printed


def _build(root: Path, *paths: str) -> list[Unit]:
    options = RenderOptions(" ".join(kustomize_command()), helm_command()[0])
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return build_units(plan_units(list(paths), Settings()), options)
    finally:
        os.chdir(cwd)


def test_a_chart_at_the_workspace_root_reads_no_token_and_no_untracked_file(
    tmp_path: Path,
) -> None:
    root = _workspace(tmp_path / "ws")
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: leak\nversion: 1.0.0\n")
    (root / "templates").mkdir()
    (root / "templates" / "x.yaml").write_text(LEAK)
    _git("add", "Chart.yaml", "templates", cwd=root)
    (tmp_path / "tmp").mkdir()
    printed = _lint_every_format(root, tmp_path / "tmp", ".")
    for secret in _secrets(root):
        assert secret not in printed, secret
    # The chart rendered, from a copy that holds its tracked files alone.
    assert "GL704" in printed and "templates/x.yaml" in printed
    (unit,) = _build(root, ".")
    assert unit.rendered_by
    (problem,) = unit.render_problems
    assert "||||" in problem.message and "gha-creds" not in problem.message


def test_a_kustomization_at_the_workspace_root_reads_no_token_and_no_untracked_file(
    tmp_path: Path,
) -> None:
    """Generator inputs git does not track are stood in by empty files (as missing ones are);
    a resource git does not track is refused before kustomize runs."""
    root = _workspace(tmp_path / "ws")
    (root / "kustomization.yaml").write_text(
        "resources: [cm.yaml]\n"
        "secretGenerator:\n"
        "- name: leak\n"
        "  files: [.git/config, gha-creds-1a2b.json]\n"
        "  envs: [.env]\n"
    )
    (root / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
    _git("add", "kustomization.yaml", "cm.yaml", cwd=root)
    (tmp_path / "tmp").mkdir()
    printed = _lint_every_format(root, tmp_path / "tmp", ".")
    for secret in _secrets(root):
        assert secret not in printed, secret
    (unit,) = _build(root, ".")
    assert unit.rendered_by and unit.render_problems == []
    (note,) = unit.notes
    assert "stand-ins" in note and ".git/config" in note and "gha-creds-1a2b.json" in note
    (secret,) = [d for f in unit.loaded for d in f.documents if d.data.get("kind") == "Secret"]
    assert set(secret.data["data"].values()) == {""}

    (root / "kustomization.yaml").write_text("resources: [cm.yaml, gha-creds-1a2b.json]\n")
    (unit,) = _build(root, ".")
    assert unit.rendered_by == []  # kustomize never ran
    ((rule, message),) = [(p.rule, p.message) for p in unit.render_problems]
    assert rule == "GL705" and "git does not track (gha-creds-1a2b.json)" in message


def test_a_chart_git_does_not_track_is_not_rendered(tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws")
    chart = root / "charts" / "new"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: new\nversion: 1.0.0\n")
    (chart / "templates" / "x.yaml").write_text(LEAK)
    (unit,) = _build(root, "charts/new")
    assert unit.rendered_by == []
    ((rule, message),) = [(p.rule, p.message) for p in unit.render_problems]
    assert rule == "GL705" and "git does not track it" in message
    _git("add", "charts", cwd=root)
    (unit,) = _build(root, "charts/new")
    assert unit.rendered_by


def test_outside_git_a_chart_is_copied_without_any_git_directory(tmp_path: Path) -> None:
    """No work tree: every file of the chart is handed to Helm, but never a ``.git``."""
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "files" / ".git").mkdir(parents=True)
    (chart / "files" / ".git" / "config").write_text(f"token = {TOKEN}\n")
    (chart / "files" / "kept.txt").write_text("kept\n")
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 1.0.0\n")
    (chart / "templates" / "x.yaml").write_text(
        NAMES + '{{ fail (printf "%s|%s" (.Files.Get "files/.git/config") $n) }}\n'
    )
    (tmp_path / "tmp").mkdir()
    printed = _lint_every_format(tmp_path, tmp_path / "tmp", "chart")
    assert TOKEN not in printed
    (unit,) = _build(tmp_path, "chart")
    (problem,) = unit.render_problems
    assert "|" in problem.message and "files/kept.txt," in problem.message
    assert ".git" not in problem.message


def test_an_untracked_dependency_archive_is_not_handed_to_helm(tmp_path: Path) -> None:
    """``helm dependency build`` writes charts/*.tgz, which repositories ignore: the archive
    is a file git does not track, so the chart renders without that dependency (a note
    names it) and Helm never opens it."""
    root = _workspace(tmp_path / "ws")
    chart = root / "app"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(
        "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n"
        "  - {name: redis, version: 1.0.0, repository: 'https://charts.example.invalid'}\n"
    )
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"
    )
    _git("add", "app", cwd=root)
    (chart / "charts").mkdir()
    with tarfile.open(chart / "charts" / "redis-1.0.0.tgz", "w:gz") as archive:
        for name, text in (
            ("redis/Chart.yaml", "apiVersion: v2\nname: redis\nversion: 1.0.0\n"),
            ("redis/templates/x.yaml", f'{{{{ fail "{CREDENTIAL}" }}}}\n'),
        ):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    (unit,) = _build(root, "app")
    assert unit.rendered_by and unit.render_problems == []
    (note,) = unit.notes
    assert "without its remote dependencies redis" in note
