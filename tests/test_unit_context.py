"""Each unit judged with its cluster's context: inferred from the repository, printed, and
never mixed with another cluster's or another application's objects.

The layouts are built in temporary directories: two alternative tutorials side by side, a
chart beside the prometheus-adapter values of ``monitoring/``, a Flux repository with
``clusters/<name>/`` Kustomizations, and Argo CD ApplicationSets. The chart is rendered by the
real helm and the overlays by the real kustomize.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpulint.cli import main
from gpulint.engine.config import Settings, load_settings
from gpulint.engine.result import Result
from gpulint.input.units import RenderOptions
from gpulint.input.units.roots import DirectoryTree

from .conftest import FIXTURES, lint_result

ADAPTER_UNNAMED = (FIXTURES / "GL401" / "fail_unnamed_rule" / "prometheus-adapter.yaml").read_text()
# The same rule with a name block: it exposes gpu_utilization.
ADAPTER_NAMED = ADAPTER_UNNAMED.replace(
    "      metricsQuery:",
    '      name: {matches: "^DCGM_FI_DEV_GPU_UTIL$", as: "gpu_utilization"}\n      metricsQuery:',
)

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: inference
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.6.0
        resources:
          limits: {{nvidia.com/gpu: 1}}
"""

HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
  namespace: inference
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {target}}}
  minReplicas: 1
  maxReplicas: 2
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      policies: [{{type: Pods, value: 1, periodSeconds: 60}}]
    scaleDown:
      stabilizationWindowSeconds: 300
      policies: [{{type: Pods, value: 1, periodSeconds: 120}}]
  metrics:
  - type: Pods
    pods:
      metric:
        name: gpu_utilization
      target:
        type: AverageValue
        averageValue: "60"
