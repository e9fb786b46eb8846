"""What the live check learned from Prometheus, as typed values the live rules read.

The collector (``gpulint.live.collector``) fills a ``LiveSnapshot`` and stores it on
``inventory.live``; rules GL801-GL812 only read it. Nothing here talks to the network, so
rules can import it freely.

Evidence is filed under the ``AdapterRule`` and ``HPA`` objects of the inventory the collector
read, and ``for_rule``/``for_hpa`` look those objects up first: ``gpulint lint --prometheus``
and cluster mode ask about the very objects that were collected. The webhook cannot: it
collects in the background from a copy of its cluster inventory, and evaluates objects that
are always new (the admitted object laid over the cache, cache entries replaced by watch
events). For any other object the evidence is found by stable keys:

* an adapter rule by where it is written and what it says (``rule_key``): the file
  (``cluster://<namespace>/ConfigMap/<name>`` for a ConfigMap of the cluster), the document,
  the config's place in it, ``rules`` or ``externalRules`` and the index, and the rule's whole
  mapping (seriesQuery, metricsQuery, resources, name, filters), so that an edited rule gets
  no evidence collected for its old text;
* an HPA by its file, document, namespace and name (``hpa_key``); the evidence of one of its
  metrics applies only while the HPA asks for the same metric (``metric_key``: type, name,
  selector, described object) of the same scaleTargetRef, and only while the adapter rule that
  served it is still in the inventory being evaluated, unchanged. It is handed out re-bound to
  the asking HPA, its metric and that rule, so that findings point at the object being
  evaluated and judge its current target.

A key includes the file, so evidence never crosses from one file (or cluster object) to
another.

The queries of KEDA prometheus triggers (GL810-GL812) are run by ``gpulint lint --prometheus``
only, and their evidence is filed under the very ``PrometheusTrigger`` objects collected: the
webhook does not run them (whoever may create a ScaledObject writes its query, and the
webhook's Prometheus credentials are the operator's).
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from gpulint.chain.adapter import AdapterRule
from gpulint.input.document import Document
from gpulint.kinds.hpa import HPA, HpaMetric
from gpulint.kinds.triggers import PrometheusTrigger
from gpulint.live.options import window_text
from gpulint.metrics.promql import Selector


class ExposedRules(Protocol):
    """What re-binding evidence asks of the inventory an HPA belongs to."""

    def rules_exposing(
        self, metric: str, api: str, near: Document | None = None
    ) -> list[AdapterRule]: ...


# Why a live check could not use Prometheus (``LiveSnapshot.error_reason``): no connection,
# no (complete) answer within the timeout, an HTTP error status, an answer that is not the
# Prometheus API.
UNREACHABLE, TIMEOUT, HTTP_ERROR, BAD_ANSWER = "unreachable", "timeout", "http-error", "bad-answer"
FAILURE_REASONS = (UNREACHABLE, TIMEOUT, HTTP_ERROR, BAD_ANSWER)

# Labels that name a pod or a namespace in GPU series: dcgm-exporter's own (``pod``,
# ``namespace``; ``pod_name``/``pod_namespace`` with --use-old-namespace), what Prometheus
# renames them to under honor_labels: false (``exported_*``), and the names of the classic
# kubernetes-pods scrape config.
POD_LABELS = ("pod", "exported_pod", "pod_name", "kubernetes_pod_name", "exported_pod_name")
NAMESPACE_LABELS = (
    "namespace",
    "exported_namespace",
    "pod_namespace",
    "kubernetes_namespace",
    "exported_pod_namespace",
)
# dcgm-exporter writes Hostname (hostname since NVIDIA/dcgm-exporter#655); other exporters
# leave only the scrape target to tell nodes apart.
NODE_LABELS = ("Hostname", "hostname", "node", "kubernetes_node", "instance")
GPU_LABELS = ("UUID", "uuid", "gpu", "minor_number")
MIG_PROFILE_LABEL = "GPU_I_PROFILE"
MIG_INSTANCE_LABEL = "GPU_I_ID"

# Bounds on what one answer may fill in memory, whatever its size.
MAX_VALUES_PER_LABEL = 5000
MAX_SIGHTINGS = 5000


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant query's answer."""

    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, name: str) -> str:
        for key, value in self.labels:
            if key == name:
                return value
        return ""

    def describe(self) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in self.labels if k != "__name__")
        return "{" + inner + "}"


