"""A lint of plain files loads only what linting them needs: the renderers (and the process
machinery they import) and the --fix machinery stay unimported, which is most of what a
one-file lint would otherwise spend on start-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: ml}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.6.3
        resources: {limits: {nvidia.com/gpu: 1}}
"""

NOT_NEEDED = (
    "gpulint.input.units.render",
    "gpulint.input.units.tools",
    "gpulint.adoption.fix",
    "difflib",  # close-name suggestions, only for a name that is wrong
    "traceback",  # GL799, only when a rule fails
    "importlib.resources",  # the DCGM field list, only for a series outside the known table
)

# An HPA on GPU utilization served by prometheus-adapter: the adapter and metric rules run.
HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: gpu_utilization}
      target: {type: AverageValue, averageValue: "70"}
"""
ADAPTER_VALUES = """\
prometheus: {url: http://prometheus.monitoring.svc, port: 9090}
rules:
  default: false
  custom:
  - seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
    resources:
      overrides:
        exported_namespace: {resource: namespace}
        exported_pod: {resource: pod}
    name: {matches: "^DCGM_FI_DEV_GPU_UTIL$", as: "gpu_utilization"}
    metricsQuery: avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
"""


def _imported_after(paths: list[str], also: tuple[str, ...] = (), objects: int = 1) -> list[str]:
    """The modules of NOT_NEEDED (and of ``also``) a fresh interpreter has imported after
    planning, building and linting ``paths`` as ``gpulint lint`` does (and counting the
    fixable findings)."""
    names = NOT_NEEDED + also
    code = (
        "import sys\n"
        "from gpulint.engine.config import Settings\n"
        "from gpulint.engine.runner import Selection\n"
        "from gpulint.engine.files import build_units, lint_units, plan_units\n"
        "from gpulint.input.units import RenderOptions\n"
        f"units = build_units(plan_units({paths!r}, Settings()), RenderOptions())\n"
        "result = lint_units(units, Settings(), Selection())\n"
        f"assert result.objects == {objects}, result.objects\n"
        "result.fixable(False)\n"
        f"print(','.join(m for m in {names!r} if m in sys.modules))\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return [name for name in output.strip().split(",") if name]


def test_plain_files_import_no_renderer_and_no_fix_machinery(tmp_path: Path) -> None:
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(DEPLOYMENT)
    assert _imported_after([str(manifest)]) == []


def test_an_adapter_served_hpa_imports_no_suggestions_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "deployment.yaml").write_text(DEPLOYMENT)
    (tmp_path / "hpa.yaml").write_text(HPA)
    (tmp_path / "prometheus-adapter-values.yaml").write_text(ADAPTER_VALUES)
    # The rules that suggest close names ran (and imported their modules) all the same.
    rules = (
        "gpulint.rules.gl107_hpa_metric_target",
        "gpulint.rules.gl401_adapter_metric_not_exposed",
        "gpulint.rules.gl405_adapter_config_schema",
    )
    assert _imported_after([str(tmp_path)], rules, objects=2) == list(rules)


def test_a_kustomization_still_loads_the_renderer(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [deployment.yaml]\n")
    (tmp_path / "deployment.yaml").write_text(DEPLOYMENT)
    code = (
        "import sys\n"
        "from gpulint.engine.config import Settings\n"
        "from gpulint.engine.files import build_units, plan_units\n"
        "from gpulint.input.units import RenderOptions\n"
        f"plans = plan_units([{str(tmp_path)!r}], Settings())\n"
        "assert any(p.kustomizations for p in plans), plans\n"
        "options = RenderOptions(kustomize='/nonexistent/kustomize')\n"
        "build_units(plans, options)\n"
        "assert options.budget is options.budget  # one budget for the whole run\n"
        "print('gpulint.input.units.render' in sys.modules)\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "True"
