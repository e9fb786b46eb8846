"""The releases the clusters run (gpulint.engine.versions): where each comes from, what the
reports say of them, and the verdicts that follow them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulint.cli import main
from gpulint.engine.config import ConfigError, Settings, load_settings
from gpulint.engine.registry import rule_names, rule_option_schemas
from gpulint.engine.versions import CONFIG, DEFAULT, OPTION, Release, Versions, parse_release

from .conftest import lint_text

SCALE_TO_ZERO = """
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: queue}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
  minReplicas: 0
  maxReplicas: 4
  metrics:
  - type: External
    external:
      metric: {name: queue_depth}
      target: {type: AverageValue, averageValue: "20"}
"""


def _settings(text: str, tmp_path: Path) -> Settings:
    config = tmp_path / ".gpulint.yaml"
    config.write_text(text)
    return load_settings(str(config), rule_option_schemas(), rule_names())


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("1.35", Release(1, 35)),
        ("v1.35.2", Release(1, 35)),
        ("1.35+", Release(1, 35)),
        ("2.20.1-rc.0", Release(2, 20)),
        ("v0.20.0+abc", Release(0, 20)),
        ("1", None),
        ("latest", None),
        ("", None),
    ],
)
def test_releases_as_projects_write_them(text: str, release: Release | None) -> None:
    assert parse_release(text) == release


def test_the_configuration_names_each_release(tmp_path: Path) -> None:
    settings = _settings(
        'kubernetes-version: "1.34"\nkeda-version: v2.17.2\nknative-version: "1.22"\n'
        'kserve:\n  version: "0.15"\n',
        tmp_path,
    )
    versions = settings.versions
    assert (versions.kubernetes, versions.keda, versions.knative, versions.kserve) == (
        Release(1, 34),
        Release(2, 17),
        Release(1, 22),
        Release(0, 15),
    )
    assert {versions.known(p).source for p in ("kubernetes", "keda", "knative", "kserve")} == {
        CONFIG
    }
    assert settings.kserve_version == (0, 15)
    defaults = Settings().versions
    assert str(defaults.kubernetes) == "1.37" and defaults.defaulted("kubernetes")
    assert (str(defaults.keda), str(defaults.knative), str(defaults.kserve)) == (
        "2.20",
        "1.23",
        "0.20",
    )


def test_every_mistake_in_a_release_is_said_with_its_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        _settings('kubernetes-version: 1.30\nrules: {}\nkeda-version: "two"\n', tmp_path)
    problems = raised.value.problems
    assert [(line, column) for line, column, _ in problems] == [(1, 1), (3, 1)]
    assert "write the release quoted" in problems[0][2] and "1.3" in problems[0][2]
    assert "'two' is not a release" in problems[1][2]


def test_an_option_beats_the_configuration_and_the_cluster() -> None:
    versions = Versions().with_release("kubernetes", Release(1, 33), OPTION)
    assert versions.with_release("kubernetes", Release(1, 36), "cluster").kubernetes == (1, 33)
    read = Versions().with_release("kubernetes", Release(1, 36), "cluster")
    assert read.with_release("kubernetes", Release(1, 30), CONFIG).kubernetes == (1, 36)
    assert Versions().known("keda").source == DEFAULT


def test_the_report_says_once_what_it_judged_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hpa.yaml").write_text(SCALE_TO_ZERO)
    (tmp_path / ".gpulint.yaml").write_text('kubernetes-version: "1.36"\n')
    assert main(["lint", "hpa.yaml", "--color", "never"]) == 1  # GL108 on 1.36
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("versions: judged for") == 1
    assert (
        "versions: judged for Kubernetes 1.36 (.gpulint.yaml); KEDA 2.20, Knative 1.23 and "
        "KServe 0.20 (the defaults: set keda-version, knative-version and kserve.version in "
        ".gpulint.yaml)"
    ) in out
    assert main(["lint", "hpa.yaml", "--kubernetes-version", "1.37", "-f", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["findings"] == []
    assert report["summary"]["versions"]["kubernetes"] == {"version": "1.37", "source": "option"}
    assert report["summary"]["versions"]["keda"] == {"version": "2.20", "source": "default"}


def test_a_release_that_is_no_release_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["lint", "--keda-version", "newest", "."])
    assert raised.value.code == 2
    assert "'newest' is not a release" in capsys.readouterr().err


@pytest.mark.parametrize(("release", "found"), [((1, 36), 1), ((1, 37), 0)])
def test_scale_to_zero_follows_the_kubernetes_release(release: tuple[int, int], found: int) -> None:
    settings = Settings()
    settings.versions = settings.versions.with_release("kubernetes", Release(*release), CONFIG)
    findings = lint_text(SCALE_TO_ZERO, settings=settings, select=["GL108"])
    assert len(findings) == found
    if found:
        assert "Kubernetes 1.36, where it is alpha and off by default" in findings[0].message