class Answer(enum.Enum):
    VALUE = "value"  # one element with a finite value
    NOT_FINITE = "not-finite"  # one element, NaN or an infinity
    EMPTY = "empty"  # no element
    NO_VALUE = "no-value"  # one element without a value: a range vector
    MULTIPLE = "multiple"  # more than one element
    UNDECODABLE = "undecodable"  # a scalar or string result, or a value that is no number


@dataclass(frozen=True)
class Reading:
    """An instant query's answer, as KEDA's prometheus scaler reads it."""

    answer: Answer
    result_type: str
    count: int  # elements in data.result
    value: float | None = None  # the one element's value
    shown: tuple[Sample, ...] = ()  # the first elements, for messages
    varying: tuple[str, ...] = ()  # labels whose values set the first elements apart
    detail: str = ""  # why KEDA cannot decode it

    def keda_value(self, ignore_null_values: bool) -> float | None:
        """What KEDA hands the HPA; None when its poll fails."""
        if self.answer is Answer.VALUE:
            return self.value
        if self.answer in (Answer.EMPTY, Answer.NO_VALUE, Answer.NOT_FINITE):
            return 0.0 if ignore_null_values else None
        return None


@dataclass
class SeriesSummary:
    """What gpulint keeps of a ``/api/v1/series`` answer (the series themselves are dropped)."""

    count: int = 0
    names: Counter[str] = field(default_factory=Counter)
    label_counts: Counter[str] = field(default_factory=Counter)
    # tracked label -> value -> series
    values: dict[str, Counter[str]] = field(default_factory=dict)
    # (object label, namespace label or "") -> namespace value or "" -> object values
    objects: dict[tuple[str, str], dict[str, set[str]]] = field(default_factory=dict)
    # node -> GPUs (or MIG instances) seen, and the ``pod`` values of their series
    node_gpus: dict[str, set[str]] = field(default_factory=dict)
    node_pods: dict[str, set[str]] = field(default_factory=dict)
    # matcher (as written) -> series it rejects, for selectors checked against these series
    rejected: Counter[str] = field(default_factory=Counter)
    mig_names: set[str] = field(default_factory=set)

    def carries(self, label: str) -> bool:
        return self.label_counts.get(label, 0) > 0

    def objects_in(
        self, object_label: str, namespace_label: str | None, namespace: str
    ) -> set[str]:
        by_namespace = self.objects.get((object_label, namespace_label or ""), {})
        return by_namespace.get(namespace if namespace_label else "", set())

    def namespaces_of(self, object_label: str, namespace_label: str) -> dict[str, set[str]]:
        return self.objects.get((object_label, namespace_label), {})

    def top_values(self, label: str, limit: int = 3) -> list[str]:
        return [value for value, _ in self.values.get(label, Counter()).most_common(limit)]


@dataclass(frozen=True, slots=True)
class Alternative:
    """A metric that exists now under another name than the one a seriesQuery asks for."""

    name: str
    reason: str  # "case" | "family" | "typo"
    source: str  # the exporter that writes it
    conversion: str  # how its values relate to the wanted metric's


@dataclass
class MissingSeries:
    """Why a seriesQuery matches nothing, as far as Prometheus can tell."""

    name_only: SeriesSummary | None = None  # the same metric names, label matchers dropped
    alternatives: list[Alternative] = field(default_factory=list)
    # the series of the first alternative: their labels decide which pod label a fix names
    alternative_series: SeriesSummary | None = None
    last_seen: dict[str, float] = field(default_factory=dict)  # name -> unix time, in lookback
    absent_labels: list[str] = field(default_factory=list)  # for selectors without a name


