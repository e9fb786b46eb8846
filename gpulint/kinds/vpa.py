"""VerticalPodAutoscaler (autoscaling.k8s.io/v1): what it resizes, and whether it evicts.

Facts (kubernetes/autoscaler vertical-pod-autoscaler, commit 55c37cd):

* ``spec.updatePolicy.updateMode`` is ``Off``, ``Initial``, ``Recreate``,
  ``InPlaceOrRecreate``, ``InPlace`` or ``Auto``; unset, it is ``Recreate``. ``Auto`` is
  deprecated and does what ``Recreate`` does; ``InPlaceOrRecreate`` resizes in place and
  falls back to eviction; ``InPlace`` never evicts; ``Initial`` sets requests only when a pod
  is created; ``Off`` only recommends (pkg/apis/autoscaling.k8s.io/v1/types.go ``UpdateMode``,
  docs/quickstart.md).
* ``resourcePolicy.containerPolicies[]``: one per ``containerName`` and one ``"*"`` for the
  containers without their own; ``mode: "Off"`` leaves a container alone;
  ``controlledResources`` defaults to ``[cpu, memory]`` (types.go ``ContainerResourcePolicy``).
  The recommender translates only ``cpu`` and ``memory`` and drops any other name
  (pkg/recommender/model/types.go ``ResourceNamesApiToModel``); the admission controller
  refuses any other name on a new object (pkg/admission-controller/resource/vpa/
  validation.go ``validateVPASpecResourcePolicy``).
* ``updatePolicy.minReplicas`` overrides the updater's ``--min-replicas`` (default 2): the
  updater evicts nothing from a workload with fewer live pods
  (pkg/updater/restriction/pods_restriction_factory.go, docs/flags.md).

A PodDisruptionBudget (policy/v1) bounds what the updater may evict, since it evicts through
the Eviction API (pods_eviction_restriction.go ``Evict``: ``EvictV1``); ``budgets_covering``
finds the budgets that select a pod template.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from gpulint.core.selectors import LabelSelector, labels_of
from gpulint.input.document import Manifest, Path, as_dict, as_list
from gpulint.kinds.scaletarget import TargetRef
from gpulint.kinds.view import KindView
from gpulint.kinds.workload import PodTemplate

VPA_KIND = "VerticalPodAutoscaler"
VPA_GROUP = "autoscaling.k8s.io"
DEFAULT_MODE = "Recreate"
# Modes in which the updater changes running pods, and those in which it may evict them.
UPDATING_MODES = frozenset({"Auto", "Recreate", "InPlaceOrRecreate", "InPlace"})
EVICTING_MODES = frozenset({"Auto", "Recreate", "InPlaceOrRecreate"})
# The only resources VPA recommends and sets.
RESIZABLE = ("cpu", "memory")
# The updater's --min-replicas default (docs/flags.md).
UPDATER_MIN_REPLICAS = 2
PDB_KIND = "PodDisruptionBudget"


class ControlledResource(NamedTuple):
    name: str
    path: Path


class ContainerPolicy(NamedTuple):
    """One ``resourcePolicy.containerPolicies`` entry."""

    container: str  # a container name, or "*"
    mode: str  # Auto | Off
    controlled: tuple[ControlledResource, ...] | None  # None: not written (cpu and memory)
    path: Path
    mode_written: bool = False

    @property
    def resources(self) -> frozenset[str]:
        """What VPA sets for the containers of this policy."""
        if self.mode == "Off":
            return frozenset()
        if self.controlled is None:
            return frozenset(RESIZABLE)
        return frozenset(r.name for r in self.controlled if r.name in RESIZABLE)


class VPA(KindView):
    """A VerticalPodAutoscaler. Of the kinds protocol it answers ``target_refs`` alone: it sets
    no replicas and makes no pods, and admission re-judges it when its workload or an
    autoscaler on it changes."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        spec = as_dict(manifest.data.get("spec"))
        self.spec = spec
        ref = as_dict(spec.get("targetRef"))
        self.target_ref: TargetRef | None = None
        if isinstance(ref.get("name"), str) and isinstance(ref.get("kind"), str):
            api_version = ref.get("apiVersion")
            self.target_ref = TargetRef(
                ref["kind"],
                ref["name"],
                api_version if isinstance(api_version, str) else "",
                ("spec", "targetRef"),
            )
        policy = as_dict(spec.get("updatePolicy"))
        written = policy.get("updateMode")
        self.written_mode: str | None = written if isinstance(written, str) else None
        self.mode_path: Path = (
            ("spec", "updatePolicy", "updateMode")
            if "updateMode" in policy
            else ("spec", "updatePolicy")
            if "updatePolicy" in spec
            else ("spec",)
        )
        minimum = policy.get("minReplicas")
        self.min_replicas: int | None = (
            minimum if isinstance(minimum, int) and not isinstance(minimum, bool) else None
        )
        self.container_policies: list[ContainerPolicy] = _container_policies(spec)

    def target_refs(self) -> list[TargetRef]:
        return [self.target_ref] if self.target_ref is not None else []

    @property
    def update_mode(self) -> str:
        """The mode the updater applies (``Recreate`` when none is written)."""
        return self.written_mode if self.written_mode is not None else DEFAULT_MODE

    @property
    def updates_running_pods(self) -> bool:
        return self.update_mode in UPDATING_MODES

    @property
    def may_evict(self) -> bool:
        return self.update_mode in EVICTING_MODES

    def describe_mode(self) -> str:
        if self.written_mode is None:
            return f'updateMode "{DEFAULT_MODE}" (the default: none is written)'
        if self.written_mode == "Auto":
            return 'updateMode "Auto" (deprecated; it does what "Recreate" does)'
        return f'updateMode "{self.written_mode}"'

    def policy_for(self, container: str) -> ContainerPolicy | None:
        """The policy that applies to a container: its own, else the ``"*"`` one."""
        default = None
        for policy in self.container_policies:
            if policy.container == container:
                return policy
            if policy.container == "*" and default is None:
                default = policy
        return default

    def resized(self, container: str) -> frozenset[str]:
        """The resources VPA sets on a container (cpu and memory unless a policy narrows it)."""
        policy = self.policy_for(container)
        return frozenset(RESIZABLE) if policy is None else policy.resources

    def resized_in(self, templates: Iterable[PodTemplate]) -> dict[str, frozenset[str]]:
        """Per container of ``templates`` (init containers aside), what VPA sets on it."""
        found: dict[str, frozenset[str]] = {}
        for template in templates:
            for container in template.containers:
                if not container.init:
                    found[container.name] = self.resized(container.name)
        return found

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"VerticalPodAutoscaler {where}{self.name}"


