"""The rule-facing API: the one module a rule imports from.

A rule (``rules/glNNN_<name>.py``, see ``gpulint.engine.rule``) reads the objects its scope
hands it and the inventory's answers, and builds findings through its context; everything it
needs for that is named here, so a rule's imports say "gpulint" once and the modules under
the API can move without touching the rules:

* findings, places and fixes: ``Context`` (``ctx.finding``, ``ctx.at``), ``Finding``,
  ``Severity``, ``related``, ``claim_links``, and ``edits`` (fix plans as edits);
* the inventory (``Inventory``: its views, relations and the scrape chain's questions) and
  the views of the kinds (``HPA``, ``ScaledObject``, ``InferenceService``, ...);
* the domain helpers two or more rules share (the adapter's rules, DCGM metric names, PromQL,
  quantities, the wording of live findings);
* what the front doors collected (``LiveSnapshot``, ``ClusterSnapshot``, a replay).

The helpers that only some rules need and that cost start-up (the live checks' wording, the
scrape chain's questions, the replay, the query templates, the DCGM field table, the live and
cluster evidence) are imported
when a rule first asks for them: a lint of a few files imports only the rules its objects call
for, and those only what they use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpulint.adoption import edits
from gpulint.chain.adapter import (
    CONFIG_KEYS,
    CUSTOM,
    EXTERNAL,
    FILTER_KEYS,
    MAX_QUERY_CHARS,
    NAME_KEYS,
    OVERRIDE_KEYS,
    RESOURCE_RULE_KEYS,
    RESOURCE_RULES_KEYS,
    RESOURCES_KEYS,
    RULE_KEYS,
    SERIES_NAME,
    AdapterConfig,
    AdapterRule,
    canonical_resource,
    compile_go_regex,
    go_regex_problem,
    render_resource_template,
    requested_metric_name,
    singular,
)
from gpulint.chain.address import ParsedUrl, PrometheusUrl
from gpulint.chain.exporter import DcgmExporter
from gpulint.chain.monitors import Monitor
from gpulint.chain.scrapelabels import DcgmScrape
from gpulint.chain.services import EndpointState, ServiceView
from gpulint.core.message import capitalized
from gpulint.core.model import (
    Finding,
    Location,
    Related,
    Severity,
)
from gpulint.core.quantity import (
    INT32_MAX,
    SHOWN_CHARS,
    Quantity,
    QuantityError,
    QuantityOutOfRange,
    abbreviated,
    format_number,
    int32_out_of_range,
    is_unknown,
    parse_quantity,
    paste_quantity,
    ratio_target_fix,
    shown_value,
    try_quantity,
)
from gpulint.engine.rule import (
    Context,
    claim_links,
    related,
)
from gpulint.engine.scopes import PodOwner
from gpulint.input.document import (
    Document,
    Manifest,
    Path,
    as_dict,
    as_list,
    plain_data,
    yaml_text,
)
from gpulint.input.yamlparse import OversizedNumber
from gpulint.inventory import (
    Autoscaler,
    Inventory,
    ResolvedTarget,
    TargetGroup,
    key_of,
)
from gpulint.kinds.hpa import (
    CUSTOM_METRIC_TYPES,
    HPA,
    HPA_KIND,
    RESOURCE_METRIC_TYPES,
    HpaMetric,
    MetricTarget,
    behavior_fix,
    scale_down_fix,
    scale_up_fix,
)
from gpulint.kinds.keda import ScaledObject
from gpulint.kinds.knative import (
    CONFIGURATION_LABEL,
    KNATIVE_SERVING_GROUP,
    MIN_SCALE,
    REVISION_LABEL,
    KnativeService,
    is_autoscaling_annotation,
    is_knative_owned,
    owning_revision,
    revision_deployment_parent,
)
from gpulint.kinds.kserve import CLASS_ANNOTATION as KSERVE_CLASS_ANNOTATION
from gpulint.kinds.kserve import (
    DEPRECATED_MODES,
    KNATIVE,
    LEGACY_AUTOSCALING_ANNOTATIONS,
    MODE_ANNOTATION,
    MODE_VALUES,
    STANDARD,
    Component,
    InferenceService,
    external_class_fix,
    generated_hpa_metrics,
    mode_note,
    mode_spelling,
)
from gpulint.kinds.revisions import CLASS_ANNOTATION as KNATIVE_CLASS_ANNOTATION
from gpulint.kinds.revisions import (
    HPA_CLASS,
    KPA_METRICS,
    METRIC_ANNOTATION,
    TARGET_ANNOTATION,
    RevisionAutoscaling,
    annotation_text,
)
from gpulint.kinds.scaledjob import ScaledJob
from gpulint.kinds.scaletarget import TargetRef
from gpulint.kinds.triggers import PrometheusTrigger
from gpulint.kinds.view import AdapterMetric, KindView, generated_by, generator_of, is_generated
from gpulint.kinds.vpa import PDB_KIND, RESIZABLE, UPDATER_MIN_REPLICAS, VPA, budgets_covering
from gpulint.kinds.workload import (
    Container,
    GpuRequest,
    PodTemplate,
)
from gpulint.metrics.promql import (
    Matcher,
    PlacedAggregation,
    Selector,
    mention,
    mentions,
    metric_names_in_query,
    outermost_aggregations,
    placed_aggregations,
    reads_no_series,
    top_level_text,
)

if TYPE_CHECKING:
    from gpulint.chain.gpusum import ONE_GPU_MAX, gpus_per_pod, gpus_summed, summed_gpu_series
    from gpulint.chain.scrape import (
        dcgm_series_read,
        dcgm_targets,
        endpoint_problems,
        looks_like_prometheus,
        placement_problems,
        selection_problem,
        url_fix,
        url_problem,
    )
    from gpulint.chain.targetscale import metric_scale, off_scale
    from gpulint.chain.written import (
        MetricChoice,
        PodLabels,
        dcgm_labels,
        hpa_class_fix,
        prometheus_address,
        revision_autoscalers,
        revision_metric,
        series_labels,
    )
    from gpulint.cluster.snapshot import (
        NO_API,
        NOT_FOUND,
        UNAVAILABLE,
        ClusterSnapshot,
        MetricProbe,
    )
    from gpulint.live.options import format_duration
    from gpulint.live.scale import (
        Verdict,
        between,
        float_text,
        judge,
    )
    from gpulint.live.series import exporter_pods
    from gpulint.live.snapshot import (
        NAMESPACE_LABELS,
        POD_LABELS,
        TIMEOUT,
        Answer,
        HpaEvidence,
        LiveSnapshot,
        MissingSeries,
        QueryCheck,
        Reading,
        SeriesSummary,
        Sighting,
        TriggerEvidence,
    )
    from gpulint.live.words import (
        ago,
        code,
        curl_for,
        enough_history,
        failing_poll,
        labels_carried,
        listing,
        number,
        rule_label,
        rule_where,
        seen_over,
        sent_to,
        short_history,
        stats,
        target_of,
    )
    from gpulint.metrics import names as gpumetrics
    from gpulint.metrics import querytemplate
    from gpulint.metrics.names import (
        Exporter,
        GpuMetric,
        Scale,
        canonical_metric_name,
        exporter_of_series,
        is_dcgm_field,
        looks_like_gpu_metric,
        lookup,
        names_a_gpu,
        nearest_dcgm_name,
        scale_of,
    )
    from gpulint.replay.report import (
        Replayed,
        stamp,
    )

# Imported on first use (see the module's docstring): name -> (module, attribute or None
# for the module itself).
_ON_FIRST_USE: dict[str, tuple[str, str | None]] = {
    "NO_API": ("gpulint.cluster.snapshot", "NO_API"),
    "NOT_FOUND": ("gpulint.cluster.snapshot", "NOT_FOUND"),
    "UNAVAILABLE": ("gpulint.cluster.snapshot", "UNAVAILABLE"),
    "ClusterSnapshot": ("gpulint.cluster.snapshot", "ClusterSnapshot"),
    "MetricProbe": ("gpulint.cluster.snapshot", "MetricProbe"),
    "NAMESPACE_LABELS": ("gpulint.live.snapshot", "NAMESPACE_LABELS"),
    "POD_LABELS": ("gpulint.live.snapshot", "POD_LABELS"),
    "TIMEOUT": ("gpulint.live.snapshot", "TIMEOUT"),
    "Answer": ("gpulint.live.snapshot", "Answer"),
    "HpaEvidence": ("gpulint.live.snapshot", "HpaEvidence"),
    "LiveSnapshot": ("gpulint.live.snapshot", "LiveSnapshot"),
    "MissingSeries": ("gpulint.live.snapshot", "MissingSeries"),
    "QueryCheck": ("gpulint.live.snapshot", "QueryCheck"),
    "Reading": ("gpulint.live.snapshot", "Reading"),
    "SeriesSummary": ("gpulint.live.snapshot", "SeriesSummary"),
    "Sighting": ("gpulint.live.snapshot", "Sighting"),
    "TriggerEvidence": ("gpulint.live.snapshot", "TriggerEvidence"),
    "gpumetrics": ("gpulint.metrics.names", None),
    "Exporter": ("gpulint.metrics.names", "Exporter"),
    "GpuMetric": ("gpulint.metrics.names", "GpuMetric"),
    "Scale": ("gpulint.metrics.names", "Scale"),
    "canonical_metric_name": ("gpulint.metrics.names", "canonical_metric_name"),
    "exporter_of_series": ("gpulint.metrics.names", "exporter_of_series"),
    "is_dcgm_field": ("gpulint.metrics.names", "is_dcgm_field"),
    "looks_like_gpu_metric": ("gpulint.metrics.names", "looks_like_gpu_metric"),
    "lookup": ("gpulint.metrics.names", "lookup"),
    "names_a_gpu": ("gpulint.metrics.names", "names_a_gpu"),
    "nearest_dcgm_name": ("gpulint.metrics.names", "nearest_dcgm_name"),
    "scale_of": ("gpulint.metrics.names", "scale_of"),
    "Replayed": ("gpulint.replay.report", "Replayed"),
    "Verdict": ("gpulint.live.scale", "Verdict"),
    "ago": ("gpulint.live.words", "ago"),
    "between": ("gpulint.live.scale", "between"),
    "code": ("gpulint.live.words", "code"),
    "curl_for": ("gpulint.live.words", "curl_for"),
    "ONE_GPU_MAX": ("gpulint.chain.gpusum", "ONE_GPU_MAX"),
    "gpus_per_pod": ("gpulint.chain.gpusum", "gpus_per_pod"),
    "gpus_summed": ("gpulint.chain.gpusum", "gpus_summed"),
    "summed_gpu_series": ("gpulint.chain.gpusum", "summed_gpu_series"),
    "metric_scale": ("gpulint.chain.targetscale", "metric_scale"),
    "off_scale": ("gpulint.chain.targetscale", "off_scale"),
    "dcgm_series_read": ("gpulint.chain.scrape", "dcgm_series_read"),
    "dcgm_targets": ("gpulint.chain.scrape", "dcgm_targets"),
    "endpoint_problems": ("gpulint.chain.scrape", "endpoint_problems"),
    "enough_history": ("gpulint.live.words", "enough_history"),
    "failing_poll": ("gpulint.live.words", "failing_poll"),
    "float_text": ("gpulint.live.scale", "float_text"),
    "format_duration": ("gpulint.live.options", "format_duration"),
    "judge": ("gpulint.live.scale", "judge"),
    "labels_carried": ("gpulint.live.words", "labels_carried"),
    "listing": ("gpulint.live.words", "listing"),
    "looks_like_prometheus": ("gpulint.chain.scrape", "looks_like_prometheus"),
    "number": ("gpulint.live.words", "number"),
    "placement_problems": ("gpulint.chain.scrape", "placement_problems"),
    "querytemplate": ("gpulint.metrics.querytemplate", None),
    "rule_label": ("gpulint.live.words", "rule_label"),
    "rule_where": ("gpulint.live.words", "rule_where"),
    "selection_problem": ("gpulint.chain.scrape", "selection_problem"),
    "seen_over": ("gpulint.live.words", "seen_over"),
    "sent_to": ("gpulint.live.words", "sent_to"),
    "short_history": ("gpulint.live.words", "short_history"),
    "stamp": ("gpulint.replay.report", "stamp"),
    "stats": ("gpulint.live.words", "stats"),
    "exporter_pods": ("gpulint.live.series", "exporter_pods"),
    "target_of": ("gpulint.live.words", "target_of"),
    "url_fix": ("gpulint.chain.scrape", "url_fix"),
    "url_problem": ("gpulint.chain.scrape", "url_problem"),
    "PodLabels": ("gpulint.chain.written", "PodLabels"),
    "dcgm_labels": ("gpulint.chain.written", "dcgm_labels"),
    "prometheus_address": ("gpulint.chain.written", "prometheus_address"),
    "series_labels": ("gpulint.chain.written", "series_labels"),
    "MetricChoice": ("gpulint.chain.written", "MetricChoice"),
    "hpa_class_fix": ("gpulint.chain.written", "hpa_class_fix"),
    "revision_autoscalers": ("gpulint.chain.written", "revision_autoscalers"),
    "revision_metric": ("gpulint.chain.written", "revision_metric"),
}


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _ON_FIRST_USE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = importlib.import_module(module)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


__all__ = [
    "CONFIGURATION_LABEL",
    "CONFIG_KEYS",
    "CUSTOM",
    "CUSTOM_METRIC_TYPES",
    "DEPRECATED_MODES",
    "EXTERNAL",
    "FILTER_KEYS",
    "HPA",
    "HPA_CLASS",
    "HPA_KIND",
    "INT32_MAX",
    "KNATIVE",
    "KNATIVE_CLASS_ANNOTATION",
    "KNATIVE_SERVING_GROUP",
    "KPA_METRICS",
    "KSERVE_CLASS_ANNOTATION",
    "LEGACY_AUTOSCALING_ANNOTATIONS",
    "MAX_QUERY_CHARS",
    "METRIC_ANNOTATION",
    "MIN_SCALE",
    "MODE_ANNOTATION",
    "MODE_VALUES",
    "NAMESPACE_LABELS",
    "NAME_KEYS",
    "NOT_FOUND",
    "NO_API",
    "ONE_GPU_MAX",
    "OVERRIDE_KEYS",
    "PDB_KIND",
    "POD_LABELS",
    "RESIZABLE",
    "RESOURCES_KEYS",
    "RESOURCE_METRIC_TYPES",
    "RESOURCE_RULES_KEYS",
    "RESOURCE_RULE_KEYS",
    "REVISION_LABEL",
    "RULE_KEYS",
    "SERIES_NAME",
    "SHOWN_CHARS",
    "STANDARD",
    "TARGET_ANNOTATION",
    "TIMEOUT",
    "UNAVAILABLE",
    "UPDATER_MIN_REPLICAS",
    "VPA",
    "AdapterConfig",
    "AdapterMetric",
    "AdapterRule",
    "Answer",
    "Autoscaler",
    "ClusterSnapshot",
    "Component",
    "Container",
    "Context",
    "DcgmExporter",
    "DcgmScrape",
    "Document",
    "EndpointState",
    "Exporter",
    "Finding",
    "GpuMetric",
    "GpuRequest",
    "HpaEvidence",
    "HpaMetric",
    "InferenceService",
    "Inventory",
    "KindView",
    "KnativeService",
    "LiveSnapshot",
    "Location",
    "Manifest",
    "Matcher",
    "MetricChoice",
    "MetricProbe",
    "MetricTarget",
    "MissingSeries",
    "Monitor",
    "OversizedNumber",
    "ParsedUrl",
    "Path",
    "PlacedAggregation",
    "PodLabels",
    "PodOwner",
    "PodTemplate",
    "PrometheusTrigger",
    "PrometheusUrl",
    "Quantity",
    "QuantityError",
    "QuantityOutOfRange",
    "QueryCheck",
    "Reading",
    "Related",
    "Replayed",
    "ResolvedTarget",
    "RevisionAutoscaling",
    "Scale",
    "ScaledJob",
    "ScaledObject",
    "Selector",
    "SeriesSummary",
    "ServiceView",
    "Severity",
    "Sighting",
    "TargetGroup",
    "TargetRef",
    "TriggerEvidence",
    "Verdict",
    "abbreviated",
    "ago",
    "annotation_text",
    "as_dict",
    "as_list",
    "behavior_fix",
    "between",
    "budgets_covering",
    "canonical_metric_name",
    "canonical_resource",
    "capitalized",
    "claim_links",
    "code",
    "compile_go_regex",
    "curl_for",
    "dcgm_labels",
    "dcgm_series_read",
    "dcgm_targets",
    "edits",
    "endpoint_problems",
    "enough_history",
    "exporter_of_series",
    "exporter_pods",
    "external_class_fix",
    "failing_poll",
    "float_text",
    "format_duration",
    "format_number",
    "generated_by",
    "generated_hpa_metrics",
    "generator_of",
    "go_regex_problem",
    "gpumetrics",
    "gpus_per_pod",
    "gpus_summed",
    "hpa_class_fix",
    "int32_out_of_range",
    "is_autoscaling_annotation",
    "is_dcgm_field",
    "is_generated",
    "is_knative_owned",
    "is_unknown",
    "judge",
    "key_of",
    "labels_carried",
    "listing",
    "looks_like_gpu_metric",
    "looks_like_prometheus",
    "lookup",
    "mention",
    "mentions",
    "metric_names_in_query",
    "metric_scale",
    "mode_note",
    "mode_spelling",
    "names_a_gpu",
    "nearest_dcgm_name",
    "number",
    "off_scale",
    "outermost_aggregations",
    "owning_revision",
    "parse_quantity",
    "paste_quantity",
    "placed_aggregations",
    "placement_problems",
    "plain_data",
    "prometheus_address",
    "querytemplate",
    "ratio_target_fix",
    "reads_no_series",
    "related",
    "render_resource_template",
    "requested_metric_name",
    "revision_autoscalers",
    "revision_deployment_parent",
    "revision_metric",
    "rule_label",
    "rule_where",
    "scale_down_fix",
    "scale_of",
    "scale_up_fix",
    "seen_over",
    "selection_problem",
    "sent_to",
    "series_labels",
    "short_history",
    "shown_value",
    "singular",
    "stamp",
    "stats",
    "summed_gpu_series",
    "target_of",
    "top_level_text",
    "try_quantity",
    "url_fix",
    "url_problem",
    "yaml_text",
]
