"""Relations across files: nearest copies in per-environment repositories, the examples."""

from __future__ import annotations

from pathlib import Path

from .conftest import ROOT, lint_paths, rules_of

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: llm, namespace: ml}}
spec:
  selector: {{matchLabels: {{app: llm}}}}
  template:
    metadata: {{labels: {{app: llm}}}}
    spec:
      containers:
      - {{name: llm, image: vllm, resources: {{limits: {{{resource}: {count}}}}}}}
"""
CPU_HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
"""
GPU_HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}
      target: {type: AverageValue, averageValue: "60"}
  behavior:
    scaleUp: {policies: [{type: Pods, value: 1, periodSeconds: 60}]}
    scaleDown: {stabilizationWindowSeconds: 600}
"""
ADAPTER = """\
rules:
  default: false
  custom:
  - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{{exported_pod!="",exported_namespace!=""}}'
    resources:
      overrides:
        exported_namespace: {{resource: namespace}}
        exported_pod: {{resource: pod}}
    name: {{matches: "^DCGM_FI_DEV_GPU_UTIL$", as: gpu_utilization}}
    metricsQuery: {aggregation}(<<.Series>>{{<<.LabelMatchers>>}}) by (<<.GroupBy>>)
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_same_objects_in_two_environments_are_not_two_autoscalers(tmp_path: Path) -> None:
    deployment = DEPLOYMENT.format(resource="nvidia.com/gpu", count=1)
    _write(
        tmp_path,
        {
            "prod/app.yaml": deployment + "---\n" + GPU_HPA,
            "staging/app.yaml": deployment + "---\n" + GPU_HPA,
        },
    )
    assert "GL103" not in rules_of(lint_paths(tmp_path))


def test_an_hpa_scales_the_deployment_of_its_own_environment(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "prod/deployment.yaml": DEPLOYMENT.format(resource="nvidia.com/gpu", count=1),
            "prod/hpa.yaml": CPU_HPA,
            "dev/deployment.yaml": DEPLOYMENT.format(resource="cpu", count=2),
            "dev/hpa.yaml": CPU_HPA,
        },
    )
    findings = [f for f in lint_paths(tmp_path) if f.rule == "GL101"]
    assert [Path(f.location.file).parent.name for f in findings] == ["prod"]


def test_an_hpa_is_judged_against_the_adapter_config_of_its_environment(tmp_path: Path) -> None:
    deployment = DEPLOYMENT.format(resource="nvidia.com/gpu", count=2)
    _write(
        tmp_path,
        {
            "prod/app.yaml": deployment + "---\n" + GPU_HPA,
            "prod/adapter-values.yaml": ADAPTER.format(aggregation="avg"),
            "staging/app.yaml": deployment + "---\n" + GPU_HPA,
            "staging/adapter-values.yaml": ADAPTER.format(aggregation="sum"),
        },
    )
    findings = [f for f in lint_paths(tmp_path) if f.rule == "GL406"]
    assert [Path(f.location.file).parent.name for f in findings] == ["staging"]


def test_examples_show_the_seeds_mistakes_and_nothing_for_the_corrections() -> None:
    examples = ROOT / "examples"
    findings = lint_paths(examples)
    by_dir: dict[str, set[str]] = {}
    for finding in findings:
        relative = Path(finding.location.file).resolve().relative_to(examples)
        by_dir.setdefault("/".join(relative.parts[:2]), set()).add(finding.rule)
    assert {d for d in by_dir if d.endswith("/fixed")} == set(), by_dir
    assert by_dir["seed-ko/broken"] == {"GL701", "GL102", "GL406", "GL603", "GL604"}
    assert by_dir["seed-ja/broken"] >= {
        "GL301",
        "GL306",
        "GL106",
        "GL103",
        "GL102",
        "GL403",
        "GL404",
        "GL407",
        "GL401",
    }
