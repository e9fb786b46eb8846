"""Cluster rules (GL901-GL903): exact findings, as a user reads them.

GL901 and GL902 run against the fake API server through ``gpulint lint --cluster``; GL903 also
runs on files (a dumped Deployment with its ownerReferences).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from gpulint.engine.registry import rule_by_id

from ..conftest import lint_text
from .test_cluster_fixtures import lint_cluster

DEPLOYMENT_AND_POD = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: triton, namespace: ml}
spec:
  selector: {matchLabels: {app: triton}}
  template:
    metadata: {labels: {app: triton}}
    spec:
      containers:
      - {name: server, image: triton, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: v1
kind: Pod
metadata: {name: triton-6d5f7-abcde, namespace: ml, labels: {app: triton}}
spec:
  containers:
  - {name: server, image: triton}
"""


def _hpa(metrics: str, status: str = "") -> str:
    return f"""
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: triton, namespace: ml}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: triton}}
  maxReplicas: 4
  metrics:
{metrics}
{status}"""


PODS_METRIC = """\
  - type: Pods
    pods:
      metric: {name: gpu_utilization}
      target: {type: AverageValue, averageValue: "60"}"""
EXTERNAL_METRIC = """\
  - type: External
    external:
      metric:
        name: queue_depth
        selector: {matchLabels: {queue: triton}}
      target: {type: AverageValue, averageValue: "10"}"""


class Case(NamedTuple):
    id: str
    rule: str
    world: str
    message: str
    fix: str


