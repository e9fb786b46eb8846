"""dcgm-exporter as deployed: a DaemonSet written out, or one gpu-operator or the
dcgm-exporter chart makes; its pods' labels and ports, and where the scheduler may put them.

Placement is the pod's ``nodeSelector`` (every pair on the node), required node affinity
(``nodeSelectorTerms``: any term, all its expressions) and ``tolerations`` (a pod lands on a
node only if it tolerates each of its NoSchedule/NoExecute taints; an ``Exists`` toleration
without a key tolerates every taint) (Kubernetes docs, "Assigning Pods to Nodes", "Taints and
Tolerations").

* gpu-operator runs dcgm-exporter with ``nodeSelector: nvidia.com/gpu.deploy.dcgm-exporter:
  "true"``, a label its node-labeling controller sets on every node with
  ``nvidia.com/gpu.present=true`` (from NFD's ``feature.node.kubernetes.io/pci-10de.present``),
  so it follows the GPU nodes; its tolerations are ``daemonsets.tolerations`` (default:
  ``nvidia.com/gpu`` Exists NoSchedule), which replace the DaemonSet's own
  (assets/state-dcgm-exporter/0800_daemonset.yaml; controllers/state_manager.go;
  object_controls.go ``applyCommonDaemonsetConfig``). ClusterPolicy has no node selector for
  ``dcgm`` or ``dcgmExporter`` (api/nvidia/v1/clusterpolicy_types.go ``DCGMSpec``,
  ``DCGMExporterSpec``, ``DaemonsetsSpec``) and the chart's clusterpolicy.yaml renders none:
  ``dcgm.nodeSelector`` places nothing. A node is kept out with the label
  ``nvidia.com/gpu.deploy.dcgm-exporter=false`` (or ``nvidia.com/gpu.deploy.operands=false``).
* the dcgm-exporter chart takes ``nodeSelector`` (default ``{}``), ``affinity`` (``{}``) and
  ``tolerations`` (default: only ``node-role.kubernetes.io/control-plane`` NoSchedule), and
  serves ``service.port`` (9400) as container port ``metrics`` (deployment/values.yaml,
  templates/daemonset.yaml).

It maps GPUs to the pods that hold them through the kubelet's pod-resources API: a GPU a
device plugin allocated always, a GPU allocated through Dynamic Resource Allocation only with
``--kubernetes-enable-dra`` (env ``KUBERNETES_ENABLE_DRA``, default false; the chart's
``kubernetesDRA.enabled``, default false, sets the env), and then only for the driver
``gpu.nvidia.com`` (NVIDIA/dcgm-exporter@d5e5f51: pkg/cmd/app.go ``CLIKubernetesEnableDRA``,
internal/pkg/transformation/kubernetes.go ``toDeviceToPodsDRA``, const.go
``DRAGPUDriverName``, deployment/values.yaml ``kubernetesDRA``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.chain.monitors import (
    OPERATOR_EXPORTER,
    dcgm_chart_fullname,
    dcgm_chart_namespace,
    dcgm_chart_selector_labels,
)
from gpulint.chain.scrapelabels import mentions_dcgm
from gpulint.core.selectors import label_value, labels_of
from gpulint.input.chartvalues import DCGM_EXPORTER, GPU_OPERATOR, ChartValues
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list
from gpulint.kinds.workload import pod_templates

OPERATOR_NODE_LABEL = "nvidia.com/gpu.deploy.dcgm-exporter"
OPERATOR_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
DCGM_CHART_TOLERATIONS = (
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
)
DCGM_PORT = 9400
# gpu-operator values that look like node placement for dcgm-exporter and place nothing.
OPERATOR_IGNORED_PLACEMENT = (
    ("dcgm", "nodeSelector"),
    ("dcgm", "affinity"),
    ("dcgm", "tolerations"),
    ("dcgmExporter", "nodeSelector"),
    ("dcgmExporter", "affinity"),
    ("dcgmExporter", "tolerations"),
    ("daemonsets", "nodeSelector"),
    ("daemonsets", "affinity"),
)


class Toleration(NamedTuple):
    key: str | None
    operator: str  # Equal | Exists
    value: str | None
    effect: str | None  # None: every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and taint.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return self.key is None or self.key == taint.key
        if self.key != taint.key:
            return False
        return taint.value is None or self.value == taint.value

    def __str__(self) -> str:
        text = self.key or "<every key>"
        if self.operator == "Equal" and self.value is not None:
            text += f"={self.value}"
        return f"{text}:{self.effect}" if self.effect else text


class Taint(NamedTuple):
    """A taint the nodes of a GPU workload carry, as its tolerations tell."""

    key: str
    value: str | None
    effect: str

    def __str__(self) -> str:
        value = f"={self.value}" if self.value is not None else ""
        return f"{self.key}{value}:{self.effect}"


class Requirement(NamedTuple):
    """One ``matchExpressions`` entry of a node selector term."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...]


