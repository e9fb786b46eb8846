"""What a replay reads and what it produces: small typed values."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulint.input.document import Document, Path
from gpulint.replay.activation import KedaActivation
from gpulint.replay.behavior import DEFAULT_TOLERANCES, Behavior, Tolerances
from gpulint.replay.formula import Formula, FormulaError

# How a metric's value relates to the replicas (see gpulint.replay.simulate):
PER_POD = "per-pod"  # Pods metrics: each pod's value, averaged by the controller
TOTAL_PER_POD = "total-per-pod"  # Object/External AverageValue: a total divided by the target
TOTAL_VALUE = "total-value"  # Object/External Value: a total held at the target


@dataclass(frozen=True)
class ReplayMetric:
    """One metric of an autoscaler, as the controller reads it and as Prometheus has it."""

    name: str
    type: str  # Pods, Object, External
    target_type: str  # AverageValue, Value
    target: float
    query: str
    cap: float | None = None  # a per-pod value cannot exceed this (100 for percent, 1 ratios)
    activation: float | None = None  # KEDA activationThreshold: active when value is above
    ignore_null: bool = True  # KEDA's ignoreNullValues: no series (or NaN) reads as 0
    params: tuple[tuple[str, str], ...] = ()  # sent along with the query (KEDA's)
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def relation(self) -> str:
        if self.type == "Pods":
            return PER_POD
        return TOTAL_PER_POD if self.target_type == "AverageValue" else TOTAL_VALUE


@dataclass(frozen=True)
class Composite:
    """KEDA's ``advanced.scalingModifiers``: the formula over the named triggers' values is
    the one metric (``composite-metric``, External) KEDA's HPA reads, against its ``target``
    as ``metricType`` says; the ScaledObject is active when it is above ``activationTarget``
    (kedacore/keda pkg/scaling/scale_handler.go, IsUsingModifiers). ``names``: trigger name ->
    the index of its metric in the spec's ``metrics``."""

    formula: Formula
    names: tuple[tuple[str, int], ...]
    metric: ReplayMetric

    def value(self, raw: list[float | None]) -> float | None:
        """The composite value from each metric's raw value; None when a trigger the formula
        reads has none (KEDA: a failing trigger fails the composite metric) or the formula
        gives no number."""
        values: dict[str, float] = {}
        for name, index in self.names:
            value = raw[index]
            if value is None:
                return None
            values[name] = value
        try:
            return self.formula.evaluate(values)
        except FormulaError:
            return None


@dataclass(frozen=True)
class ReplaySpec:
    """An autoscaler, ready to replay."""

    kind: str  # HorizontalPodAutoscaler, ScaledObject
    namespace: str
    name: str
    target_kind: str
    target_name: str
    min_replicas: int
    max_replicas: int
    behavior: Behavior | None
    metrics: tuple[ReplayMetric, ...]
    pod_ready_after_s: float
    pod_ready_source: str  # where pod_ready_after_s comes from, for the report
    gpus_per_pod: int
    keda: KedaActivation | None = None
    document: Document | None = None  # where findings point
    path: Path = ()
    behavior_path: Path = ()
    # behavior.*.tolerance on a release that honours it, else the controller flag's 10%
    tolerances: Tolerances = DEFAULT_TOLERANCES
    # Where its maximum is written, when not at spec.maxReplicas (spec.maxReplicaCount): the
    # settings a controller makes the autoscaler from (a NIMService's spec.scale.hpa).
    max_path: Path | None = None
    # KEDA's scalingModifiers: the metric the controller reads is made of ``metrics``
    composite: Composite | None = None

    @property
    def controlled(self) -> tuple[ReplayMetric, ...]:
        """The metrics the controller compares with their targets."""
        return (self.composite.metric,) if self.composite is not None else self.metrics

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Skipped:
    """An autoscaler left out of the replay, and why."""

    kind: str
    namespace: str
    name: str
    reason: str

    def describe(self) -> str:
        """The one line every report (and stderr) writes for it."""
        return f"{self.kind} {self.namespace}/{self.name} not replayed: {self.reason}"


@dataclass
class History:
    """The series a replay runs on, on one time grid (Unix seconds, ascending).

    ``values[i][k]``: metric i at ``times[k]`` (None: no sample); ``pods[i][k]``: for a Pods
    metric, how many pods reported it; ``observed``: the replicas kube-state-metrics saw."""

    times: list[float]
    values: list[list[float | None]]
    pods: list[list[int | None]]
    observed: list[int | None]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Event:
    time: float
    before: int
    after: int
    reason: str


@dataclass
class Tick:
    """One controller sync of the replay."""

    time: float
    replicas: int  # spec replicas after this sync
    ready: int  # pods ready (serving) at this sync, before it acts
    starting: int  # pods created and not ready yet
    load: float | None  # the load in pods' worth at the target (max over metrics)
    # the first metric as the simulated pods report it, on the scale the controller compares
    # with its target (per pod for an Object/External AverageValue)
    value: float | None


@dataclass
class Run:
    """One replay: the simulated controller's syncs and replica changes."""

    ticks: list[Tick]
    events: list[Event]
    queued_s: float | None = None  # time with a pod waiting for a GPU node (None: no nodes)
    stopped: bool = False  # ended early by the ``stop`` of ``simulate.replay``