EFFECT = (
    "; the HPA controller gets the same answer, sets ScalingActive=False ({}) and never scales "
    "on it."
)
CASES = [
    Case(
        "GL901 a name the adapter does not expose",
        "GL901",
        "kubefake: {custom: [{metric: DCGM_FI_DEV_GPU_UTIL, namespace: ml, "
        "name: triton-6d5f7-abcde, value: '55'}]}\n---"
        + DEPLOYMENT_AND_POD
        + "---"
        + _hpa(PODS_METRIC),
        "HPA triton reads Pods metric gpu_utilization, but custom.metrics.k8s.io does not know it "
        "(the server could not find the metric gpu_utilization for pods)"
        + EFFECT.format("FailedGetPodsMetric"),
        """\
# list the names the API serves and use one of them in the HPA:
kubectl get --raw /apis/custom.metrics.k8s.io/v1beta1
# or make the adapter expose this name, e.g.:
rules:
- seriesQuery: 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
  resources:
    overrides:
      exported_namespace: {resource: namespace}
      exported_pod: {resource: pod}
  name: {matches: ^DCGM_FI_DEV_GPU_UTIL$, as: gpu_utilization}
  metricsQuery: avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)""",
    ),
    Case(
        "GL901 values only for other pods",
        "GL901",
        "kubefake: {custom: [{metric: gpu_utilization, namespace: ml, name: dcgm-exporter-x, "
        "value: '55'}]}\n---" + DEPLOYMENT_AND_POD + "---" + _hpa(PODS_METRIC),
        "HPA triton reads Pods metric gpu_utilization, but custom.metrics.k8s.io returns no "
        "value for the pods of Deployment ml/triton (app=triton): the metric exists, yet none "
        "of its series map to them" + EFFECT.format("FailedGetPodsMetric"),
        """\
# see what the API returns for these pods:
kubectl get --raw '/apis/custom.metrics.k8s.io/v1beta1/namespaces/ml/pods/*/gpu_utilization\
?labelSelector=app%3Dtriton'
# the adapter rule must map the series' pod and namespace labels; for dcgm-exporter scraped \
with honorLabels: false those are exported_pod and exported_namespace:
resources:
  overrides:
    exported_namespace: {resource: namespace}
    exported_pod: {resource: pod}""",
    ),
    Case(
        "GL901 an External selector that matches nothing",
        "GL901",
        "kubefake: {external: [{metric: queue_depth, namespace: ml, labels: {queue: other}, "
        "value: '3'}]}\n---" + _hpa(EXTERNAL_METRIC),
        "HPA triton reads External metric queue_depth, but external.metrics.k8s.io returns no "
        "value for namespace ml: the metric exists, yet none of its series map to them"
        + EFFECT.format("FailedGetExternalMetric"),
        """\
# see what the API returns for this selector:
kubectl get --raw '/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/queue_depth\
?labelSelector=queue%3Dtriton'
# the selector's labels and the HPA's namespace must match labels of the series: drop labels \
the series lack, or set resources.namespaced: false on the external rule when the series carry \
no namespace""",
    ),
    Case(
        "GL901 no external metrics API",
        "GL901",
        "kubefake: {external-api: absent}\n---" + _hpa(EXTERNAL_METRIC),
        "HPA triton reads External metric queue_depth, but no APIService serves "
        "external.metrics.k8s.io in the cluster" + EFFECT.format("FailedGetExternalMetric"),
        """\
# no APIService serves external.metrics.k8s.io: prometheus-adapter with externalRules, or \
KEDA, registers it (one of them)
helm install prometheus-adapter prometheus-community/prometheus-adapter --namespace monitoring
kubectl get apiservice v1beta1.external.metrics.k8s.io""",
    ),
    Case(
        "GL901 the adapter is down",
        "GL901",
        "kubefake: {custom-api: down}\n---" + DEPLOYMENT_AND_POD + "---" + _hpa(PODS_METRIC),
        "HPA triton reads Pods metric gpu_utilization, but the APIService for "
        "custom.metrics.k8s.io is registered and the server behind it does not answer (503)"
        + EFFECT.format("FailedGetPodsMetric"),
        """\
# the APIService is registered but its server does not answer: see why, and check the \
adapter's pods and logs
kubectl get apiservice v1beta1.custom.metrics.k8s.io -o jsonpath='{.status.conditions}'""",
    ),
    Case(
        "GL902 a resource metric without requests",
        "GL902",
        _hpa(
            "  - type: Resource\n    resource: {name: cpu, target: {type: Utilization, "
            "averageUtilization: 70}}",
            """status:
  conditions:
  - type: ScalingActive
    status: "False"
    reason: FailedGetResourceMetric
    message: >-
      the HPA was unable to compute the replica count: failed to get cpu utilization:
      missing request for cpu in container server of Pod triton-6d5f7-abcde""",
        ),
        'HPA triton reports ScalingActive=False, reason FailedGetResourceMetric: "the HPA was '
        "unable to compute the replica count: failed to get cpu utilization: missing request "
        'for cpu in container server of Pod triton-6d5f7-abcde"; the resource metrics API '
        "(metrics-server) gives no usage for its pods, or a container has no request for the "
        "resource; the controller skips it until the cause is gone.",
        """\
# every container of the target needs a request for the resource the HPA reads:
resources:
  requests:
    cpu: 500m
# and metrics-server must answer: kubectl top pods -n ml""",
    ),
    Case(
        "GL902 parked at zero replicas",
        "GL902",
        _hpa(
            PODS_METRIC,
            """status:
  conditions:
  - {type: ScalingActive, status: "False", reason: ScalingDisabled,
     message: scaling is disabled since the replica count of the target is zero}""",
        ),
        'HPA triton reports ScalingActive=False, reason ScalingDisabled: "scaling is disabled '
        'since the replica count of the target is zero"; the target has 0 replicas, which '
        "parks the HPA until something scales it up; the controller skips it until the cause "
        "is gone.",
        "kubectl scale deployment -n ml triton --replicas=1   # or delete the HPA while the "
        "workload is parked",
    ),
    Case(
        # KEDA labels the HPA it makes; a copy that lost its ownerReferences keeps the label,
        # and the message still names the ScaledObject to change.
        "GL902 an HPA KEDA made, known by its label",
        "GL902",
        _hpa(
            PODS_METRIC,
            """status:
  conditions:
  - {type: ScalingActive, status: "False", reason: ScalingDisabled,
     message: scaling is disabled since the replica count of the target is zero}""",
        ).replace(
            "metadata: {name: triton, namespace: ml}",
            "metadata: {name: triton, namespace: ml, labels: {scaledobject.keda.sh/name: queue}}",
        ),
        "HPA triton (made by KEDA for ScaledObject queue) reports ScalingActive=False, reason "
        'ScalingDisabled: "scaling is disabled since the replica count of the target is zero"; '
        "the target has 0 replicas, which parks the HPA until something scales it up; the "
        "controller skips it until the cause is gone.",
        "kubectl scale deployment -n ml triton --replicas=1   # or delete the HPA while the "
        "workload is parked",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_cluster_finding_wording(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, report, err = lint_cluster(
        case.world, tmp_path, "--select", case.rule, monkeypatch=monkeypatch
    )
    findings: list[dict[str, Any]] = report["findings"]
    assert len(findings) == 1, findings or err
    (finding,) = findings
    assert finding["file"] == "cluster://ml/HorizontalPodAutoscaler/triton"
    assert finding["severity"] == "error"
    assert finding["message"] == case.message
    assert finding["fix"] == case.fix
    assert code == 1


GL903_WORLD = """
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: worker-blue-deployment
          namespace: ml
          labels: {serving.knative.dev/service: worker}
          ownerReferences:
          - {apiVersion: serving.knative.dev/v1, kind: Revision, name: worker-blue}
        spec:
          selector: {matchLabels: {app: worker}}
          template:
            metadata: {labels: {app: worker}}
            spec:
              containers:
              - {name: app, image: worker}
        ---
        apiVersion: autoscaling/v2
        kind: HorizontalPodAutoscaler
        metadata: {name: worker, namespace: ml}
        spec:
          scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker-blue-deployment}
          maxReplicas: 4
          metrics:
          - type: External
            external:
              metric: {name: queue_depth}
              target: {type: AverageValue, averageValue: "20"}
        """


def test_gl903_wording_in_cluster_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, report, _ = lint_cluster(
        textwrap.dedent(GL903_WORLD), tmp_path, "--select", "GL903", monkeypatch=monkeypatch
    )
    assert code == 1
    (finding,) = report["findings"]
    assert (finding["rule"], finding["file"], finding["severity"]) == (
        "GL903",
        "cluster://ml/HorizontalPodAutoscaler/worker",
        "error",
    )
    assert finding["message"] == (
        "HorizontalPodAutoscaler worker targets Deployment worker-blue-deployment, which "
        "Knative Revision worker-blue owns (ownerReferences): Knative scales that Deployment "
        "itself, so two autoscalers write its replicas, and the next template change moves "
        "traffic to a new revision's Deployment and leaves this one scaling nothing."
    )
    assert finding["fix"] == (
        "# delete HorizontalPodAutoscaler worker and let Knative scale every revision; on "
        "Knative Service worker, spec.template.metadata.annotations:\n"
        "autoscaling.knative.dev/class: hpa.autoscaling.knative.dev\n"
        "autoscaling.knative.dev/metric: queue_depth\n"
        'autoscaling.knative.dev/target: "20"'
    )
    assert [r["name"] for r in finding["related"]] == ["worker-blue-deployment"]


def test_in_files_gl105_reports_revision_owned_targets_and_gl903_does_not_run() -> None:
    findings = lint_text(GL903_WORLD, select=["GL105", "GL903"])
    assert [(f.rule, f.location.line, f.location.column) for f in findings] == [("GL105", 21, 59)]


def test_in_cluster_mode_gl903_reports_them_instead_of_gl105(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, report, _ = lint_cluster(
        textwrap.dedent(GL903_WORLD),
        tmp_path,
        "--select",
        "GL105,GL903",
        monkeypatch=monkeypatch,
    )
    assert [f["rule"] for f in report["findings"]] == ["GL903"]


def test_gl902_names_rules_as_the_catalog_does() -> None:
    from gpulint.rules.gl902_cluster_hpa_condition import EXPLANATIONS, RULES

    for rule_id, name in RULES.items():
        spec = rule_by_id(rule_id)
        assert spec is not None and spec.name == name, rule_id
    assert {r for _, rules in EXPLANATIONS.values() for r in rules} == set(RULES)
