"""``gpulint migrate keda``: HPAs served by prometheus-adapter rewritten as KEDA ScaledObjects,
in real git repositories, built with the real kustomize, checked by the real promtool and
validated against KEDA's and Kubernetes' schemas."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpulint.cli import main
from gpulint.live.adapterquery import regex_literal
from gpulint.metrics.promql import selectors_in_query

from .kedaschema import scaled_object_problems
from .live.harness import promtool_binary
from .tools import kustomize_build

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
KUBERNETES = "1.32"
SERVER = "http://prometheus.monitoring.svc:9090"

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai
        resources:
          limits: {{nvidia.com/gpu: 1}}
"""

HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
  namespace: {namespace}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {name}
  minReplicas: 1
  maxReplicas: 4
  behavior:
    scaleUp:
      policies:
      - {{type: Pods, value: 1, periodSeconds: 120}}
    scaleDown:
      stabilizationWindowSeconds: 600
  metrics:
  - type: Pods
    pods:
      metric:
        name: gpu_utilization
      target:
        type: AverageValue
        averageValue: "70"
  - type: External
    external:
      metric:
        name: queue_depth
        selector:
          matchLabels:
            zone: {zone}
          matchExpressions:
          - key: app
            operator: In
            values: [{app_b}, {app_a}]
      target:
        type: Value
        value: 500m
"""

ADAPTER = """\
prometheus:
  url: http://kube-prometheus-stack-prometheus.monitoring.svc
  port: 9090