def _container_policies(spec: dict[str, Any]) -> list[ContainerPolicy]:
    found = []
    policies = as_dict(spec.get("resourcePolicy")).get("containerPolicies")
    for index, entry in enumerate(as_list(policies)):
        if not isinstance(entry, dict):
            continue
        path: Path = ("spec", "resourcePolicy", "containerPolicies", index)
        name = entry.get("containerName")
        mode = entry.get("mode")
        controlled: tuple[ControlledResource, ...] | None = None
        if isinstance(entry.get("controlledResources"), list):
            controlled = tuple(
                ControlledResource(str(item), (*path, "controlledResources", i))
                for i, item in enumerate(entry["controlledResources"])
                if isinstance(item, str)
            )
        found.append(
            ContainerPolicy(
                name if isinstance(name, str) else "",
                mode if isinstance(mode, str) else "Auto",
                controlled,
                path,
                "mode" in entry,
            )
        )
    return found


def is_vpa(manifest: Manifest) -> bool:
    return manifest.kind == VPA_KIND and manifest.group == VPA_GROUP


def budgets_covering(
    template: PodTemplate, namespace: str | None, budgets: Iterable[Manifest]
) -> list[Manifest]:
    """The PodDisruptionBudgets of ``namespace`` whose selector matches the template's pods.

    policy/v1: an empty selector selects every pod of the namespace, a missing one none;
    policy/v1beta1 (removed in Kubernetes 1.25): an empty one selects none too (kubernetes
    api/policy/v1/types.go ``PodDisruptionBudgetSpec.Selector``). A match that depends on a
    value gpulint cannot read (a template) counts as a match: rules report only what is
    certain."""
    labels = labels_of(template.labels)
    found = []
    for budget in budgets:
        if budget.kind != PDB_KIND or budget.group != "policy":
            continue
        if (budget.namespace or "") != (namespace or ""):
            continue
        selector = LabelSelector.of(as_dict(budget.data.get("spec")).get("selector"))
        if selector is None or not selector.valid:
            continue
        if selector.is_empty and budget.api_version != "policy/v1":
            continue
        if selector.matches(labels) is not False:
            found.append(budget)
    return found