@dataclass
class QueryCheck:
    """An adapter rule's metricsQuery, rendered for real objects and run as an instant query."""

    series_name: str
    resource: str | None = None  # "pods" ...; None for external rules
    object_label: str | None = None
    namespace_label: str | None = None
    namespace: str | None = None
    objects: list[str] = field(default_factory=list)
    rendered: str = ""
    error: str | None = None
    samples: list[Sample] = field(default_factory=list)
    skipped: str | None = None
    absent_names: list[str] = field(default_factory=list)
    last_seen: dict[str, float] = field(default_factory=dict)

    @property
    def ran(self) -> bool:
        return self.skipped is None and bool(self.rendered)


@dataclass
class RuleEvidence:
    rule: AdapterRule
    series: SeriesSummary
    missing: MissingSeries | None = None
    query: QueryCheck | None = None

    def exposed(self) -> dict[str, str]:
        """API metric name -> a series name that gives it, for the series found."""
        found: dict[str, str] = {}
        for series, _ in self.series.names.most_common():
            name = self.rule.name_for_series(series)
            if name and name not in found:
                found[name] = series
        return found


@dataclass(frozen=True, slots=True)
class Sighting:
    """A series of some metric that carries one of an HPA target's pods."""

    metric: str
    pod_label: str
    pod: str
    namespace_label: str
    namespace: str
    mig_profile: str


@dataclass
class HpaEvidence:
    """One HPA metric served by an adapter rule, queried as the adapter would for its pods."""

    hpa: HPA
    metric: HpaMetric
    rule: AdapterRule
    series_name: str
    target: str  # "Deployment ml/triton"
    pod_names: str = ""  # "triton-<hash>-<id>"
    pod_pattern: str | None = None
    namespace: str | None = None
    object_label: str | None = None
    namespace_label: str | None = None
    objects: list[str] = field(default_factory=list)  # the object names the query asked for
    rendered: str = ""
    error: str | None = None
    samples: list[Sample] = field(default_factory=list)
    usable: list[Sample] = field(default_factory=list)  # samples the adapter can hand out
    sightings: list[Sighting] = field(default_factory=list)
    observed: list[float] = field(default_factory=list)  # look-back history and current values
    # Seconds of the look-back window the history covers (0: only the value now).
    history_span: float = 0.0
    skipped: str | None = None

    def observed_stats(self) -> tuple[float, float, float] | None:
        return observed_stats(self.observed)


def observed_stats(observed: list[float]) -> tuple[float, float, float] | None:
    """(minimum, median, maximum) of the finite values; None when there are none."""
    values = sorted(v for v in observed if math.isfinite(v))
    if not values:
        return None
    middle = len(values) // 2
    median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
    return values[0], median, values[-1]


@dataclass
class TriggerEvidence:
    """A KEDA prometheus trigger's query, sent as KEDA sends it, and what came back."""

    trigger: PrometheusTrigger
    url: str  # where it was sent (--prometheus)
    wait: float  # seconds KEDA waits for the answer (the trigger's timeout, else its default)
    dropped: list[str] = field(default_factory=list)  # parts of the request not sent
    elapsed: float | None = None  # seconds the answer took, measured here
    error: str | None = None  # Prometheus refused the PromQL (syntax or execution error)
    failure: str | None = None  # no usable answer: a timeout, an HTTP error, an unreadable body
    failure_reason: str | None = None  # one of FAILURE_REASONS when ``failure`` is set
    reading: Reading | None = None
    absent_names: list[str] = field(default_factory=list)  # names with no series now
    alternatives: dict[str, list[Alternative]] = field(default_factory=dict)
    stale_names: list[str] = field(default_factory=list)  # names with series but no sample now
    last_seen: dict[str, float] = field(default_factory=dict)  # name -> unix time, in look-back
    # The query's selectors whose metric has series, with those series (label matchers
    # dropped) checked against the selector's label matchers.
    filtered: list[tuple[Selector, SeriesSummary]] = field(default_factory=list)
    observed: list[float] = field(default_factory=list)  # look-back history and the value now
    # Seconds of the look-back window the history covers (0: only the value now).
    history_span: float = 0.0

    def observed_stats(self) -> tuple[float, float, float] | None:
        return observed_stats(self.observed)


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    """One active target of ``/api/v1/targets``, as much of it as the rules read."""

    scrape_pool: str
    scrape_url: str
    health: str  # up | down | unknown
    last_error: str
    labels: tuple[tuple[str, str], ...]

    def label(self, name: str) -> str:
        for key, value in self.labels:
            if key == name:
                return value
        return ""


