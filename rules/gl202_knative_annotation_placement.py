"""A Knative autoscaling annotation sits on the Service's own metadata instead of its template.

## What it checks
Every ``autoscaling.knative.dev/*`` annotation (``class``, ``metric``, ``target``,
``min-scale``, ``max-scale``, ``window`` ...) in ``metadata.annotations`` of a Knative
``serving.knative.dev`` Service or Configuration. KServe InferenceServices are not checked:
KServe copies the annotations of an InferenceService's metadata to the revision template
itself, so they belong there.

## Why is this bad?
Knative's autoscaler reads these annotations from the revision, which is stamped from
``spec.template``. On the Service or Configuration itself the webhook rejects them with
``autoscaling annotations must be put under "spec.template.metadata.annotations" to work``;
a chart that puts them there never deploys, and a copy that slipped past the webhook (an old
Knative, a dry run without it) is never read: the revision keeps the default KPA class and
concurrency metric.

## Example
```yaml
apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: llm
  annotations:
    autoscaling.knative.dev/class: hpa.autoscaling.knative.dev   # rejected here
spec:
  template:
    spec:
      containers:
      - image: vllm/vllm-openai
```

## Use instead
```yaml
apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: llm
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/class: hpa.autoscaling.knative.dev
    spec:
      containers:
      - image: vllm/vllm-openai
```

## References
- knative/serving pkg/apis/serving/metadata_validation.go,
  ``ValidateHasNoAutoscalingAnnotation``.
- Knative docs, "Configuring the autoscaler class" (annotations go on the revision template).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from gpulint.ruleapi import (
    Context,
    Finding,
    Inventory,
    KnativeService,
    Severity,
    annotation_text,
    edits,
    is_autoscaling_annotation,
    related,
)

ID = "GL202"
NAME = "knative-annotation-placement"
SEVERITY = Severity.ERROR
SCOPE = "knative"
FIXES = ("safe",)
STAGES = ("workload",)

REJECTION = 'autoscaling annotations must be put under "spec.template.metadata.annotations" to work'


def _plan(ksvc: KnativeService, key: str) -> edits.FixPlan | None:
    """The annotation leaves metadata and goes to the revision template, unless the template
    already sets it (its value is what revisions use today). Several misplaced annotations
    move one per round: their insertions meet at one place."""
    text = annotation_text(ksvc.manifest.annotations[key])
    if text is None:
        return None  # a template action or a structure: by hand
    ops: list[edits.Op] = [edits.Delete(ksvc.manifest, ("metadata", "annotations", key))]
    if key not in ksvc.template_annotations:
        template = ("spec", "template", "metadata", "annotations")
        ops.append(edits.Insert(ksvc.manifest, template, ((key, text),)))
    return edits.safe(*ops)


def check(ksvc: KnativeService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    kind, name = ksvc.manifest.kind, ksvc.name
    for key, value in ksvc.manifest.annotations.items():
        if not is_autoscaling_annotation(key):
            continue
        text = annotation_text(value)
        shown = json.dumps(text if text is not None else "")
        template_value = annotation_text(ksvc.template_annotations.get(key))
        links = []
        if key in ksvc.template_annotations:
            links.append(related(ksvc.manifest, ksvc.annotation_path(key), "template annotation"))
        if template_value is not None and template_value == text:
            where = "; the revision template already sets the same value"
            fix = f"delete {key} from metadata.annotations (the revision template has it)"
        elif template_value is not None:
            where = (
                f"; the revision template sets {json.dumps(template_value)}, which is what "
                "revisions use"
            )
            fix = (
                f"delete {key} from metadata.annotations; if {shown} is the value you meant, "
                f"set it in spec.template.metadata.annotations.{key}"
            )
        else:
            where = ""
            fix = (
                "spec:\n"
                "  template:\n"
                "    metadata:\n"
                "      annotations:\n"
                f"        {key}: {shown}\n"
                f"# and delete {key} from metadata.annotations"
            )
        yield ctx.finding(
            ksvc.manifest,
            ("metadata", "annotations", key),
            f"Knative {kind} {name} has {key} in its own metadata.annotations. The Knative "
            f"webhook rejects it there ({REJECTION}), because the autoscaler reads only the "
            f"revision template's annotations{where}.",
            fix,
            related=links,
            plan=_plan(ksvc, key),
        )
