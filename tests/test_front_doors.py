"""Every front door judges the same inventories, however the paths are typed.

lint, check-adapter, trace and replay build their units through one assembly
(gpulint.engine.assembly). Over every layout the tests hold, with the repository named as
``.``, as its top-level directories one by one, and as ``..`` from a subdirectory, each unit
must hold the same objects and take the same platform components from the same units.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpulint.cli import main
from gpulint.engine import assembly, files
from gpulint.engine.context import Context
from gpulint.input.units import Unit
from gpulint.inventory import Inventory

from .conftest import FIXTURES
from .test_unit_context import (
    ADAPTER_NAMED,
    ADAPTER_UNNAMED,
    APPLICATION_SET,
    DEPLOYMENT,
    HPA,
    SCALED_OBJECT,
    _flux,
    _write,
)

PLATFORM_APPS = FIXTURES / "units" / "platform-apps"
GITOPS = FIXTURES / "units" / "gitops"

# One unit as a front door judged it: (root, objects, what it took and from where).
Judged = tuple[str, tuple[tuple[str, str, str], ...], tuple[tuple[str, str], ...]]
Layout = Callable[[Path], None]


def _copy(source: Path) -> Layout:
    def make(root: Path) -> None:
        shutil.copytree(source, root, dirs_exist_ok=True)

    return make


def _one_directory_per_application(root: Path) -> None:
    """teams/team-N/svc-M, a GPU Deployment and its HPA each, the adapter values in one
    application's directory."""
    layout = {}
    for team in range(2):
        for service in range(3):
            name = f"svc-{team}-{service}"
            where = f"teams/team-{team}/{name}"
            layout[f"{where}/deployment.yaml"] = DEPLOYMENT.format(name=name)
            layout[f"{where}/hpa.yaml"] = HPA.format(name=name, target=name)
    layout["teams/team-1/svc-1-2/prometheus-adapter.yaml"] = ADAPTER_UNNAMED
    _write(root, layout)


def _argo(root: Path) -> None:
    _write(
        root,
        {
            "argocd/apps.yaml": APPLICATION_SET.format(
                destination="{name: gpu-cluster, namespace: inference}"
            ),
            "apps/a/deployment.yaml": DEPLOYMENT.format(name="a"),
            "apps/a/hpa.yaml": HPA.format(name="a", target="a"),
            "apps/b/deployment.yaml": DEPLOYMENT.format(name="b"),
            "apps/b/scaledobject.yaml": SCALED_OBJECT.format(name="b", target="b"),
            "platform/prometheus-adapter.yaml": ADAPTER_NAMED,
        },
    )


def _chart_and_values(root: Path) -> None:
    _write(
        root,
        {
            "charts/app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\n",
            "charts/app/values.yaml": "{}\n",
            "charts/app/templates/deployment.yaml": DEPLOYMENT.format(name="llm"),
            "charts/app/templates/hpa.yaml": HPA.format(name="llm", target="llm"),
            "monitoring/prometheus-adapter.yaml": ADAPTER_UNNAMED,
        },
    )


def _plain(root: Path) -> None:
    _write(
        root,
        {
            "manifests/deployment.yaml": DEPLOYMENT.format(name="llm"),
            "manifests/hpa.yaml": HPA.format(name="llm", target="llm"),
            "manifests/adapter.yaml": ADAPTER_NAMED,
        },
    )


LAYOUTS: dict[str, Layout] = {
    "plain": _plain,
    "overlays-and-platform": _copy(PLATFORM_APPS),
    "gitops-overlays-chart": _copy(GITOPS),
    "chart-and-values": _chart_and_values,
    "flux": _flux,
    "argo": _argo,
    "one-directory-per-application": _one_directory_per_application,
}


def _spellings(root: Path) -> list[tuple[Path, list[str]]]:
    """(working directory, paths): the repository as ``.``, as its top-level directories,
    and as ``..`` from its first directory."""
    tops = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    return [(root, ["."]), (root, [f"{name}/" for name in tops]), (root / tops[0], [".."])]


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[Judged]:
    judged: list[Judged] = []
    original = files.unit_inventory

    def recorded(unit: Unit, settings: Any, context: Context | None = None) -> Inventory:
        inventory = original(unit, settings, context)
        objects = tuple(sorted((m.kind, m.namespace or "", m.name) for m in inventory.manifests))
        taken = tuple(
            sorted(
                (b.category, os.path.realpath(b.provider))
                for b in (context.borrowed if context is not None else ())
            )
        )
        judged.append((os.path.realpath(unit.root), objects, taken))
        return inventory

    monkeypatch.setattr(files, "unit_inventory", recorded)
    monkeypatch.setattr(assembly, "unit_inventory", recorded)
    return judged


