"""GL604: can dcgm-exporter run where the GPU workloads run (its nodeSelector, affinity and
tolerations against theirs)?"""

from __future__ import annotations

from gpulint.chain.adapter import describe_document
from gpulint.chain.exporter import (
    OPERATOR_NODE_LABEL,
    DcgmExporter,
    Placement,
    Requirement,
    Taint,
    ignored_placement,
)
from gpulint.chain.problems import Problem, indent
from gpulint.core.message import capitalized
from gpulint.core.quantity import abbreviated
from gpulint.engine.rule import related
from gpulint.input.chartvalues import GPU_OPERATOR, ChartValues
from gpulint.input.document import Document, Path, yaml_text
from gpulint.inventory import Inventory


def placement_problems(exporter: DcgmExporter, inventory: Inventory) -> list[Problem]:
    """GL604: the exporter cannot run on the nodes the unit's GPU workloads run on, or
    gpu-operator values place it through settings no template reads."""
    problems = (
        _ignored_placement_problems(exporter, exporter.chart) if exporter.chart is not None else []
    )
    placements = inventory.pipeline.gpu_placements()
    if not placements:
        return problems
    placement = exporter.placement
    missing: list[Taint] = []
    tainted_owners: list[tuple[Document, Path]] = []
    conflicts: list[str] = []
    conflicting_owners: list[tuple[Document, Path]] = []
    wanted: dict[str, list[str]] = {}
    for group in placements:
        untolerated = [t for t in group.taints if not placement.tolerates(t)]
        for taint in untolerated:
            if taint not in missing:
                missing.append(taint)
        if untolerated:
            tainted_owners.extend(group.owners)
        found = _selector_conflicts(placement, group.placement)
        for text in found:
            if text not in conflicts:
                conflicts.append(text)
        if found:
            conflicting_owners.extend(group.owners)
            _add_wanted(wanted, group.placement, placement)
    if missing:
        shown = ", ".join(str(t) for t in missing)
        problems.append(
            Problem(
                exporter.document,
                placement.tolerations_path,
                f"dcgm-exporter does not tolerate the GPU nodes' taint {abbreviated(shown)}. "
                f"{capitalized(exporter.describe())} does not tolerate {shown}, which the nodes of "
                f"the unit's GPU workloads carry (tolerated by {_owners(tainted_owners)}). No "
                "exporter pod runs on those nodes, so their GPUs report no metrics",
                _tolerations_fix(exporter, missing),
                tuple(related(d, p, "GPU workload") for d, p in tainted_owners[:3]),
            )
        )
    if conflicts:
        problems.append(
            Problem(
                exporter.document,
                placement.node_selector_path,
                "dcgm-exporter is kept off the GPU nodes by its nodeSelector. "
                f"{capitalized(exporter.describe())} is kept off the nodes of the unit's GPU "
                "workloads: "
                f"{'; '.join(conflicts)} ({_owners(conflicting_owners)}). No exporter pod runs "
                "where those GPUs are, so they report no metrics",
                _selector_fix(wanted),
                tuple(related(d, p, "GPU workload") for d, p in conflicting_owners[:3]),
            )
        )
    return problems


def _ignored_placement_problems(exporter: DcgmExporter, chart: ChartValues) -> list[Problem]:
    """gpu-operator values that set a placement no template of the chart reads."""
    problems = []
    for path in ignored_placement(chart):
        section, key = path[-2], path[-1]
        problems.append(
            Problem(
                exporter.document,
                path,
                f"gpu-operator values set {section}.{key}, which places nothing. "
                f"{capitalized(chart.describe())} set it, but gpu-operator's "
                f"ClusterPolicy has no {key} for {section}"
                + (
                    " (dcgm is the standalone DCGM host engine, off by default, not the exporter)"
                    if section == "dcgm"
                    else ""
                )
                + ". gpu-operator runs dcgm-exporter on every node it labels "
                f"{OPERATOR_NODE_LABEL}=true, which is every node with an NVIDIA GPU",
                f"# delete {section}.{key}; to keep dcgm-exporter off a GPU node, label it:\n"
                f"kubectl label node <node> {OPERATOR_NODE_LABEL}=false",
            )
        )
    return problems


def _add_wanted(wanted: dict[str, list[str]], workloads: Placement, exporter: Placement) -> None:
    """The node labels the GPU workloads select on the keys the exporter selects on too."""
    for key, value in workloads.node_selector.items():
        if key in exporter.node_selector and value is not None:
            wanted.setdefault(key, [])
            if value not in wanted[key]:
                wanted[key].append(value)


def _owners(owners: list[tuple[Document, Path]]) -> str:
    names = []
    for document, _ in owners:
        ref = describe_document(document)
        text = str(ref)
        if text not in names:
            names.append(text)
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _selector_conflicts(exporter: Placement, workload: Placement) -> list[str]:
    if exporter.follows_gpu_nodes:
        return []
    found = []
    for key, value in exporter.node_selector.items():
        theirs = workload.node_selector.get(key)
        if value is not None and theirs is not None and theirs != value:
            found.append(f"its nodeSelector wants {key}={value}, the workloads' {key}={theirs}")
    if exporter.terms and all(_excludes(term, workload.node_selector) for term in exporter.terms):
        found.append(
            "its required node affinity matches no node the workloads' nodeSelector "
            f"({', '.join(f'{k}={v}' for k, v in sorted(workload.node_selector.items(), key=str))})"
            " allows"
        )
    return found


def _excludes(term: list[Requirement], labels: dict[str, str | None]) -> bool:
    """Does this node selector term rule out every node with ``labels``?"""
    for requirement in term:
        if requirement.key not in labels:
            continue
        value = labels[requirement.key]
        if value is None:
            continue
        if requirement.operator == "In" and value not in requirement.values:
            return True
        if requirement.operator == "NotIn" and value in requirement.values:
            return True
        if requirement.operator == "DoesNotExist":
            return True
    return False


def _tolerations_fix(exporter: DcgmExporter, missing: list[Taint]) -> str:
    entries = [
        {
            k: v
            for k, v in (
                ("key", t.key),
                ("operator", "Equal" if t.value is not None else "Exists"),
                ("value", t.value),
                ("effect", t.effect),
            )
            if v is not None
        }
        for t in exporter.placement.tolerations
    ]
    for taint in missing:
        entry = {"key": taint.key, "operator": "Exists", "effect": taint.effect}
        if entry not in entries:
            entries.append(entry)
    text = yaml_text({"tolerations": entries})
    if exporter.kind == GPU_OPERATOR:
        return "# the tolerations of every gpu-operator DaemonSet:\ndaemonsets:\n" + indent(text, 2)
    return text


def _selector_fix(wanted: dict[str, list[str]]) -> str:
    if all(len(values) == 1 for values in wanted.values()):
        return yaml_text({"nodeSelector": {k: v[0] for k, v in wanted.items()}})
    expressions = [{"key": k, "operator": "In", "values": v} for k, v in wanted.items()]
    return "# the GPU workloads run on several values: drop the nodeSelector entry and use\n" + (
        yaml_text(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": expressions}]
                        }
                    }
                }
            }
        )
    )