"""

SCALED_OBJECT = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
  namespace: inference
spec:
  scaleTargetRef: {{name: {target}}}
  minReplicaCount: 1
  maxReplicaCount: 2
  triggers:
  - type: cpu
    metricType: Utilization
    metadata: {{value: "60"}}
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _rules(result: Result, *only: str) -> list[tuple[str, str]]:
    return sorted((f.rule, f.location.file) for f in result.findings if not only or f.rule in only)


def _contexts(result: Result) -> dict[str, str]:
    return {unit.name: unit.context for unit in result.units}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_alternative_tutorials_are_judged_apart(tmp_path: Path) -> None:
    # Two tutorials of one repository scale the same Deployment name, one with an HPA and
    # one with KEDA; each holds its own Deployment under its own name. No cluster holds both.
    _write(
        tmp_path,
        {
            "tutorials/hpa/deployment.yaml": DEPLOYMENT.format(name="llm"),
            "tutorials/hpa/hpa.yaml": HPA.format(name="llm", target="llm"),
            "tutorials/keda/deployment.yaml": DEPLOYMENT.format(name="llm-keda"),
            "tutorials/keda/scaledobject.yaml": SCALED_OBJECT.format(name="llm", target="llm"),
        },
    )
    result = lint_result("tutorials")
    assert "GL103" not in {f.rule for f in result.findings}
    assert [(u.name, u.objects) for u in result.units] == [
        ("tutorials/hpa", 2),
        ("tutorials/keda", 2),
    ]
    assert _contexts(result) == {
        "tutorials/hpa": "cluster the input; its own objects only",
        "tutorials/keda": "cluster the input; its own objects only",
    }


def test_one_application_in_nested_directories_stays_one_unit(tmp_path: Path) -> None:
    # The Deployment beside its autoscalers' directory (kubernetes/examples' vllm layout):
    # one application, so the two autoscalers on one Deployment are still GL103.
    _write(
        tmp_path,
        {
            "vllm/deployment.yaml": DEPLOYMENT.format(name="llm"),
            "vllm/hpa/hpa.yaml": HPA.format(name="llm", target="llm"),
            "vllm/hpa/scaledobject.yaml": SCALED_OBJECT.format(name="llm", target="llm"),
        },
    )
    result = lint_result("vllm")
    assert len(result.units) == 1
    assert [f.rule for f in result.findings].count("GL103") == 2


def test_an_autoscaler_outside_every_application_joins_the_one_it_names(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "apps/a/deployment.yaml": DEPLOYMENT.format(name="a"),
            "apps/b/deployment.yaml": DEPLOYMENT.format(name="b"),
            "autoscaling/hpa-a.yaml": HPA.format(name="a", target="a"),
        },
    )
    result = lint_result(".")
    assert [(u.name, u.objects) for u in result.units] == [("apps/a", 2), ("apps/b", 1)]


def _chart(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "charts/app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\n",
            "charts/app/values.yaml": "{}\n",
            "charts/app/templates/deployment.yaml": DEPLOYMENT.format(name="llm"),
            "charts/app/templates/hpa.yaml": HPA.format(name="llm", target="llm"),
            "monitoring/prometheus-adapter.yaml": ADAPTER_UNNAMED,
        },
    )


def test_a_chart_is_judged_with_the_adapter_named_beside_it(
    tmp_path: Path, helm: list[str]
) -> None:
    _chart(tmp_path)
    options = RenderOptions(helm=helm[0])
    alone = lint_result("charts/", options=options)
    assert "GL401" not in {f.rule for f in alone.findings}  # no adapter config: not judged

    result = lint_result("charts/", "monitoring/", options=options)
    (finding,) = [f for f in result.findings if f.rule == "GL401"]
    assert finding.location.file == "charts/app/templates/hpa.yaml"
    # The finding names where the adapter config it was judged against came from.
    assert finding.message.endswith(
        "Helm values prometheus-adapter.yaml comes from monitoring, taken as this unit's "
        "prometheus-adapter config (the input is one cluster)."
    )
    assert _contexts(result) == {
        "charts/app": "cluster the input; its own objects and prometheus-adapter config from "
        "monitoring",
        "monitoring": "cluster the input; its own objects only",
    }
    # However the repository is named: as one path, it is the same one cluster.
    whole = lint_result(".", options=options)
    assert [(f.rule, f.location.file, f.location.line) for f in whole.findings] == [
        (f.rule, f.location.file, f.location.line) for f in result.findings
    ]
    # The borrowed values are not counted as the chart's objects, nor reported twice.
    assert [(u.name, u.objects) for u in result.units] == [("charts/app", 2), ("monitoring", 0)]


def test_trace_follows_the_adapter_lent_beside_the_chart(
    tmp_path: Path, helm: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """trace judges each unit with the same context as lint: the chart's autoscaler reaches
    the adapter config named beside it, broken where lint reports GL401."""
    _chart(tmp_path)
    main(["trace", "--helm", helm[0], "charts/", "monitoring/", "--format", "json"])
    traces = json.loads(capsys.readouterr().out)["traces"]
    links = [link for trace in traces for link in trace["links"]]
    adapter = [link for link in links if link["stage"] == "adapter-rule"]
    assert adapter and all("not in the input" not in link["detail"] for link in adapter)
    assert any("GL401" in link["findings"] for link in links)


def test_a_fixed_adapter_clears_the_chart(tmp_path: Path, helm: list[str]) -> None:
    _chart(tmp_path)
    (tmp_path / "monitoring" / "prometheus-adapter.yaml").write_text(ADAPTER_NAMED)
    result = lint_result("charts/", "monitoring/", options=RenderOptions(helm=helm[0]))
    assert _rules(result) == []


def test_the_context_is_printed_in_text_and_json(
    tmp_path: Path, helm: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _chart(tmp_path)
    args = ["lint", "--helm", helm[0], "charts/", "monitoring/"]
    main([*args, "--format", "json"])
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert [(u["name"], u["context"]) for u in summary["units"]] == [
        (
            "charts/app",
            "cluster the input; its own objects and prometheus-adapter config from monitoring",
        ),
        ("monitoring", "cluster the input; its own objects only"),
    ]
    assert summary["clusters"] == [
        {
            "name": "the input",
            "why": "no GitOps object or clusters: entry of .gpulint.yaml divides the input",
            "units": ["charts/app", "monitoring"],
            "lends": [
                {
                    "component": "prometheus-adapter config",
                    "from": "monitoring",
                    "to": ["charts/app"],
                }
            ],
            "notLent": [],
        }
    ]
    assert "clusters: in .gpulint.yaml" in summary["contextChange"]
    main(args)
    lines = capsys.readouterr().out.splitlines()
    clusters = [line for line in lines if line.startswith("cluster: ")]
    assert len(clusters) == 2  # one line per cluster, wrapped, and how to change it
    words = " ".join(" ".join(lines).split())
    assert (
        "cluster: the input (no GitOps object or clusters: entry of .gpulint.yaml divides the "
        "input): 2 units; monitoring lends prometheus-adapter config to charts/app" in words
    )
    assert "cluster: to change it, declare clusters: in .gpulint.yaml" in words


def test_one_path_or_several_is_the_same_one_cluster(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "repos/app/deployment.yaml": DEPLOYMENT.format(name="llm"),
            "repos/app/hpa.yaml": HPA.format(name="llm", target="llm"),
            "repos/other/deployment.yaml": DEPLOYMENT.format(name="other"),
            "repos/adapter/values.yaml": ADAPTER_UNNAMED,
        },
    )
    for paths in (["repos/app", "repos/other", "repos/adapter"], ["repos"], ["."]):
        result = lint_result(*paths)
        found = [(f.rule, os.path.normpath(f.location.file)) for f in result.findings]
        assert found == [("GL401", "repos/app/hpa.yaml")], paths
    # Directories that are no cluster together are declared apart.
    (tmp_path / ".gpulint.yaml").write_text(
        "clusters:\n  a: {applications: [repos/app]}\n  b: {platform: [repos/adapter]}\n"
    )
    result = lint_result("repos", settings=_settings(tmp_path))
    assert _rules(result, "GL401") == []
    assert _contexts(result)["repos/app"] == "cluster a; its own objects only"


SERVICE_MONITOR = """\
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: dcgm-exporter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: dcgm-exporter}}
  endpoints: [{port: metrics}]