rules:
  default: false
  custom:
  - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
    resources:
      overrides:
        exported_namespace: {resource: namespace}
        exported_pod: {resource: pod}
    name: {matches: "^DCGM_FI_DEV_GPU_UTIL$", as: gpu_utilization}
    metricsQuery: 'avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
  external:
  - seriesQuery: 'vllm:num_requests_waiting{namespace!=""}'
    resources:
      overrides:
        namespace: {resource: namespace}
    name: {matches: "^vllm:num_requests_waiting$", as: queue_depth}
    metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def make_repo(path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base")
    return path


def plain_app(name: str = "llm", namespace: str = "serving", **hostile: str) -> dict[str, str]:
    values = {"zone": "eu", "app_a": "chat", "app_b": "batch", **hostile}
    return {
        "apps/deployment.yaml": DEPLOYMENT.format(name=name, namespace=namespace),
        "apps/hpa.yaml": HPA.format(name=name, namespace=namespace, **values),
        "platform/prometheus-adapter.yaml": ADAPTER,
    }


def migrate(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["migrate", "keda", str(repo), *args])
    out, err = capsys.readouterr()
    return code, out, err


def lint_findings(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    main(["lint", str(path), "-f", "json"])
    findings: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["findings"]
    return findings


def objects_in(texts: list[str]) -> list[dict[str, Any]]:
    found = []
    for text in texts:
        found += [d for d in yaml.safe_load_all(text) if isinstance(d, dict) and "kind" in d]
    return found


def validate(objects: list[dict[str, Any]]) -> None:
    """KEDA's ScaledObjects against KEDA's types, the rest against Kubernetes' schemas."""
    scaled = [o for o in objects if o["kind"] == "ScaledObject"]
    assert scaled_object_problems(scaled) == []
    for obj in objects:
        if obj["kind"] != "ScaledObject":
            kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def test_a_plain_hpa_becomes_a_scaled_object_beside_it_and_the_hpa_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", plain_app())
    monkeypatch.chdir(repo)
    assert lint_findings(repo, capsys) == []
    code, out, _ = migrate(repo, capsys, "--write")
    assert code == 0, out
    assert not (repo / "apps" / "hpa.yaml").exists()  # its only document went
    written = (repo / "apps" / "scaledobject-llm.yaml").read_text()
    scaled = yaml.safe_load(written)
    spec = scaled["spec"]
    assert scaled["metadata"] == {
        "name": "llm",
        "namespace": "serving",
        "annotations": {"scaledobject.keda.sh/transfer-hpa-ownership": "true"},
    }
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 4)
    assert spec["advanced"]["horizontalPodAutoscalerConfig"] == {
        "name": "llm",
        "behavior": {
            "scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}]},
            "scaleDown": {"stabilizationWindowSeconds": 600},
        },
    }
    pods, external = spec["triggers"]
    address = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    # The adapter's own rendering for this HPA (pkg/naming/metrics_query.go): the selector's
    # matchers first, sorted by key, In values sorted and joined; then the namespace; pods by
    # the names their Deployment gives them; summed to one series.
    assert pods == {
        "type": "prometheus",
        "metricType": "AverageValue",
        "metadata": {
            "serverAddress": address,
            "query": 'sum(avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="serving",'
            'exported_pod=~"llm-[a-z0-9]{1,10}-[a-z0-9]{5}"}) by (exported_pod))',
            "threshold": "70",
        },
    }
    assert external == {
        "type": "prometheus",
        "metricType": "Value",
        "metadata": {
            "serverAddress": address,
            "query": 'sum(sum(vllm:num_requests_waiting{app=~"batch|chat",zone="eu",'
            'namespace="serving"}))',
            "threshold": "0.5",
        },
    }
    assert lint_findings(repo, capsys) == []
    validate(objects_in([p.read_text() for p in repo.rglob("*.yaml") if "platform" not in str(p)]))


def test_the_diff_is_a_patch_git_applies_to_what_write_makes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    files = plain_app()
    files["apps/hpa.yaml"] = "# the model server\n" + files["apps/deployment.yaml"] + "---\n"
    files["apps/hpa.yaml"] += HPA.format(
        name="llm", namespace="serving", zone="eu", app_a="a", app_b="b"
    )
    del files["apps/deployment.yaml"]
    repo = make_repo(tmp_path / "repo", files)
    monkeypatch.chdir(repo)
    code, patch, err = migrate(repo, capsys, "--diff")
    assert code == 0, err
    assert git(repo, "status", "--porcelain") == ""  # --diff writes nothing
    (tmp_path / "change.patch").write_text(patch)
    git(repo, "apply", str(tmp_path / "change.patch"))
    applied = {p.name: p.read_text() for p in (repo / "apps").iterdir()}
    git(repo, "checkout", "-q", ".")
    git(repo, "clean", "-qfd")
    migrate(repo, capsys, "--write")
    assert {p.name: p.read_text() for p in (repo / "apps").iterdir()} == applied
    # The Deployment and the comment stay; the HPA's document goes.
    assert "kind: HorizontalPodAutoscaler" not in applied["hpa.yaml"]
    assert applied["hpa.yaml"].startswith("# the model server\napiVersion: apps/v1")


def test_hostile_names_are_escaped_in_the_queries_and_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No API server accepts these names; a file can hold them, and the query made from them
    # must still select exactly them and stay one PromQL expression.
    namespace = 'ns"})or vector(1)#'
    name = "llm+a|b(c).*"
    zone = 'eu"\\\n}'
    app = "x|y.*"
    files = plain_app(
        name=json.dumps(name),
        namespace=json.dumps(namespace),
        zone=json.dumps(zone),
        app_a=json.dumps(app),
        app_b="plain",
    )
    repo = make_repo(tmp_path / "repo", files)
    monkeypatch.chdir(repo)
    code, out, err = migrate(repo, capsys, "--write")
    assert code == 0, out + err
    [written] = [p for p in (repo / "apps").iterdir() if p.name.startswith("scaledobject-")]
    assert written.name == "scaledobject-llm-a-b-c.yaml"
    scaled = yaml.safe_load(written.read_text())
    assert scaled["metadata"]["name"] == name
    pods, external = (t["metadata"]["query"] for t in scaled["spec"]["triggers"])
    # Prometheus's own parser reads each as one expression (promtool check rules).
    promtool = promtool_binary()
    if promtool is None:
        pytest.skip("promtool is not installed")
    rules = {
        "groups": [
            {
                "name": "m",
                "rules": [
                    {"record": "pods", "expr": pods},
                    {"record": "external", "expr": external},
                ],
            }
        ]
    }
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    checked = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / "rules.yaml")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # And the matchers select exactly the hostile values.
    [selector] = selectors_in_query(pods)
    by_label = {m.label: m for m in selector.matchers}
    assert by_label["exported_namespace"].value == namespace
    pod_matcher = by_label["exported_pod"]
    assert pod_matcher.value.startswith(regex_literal(name))
    assert pod_matcher.matches(f"{name}-5d9f7c6b8-x2x7q")
    assert not pod_matcher.matches("llmaab-5d9f7c6b8-x2x7q")
    [selector] = selectors_in_query(external)
    by_label = {m.label: m for m in selector.matchers}
    assert by_label["zone"].value == zone
    # In values are joined into one regular expression as the adapter joins them
    # (metrics_query.go, selectTargetValue): its query and KEDA's select the same series.
    assert by_label["app"].value == f"plain|{app}"
    assert by_label["namespace"].value == namespace