# Targets kept from one answer (a Prometheus scraping every pod of a large cluster has tens of
# thousands; the dcgm-exporter ones are what the rules look for).
MAX_TARGETS = 20000


# --- stable keys ----------------------------------------------------------------------------

RuleKey = tuple[str, int, str, tuple[Any, ...], str, int, Hashable]
HpaKey = tuple[str, int, str | None, str]
MetricKey = tuple[str, str | None, Hashable, Hashable, tuple[str, str] | None]


def rule_key(rule: AdapterRule) -> RuleKey:
    """An adapter rule across inventories: where it is written, and its whole content."""
    config = rule.config
    document = config.document
    return (
        document.file,
        document.index,
        config.form,
        tuple(config.base),
        rule.kind,
        rule.index,
        _frozen(rule.data),
    )


def hpa_key(hpa: HPA) -> HpaKey:
    """An HPA across inventories: its file and document, namespace and name."""
    manifest = hpa.manifest
    return (manifest.file, manifest.index, manifest.namespace, manifest.name)


def metric_key(hpa: HPA, metric: HpaMetric) -> MetricKey:
    """What the evidence of one HPA metric was collected for: the metric as the adapter is
    asked for it, and the workload whose pods the query named."""
    ref = hpa.target_ref
    return (
        metric.type,
        metric.name,
        _frozen(metric.selector),
        _frozen(metric.described_object),
        (ref.kind, ref.name) if ref is not None else None,
    )


def _first(pair: tuple[str, Hashable]) -> str:
    return pair[0]


def _frozen(value: Any) -> Hashable:
    """A hashable value equal for equal YAML or JSON data, whatever mapping order."""
    if isinstance(value, dict):
        return tuple(sorted(((repr(k), _frozen(v)) for k, v in value.items()), key=_first))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


@dataclass
class Checked:
    """What one live check asked Prometheus about: adapter rules, HPA metrics and KEDA
    triggers, each by a key that names it in every unit that holds it."""

    rules: set[RuleKey] = field(default_factory=set)
    hpa_metrics: set[tuple[HpaKey, int]] = field(default_factory=set)
    triggers: set[tuple[str, int, tuple[str | int, ...]]] = field(default_factory=set)

    def add(self, other: Checked) -> None:
        self.rules |= other.rules
        self.hpa_metrics |= other.hpa_metrics
        self.triggers |= other.triggers

    def __bool__(self) -> bool:
        return bool(self.rules or self.triggers)