"""


def test_two_different_providers_of_one_component_are_never_guessed_between(
    tmp_path: Path, kustomize: list[str]
) -> None:
    # Two monitoring directories, each with its own copy of the ServiceMonitor: two units,
    # and no telling which of them serves the application.
    _write(
        tmp_path,
        {
            "app/kustomization.yaml": "resources: [deployment.yaml, hpa.yaml]\n",
            "app/deployment.yaml": DEPLOYMENT.format(name="llm"),
            "app/hpa.yaml": HPA.format(name="llm", target="llm"),
            "monitoring-a/values.yaml": ADAPTER_UNNAMED,
            "monitoring-a/servicemonitor.yaml": SERVICE_MONITOR,
            "monitoring-b/values.yaml": ADAPTER_NAMED,
            "monitoring-b/servicemonitor.yaml": SERVICE_MONITOR,
        },
    )
    options = RenderOptions(" ".join(kustomize))
    result = lint_result("app", "monitoring-a", "monitoring-b", options=options)
    assert "GL401" not in {f.rule for f in result.findings}
    # The two ServiceMonitors are copies of one text: either says what the cluster runs.
    assert _contexts(result)["app"] == (
        "cluster the input; its own objects and dcgm-exporter from monitoring-a; Prometheus "
        "monitoring objects from monitoring-a; prometheus-adapter config not taken: 2 "
        "directories are equally near (monitoring-a, monitoring-b)"
    )
    # Named with one of them only, the application is judged with it.
    result = lint_result("app", "monitoring-a", options=options)
    assert _rules(result) == [("GL401", "app/hpa.yaml")]


def test_declared_units_take_part_in_their_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(
        tmp_path,
        {
            "app/deployment.yaml": DEPLOYMENT.format(name="llm"),
            "app/hpa.yaml": HPA.format(name="llm", target="llm"),
            "adapter/values.yaml": ADAPTER_UNNAMED,
        },
    )
    main(["lint", "--format", "json", "app", "adapter"])
    report = json.loads(capsys.readouterr().out)
    assert [f["rule"] for f in report["findings"]] == ["GL401"]  # one unit of loose files
    # A unit per directory changes what is one unit, not what the cluster serves it with.
    (tmp_path / ".gpulint.yaml").write_text("units: [app, adapter]\n")
    main(["lint", "--format", "json", "app", "adapter"])
    report = json.loads(capsys.readouterr().out)
    assert [f["rule"] for f in report["findings"]] == ["GL401"]
    assert [(u["name"], u["context"]) for u in report["summary"]["units"]] == [
        ("adapter", "cluster the input; its own objects only"),
        ("app", "cluster the input; its own objects and prometheus-adapter config from adapter"),
    ]
    # The whole tree as one unit: "." names the configuration's own directory.
    (tmp_path / ".gpulint.yaml").write_text("units: [.]\n")
    main(["lint", "--format", "json", "."])
    report = json.loads(capsys.readouterr().out)
    assert [u["name"] for u in report["summary"]["units"]] == ["."]
    assert [f["rule"] for f in report["findings"]] == ["GL401"]


@pytest.mark.parametrize(
    "config",
    [
        "units: [app, nowhere/*]\n",
        "clusters:\n  prod: {applications: [app], platform: [nowhere]}\n",
    ],
)
def test_a_pattern_that_matches_nothing_is_an_error_that_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str
) -> None:
    _write(tmp_path, {"app/deployment.yaml": DEPLOYMENT.format(name="llm")})
    (tmp_path / ".gpulint.yaml").write_text(config)
    assert main(["lint", "."]) == 2
    error = capsys.readouterr().err
    assert "matches no directory" in error and "nowhere" in error and ".gpulint.yaml" in error


def _settings(root: Path) -> Settings:
    from gpulint.engine.registry import rule_names, rule_option_schemas

    return load_settings(str(root / ".gpulint.yaml"), rule_option_schemas(), rule_names())


def _flux(tmp_path: Path) -> None:
    files = {}
    for env in ("prod", "staging"):
        files[f"clusters/{env}/sync.yaml"] = f"""\
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: apps, namespace: flux-system}}
spec:
  interval: 10m
  path: ./apps/{env}
  prune: true
  sourceRef: {{kind: GitRepository, name: flux-system}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: infrastructure, namespace: flux-system}}
