"""Kustomizations whose generator inputs a setup step makes: built with empty stand-ins, the
rest judged at its real lines, a note saying what was stood in, nothing written to the
repository; anything else missing still means no cluster can get it (GL704)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from gpulint.input.units import RenderOptions

from . import artifacts
from .conftest import FIXTURES, lint_result

GPU_CPU_HPA = (FIXTURES / "GL101" / "fail_cpu_only.yaml").read_text()


@pytest.fixture
def tools(
    kustomize: list[str], helm: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> RenderOptions:
    """The tools, run from the repository being linted (tmp_path), as a user runs gpulint."""
    monkeypatch.chdir(tmp_path)
    return RenderOptions(" ".join(kustomize), helm[0])


def overlay_with_generator(tmp_path: Path, generator: str) -> Path:
    base = tmp_path / "base"
    base.mkdir()
    (base / "kustomization.yaml").write_text("resources: [app.yaml]\n")
    (base / "app.yaml").write_text(GPU_CPU_HPA)
    overlay = tmp_path / "overlays" / "h200"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(
        f"resources: [../../base]\nnamespace: ml\n{generator}"
    )
    return overlay


def tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize(
    "generator",
    [
        "configMapGenerator:\n- name: model\n  envs: [model.env]\n",
        "configMapGenerator:\n- name: model\n  env: model.env\n",
        "secretGenerator:\n- name: tls\n  files: [tls.crt, key=tls.key]\n",
    ],
)
def test_missing_generator_inputs_are_stood_in_and_the_base_is_judged(
    tools: RenderOptions, tmp_path: Path, generator: str
) -> None:
    overlay = overlay_with_generator(tmp_path, generator)
    before = tree(tmp_path)
    temporary = set(os.listdir(tempfile.gettempdir()))
    result = lint_result(overlay, options=tools)
    found = [(f.rule, Path(f.location.file).name, f.location.line) for f in result.findings]
    assert ("GL101", "app.yaml", 35) in found  # at the base's line, as a real build maps it
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    (note,) = [n for n in result.notes if "stand-ins" in n]
    assert "overlays/h200" in note and "what they would hold was not judged" in note
    assert tree(tmp_path) == before  # nothing written into the repository
    left = set(os.listdir(tempfile.gettempdir())) - temporary
    assert not [name for name in left if name.startswith("gpulint-")]


def test_a_missing_resource_still_means_no_cluster_gets_it(
    tools: RenderOptions, tmp_path: Path
) -> None:
    overlay = overlay_with_generator(
        tmp_path, "configMapGenerator:\n- name: model\n  envs: [model.env]\n"
    )
    (overlay / "kustomization.yaml").write_text(
        "resources: [../../base, gone.yaml]\n"
        "configMapGenerator:\n- name: model\n  envs: [model.env]\n"
    )
    result = lint_result(overlay, options=tools)
    failed = [f for f in result.findings if f.rule == "GL704"]
    assert failed and all(
        f.location.file.endswith("overlays/h200/kustomization.yaml") for f in failed
    )
    # The base builds alone and is judged as a unit of its own, without the overlay.
    assert all("base, which it includes, builds alone" in (f.location.note or "") for f in failed)
    assert not [n for n in result.notes if "stand-ins" in n]


def test_a_kustomize_error_names_the_real_files_not_the_copy(
    tools: RenderOptions, tmp_path: Path
) -> None:
    overlay = overlay_with_generator(
        tmp_path, "configMapGenerator:\n- name: model\n  envs: [model.env]\n"
    )
    (tmp_path / "base" / "app.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    result = lint_result(overlay, options=tools)
    (failed,) = [f for f in result.findings if f.rule == "GL704"]
    assert "gpulint-standins-" not in failed.message


@pytest.mark.slow
def test_gpulint_lints_its_own_deploy_directory_clean_in_a_fresh_clone(
    tmp_path: Path, kustomize: list[str], helm: list[str]
) -> None:
    """deploy/without-cert-manager reads a certificate make-certificate.sh writes (git
    ignores it): the kustomization is judged with stand-ins, the chart and the other
    overlay rendered, and nothing is found."""
    clone = artifacts.tracked_copy(tmp_path / "repo")
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(helm[0]).parent), os.environ["PATH"]])}
    gpulint = shutil.which("gpulint", path=os.path.dirname(os.sys.executable))
    assert gpulint
    done = subprocess.run(
        [gpulint, "lint", "deploy/"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    words = " ".join(done.stdout.split())  # wrapped at 80 columns (tests/conftest.py)
    assert "0 errors, 0 warnings, 0 info" in words
    assert "deploy/chart (helm," in words and "deploy/without-cert-manager (kustomize," in words
    assert "stand-ins" in words


def test_thousands_of_missing_inputs_are_not_stood_in(tools: RenderOptions, tmp_path: Path) -> None:
    """A kustomization naming more missing inputs than a copy may hold is reported as it is
    (GL704), not mirrored file by file."""
    names = ", ".join(f"f{i}.env" for i in range(2_100))
    overlay = overlay_with_generator(
        tmp_path, f"configMapGenerator:\n- name: model\n  envs: [{names}]\n"
    )
    result = lint_result(overlay, options=tools)
    failed = [f for f in result.findings if f.rule == "GL704"]
    assert len(failed) == 2_100  # one per missing file, at the overlay
    assert all(f.location.file.endswith("overlays/h200/kustomization.yaml") for f in failed)
    assert not [n for n in result.notes if "stand-ins" in n]


REPLACEMENT = (
    "- source: {kind: ConfigMap, name: vllm, fieldPath: data.CONTAINER_IMAGE_URL}\n"
    "  targets:\n"
    "  - select: {kind: Deployment, name: triton}\n"
    "    fieldPaths: [spec.template.spec.containers.0.image]\n"
)


@pytest.mark.parametrize(
    ("base", "overlay", "files", "keys"),
    [
        # The overlay's own generator, read by an inline replacement.
        (
            "",
            "configMapGenerator:\n- name: vllm\n  envs: [runtime.env]\n"
            f"replacements:\n{REPLACEMENT}",
            {},
            ["ConfigMap vllm CONTAINER_IMAGE_URL"],
        ),
        # The base's generator, merged into by the overlay, renamed by its namePrefix, read
        # by replacements in a file of their own and by a legacy var.
        (
            "configMapGenerator:\n- name: vllm\n  envs: [vllm.env]\n",
            "namePrefix: h200-\n"
            "configMapGenerator:\n- name: vllm\n  behavior: merge\n  envs: [runtime.env]\n"
            "replacements:\n- path: replacements.yaml\n"
            "vars:\n- name: MODEL\n  objref: {kind: ConfigMap, name: h200-vllm, apiVersion: v1}\n"
            "  fieldref: {fieldpath: data.MODEL}\n",
            {"overlays/h200/replacements.yaml": REPLACEMENT},
            ["ConfigMap vllm CONTAINER_IMAGE_URL", "ConfigMap h200-vllm MODEL"],
        ),
        # A key the base's committed env file holds is read from it, not stood in (a second
        # CONTAINER_IMAGE_URL in one generator would be refused by kustomize).
        (
            "configMapGenerator:\n- name: vllm\n  envs: [vllm.env, local.env]\n",
            f"replacements:\n{REPLACEMENT}",
            {"base/vllm.env": "# written by hand\nCONTAINER_IMAGE_URL=nvcr.io/nim:1\n"},
            [],
        ),
        # A Secret's file named by its key.
        (
            "",
            "secretGenerator:\n- name: vllm\n  files: [CONTAINER_IMAGE_URL=image.txt]\n"
            f"replacements:\n{REPLACEMENT.replace('ConfigMap', 'Secret')}",
            {},
            ["Secret vllm CONTAINER_IMAGE_URL"],
        ),
    ],
)
def test_keys_replacements_read_from_a_stood_in_generator_are_stood_in(
    tools: RenderOptions,
    tmp_path: Path,
    base: str,
    overlay: str,
    files: dict[str, str],
    keys: list[str],
) -> None:
    """An overlay copying a value out of a generated ConfigMap or Secret whose input a setup
    step writes builds with a placeholder for it: the base's HPA is judged at its lines
    (GL102 on an HPA without behavior), not lost to GL704, and the note names the keys."""
    directory = overlay_with_generator(tmp_path, overlay)
    (tmp_path / "base" / "kustomization.yaml").write_text(f"resources: [app.yaml]\n{base}")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    before = tree(tmp_path)
    result = lint_result(directory, options=tools)
    found = {(f.rule, Path(f.location.file).name, f.location.line) for f in result.findings}
    assert {("GL101", "app.yaml", 35), ("GL102", "app.yaml", 27)} <= found
    assert not [f for f in result.findings if f.rule in {"GL704", "GL705"}]
    (note,) = [n for n in result.notes if "stand-ins" in n]
    for key in keys:
        assert key in note
    assert ("holding placeholders" in note) == bool(keys)
    assert tree(tmp_path) == before