def _doors(paths: list[str]) -> dict[str, list[str]]:
    # A Prometheus that refuses at once: the live check and replay fail after assembling.
    nowhere = "http://127.0.0.1:9"
    return {
        "lint": ["lint", "--no-config", "--format", "json", *paths],
        "trace": ["trace", "--no-config", "--format", "json", *paths],
        "replay": ["replay", "--no-config", "--prometheus", nowhere, "--format", "json", *paths],
        "check-adapter": [
            "check-adapter",
            "--no-config",
            "--prometheus",
            nowhere,
            "--prometheus-timeout",
            "2",
            "--format",
            "json",
            *paths,
        ],
    }


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_front_door_judges_the_same_units_however_the_paths_are_typed(
    layout: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kustomize: list[str],
    helm: list[str],
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    LAYOUTS[layout](root)
    (root / ".git").mkdir()  # the repository's boundary
    monkeypatch.setenv("PATH", f"{Path(helm[0]).parent}{os.pathsep}{os.environ['PATH']}")
    seen: dict[tuple[str, str], list[Judged]] = {}
    for cwd, paths in _spellings(root):
        monkeypatch.chdir(cwd)
        for door, argv in _doors(paths).items():
            if door == "check-adapter":
                argv = [*argv[: -len(paths)], _adapter_file(root, cwd), *paths]
            judged = _recording(monkeypatch)
            main(argv)
            capsys.readouterr()
            seen[(door, " ".join(paths))] = sorted(judged)
    (first_key, first), *rest = seen.items()
    assert first, f"{layout}: {first_key} judged no unit"
    for key, judged in rest:
        assert judged == first, f"{layout}: {key} differs from {first_key}"


def _adapter_file(root: Path, cwd: Path) -> str:
    """An adapter file of the layout (check-adapter's first argument), as seen from ``cwd``;
    the layout's first YAML file when it has none."""
    candidates = sorted(root.rglob("*adapter*.yaml")) or sorted(root.rglob("*.yaml"))
    return os.path.relpath(candidates[0], cwd)


def _gl401(report: dict[str, Any]) -> list[tuple[str, int, int, tuple[str, ...]]]:
    return [
        (os.path.normpath(f["file"]), f["line"], f["column"], tuple(f.get("units", ())))
        for f in report["findings"]
        if f["rule"] == "GL401"
    ]


@pytest.mark.parametrize(
    ("cwd", "paths"),
    [
        ("", ["."]),
        ("", ["apps/", "kserve/", "knative/", "monitoring/"]),
        ("", ["apps/", "monitoring/"]),
        ("apps", [".."]),
    ],
)
def test_the_base_hpa_is_judged_with_the_platform_of_its_repository(
    cwd: str,
    paths: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kustomize: list[str],
) -> None:
    """A repository written from public tutorials: the overlays' HPA asks for a metric the
    adapter of monitoring/ does not expose, whichever way the repository is named."""
    root = tmp_path / "repo"
    shutil.copytree(PLATFORM_APPS, root)
    monkeypatch.chdir(root / cwd)
    assert main(["lint", "--no-config", "--format", "json", *paths]) == 1
    report = json.loads(capsys.readouterr().out)

    def shown(path: str) -> str:
        return os.path.relpath(root / path, root / cwd)

    assert _gl401(report) == [
        (
            shown("apps/llm/base/hpa.yaml"),
            23,
            9,
            (shown("apps/llm/overlays/prod"), shown("apps/llm/overlays/staging")),
        )
    ]
    (finding,) = [f for f in report["findings"] if f["rule"] == "GL401"]
    assert "taken as this unit's prometheus-adapter config" in finding["message"]
    # trace agrees: the overlays' adapter link is broken by GL401, the adapter was read.
    main(["trace", "--no-config", "--format", "json", *paths])
    traces = json.loads(capsys.readouterr().out)["traces"]
    llm = [t for t in traces if t["autoscaler"]["name"] == "llm"]
    assert len(llm) == 2
    for trace in llm:
        (link,) = [link for link in trace["links"] if link["stage"] == "adapter-rule"]
        assert link["status"] == "broken" and "GL401" in link["findings"]
        assert "not in the input" not in link["detail"]


def test_a_lone_file_says_which_checks_did_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(PLATFORM_APPS, root)
    monkeypatch.chdir(root)
    assert main(["lint", "--no-config", "apps/triton/hpa.yaml"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "apps/triton/hpa.yaml:7:3: not checked (GL101, GL103, GL501): the pods it scales: "
        "Deployment vision/triton is not in the input; lint the workload's manifest with it"
    ) in out
    assert (
        "apps/triton/hpa.yaml:24:9: not checked (GL401): whether prometheus-adapter serves its "
        "Pods metric gpu_utilization: its cluster's input holds no prometheus-adapter config"
    ) in out
    assert "2 checks not run" in out
    main(["lint", "--no-config", "--format", "json", "apps/triton/hpa.yaml"])
    report = json.loads(capsys.readouterr().out)
    assert [(n["checks"], n["line"]) for n in report["notChecked"]] == [
        (["GL101", "GL103", "GL501"], 7),
        (["GL401"], 24),
    ]
    # Named with its workload and its cluster's adapter, everything runs.
    main(["lint", "--no-config", "--format", "json", "apps/triton", "monitoring"])
    assert json.loads(capsys.readouterr().out)["notChecked"] == []
    # --select narrows the notes to the checks that run.
    main(["lint", "--no-config", "--format", "json", "--select", "GL4", "apps/triton/hpa.yaml"])
    report = json.loads(capsys.readouterr().out)
    assert [n["checks"] for n in report["notChecked"]] == [["GL401"]]


def test_context_shows_each_cluster_and_what_each_unit_takes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kustomize: list[str],
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(PLATFORM_APPS, root)
    monkeypatch.chdir(root)
    assert main(["context", "--no-config", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (cluster,) = report["clusters"]
    assert cluster["name"] == "the input"
    units = {u["name"]: u for u in cluster["units"]}
    assert sorted(units) == [
        "apps/llm/overlays/prod",
        "apps/llm/overlays/staging",
        "apps/triton",
        "knative/whisper",
        "kserve",
        "monitoring",
    ]
    assert units["monitoring"]["components"]["prometheus-adapter config"] == [
        "monitoring/prometheus-adapter-values.yaml"
    ]
    assert {(t["component"], t["from"]) for t in units["apps/triton"]["takes"]} == {
        ("prometheus-adapter config", "monitoring"),
        ("dcgm-exporter", "monitoring"),
        ("Prometheus monitoring objects", "monitoring"),
        ("platform chart values", "monitoring"),
    }
    assert main(["context", "--no-config"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("cluster the input (")
    assert "  apps/triton (files, 2 files)\n    takes prometheus-adapter config" in text
