"""Suppression by annotation (object or pod template) and by comment; unused ones are GL703."""

from __future__ import annotations

from gpulint.core.model import Finding

from .conftest import lint_text as lint_all
from .conftest import rules_of


def lint_text(text: str, select: list[str] | None = None) -> list[Finding]:
    # These tests are about suppression: GL101 and the GL7xx rules are enough.
    return lint_all(text, select=select or ["GL101", "GL7"])


WORKLOAD = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web{deployment_annotations}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata:
      labels: {{app: web}}{template_annotations}
    spec:
      containers:
      - {{name: web, image: web, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}
---
apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata:
  name: web{hpa_annotations}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
  maxReplicas: 3{hpa_comment}
  targetCPUUtilizationPercentage: 70{same_line}
"""


def manifest(
    deployment: str = "", template: str = "", hpa: str = "", comment: str = "", same_line: str = ""
) -> str:
    def annotations(value: str, indent: str) -> str:
        return f'\n{indent}annotations: {{gpulint.dev/ignore: "{value}"}}' if value else ""

    return WORKLOAD.format(
        deployment_annotations=annotations(deployment, "  "),
        template_annotations=annotations(template, "      "),
        hpa_annotations=annotations(hpa, "  "),
        hpa_comment=f"\n  # gpulint: ignore={comment}" if comment else "",
        same_line=f"  # gpulint: ignore={same_line}" if same_line else "",
    )


def test_unsuppressed_baseline() -> None:
    assert rules_of(lint_text(manifest())) == ["GL101"]


def test_annotation_on_the_object_suppresses() -> None:
    assert rules_of(lint_text(manifest(hpa="GL101"))) == []
    assert rules_of(lint_text(manifest(hpa="hpa-cpu-on-gpu-workload"))) == []
    assert rules_of(lint_text(manifest(hpa="GL102, GL101"))) == []


def test_annotation_on_another_object_does_not_suppress() -> None:
    findings = lint_text(manifest(deployment="GL101"))
    # The Deployment's annotation does not cover the HPA's finding, and is itself unused.
    assert rules_of(findings) == ["GL703", "GL101"]
    assert findings[0].location.line == 5
    assert "reports nothing here" in findings[0].message


def test_comment_on_the_line_above_or_the_same_line_suppresses() -> None:
    # The finding is at targetCPUUtilizationPercentage.
    assert rules_of(lint_text(manifest(comment="GL101"))) == []
    assert rules_of(lint_text(manifest(same_line="GL101"))) == []


def test_comment_two_lines_above_does_not_suppress() -> None:
    text = manifest().replace("  maxReplicas: 3", "  # gpulint: ignore=GL101\n  maxReplicas: 3")
    assert rules_of(lint_text(text)) == ["GL703", "GL101"]


def test_template_annotation_covers_findings_inside_the_template() -> None:
    text = manifest(template="GL101")
    # GL101 is about the HPA, outside the template: the annotation is unused there.
    assert rules_of(lint_text(text)) == ["GL703", "GL101"]


def test_comment_for_another_rule_is_unused() -> None:
    findings = lint_text(manifest(comment="GL701"))
    assert rules_of(findings) == ["GL703", "GL101"]
    assert findings[0].message.startswith("`# gpulint: ignore=GL701` suppresses nothing")


def test_unused_suppression_is_not_judged_for_rules_that_did_not_run() -> None:
    findings = lint_text(manifest(hpa="GL101"), select=["GL7"])
    assert rules_of(findings) == []


def test_unused_suppressions_can_be_turned_off() -> None:
    findings = lint_all(manifest(comment="GL701"), select=["GL101"])
    assert rules_of(findings) == ["GL101"]


def test_suppressing_everything() -> None:
    assert rules_of(lint_text(manifest(hpa="all"))) == []


def test_template_annotation_suppresses_workload_findings_inside_it() -> None:
    text = manifest().replace("{limits: {nvidia.com/gpu: 1}}", "{requests: {nvidia.com/gpu: 1}}")
    assert "GL501" in rules_of(lint_all(text, select=["GL501"]))
    suppressed = manifest(template="GL501").replace(
        "{limits: {nvidia.com/gpu: 1}}", "{requests: {nvidia.com/gpu: 1}}"
    )
    assert rules_of(lint_all(suppressed, select=["GL501", "GL7"])) == []