def test_a_selector_label_no_prometheus_label_can_be_is_refused_with_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    files = plain_app()
    files["apps/hpa.yaml"] = files["apps/hpa.yaml"].replace("zone: eu", "app.kubernetes.io/x: eu")
    repo = make_repo(tmp_path / "repo", files)
    monkeypatch.chdir(repo)
    code, out, _ = migrate(repo, capsys, "--write")
    assert code == 1
    assert "refused" in out and "app.kubernetes.io/x" in out
    assert git(repo, "status", "--porcelain") == ""


def test_nothing_is_written_through_a_link_or_outside_the_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", plain_app())
    (repo / "linked").symlink_to(repo / "apps", target_is_directory=True)
    monkeypatch.chdir(repo)
    capsys.readouterr()
    code = main(["migrate", "keda", "linked", "platform", "--write"])
    out = capsys.readouterr().out
    assert code == 1
    assert "may not be written" in out
    assert git(repo, "status", "--porcelain") == "?? linked\n"
    # An HPA file that is itself a link: never edited through it.
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(str(repo / "apps" / "hpa.yaml"), outside / "hpa.yaml")
    (repo / "apps" / "hpa.yaml").symlink_to(outside / "hpa.yaml")
    before = (outside / "hpa.yaml").read_text()
    migrate(repo, capsys, "--write")
    assert (outside / "hpa.yaml").read_text() == before
    assert not any(p.name.startswith("scaledobject-") for p in (repo / "apps").iterdir())


def test_without_the_adapters_prometheus_it_refuses_unless_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    files = plain_app()
    files["platform/prometheus-adapter.yaml"] = ADAPTER.split("rules:", 1)[1].join(["rules:", ""])
    repo = make_repo(tmp_path / "repo", files)
    monkeypatch.chdir(repo)
    code, out, _ = migrate(repo, capsys)
    assert code == 1 and "--server-address" in out
    code, out, _ = migrate(repo, capsys, "--write", "--server-address", SERVER)
    assert code == 0, out
    assert SERVER in (repo / "apps" / "scaledobject-llm.yaml").read_text()


@pytest.mark.parametrize(
    ("example", "options"),
    [
        ("seed-ko/fixed", []),
        ("seed-ja/fixed", ["--server-address", SERVER]),
        # Two HPAs, one after the other in one file: both go, and the file with them.
        ("live/fixed", []),
    ],
)
def test_the_seeds_recipes_migrate_and_lint_clean(
    example: str,
    options: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES / example, repo)
    make_repo(repo, {})
    monkeypatch.chdir(repo)
    code, out, _ = migrate(repo, capsys, "--write", *options)
    assert code == 0, out
    kinds = [o["kind"] for o in objects_in([p.read_text() for p in repo.glob("*.yaml")])]
    assert "HorizontalPodAutoscaler" not in kinds and "ScaledObject" in kinds
    assert lint_findings(repo, capsys) == []
    scaled = objects_in([p.read_text() for p in repo.glob("scaledobject-*.yaml")])
    assert scaled_object_problems(scaled) == []
    # gpulint trace follows each trigger from the workload to the ScaledObject, unbroken.
    capsys.readouterr()
    assert main(["trace", str(repo), "-f", "json"]) == 0
    traces = json.loads(capsys.readouterr().out)["traces"]
    assert traces and all(t["autoscaler"]["kind"] == "ScaledObject" for t in traces)
    assert all(link["status"] != "broken" for t in traces for link in t["links"])
    # The validator refuses what KEDA's types refuse.
    broken = json.loads(json.dumps(scaled[0]))
    broken["spec"]["minReplicaCount"] = "one"
    assert len(scaled_object_problems([broken])) == 1


OVERLAY = """\
namespace: {namespace}
namePrefix: {prefix}
resources:
- ../../base
"""


def overlay_repo(path: Path) -> Path:
    app = plain_app(namespace="base-ns")
    files = {
        "base/deployment.yaml": app["apps/deployment.yaml"],
        "base/hpa.yaml": app["apps/hpa.yaml"],
        "base/kustomization.yaml": "resources:\n- deployment.yaml\n- hpa.yaml\n",
        "overlays/prod/kustomization.yaml": OVERLAY.format(namespace="prod", prefix="prod-"),
        "overlays/dev/kustomization.yaml": OVERLAY.format(namespace="dev", prefix="dev-"),
        "platform/prometheus-adapter.yaml": ADAPTER,
    }
    return make_repo(path, files)


