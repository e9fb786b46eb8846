"""The RBAC and webhook rules of deploy/ are generated from the kinds registry
(gpulint.webhook.deploy): the checked-in files are what the generator writes, the generator
follows the registry, and a new kind reaches what kustomize and Helm render with no edit in
deploy/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpulint.webhook import deploy
from gpulint.webhook.deploy import DeployError

from gpulint.kinds import registry
from gpulint.kinds.registry import AUTOSCALER, WORKLOAD, KindSpec

from ..conftest import ROOT
from ..tools import helm_command, kustomize_build

REGENERATE = f"regenerate with: {deploy.COMMAND}"
# The files the kinds registry writes, and the Role that reads Knative's config-autoscaler
# by name (gpulint.cluster.kinds.NAMED_CONFIGMAPS).
GENERATED = (deploy.BASE_RBAC, deploy.BASE_WEBHOOK, deploy.CHART_KINDS)
NAMED = deploy.named_configmaps_file("knative-serving")


def without(kind: str, group: str) -> tuple[KindSpec, ...]:
    kinds = tuple(s for s in registry.KINDS if (s.kind, s.group) != (kind, group))
    assert len(kinds) == len(registry.KINDS) - 1
    return kinds


def copy_of_deploy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    return tmp_path


def test_the_checked_in_deploy_files_are_what_the_registry_generates() -> None:
    generated = deploy.generated_files(ROOT)
    assert set(generated) == {*GENERATED, NAMED}
    assert '  resourceNames: ["config-autoscaler"]\n' in generated[NAMED]
    for path, text in generated.items():
        assert (ROOT / path).read_text(encoding="utf-8") == text, f"{path}: {REGENERATE}"


def test_the_generated_rules_are_the_registry_s_watched_and_evaluated_kinds() -> None:
    granted = {(r.group, p) for r in deploy.watched_rules() for p in r.resources}
    assert granted == {(s.group, s.plural) for s in registry.watched_specs()}
    workloads = {(r.group, p) for r in deploy.webhook_rules(workloads=True) for p in r.resources}
    scaling = {(r.group, p) for r in deploy.webhook_rules(workloads=False) for p in r.resources}
    evaluated = {(s.group, s.plural) for s in registry.KINDS if s.evaluated}
    assert workloads | scaling == evaluated
    assert workloads == {("apps", "deployments"), ("apps", "statefulsets")}
    assert not workloads & scaling
    for rule in [*deploy.webhook_rules(workloads=True), *deploy.webhook_rules(workloads=False)]:
        specs = [s for s in registry.KINDS if s.group == rule.group and s.plural in rule.resources]
        assert all(s.versions == rule.versions for s in specs), rule
    # The comments say why what is not judged is read.
    why = {r.group: r.why for r in deploy.watched_rules()}
    assert why["resource.k8s.io"] == ("DRA: the claims pods name say whether they hold GPUs.",)
    assert why["policy"] == ("What bounds the evictions of a VerticalPodAutoscaler (GL112).",)
    assert why["autoscaling"] == ()


@pytest.mark.parametrize(
    ("kind", "group", "plural"),
    [
        ("VerticalPodAutoscaler", "autoscaling.k8s.io", "verticalpodautoscalers"),
        ("ScaledJob", "keda.sh", "scaledjobs"),
        ("StatefulSet", "apps", "statefulsets"),
    ],
)
def test_removing_a_kind_from_the_registry_removes_it_from_every_generated_file(
    monkeypatch: pytest.MonkeyPatch, kind: str, group: str, plural: str
) -> None:
    before = deploy.generated_files(ROOT)
    monkeypatch.setattr(registry, "KINDS", without(kind, group))
    after = deploy.generated_files(ROOT)
    for path in GENERATED:
        assert after[path] != before[path], path
        assert f'"{plural}"' in before[path]
        assert f'"{plural}"' not in after[path], path
    # What is not generated stays as written.
    rbac = after[deploy.BASE_RBAC]
    assert rbac.startswith(before[deploy.BASE_RBAC].split(deploy.begin_marker(deploy.WATCHED))[0])
    assert rbac.endswith(before[deploy.BASE_RBAC].split(deploy.end_marker(deploy.WATCHED))[1])


def test_a_rule_goes_with_its_last_kind_and_its_comment_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "KINDS", without("PodDisruptionBudget", "policy"))
    text = deploy.generated_files(ROOT)[deploy.BASE_RBAC]
    assert '"policy"' not in text
    assert "VerticalPodAutoscaler (GL112)" not in text


def test_a_watched_kind_that_is_not_judged_must_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    silent = KindSpec("Lease", "coordination.k8s.io", ("v1",), "leases", "config", watched=True)
    monkeypatch.setattr(registry, "KINDS", (*registry.KINDS, silent))
    with pytest.raises(DeployError, match=r"Lease \(leases.coordination.k8s.io\).*why_watched"):
        deploy.generated_files(ROOT)


def test_an_evaluated_workload_with_its_pods_elsewhere_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The workloads webhook's matchConditions read spec.template: a CronJob sent through it
    would never match, so the generator refuses rather than write a rule that sends nothing."""
    cronjob = next(s for s in registry.KINDS if s.kind == "CronJob")
    judged = cronjob._replace(evaluated=True, watched=True)
    monkeypatch.setattr(
        registry, "KINDS", tuple(judged if s is cronjob else s for s in registry.KINDS)
    )
    with pytest.raises(DeployError, match="CronJob keeps its pod templates outside"):
        deploy.generated_files(ROOT)
    assert judged.role == WORKLOAD


