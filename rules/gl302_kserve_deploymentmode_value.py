"""The KServe deployment-mode annotation has a value KServe does not know.

## What it checks
The value of ``serving.kserve.io/deploymentMode`` on a ``serving.kserve.io``
InferenceService. KServe knows ``Standard``, ``Knative`` and ``ModelMesh``, and the
deprecated aliases ``RawDeployment`` and ``Serverless``, spelled exactly so. Any other value
(``Raw``, ``rawDeployment``, ``serverless``, ``""`` ...) is an error. The names are judged
against ``kserve.version`` in ``.gpulint.yaml`` (default: the newest KServe, 0.20):
``Standard``/``Knative`` on KServe before 0.16 are errors (that KServe does not know them),
``RawDeployment``/``Serverless`` from 0.16 on are reported at info level, and fixes write
the names of that release. Templated values (``{{ .Values.mode }}``) are not judged.

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

from gpulint.ruleapi import (
    DEPRECATED_MODES,
    KNATIVE,
    MODE_ANNOTATION,
    MODE_VALUES,
    STANDARD,
    Context,
    Finding,
    InferenceService,
    Inventory,
    Severity,
    is_unknown,
    mode_note,
    mode_spelling,
    related,
    standard_mode_fix,
)

ID = "GL302"
NAME = "kserve-deploymentmode-value"
SEVERITY = Severity.ERROR
SCOPE = "isvc"
STAGES = ("workload",)

_KNOWN = ", ".join(MODE_VALUES)


def check(isvc: InferenceService, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    value = isvc.mode_annotation
    if value is None or is_unknown(value):
        return
    version = inventory.settings.kserve_version
    note = mode_note(version, inventory.settings.versions.defaulted("kserve"))
    path = ("metadata", "annotations", MODE_ANNOTATION)
    configmap = inventory.kserve_mode_source()
    links = [related(configmap, ("data", "deploy"), "cluster default")] if configmap else []
    if value in MODE_VALUES:
        spelled = mode_spelling(value, version)
        if spelled == value or version is None:
            return
        if value in DEPRECATED_MODES:
            yield ctx.finding(
                isvc.manifest,
                path,
                f"InferenceService {isvc.name} uses the deprecated deployment mode {value}. "
                f"KServe 0.16 and later rewrite it to {spelled}, the name to write on "
                f"{note}.",
                f"{MODE_ANNOTATION}: {spelled}",
                severity=Severity.INFO,
            )
            return
        # Standard or Knative on a KServe that predates them.
        source = isvc.default_mode_source(configmap)
        yield ctx.finding(
            isvc.manifest,
            path,
            f"InferenceService {isvc.name} sets deployment mode {value}, which its KServe "
            f"release does not know. The name exists from KServe 0.16, and the clusters run "
            f"{note}: KServe ignores it without a warning and {source}, so it "
            f"runs in {isvc.mode} mode.",
            _fix(
                isvc,
                inventory,
                MODE_VALUES[value],
                f"{MODE_ANNOTATION}: {spelled}   # {note}",
            ),
            related=links,
        )
        return
    suggestion = _suggest(value)
    meant = ""
    if suggestion:
        written = mode_spelling(suggestion, version)
        also = f" ({written}: {note})" if written != suggestion else ""
        meant = f". Did you mean {suggestion}{also}?"
    spelled = mode_spelling(suggestion or STANDARD, version)
    source = isvc.default_mode_source(configmap)
    yield ctx.finding(
        isvc.manifest,
        path,
        f"InferenceService {isvc.name} sets {MODE_ANNOTATION} to {value!r}, which KServe does "
        f"not know. Values are case-sensitive ({_KNOWN}); KServe ignores it without a "
        f"warning and {source}, so it runs in {isvc.mode} mode{meant or '.'}",
        _fix(
            isvc,
            inventory,
            MODE_VALUES.get(suggestion or STANDARD, suggestion or STANDARD),
            f"{MODE_ANNOTATION}: {spelled}   # {note}",
        ),
        related=links,
    )


def _fix(isvc: InferenceService, inventory: Inventory, meant: str, line: str) -> str:
    """The annotation as KServe reads it; when that switches the InferenceService to
    Standard mode, with what Standard mode needs of it (``standard_mode_fix``)."""
    if meant == STANDARD and isvc.mode != STANDARD:
        return standard_mode_fix(isvc, inventory, line)
    return line


def _suggest(value: str) -> str | None:
    """The known value a misspelling most likely meant."""
    folded = value.strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    for known in MODE_VALUES:
        if known.lower() == folded:
            return known
    if folded in ("raw", "rawdeploy", "deployment", "kubernetes", "k8s"):
        return STANDARD
    if folded in ("kn", "knativeserving", "serverlessdeployment"):
        return KNATIVE
    return None
