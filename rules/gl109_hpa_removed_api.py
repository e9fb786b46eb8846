"""An HPA is written in autoscaling/v2beta1 or v2beta2, which current Kubernetes no longer serves.

## What it checks
A HorizontalPodAutoscaler whose ``apiVersion`` is ``autoscaling/v2beta1`` (not served since
Kubernetes 1.25) or ``autoscaling/v2beta2`` (not served since 1.26). HPAs that KEDA, KServe or
Knative generated (in a cluster dump read through an old version) are left to their owners.

The verdict follows ``kubernetes-version`` in ``.gpulint.yaml`` (default: the newest
release): on a release that still serves the version, the finding is a warning that the
upgrade to the release that removes it will fail.

## Why is this bad?
The API server of a current cluster does not know these versions: ``kubectl apply`` stops with
``no matches for kind "HorizontalPodAutoscaler" in version "autoscaling/v2beta2"`` and a Helm
release fails to install or upgrade, so the workload runs without an autoscaler.
``autoscaling/v2`` has been GA since Kubernetes 1.23. v2beta2 has the same fields as v2;
v2beta1 spells targets differently (``targetAverageValue``, ``metricName``).

## Example
```yaml
apiVersion: autoscaling/v2beta1
kind: HorizontalPodAutoscaler
metadata: {name: triton}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: triton}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods: {metricName: DCGM_FI_DEV_GPU_UTIL, targetAverageValue: "70"}
```

## Use instead
```yaml
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: triton}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: triton}
  maxReplicas: 4
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "70"}
```

## References
- Kubernetes deprecated API migration guide: autoscaling/v2beta1 (removed in v1.25) and
  autoscaling/v2beta2 (removed in v1.26).
- Kubernetes API reference, HorizontalPodAutoscaler autoscaling/v2.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.ruleapi import (
    HPA,
    Context,
    Finding,
    Inventory,
    Release,
    Severity,
    edits,
    is_generated,
    yaml_text,
)

ID = "GL109"
NAME = "hpa-removed-api"
SEVERITY = Severity.ERROR
SCOPE = "hpa"
FIXES = ("safe",)
STAGES = ("autoscaler",)

# The last Kubernetes minor release that served each version is the one before these.
NOT_SERVED_SINCE = {"v2beta1": Release(1, 25), "v2beta2": Release(1, 26)}


def check(hpa: HPA, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    since = NOT_SERVED_SINCE.get(hpa.version)
    if since is None or is_generated(hpa.manifest):
        return
    api_version = hpa.manifest.api_version
    versions = inventory.settings.versions
    failure = f'\'no matches for kind "HorizontalPodAutoscaler" in version "{api_version}"\''
    severity = None
    if versions.kubernetes >= since:
        message = (
            f"HorizontalPodAutoscaler {hpa.name} is written in {api_version}, which Kubernetes "
            f"stopped serving in {since}. Applying it fails with {failure} and the workload "
            "is left without an autoscaler."
        )
    else:
        hint = versions.setting_hint("kubernetes")
        message = (
            f"HorizontalPodAutoscaler {hpa.name} is written in {api_version}, which "
            f"{versions.named('kubernetes')}{' ' + hint if hint else ''} still serves but "
            f"Kubernetes {since} no longer does. After that upgrade, applying it fails with "
            f"{failure} and the workload is left without an autoscaler."
        )
        severity = Severity.WARNING
    api = edits.Replace(hpa.manifest, ("apiVersion",), "autoscaling/v2")
    converted = hpa.metrics_in_v2()
    if hpa.version == "v2beta2" or not converted:
        fix = "apiVersion: autoscaling/v2"
        if hpa.version == "v2beta2":
            fix += "   # the rest of the object is the same in v2"
        plan = edits.safe(api)
    else:
        spec = yaml_text({"spec": {"metrics": converted}})
        fix = (
            "apiVersion: autoscaling/v2\n"
            "# and spec.metrics in the v2 shape (the other fields stay as they are):\n" + spec
        )
        plan = edits.safe(api, edits.Set(hpa.manifest, ("spec", "metrics"), converted))
    yield ctx.finding(hpa.manifest, ("apiVersion",), message, fix, plan=plan, severity=severity)