def test_a_webhook_left_without_kinds_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds = tuple(
        s._replace(evaluated=False, watched=False) if s.role == WORKLOAD else s
        for s in registry.KINDS
    )
    monkeypatch.setattr(registry, "KINDS", kinds)
    with pytest.raises(DeployError, match="no workload kind is evaluated"):
        deploy.generated_files(ROOT)


def _rendered_rules(objects: list[dict[str, Any]]) -> tuple[set[tuple[str, str]], dict[str, Any]]:
    """What the ClusterRole grants, and the webhooks' rules by webhook name."""
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    granted = {
        (g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
    }
    (configuration,) = [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]
    return granted, {w["name"]: w["rules"] for w in configuration["webhooks"]}


def test_a_new_kind_reaches_what_kustomize_and_helm_render(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One registry entry, the generator, and both install routes grant and send the kind."""
    new = KindSpec(
        "GPUScaler",
        "gpus.example.com",
        ("v1", "v1beta1"),
        "gpuscalers",
        AUTOSCALER,
        evaluated=True,
        watched=True,
    )
    monkeypatch.setattr(registry, "KINDS", (*registry.KINDS, new))
    root = copy_of_deploy(tmp_path)
    written = deploy.update(root, say=lambda line: None)
    assert set(written) == set(GENERATED)
    expected_rule = {
        "apiGroups": ["gpus.example.com"],
        "apiVersions": ["v1", "v1beta1"],
        "resources": ["gpuscalers"],
        "operations": ["CREATE", "UPDATE"],
        "scope": "Namespaced",
    }
    kustomized = [d for d in yaml.safe_load_all(kustomize_build(root / "deploy" / "base")) if d]
    result = subprocess.run(
        [*helm_command(), "template", "x", str(root / "deploy" / "chart"), "-n", "gpulint"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    charted = [d for d in yaml.safe_load_all(result.stdout) if d]
    for objects in (kustomized, charted):
        granted, webhooks = _rendered_rules(objects)
        assert ("gpus.example.com", "gpuscalers") in granted
        assert webhooks.pop("scaling.gpulint.dev")[-1] == expected_rule
        assert all(expected_rule not in rules for rules in webhooks.values())
    # The tree itself was not written.
    assert "gpuscalers" not in (ROOT / deploy.CHART_KINDS).read_text()


def _run_command(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint.webhook.deploy"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_command_rewrites_what_drifted_and_nothing_else(tmp_path: Path) -> None:
    root = copy_of_deploy(tmp_path)
    rbac = root / deploy.BASE_RBAC
    rbac.write_text(rbac.read_text().replace('"statefulsets"', '"statefulsets", "daemonsets"'))
    (root / deploy.CHART_KINDS).unlink()
    result = _run_command(root)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"wrote {deploy.BASE_RBAC}",
        f"wrote {deploy.CHART_KINDS}",
    ]
    for path in (*GENERATED, NAMED):
        assert (root / path).read_text() == (ROOT / path).read_text(), path
    again = _run_command(root)
    assert (again.returncode, again.stdout) == (0, "")


def test_the_command_says_where_a_block_s_markers_are_missing(tmp_path: Path) -> None:
    root = copy_of_deploy(tmp_path)
    webhook = root / deploy.BASE_WEBHOOK
    end = deploy.end_marker(deploy.SCALING)
    webhook.write_text(webhook.read_text().replace(end, "# the end"))
    before = webhook.read_text()
    result = _run_command(root)
    assert result.returncode == 2
    assert f"{deploy.BASE_WEBHOOK}: needs one line" in result.stderr
    assert end in result.stderr
    assert webhook.read_text() == before


def test_the_command_outside_the_repository_says_where_to_run_it(tmp_path: Path) -> None:
    result = _run_command(tmp_path)
    assert result.returncode == 2
    assert "run it from the repository's root" in result.stderr
    assert not any(tmp_path.iterdir())