def test_an_overlays_hpa_becomes_a_patch_and_a_resource_of_that_overlay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = overlay_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    capsys.readouterr()
    code = main(["migrate", "keda", "overlays/prod", "platform", "--write"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert git(repo, "status", "--porcelain", "base") == ""  # the base is left alone
    built = objects_in([kustomize_build(repo / "overlays" / "prod")])
    kinds = {o["kind"]: o for o in built}
    assert "HorizontalPodAutoscaler" not in kinds
    scaled = kinds["ScaledObject"]
    assert scaled["metadata"]["name"] == "prod-llm"
    assert scaled["metadata"]["namespace"] == "prod"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "prod-llm"
    assert scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["name"] == "prod-llm"
    query = scaled["spec"]["triggers"][0]["metadata"]["query"]
    assert 'exported_namespace="prod",exported_pod=~"prod-llm-[a-z0-9]{1,10}' in query
    validate(built)
    # The other overlay still has its HPA until it is migrated too.
    dev = {o["kind"] for o in objects_in([kustomize_build(repo / "overlays" / "dev")])}
    assert "HorizontalPodAutoscaler" in dev
    git(repo, "add", "-A")  # gpulint renders what git tracks, as the change is committed
    assert lint_findings(repo / "overlays" / "prod", capsys) == []
    kustomization = yaml.safe_load((repo / "overlays" / "prod" / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../../base", "scaledobject-prod-llm.yaml"]
    assert kustomization["patches"] == [
        {
            "path": "delete-hpa-prod-llm.yaml",
            "target": {"kind": "HorizontalPodAutoscaler", "name": "llm"},
        }
    ]


def test_both_overlays_migrate_in_one_run_and_each_builds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = overlay_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    code, out, _ = migrate(repo, capsys, "--write")
    assert code == 0, out
    for name in ("prod", "dev"):
        built = objects_in([kustomize_build(repo / "overlays" / name)])
        kinds = [o["kind"] for o in built]
        assert "HorizontalPodAutoscaler" not in kinds and kinds.count("ScaledObject") == 1
        validate(built)
    git(repo, "add", "-A")
    assert lint_findings(repo, capsys) == []


CHART = {
    "chart/Chart.yaml": "apiVersion: v2\nname: llm\nversion: 0.1.0\n",
    "chart/values.yaml": "target: 70\n",
    "chart/templates/deployment.yaml": DEPLOYMENT.format(
        name="{{ .Release.Name }}", namespace="{{ .Release.Namespace }}"
    ),
    "chart/templates/hpa.yaml": HPA.format(
        name="{{ .Release.Name }}",
        namespace="{{ .Release.Namespace }}",
        zone="eu",
        app_a="a",
        app_b="b",
    ),
    "platform/prometheus-adapter.yaml": ADAPTER,
}


def test_a_charts_hpa_is_refused_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", CHART)
    monkeypatch.chdir(repo)
    code, out, _ = migrate(repo, capsys, "--write")
    assert code == 1
    assert "refused: it is made by a Helm chart's template" in out
    assert git(repo, "status", "--porcelain") == ""
    code, out, _ = migrate(repo, capsys, "--format", "json")
    [refused] = json.loads(out)["refused"]
    assert refused["scaled_object"]["kind"] == "ScaledObject"
    assert scaled_object_problems([refused["scaled_object"]]) == []


def test_the_docs_picture_is_what_gpulint_draws_today() -> None:
    script = EXAMPLES / "migrate" / "picture.py"
    spec = importlib.util.spec_from_file_location("migrate_picture", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    drawn = module.draw()
    committed = (EXAMPLES / "migrate" / "triton-gpu-keda.svg").read_text()
    assert drawn == committed, "run `python examples/migrate/picture.py` and commit the picture"
    assert "HorizontalPodAutoscaler default/triton-gpu" in drawn
    assert "ScaledObject default/triton-gpu" in drawn
    # The two replays of the day part at one sync, by two replicas, and the report says why.
    proof = module.proof()
    assert proof.syncs == 5761 and len(proof.differences) == 1
    assert "calcPlainMetricReplicas" in proof.why()[0]
    assert (
        "](../examples/migrate/triton-gpu-keda.svg)" in (ROOT / "docs" / "migrate.md").read_text()
    )


def test_cpu_beside_a_served_metric_becomes_keda_s_cpu_trigger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    files = plain_app()
    files["apps/hpa.yaml"] = files["apps/hpa.yaml"].replace(
        "  metrics:\n",
        "  metrics:\n  - type: Resource\n    resource:\n      name: cpu\n"
        "      target: {type: Utilization, averageUtilization: 80}\n",
    )
    repo = make_repo(tmp_path / "repo", files)
    monkeypatch.chdir(repo)
    code, out, _ = migrate(repo, capsys, "--format", "json")
    assert code == 0, out
    [migrated] = json.loads(out)["migrated"]
    cpu = migrated["scaled_object"]["spec"]["triggers"][0]
    assert cpu == {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "80"}}
    assert scaled_object_problems([migrated["scaled_object"]]) == []