def tolerations_of(data: Any) -> list[Toleration]:
    found = []
    for item in as_list(data):
        entry = as_dict(item)
        key = entry.get("key")
        operator = entry.get("operator") or "Equal"
        effect = entry.get("effect")
        found.append(
            Toleration(
                key if isinstance(key, str) and key else None,
                str(operator),
                label_value(entry.get("value")),
                effect if isinstance(effect, str) and effect else None,
            )
        )
    return found


def required_terms(affinity: Any) -> list[list[Requirement]] | None:
    """Required node affinity terms; None when there is none."""
    node = as_dict(as_dict(affinity).get("nodeAffinity"))
    required = as_dict(node.get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = as_list(required.get("nodeSelectorTerms"))
    if not terms:
        return None
    found = []
    for term in terms:
        requirements = []
        for item in as_list(as_dict(term).get("matchExpressions")):
            entry = as_dict(item)
            if isinstance(entry.get("key"), str) and isinstance(entry.get("operator"), str):
                values = tuple(
                    v for v in (label_value(x) for x in as_list(entry.get("values"))) if v
                )
                requirements.append(Requirement(entry["key"], entry["operator"], values))
        found.append(requirements)
    return found


class Placement(NamedTuple):
    """Where a pod may run, and where each part is written (or would be added)."""

    node_selector: dict[str, str | None]
    terms: list[list[Requirement]] | None
    tolerations: list[Toleration]
    node_selector_path: Path
    tolerations_path: Path
    follows_gpu_nodes: bool = False  # gpu-operator labels every GPU node for it

    def tolerates(self, taint: Taint) -> bool:
        return any(t.tolerates(taint) for t in self.tolerations)


def placement_of_pod(spec: Any, spec_path: Path) -> Placement:
    pod = as_dict(spec)
    return Placement(
        labels_of(pod.get("nodeSelector")),
        required_terms(pod.get("affinity")),
        tolerations_of(pod.get("tolerations")),
        (*spec_path, "nodeSelector") if "nodeSelector" in pod else spec_path,
        (*spec_path, "tolerations") if "tolerations" in pod else spec_path,
    )


class ContainerPort(NamedTuple):
    name: str | None
    number: int | None


class DraMapping(NamedTuple):
    """Whether the exporter labels GPUs allocated through DRA with their pods: True, False,
    or None (gpulint cannot tell); where that is said, or would be, and how it is spelled."""

    enabled: bool | None
    path: Path
    setting: str


DRA_FLAG = "--kubernetes-enable-dra"
DRA_ENV = "KUBERNETES_ENABLE_DRA"
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _go_bool(value: Any) -> bool | None:
    text = str(value).strip() if isinstance(value, str | bool | int) else ""
    if isinstance(value, bool):
        return value
    return True if text in _GO_TRUE else False if text in _GO_FALSE else None


def _daemonset_dra(template: Any, spec_path: Path) -> DraMapping:
    """``--kubernetes-enable-dra`` in a container's command or args, or the env variable
    (the flag wins, as urfave/cli reads it)."""
    for container in template.containers:
        if container.init:
            continue
        for key in ("command", "args"):
            for index, item in enumerate(as_list(container.data.get(key))):
                if not isinstance(item, str):
                    continue
                flag, _, value = item.strip().partition("=")
                if flag == DRA_FLAG:
                    enabled = True if not value else _go_bool(value)
                    return DraMapping(enabled, (*container.path, key, index), DRA_FLAG)
        for index, item in enumerate(as_list(container.data.get("env"))):
            entry = as_dict(item)
            if entry.get("name") == DRA_ENV:
                path = (*container.path, "env", index)
                return DraMapping(_go_bool(entry.get("value")), path, DRA_ENV)
    main = next((c for c in template.containers if not c.init), None)
    path = (*main.path, "args") if main is not None else spec_path
    return DraMapping(False, path, DRA_FLAG)


class DcgmExporter:
    """One dcgm-exporter DaemonSet, written out or made by a chart."""

    __slots__ = (
        "chart",
        "document",
        "dra",
        "kind",
        "made_by",
        "name",
        "namespace",
        "path",
        "placement",
        "pod_labels",
        "ports",
    )

    def __init__(
        self,
        kind: str,
        name: str | None,
        namespace: str | None,
        document: Document,
        path: Path,
        pod_labels: dict[str, str | None],
        ports: list[ContainerPort],
        placement: Placement,
        made_by: str | None = None,
        chart: ChartValues | None = None,
        dra: DraMapping | None = None,
    ) -> None:
        self.kind = kind  # DaemonSet | gpu-operator | dcgm-exporter
        self.dra = dra or DraMapping(None, path, DRA_FLAG)
        self.name = name
        self.namespace = namespace
        self.document = document
        self.path = path
        self.pod_labels = pod_labels
        self.ports = ports
        self.placement = placement
        self.made_by = made_by
        self.chart = chart

    def __repr__(self) -> str:
        return f"DcgmExporter({self.kind} {self.namespace}/{self.name})"

    @property
    def manifest(self) -> Manifest | None:
        return (
            self.document if self.made_by is None and isinstance(self.document, Manifest) else None
        )

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        name = self.name or "<release>-dcgm-exporter"
        if self.made_by:
            return f"the dcgm-exporter DaemonSet {where}{name} that {self.made_by} makes"
        return f"DaemonSet {where}{name}"

    def port_named(self, name: str) -> ContainerPort | None:
        return next((p for p in self.ports if p.name == name), None)

    def serves(self, target: int | str | None) -> bool | None:
        """Does a Service ``targetPort`` reach one of its container ports? None when the
        exporter declares no ports (a number can still be listened on)."""
        if target is None:
            return None
        if isinstance(target, str):
            return self.port_named(target) is not None
        if not self.ports:
            return None
        return any(p.number == target for p in self.ports)


def exporter_of(manifest: Manifest) -> DcgmExporter | None:
    """A dcgm-exporter DaemonSet object (its name, labels or image say dcgm-exporter)."""
    if manifest.kind != "DaemonSet":
        return None
    templates = pod_templates(manifest)
    if not templates:
        return None
    template = templates[0]
    images = [c.data.get("image") for c in template.containers if not c.init]
    if not mentions_dcgm(manifest.name, manifest.labels, template.labels, images):
        return None
    ports = []
    for container in template.containers:
        if container.init:
            continue
        for item in as_list(container.data.get("ports")):
            entry = as_dict(item)
            name, number = entry.get("name"), entry.get("containerPort")
            ports.append(
                ContainerPort(
                    name if isinstance(name, str) and name else None,
                    number if isinstance(number, int) and not isinstance(number, bool) else None,
                )
            )
    spec_path = (*template.path, "spec")
    return DcgmExporter(
        "DaemonSet",
        manifest.name,
        manifest.namespace,
        manifest,
        ("metadata", "name"),
        labels_of(template.labels),
        ports,
        placement_of_pod(manifest.get(spec_path), spec_path),
        dra=_daemonset_dra(template, spec_path),
    )


def chart_exporter(values: ChartValues) -> DcgmExporter | None:
    """The dcgm-exporter DaemonSet gpu-operator or dcgm-exporter chart values make."""
    if values.chart == GPU_OPERATOR:
        exporter = as_dict(values.get("dcgmExporter"))
        if exporter.get("enabled") is False:
            return None
        daemonsets = as_dict(values.get("daemonsets"))
        written = daemonsets.get("tolerations")
        tolerations = tolerations_of(written if written else list(OPERATOR_TOLERATIONS))
        base = values.path("dcgmExporter") if "dcgmExporter" in values.values else values.path()
        return DcgmExporter(
            GPU_OPERATOR,
            OPERATOR_EXPORTER,
            values.namespace,
            values.document,
            base,
            {"app": OPERATOR_EXPORTER},
            [ContainerPort("metrics", DCGM_PORT)],
            Placement(
                {OPERATOR_NODE_LABEL: "true"},
                None,
                tolerations,
                base,
                values.path("daemonsets", "tolerations")
                if "tolerations" in daemonsets
                else (values.path("daemonsets") if "daemonsets" in values.values else base),
                follows_gpu_nodes=True,
            ),
            made_by=values.describe(),
            chart=values,
            dra=_operator_dra(values, base),
        )
    if values.chart == DCGM_EXPORTER:
        data = values.values
        written = data.get("tolerations")
        tolerations = tolerations_of(
            written if "tolerations" in data else list(DCGM_CHART_TOLERATIONS)
        )
        port = as_dict(data.get("service")).get("port")
        number = port if isinstance(port, int) and not isinstance(port, bool) else DCGM_PORT
        return DcgmExporter(
            DCGM_EXPORTER,
            dcgm_chart_fullname(values),
            dcgm_chart_namespace(values),
            values.document,
            values.path(),
            dcgm_chart_selector_labels(values),
            [ContainerPort("metrics", number)],
            Placement(
                labels_of(data.get("nodeSelector")),
                required_terms(data.get("affinity")),
                tolerations,
                values.path("nodeSelector") if "nodeSelector" in data else values.path(),
                values.path("tolerations") if "tolerations" in data else values.path(),
            ),
            made_by=values.describe(),
            chart=values,
            dra=_chart_dra(values),
        )
    return None


def _chart_dra(values: ChartValues) -> DraMapping:
    """dcgm-exporter chart values: ``kubernetesDRA.enabled`` (default false)."""
    section = values.values.get("kubernetesDRA")
    if isinstance(section, dict) and "enabled" in section:
        enabled = _go_bool(section["enabled"])
        return DraMapping(enabled, values.path("kubernetesDRA", "enabled"), "kubernetesDRA.enabled")
    path = values.path("kubernetesDRA") if "kubernetesDRA" in values.values else values.path()
    return DraMapping(False, path, "kubernetesDRA.enabled")


def _operator_dra(values: ChartValues, base: Path) -> DraMapping:
    """gpu-operator values: the env it gives dcgm-exporter (``dcgmExporter.env``); without
    it, what the operator sets is not gpulint's to tell."""
    exporter = as_dict(values.get("dcgmExporter"))
    for index, item in enumerate(as_list(exporter.get("env"))):
        entry = as_dict(item)
        if entry.get("name") == DRA_ENV:
            return DraMapping(
                _go_bool(entry.get("value")), values.path("dcgmExporter", "env", index), DRA_ENV
            )
    return DraMapping(None, base, DRA_ENV)


def ignored_placement(values: ChartValues) -> list[Path]:
    """gpu-operator values written where no template reads node placement (``dcgm.nodeSelector``
    ...): the paths, relative to the document."""
    if values.chart != GPU_OPERATOR:
        return []
    found = []
    for section, key in OPERATOR_IGNORED_PLACEMENT:
        if key in as_dict(values.get(section)):
            found.append(values.path(section, key))
    return found
