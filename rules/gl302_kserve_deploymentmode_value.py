"""The KServe deployment-mode annotation has a value KServe does not know.

## What it checks
The value of ``serving.kserve.io/deploymentMode`` on a ``serving.kserve.io``
InferenceService. KServe knows ``Standard``, ``Knative`` and ``ModelMesh``, and the
deprecated aliases ``RawDeployment`` and ``Serverless``, spelled exactly so. Any other value
(``Raw``, ``rawDeployment``, ``serverless``, ``""`` ...) is an error; the two aliases are
reported at info level. Templated values (``{{ .Values.mode }}``) are not judged.

## Why is this bad?
KServe compares the value case-sensitively and, when it does not recognize it, silently
falls back to the cluster default (``deploy.defaultDeploymentMode`` in the
``inferenceservice-config`` ConfigMap, Knative on a default install). No webhook rejects it
and no event says so: a ``rawdeployment`` InferenceService becomes a Knative Service scaled
by the KPA on request concurrency, with scale-to-zero, instead of a Deployment with an HPA.

Since KServe 0.16 ``Standard`` and ``Knative`` are the canonical names and the defaulting
webhook rewrites ``RawDeployment``/``Serverless`` to them. Before 0.16 ``Standard`` and
``Knative`` are themselves unknown (and fall back to the default), so only switch to the new
names once every cluster runs KServe 0.16 or later.

## Example
```yaml
metadata:
  annotations:
    serving.kserve.io/deploymentMode: rawDeployment   # unknown: falls back to Knative
```

## Use instead
```yaml
metadata:
  annotations:
    serving.kserve.io/deploymentMode: Standard   # RawDeployment before KServe 0.16
```

## References
- kserve pkg/controller/v1beta1/inferenceservice/utils/utils.go ``GetDeploymentMode``
  (unknown values fall back to the configured default).
- kserve pkg/constants/constants.go ``ParseDeploymentMode``; PR #4608 (Standard/Knative,
  v0.16).
- kserve pkg/apis/serving/v1beta1/inference_service_defaults.go (aliases are rewritten).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.inventory import Inventory
from gpulint.kserve import DEPRECATED_MODES, MODE_ANNOTATION, MODE_VALUES, InferenceService
from gpulint.model import Finding, Severity
from gpulint.quantity import is_unknown
from gpulint.rule import Context, related

ID = "GL302"
NAME = "kserve-deploymentmode-value"
SEVERITY = Severity.ERROR
SCOPE = "isvc"

_KNOWN = ", ".join(MODE_VALUES)


def check(isvc: InferenceService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    value = isvc.mode_annotation
    if value is None or is_unknown(value):
        return
    path = ("metadata", "annotations", MODE_ANNOTATION)
    if value in DEPRECATED_MODES:
        canonical = DEPRECATED_MODES[value]
        yield ctx.finding(
            isvc.manifest,
            path,
            f"InferenceService {isvc.name} uses the deprecated deployment mode {value}. "
            f"KServe 0.16 and later rewrite it to {canonical}; KServe before 0.16 does not "
            f"know {canonical}, so switch only when every cluster runs 0.16 or later.",
            f"{MODE_ANNOTATION}: {canonical}   # once every cluster runs KServe 0.16 or later",
            severity=Severity.INFO,
        )
        return
    if value in MODE_VALUES:
        return
    suggestion = _suggest(value)
    meant_text = suggestion
    if suggestion in DEPRECATED_MODES:
        canonical = DEPRECATED_MODES[suggestion]
        meant_text = f"{canonical} ({suggestion} before KServe 0.16)"
        suggestion = canonical
    configmap = inventory.kserve_mode_source()
    source = isvc.default_mode_source(configmap)
    links = [related(configmap, ("data", "deploy"), "cluster default")] if configmap else []
    meant = f". Did you mean {meant_text}?" if meant_text else ""
    yield ctx.finding(
        isvc.manifest,
        path,
        f"InferenceService {isvc.name} sets {MODE_ANNOTATION} to {value!r}, which KServe does "
        f"not know. Values are case-sensitive ({_KNOWN}); KServe ignores it without a "
        f"warning and {source}, so it runs in {isvc.mode} mode{meant or '.'}",
        f"{MODE_ANNOTATION}: {suggestion or 'Standard'}" + _version_note(suggestion),
        related=links,
    )


def _suggest(value: str) -> str | None:
    """The known value a misspelling most likely meant."""
    folded = value.strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    for known in MODE_VALUES:
        if known.lower() == folded:
            return known
    if folded in ("raw", "rawdeploy", "deployment", "kubernetes", "k8s"):
        return "Standard"
    if folded in ("kn", "knativeserving", "serverlessdeployment"):
        return "Knative"
    return None


def _version_note(suggestion: str | None) -> str:
    if suggestion is None:
        return "   # or Knative; RawDeployment before KServe 0.16"
    legacy = {canonical: alias for alias, canonical in DEPRECATED_MODES.items()}
    if suggestion in legacy:
        return f"   # {legacy[suggestion]} before KServe 0.16"
    return ""
