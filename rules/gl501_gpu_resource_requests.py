"""A GPU resource is requested without a limit, unequal to it, fractionally, or as zero.

## What it checks
For every container and init container of a workload, Knative Service or KServe
InferenceService component, and every GPU resource name (``nvidia.com/gpu``,
``nvidia.com/mig-*``, ``nvidia.com/gpu.shared``, ``amd.com/gpu``, ``gpu.intel.com/*`` and the
names configured under ``gpu-resources``):

* a request without a limit;
* a request that differs from the limit;
* a count that is not a whole number (``0.5``, ``500m``), negative, not a quantity, or
  beyond the largest quantity Kubernetes holds (2^63-1, so ``1e3000000`` is out of range);
* a count of zero (warning).

Templated counts (``{{ .Values.gpus }}``, ``${gpu_count}``) are not judged. The LLM serving
kinds are judged through the containers their controllers make; a VLLMRuntime writes one count,
``deploymentConfig.resources.gpu``, that its operator sets as the request and the limit both
(production-stack operator/internal/controller/vllmruntime_controller.go), so only that
count's value is judged, where it is written.

## Why is this bad?
GPUs are extended resources: they cannot be overcommitted or split, so Kubernetes wants them
in ``limits`` (the request defaults to the limit). The API server rejects a request without
a limit ("Limit must be set for non overcommitable resources"), a request that differs from
the limit ("must be equal to nvidia.com/gpu limit"), and a fraction ("must be an integer").
A rendered chart with any of these never creates its pods; an HPA or KServe then has nothing
to scale.

A count of zero is accepted but reserves nothing, while the name still makes the container
look like a GPU workload; and a container without a device-plugin allocation can see every GPU
of the node when its image sets ``NVIDIA_VISIBLE_DEVICES=all`` (CUDA images do).

## Example
```yaml
resources:
  requests:
    nvidia.com/gpu: 1        # no limit: rejected
```

## Use instead
```yaml
resources:
  limits:
    nvidia.com/gpu: 1        # the request defaults to the limit
```
To share a GPU, use MIG profiles (``nvidia.com/mig-1g.5gb``) or the device plugin's
time-slicing, not fractions.

## References
- Kubernetes docs, "Schedule GPUs" (GPUs only in limits; request = limit; no fractions).
- kubernetes pkg/apis/core/validation/validation.go (the messages above).
- NVIDIA/k8s-device-plugin README (MIG strategies, time-slicing, visibility without a request).
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import ROUND_CEILING
from typing import Any, NamedTuple

from gpulint.ruleapi import (
    KNATIVE_SERVING_GROUP,
    Container,
    Context,
    Finding,
    Inventory,
    PodOwner,
    PodTemplate,
    Quantity,
    QuantityError,
    QuantityOutOfRange,
    Severity,
    abbreviated,
    format_number,
    is_unknown,
    parse_quantity,
    shown_value,
    try_quantity,
)

ID = "GL501"
NAME = "gpu-resource-requests"
SEVERITY = Severity.ERROR
SCOPE = "pod-owner"
STAGES = ("workload",)

_MISSING = object()
# Resource and container names in a headline are cut at these many characters.
NAME_CHARS = 32
PART_CHARS = 48


def check(owner: PodOwner, inventory: Inventory, ctx: Context) -> Iterator[Finding]:
    for template in owner.templates:
        for container in template.containers:
            resources = container.resources
            requests = resources.get("requests")
            limits = resources.get("limits")
            requests = requests if isinstance(requests, dict) else {}
            limits = limits if isinstance(limits, dict) else {}
            for name in dict.fromkeys([*requests, *limits]):
                if isinstance(name, str) and inventory.gpu_names.is_gpu(name):
                    yield from _check_resource(
                        owner,
                        template,
                        container,
                        name,
                        requests.get(name, _MISSING),
                        limits.get(name, _MISSING),
                        ctx,
                    )


def _check_resource(
    owner: PodOwner,
    template: PodTemplate,
    container: Container,
    name: str,
    request: Any,
    limit: Any,
    ctx: Context,
) -> Iterator[Finding]:
    who = _describe(owner, template, container)
    res = abbreviated(name, NAME_CHARS)
    if container.count_at is not None:
        yield from _check_count(owner, who, container.count_at, limit, ctx)
        return
    base = (*container.path, "resources")
    request_path = (*base, "requests", name)
    limit_path = (*base, "limits", name)
    if limit is _MISSING:
        if is_unknown(request):
            return
        problem = _problem(request)
        extra = f"; the count {problem[1]}" if problem and problem[0] != "zero" else ""
        if problem is not None and problem[0] == "zero":
            fix = f"delete {name} from resources.requests (a zero request reserves nothing)"
        else:
            fix = (
                f"resources:\n  limits:\n    {name}: {_whole(request)}\n"
                f"# and delete {name} from resources.requests"
            )
        yield ctx.finding(
            owner.manifest,
            request_path,
            f"{who.headline} requests {res} without a limit. The API server rejects a request "
            f'of {name}: {_shown(request)} without a limit ("Limit must be set for non '
            f'overcommitable resources"); GPUs go in limits and the request defaults to the '
            f"limit{extra}.",
            fix,
        )
        return
    limit_problem = None if is_unknown(limit) else _problem(limit)
    if limit_problem is not None:
        yield _value_finding(owner, who, name, "limits", limit, limit_path, limit_problem, ctx)
    if request is _MISSING or is_unknown(request):
        return
    request_problem = _problem(request)
    if request_problem is not None and request_problem[0] != "zero":
        yield _value_finding(
            owner, who, name, "requests", request, request_path, request_problem, ctx
        )
        return
    if limit_problem is not None or is_unknown(limit):
        return
    wanted, have = try_quantity(limit), try_quantity(request)
    if wanted is not None and have is not None and wanted.value != have.value:
        shown_limit = format_number(wanted.value)
        yield ctx.finding(
            owner.manifest,
            request_path,
            f"{who.headline} requests a different {res} count than its limit. It requests "
            f"{name}: {_shown(request)} but limits it to {shown_limit}: the API server rejects "
            f'it ("must be equal to {name} limit of {shown_limit}"); GPUs cannot be '
            "overcommitted, so the request must equal the limit.",
            f"resources:\n  limits:\n    {name}: {shown_limit}\n"
            f"# and delete {name} from resources.requests (it defaults to the limit)",
        )


def _check_count(
    owner: PodOwner, who: _Who, path: tuple[str | int, ...], count: Any, ctx: Context
) -> Iterator[Finding]:
    """One count the controller writes as request and limit both (a VLLMRuntime's
    deploymentConfig.resources.gpu): only its value can be wrong, and it is fixed there."""
    problem = None if is_unknown(count) else _problem(count)
    if problem is None:
        return
    kind, reason = problem
    field = str(path[-1])
    written = ".".join(str(step) for step in path)
    headline = f"{who.kind} {abbreviated(who.name)}: {written} {_SHORT[kind]}."
    if kind == "zero":
        yield ctx.finding(
            owner.manifest,
            path,
            f"{headline} Its value {_shown(count)} reserves no GPU, yet the controller still "
            "declares the container a GPU consumer, and without a device-plugin allocation an "
            "image that sets NVIDIA_VISIBLE_DEVICES=all sees every GPU of the node.",
            f'{field}: "1"   # or delete {field} if the model server needs no GPU',
            severity=Severity.WARNING,
        )
        return
    yield ctx.finding(
        owner.manifest,
        path,
        f"{headline} Its value {_shown(count)} {reason}, and the controller writes it as the "
        "container's GPU request and limit, so the workload it makes is refused; a device "
        "plugin hands out whole devices.",
        f'{field}: "{_whole(count)}"   # whole GPUs',
    )


def _value_finding(
    owner: PodOwner,
    who: _Who,
    name: str,
    field: str,
    value: Any,
    path: tuple[str | int, ...],
    problem: tuple[str, str],
    ctx: Context,
) -> Finding:
    kind, reason = problem
    headline = f"{who.headline}: {field} {abbreviated(name, NAME_CHARS)} {_SHORT[kind]}."
    if kind == "zero":
        return ctx.finding(
            owner.manifest,
            path,
            f"{headline} Its value {_shown(value)} reserves no GPU, yet the container is still "
            "declared as a GPU consumer, and without a device-plugin allocation an image that "
            "sets NVIDIA_VISIBLE_DEVICES=all sees every GPU of the node.",
            f"delete {name} from resources.{field} if the container needs no GPU "
            "(and set the env NVIDIA_VISIBLE_DEVICES=void for CUDA images), "
            f"or ask for at least 1",
            severity=Severity.WARNING,
        )
    if kind == "out-of-range":
        return ctx.finding(
            owner.manifest,
            path,
            f"{headline} Its value {_shown(value)} {reason}.",
            f"{name}: 1   # the number of devices each container needs",
        )
    if name.startswith("nvidia.com/mig-"):
        hint = "whole MIG instances; for less, choose a smaller MIG profile"
    elif name == "nvidia.com/gpu":
        hint = "whole GPUs; to share one, use MIG (nvidia.com/mig-1g.5gb) or time-slicing"
    else:
        hint = "whole devices"
    return ctx.finding(
        owner.manifest,
        path,
        f"{headline} Its value {_shown(value)} {reason}; a device plugin hands out whole devices.",
        f"{name}: {_whole(value)}   # {hint}",
    )


# What is wrong with a GPU count, in a headline, by the kind ``_problem`` names.
_SHORT = {
    "out-of-range": "is out of range",
    "invalid": "is not a quantity",
    "negative": "is negative",
    "fraction": "is not a whole number",
    "zero": "is zero",
}


def _problem(value: Any) -> tuple[str, str] | None:
    """What is wrong with one GPU count: (kind, reason as the API server puts it)."""
    try:
        quantity = parse_quantity(value)
    except QuantityOutOfRange:
        return "out-of-range", (
            "is out of range: a Kubernetes quantity holds at most 2^63-1, and a larger one is "
            "capped or overflows, so the count is not the number written"
        )
    except QuantityError:
        return "invalid", "is not a valid Kubernetes quantity, so the API server rejects it"
    if quantity.value < 0:
        return "negative", 'is negative (the API server says "must be greater than or equal to 0")'
    if not quantity.is_integer:
        return "fraction", 'is not a whole number (the API server says "must be an integer")'
    if quantity.value == 0:
        return "zero", "is zero"
    return None


def _whole(value: Any) -> str:
    """The count to suggest: the value rounded up to a whole device, at least 1."""
    quantity: Quantity | None = try_quantity(value)
    if quantity is None or quantity.value <= 1:
        return "1"
    return format_number(quantity.value.to_integral_value(rounding=ROUND_CEILING))


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    return shown_value(value)


class _Who(NamedTuple):
    """The container a finding is about: ``part`` of the object ``kind`` ``name``."""

    kind: str
    name: str
    part: str

    @property
    def headline(self) -> str:
        """Object first, names cut, for a headline that stays one short line."""
        return f"{self.kind} {abbreviated(self.name)}: {abbreviated(self.part, PART_CHARS)}"


def _describe(owner: PodOwner, template: PodTemplate, container: Container) -> _Who:
    manifest = owner.manifest
    where = f"{manifest.namespace}/" if manifest.namespace else ""
    kind = f"Knative {manifest.kind}" if manifest.group == KNATIVE_SERVING_GROUP else manifest.kind
    if isinstance(container.path[-1], str):
        # A KServe model-format shorthand (spec.predictor.model): one container, no name.
        part = ".".join(str(step) for step in container.path)
        return _Who(kind, f"{where}{manifest.name}", part)
    role = "init container" if container.init else "container"
    name = container.name
    if name.startswith("#"):  # unnamed, as Knative allows: name it by its position
        role = "initContainers" if container.init else "containers"
        name = f"[{name[1:]}]"
    else:
        name = f" {name}"
    label = "" if template.label in ("pod template", "pod") else f" ({template.label})"
    return _Who(kind, f"{where}{manifest.name}", f"{role}{name}{label}")