@dataclass
class LiveSnapshot:
    """Everything the live rules read; ``error`` set means Prometheus failed (GL809)."""

    url: str
    required: bool = False
    lookback: float = 86400.0
    max_age: float = 600.0
    evaluated_at: float = 0.0
    min_history: float = 0.9  # --min-history: the share of lookback a range verdict needs
    error: str | None = None
    error_reason: str | None = None  # one of FAILURE_REASONS when ``error`` is set
    rules: dict[AdapterRule, RuleEvidence] = field(default_factory=dict)
    hpas: list[HpaEvidence] = field(default_factory=list)
    triggers: dict[PrometheusTrigger, TriggerEvidence] = field(default_factory=dict)
    requests: int = 0
    elapsed: float = 0.0
    notes: list[str] = field(default_factory=list)
    # --lookback as the user wrote it (None: said from ``lookback``; ``window``).
    lookback_text: str | None = None
    # What was checked, by keys that name one rule, HPA metric or trigger in every unit that
    # holds it: a run over several units says once what it checked (``checked_note``).
    checked: Checked = field(default_factory=lambda: Checked())
    # The active scrape targets (GL806); None when not asked or not served (targets_error).
    targets: list[ScrapeTarget] | None = None
    targets_total: int = 0
    targets_error: str | None = None
    _rules_by_key: dict[RuleKey, RuleEvidence] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _hpas_by_key: dict[HpaKey, list[HpaEvidence]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def available(self) -> bool:
        return self.error is None

    @property
    def window(self) -> str:
        """The look-back window as messages say it: as the user wrote ``--lookback``."""
        return window_text(self.lookback, self.lookback_text)

    def for_rule(self, rule: AdapterRule) -> RuleEvidence | None:
        if not self.available:
            return None
        evidence = self.rules.get(rule)
        if evidence is None:
            evidence = self.index()[0].get(rule_key(rule))
        return evidence

    def for_hpa(self, hpa: HPA, inventory: ExposedRules | None = None) -> list[HpaEvidence]:
        """The evidence about ``hpa``'s metrics. For an HPA of another inventory than the one
        collected (``inventory`` is the one it belongs to), by stable keys, re-bound."""
        if not self.available:
            return []
        found = [evidence for evidence in self.hpas if evidence.hpa is hpa]
        if found or inventory is None:
            return found
        collected = self.index()[1].get(hpa_key(hpa))
        if not collected:
            return []
        metrics = {metric_key(hpa, metric): metric for metric in reversed(hpa.metrics)}
        rebound = []
        for evidence in collected:
            metric = metrics.get(metric_key(evidence.hpa, evidence.metric))
            if metric is None:
                continue
            rule = _same_rule(evidence.rule, metric, hpa, inventory)
            if rule is not None:
                rebound.append(replace(evidence, hpa=hpa, metric=metric, rule=rule))
        return rebound

    def for_trigger(self, trigger: PrometheusTrigger) -> TriggerEvidence | None:
        """The evidence about a trigger of the inventory collected (no stable keys: see the
        module's docstring)."""
        return self.triggers.get(trigger) if self.available else None

    def index(self) -> tuple[dict[RuleKey, RuleEvidence], dict[HpaKey, list[HpaEvidence]]]:
        """The evidence by stable keys, built on first use (the webhook builds it before it
        puts the snapshot in use, so that no admission pays for it)."""
        if self._rules_by_key is None or self._hpas_by_key is None:
            rules: dict[RuleKey, RuleEvidence] = {}
            for rule, evidence in self.rules.items():
                rules.setdefault(rule_key(rule), evidence)
            hpas: dict[HpaKey, list[HpaEvidence]] = {}
            for hpa_evidence in self.hpas:
                hpas.setdefault(hpa_key(hpa_evidence.hpa), []).append(hpa_evidence)
            self._rules_by_key, self._hpas_by_key = rules, hpas
        return self._rules_by_key, self._hpas_by_key


def _same_rule(
    collected: AdapterRule, metric: HpaMetric, hpa: HPA, inventory: ExposedRules
) -> AdapterRule | None:
    """The rule of ``inventory`` that serves ``metric`` and is the one the evidence was
    collected through, unchanged; None when it was edited or removed since."""
    if metric.name is None:
        return None
    wanted = rule_key(collected)
    for rule in inventory.rules_exposing(metric.name, metric.api, hpa.manifest):
        if rule_key(rule) == wanted:
            return rule
    return None