spec:
  interval: 10m
  path: ./infrastructure/{env}
  prune: true
  sourceRef: {{kind: GitRepository, name: flux-system}}
"""
        files[f"apps/{env}/kustomization.yaml"] = "resources: [deployment.yaml, hpa.yaml]\n"
        files[f"apps/{env}/deployment.yaml"] = DEPLOYMENT.format(name="llm")
        files[f"apps/{env}/hpa.yaml"] = HPA.format(name="llm", target="llm")
    files["infrastructure/prod/prometheus-adapter.yaml"] = ADAPTER_NAMED
    files["infrastructure/staging/prometheus-adapter.yaml"] = ADAPTER_UNNAMED
    _write(tmp_path, files)


def test_flux_clusters_lend_each_environment_its_own_platform(
    tmp_path: Path, kustomize: list[str]
) -> None:
    _flux(tmp_path)
    result = lint_result(".", options=RenderOptions(" ".join(kustomize)))
    # Only staging's adapter misses the name: prod is judged with prod's adapter alone.
    assert _rules(result) == [("GL401", "apps/staging/hpa.yaml")]
    (finding,) = result.findings
    assert finding.message.endswith(
        "Helm values prometheus-adapter.yaml comes from infrastructure/staging, taken as this "
        "unit's prometheus-adapter config (cluster staging, declared by Kustomization apps "
        "(clusters/staging/sync.yaml))."
    )
    contexts = _contexts(result)
    assert contexts["apps/prod"] == (
        "cluster prod; its own objects and prometheus-adapter config from infrastructure/prod"
    )
    assert contexts["infrastructure/staging"] == "cluster staging; its own objects only"


APPLICATION_SET = """\
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {{name: apps, namespace: argocd}}
spec:
  generators:
  - git:
      repoURL: https://example.com/repo.git
      revision: HEAD
      directories:
      - path: apps/*
  template:
    metadata: {{name: "{{{{path.basename}}}}"}}
    spec:
      project: default
      source: {{repoURL: https://example.com/repo.git, targetRevision: HEAD, path: "{{{{path}}}}"}}
      destination: {destination}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {{name: monitoring, namespace: argocd}}
spec:
  project: default
  source: {{repoURL: https://example.com/repo.git, targetRevision: HEAD, path: platform}}
  destination: {{name: gpu-cluster, namespace: monitoring}}
"""


def _argo(tmp_path: Path, destination: str) -> None:
    _write(
        tmp_path,
        {
            "argocd/apps.yaml": APPLICATION_SET.format(destination=destination),
            "apps/a/deployment.yaml": DEPLOYMENT.format(name="llm"),
            "apps/a/hpa.yaml": HPA.format(name="llm", target="llm"),
            "apps/b/deployment.yaml": DEPLOYMENT.format(name="llm"),
            "apps/b/scaledobject.yaml": SCALED_OBJECT.format(name="llm", target="llm"),
            "platform/prometheus-adapter.yaml": ADAPTER_UNNAMED,
        },
    )


def test_an_application_set_deploys_each_directory_with_its_cluster_platform(
    tmp_path: Path,
) -> None:
    _argo(tmp_path, "{name: gpu-cluster, namespace: inference}")
    result = lint_result(".")
    assert _rules(result, "GL103", "GL401") == [("GL401", "./apps/a/hpa.yaml")]
    contexts = _contexts(result)
    assert contexts["apps/a"] == (
        "cluster gpu-cluster; its own objects and prometheus-adapter config from platform"
    )
    assert contexts["platform"] == "cluster gpu-cluster; its own objects only"


def test_a_generated_destination_joins_nothing(tmp_path: Path) -> None:
    # "{{name}}": the cluster is known only once Argo CD generates the Applications.
    _argo(tmp_path, '{name: "{{path.basename}}", namespace: inference}')
    result = lint_result(".")
    assert _rules(result, "GL103", "GL401") == []
    assert _contexts(result)["apps/a"] == "cluster apps/a; its own objects only"


def test_declared_paths_stay_inside_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The paths are the repository's text: never above its root, never up with "..".
    from gpulint.input.units import clusters
    from gpulint.input.units.clusters import resolve

    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "apps" / "a").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    where = tmp_path / "repo" / "clusters" / "prod" / "apps.yaml"
    _write(tmp_path, {"repo/clusters/prod/apps.yaml": ""})
    repo = (tmp_path / "repo").resolve()
    assert resolve("./apps/a", str(where)) == [str(repo / "apps" / "a")]
    assert resolve("apps/*", str(where)) == [str(repo / "apps" / "a")]
    assert resolve("outside", str(where)) == []  # beside the repository, not in it
    assert resolve("../outside", str(where)) == []
    assert resolve("/etc", str(where)) == []
    monkeypatch.setattr(clusters, "MAX_ENTRIES", 20)
    for entry in range(21):  # wider than a glob may look
        (tmp_path / "repo" / "wide" / f"d{entry}").mkdir(parents=True)
    assert resolve("apps/*", str(where)) == [str(repo / "apps" / "a")]
    assert resolve("wide/*", str(where)) == []


@pytest.mark.parametrize("cwd", ["/", "tmp"])
def test_each_spelling_of_a_file_lies_in_the_directory_abspath_gives(
    cwd: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files are cut into applications by their absolute directories, worked out once per
    directory from its parent's: every spelling a command line or a walk gives a path
    (``./``, ``..``, doubled slashes, names that only start with dots) ends where
    ``os.path.abspath`` puts it, in any order and from any working directory."""
    monkeypatch.chdir(tmp_path if cwd == "tmp" else cwd)
    paths = [
        "x.yaml", "./x.yaml", "a/x.yaml", "a//x.yaml", "a/./x.yaml", "a/../x.yaml",
        "../x.yaml", "../../x.yaml", "/x.yaml", "//x.yaml", "///x.yaml", "/a//b/x.yaml",
        "a/b/c/d/x.yaml", "a/b/../c/x.yaml", "./a/b/x.yaml", "a/.../x.yaml", "a/..b/x.yaml",
        ".hidden/x.yaml", "a/./b/./x.yaml", "/../a/x.yaml",
    ]  # fmt: skip
    for order in (paths, paths[::-1], sorted(paths)):
        tree = DirectoryTree()
        for path in order + order:
            assert tree.directory(path) == os.path.dirname(os.path.abspath(path)), path


def test_knative_s_config_autoscaler_is_lent_to_the_cluster_s_services(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cluster's default Knative class (config-autoscaler's pod-autoscaler-class) is one
    per cluster: a Service in another unit is judged with it (GL203: cpu is a metric of the
    HPA class, which the KPA refuses)."""
    near_miss = FIXTURES / "GL203" / "pass_cpu_metric_under_a_cluster_default_hpa"
    _write(
        tmp_path,
        {
            "knative/config-autoscaler.yaml": (near_miss / "config-autoscaler.yaml").read_text(),
            "embedder/service.yaml": (near_miss / "service.yaml").read_text(),
        },
    )
    (tmp_path / ".gpulint.yaml").write_text("units: [knative, embedder]\n")
    main(["lint", "--format", "json", "--select", "GL203", "knative", "embedder"])
    report = json.loads(capsys.readouterr().out)
    assert report["findings"] == []
    contexts = {u["name"]: u["context"] for u in report["summary"]["units"]}
    assert "Knative config-autoscaler from knative" in contexts["embedder"]
