"""Ask the custom and external metrics APIs what each HPA would ask, as the controller does.

For a ``Pods`` metric the HPA controller asks
``/apis/custom.metrics.k8s.io/<v>/namespaces/<ns>/pods/*/<metric>?labelSelector=<target's
selector>`` (plus ``metricLabelSelector`` for ``metric.selector``); for an ``Object`` metric
``.../namespaces/<ns>/<resource>/<name>/<metric>``; for an ``External`` metric
``/apis/external.metrics.k8s.io/<v>/namespaces/<ns>/<metric, lowercased>?labelSelector=``
(kubernetes pkg/controller/podautoscaler/metrics/client.go and k8s.io/metrics custom_metrics
client). This is the ``kubectl get --raw`` check every setup guide ends with, for every HPA.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote, urlencode

from gpulint.cluster.api import ApiError, KubeApi
from gpulint.cluster.reading import Discovery
from gpulint.cluster.snapshot import (
    CUSTOM_GROUP,
    EMPTY,
    EXTERNAL_GROUP,
    FAILED,
    FORBIDDEN,
    NO_API,
    NOT_FOUND,
    SERVED,
    SKIPPED,
    UNAVAILABLE,
    MetricProbe,
)
from gpulint.core.selectors import selector_text
from gpulint.input.document import as_dict
from gpulint.inventory import Inventory
from gpulint.kinds.hpa import HPA, HpaMetric

# The versions the HPA controller's clients speak, preferred first.
CUSTOM_VERSIONS = ("v1beta2", "v1beta1")
EXTERNAL_VERSIONS = ("v1beta1",)
WORKERS = 8


class _Question:
    __slots__ = ("api", "key", "metric", "path", "query", "subject")

    def __init__(
        self,
        key: tuple[str, str, int],
        api: str,
        metric: str,
        path: str,
        query: list[tuple[str, str]],
        subject: str,
    ) -> None:
        self.key = key
        self.api = api
        self.metric = metric
        self.path = path
        self.query = query
        self.subject = subject

    @property
    def request(self) -> str:
        return f"{self.path}?{urlencode(self.query)}" if self.query else self.path


def probe_metrics(
    api: KubeApi, inventory: Inventory
) -> tuple[dict[tuple[str, str, int], MetricProbe], dict[str, str], list[str]]:
    """Probes by (namespace, HPA, metric index), the state of each metrics API, and notes."""
    discovery = Discovery(api)
    apis: dict[str, str] = {}
    versions: dict[str, str] = {}
    for name, group, wanted in (
        ("custom", CUSTOM_GROUP, CUSTOM_VERSIONS),
        ("external", EXTERNAL_GROUP, EXTERNAL_VERSIONS),
    ):
        apis[name], versions[name] = _api_state(api, discovery, group, wanted)
    probes: dict[tuple[str, str, int], MetricProbe] = {}
    questions: list[_Question] = []
    for hpa in inventory.hpas:
        if hpa.is_fragment:
            continue
        for metric in hpa.metrics:
            if not metric.is_custom or not metric.name:
                continue
            key = (hpa.namespace or "", hpa.name, metric.index)
            asked = _question(inventory, hpa, metric, versions.get(metric.api, ""))
            if isinstance(asked, MetricProbe):
                probes[key] = asked
            elif apis[metric.api] != SERVED:
                probes[key] = MetricProbe(
                    metric.api,
                    metric.name,
                    asked.request,
                    apis[metric.api],
                    _api_detail(metric.api, apis[metric.api]),
                    0,
                    asked.subject,
                )
            else:
                questions.append(asked)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for question, probe in zip(
            questions, pool.map(lambda q: _ask(api, q), questions), strict=True
        ):
            probes[question.key] = probe
    notes = _notes(apis, probes)
    return probes, apis, notes


def _api_state(
    api: KubeApi, discovery: Discovery, group: str, wanted: tuple[str, ...]
) -> tuple[str, str]:
    """(outcome, version) of a metrics API: served, no-api, unavailable, forbidden or failed."""
    try:
        version = discovery.preferred(group, wanted)
        if version is None:
            return NO_API, ""
        api.get(f"/apis/{group}/{version}")
        return SERVED, version
    except ApiError as error:
        if error.status == 404:
            return NO_API, ""
        if error.status == 503:
            return UNAVAILABLE, wanted[-1]
        if error.status == 403:
            return FORBIDDEN, wanted[-1]
        return FAILED, wanted[-1]


def _api_detail(api: str, outcome: str) -> str:
    group = CUSTOM_GROUP if api == "custom" else EXTERNAL_GROUP
    if outcome == NO_API:
        return f"no APIService serves {group}"
    if outcome == UNAVAILABLE:
        return f"the APIService for {group} is registered but its server does not answer (503)"
    if outcome == FORBIDDEN:
        return f"gpulint's credentials may not read {group}"
    return f"{group} could not be asked"


def _question(
    inventory: Inventory, hpa: HPA, metric: HpaMetric, version: str
) -> _Question | MetricProbe:
    """The request the HPA controller makes for ``metric``, or a skipped probe saying why
    gpulint cannot make it."""
    name = metric.name or ""
    namespace = hpa.namespace or "default"
    key = (hpa.namespace or "", hpa.name, metric.index)
    metric_selector = selector_text(metric.selector) if metric.selector is not None else ""
    if metric_selector is None:
        return _skipped(metric, "its metric.selector is not a valid label selector")
    if metric.type == "External":
        path = f"/apis/{EXTERNAL_GROUP}/{version}/namespaces/{namespace}/{quote(name.lower())}"
        query = [("labelSelector", metric_selector)] if metric_selector else []
        return _Question(key, "external", name, path, query, f"namespace {namespace}")
    query = [("metricLabelSelector", metric_selector)] if metric_selector else []
    base = f"/apis/{CUSTOM_GROUP}/{version}/namespaces/{namespace}"
    if metric.type == "Object":
        described = as_dict(metric.described_object)
        kind, object_name = described.get("kind"), described.get("name")
        if not isinstance(kind, str) or not kind or not isinstance(object_name, str):
            return _skipped(metric, "its describedObject has no kind and name")
        if kind == "Namespace":
            path = f"/apis/{CUSTOM_GROUP}/{version}/namespaces/{object_name}/metrics/{quote(name)}"
        else:
            resource = _resource_of(kind, described.get("apiVersion"))
            path = f"{base}/{resource}/{quote(object_name)}/{quote(name)}"
        return _Question(key, "custom", name, path, query, f"{kind} {namespace}/{object_name}")
    if hpa.target_ref is None:
        return _skipped(metric, "the HPA has no scaleTargetRef")
    target = inventory.resolve_target(hpa.namespace, hpa.target_ref, hpa.manifest)
    if target.manifest is None:
        return _skipped(metric, f"its target {target.describe()} is not in the cluster")
    selector = selector_text(as_dict(target.manifest.data.get("spec")).get("selector"))
    if not selector:
        return _skipped(metric, f"its target {target.describe()} has no pod selector")
    subject = f"the pods of {target.describe()} ({selector})"
    path = f"{base}/pods/*/{quote(name)}"
    return _Question(key, "custom", name, path, [("labelSelector", selector), *query], subject)


def _skipped(metric: HpaMetric, why: str) -> MetricProbe:
    return MetricProbe(metric.api, metric.name or "", "", SKIPPED, why, 0, "")


def _resource_of(kind: str, api_version: Any) -> str:
    """The resource the controller names an Object metric's describedObject by: the plural,
    qualified by its API group outside the core group (``deployments.apps``)."""
    lowered = kind.lower()
    if lowered.endswith("s"):
        plural = lowered + "es"
    elif lowered.endswith("y") and lowered[-2:-1] not in "aeiou":
        plural = lowered[:-1] + "ies"
    else:
        plural = lowered + "s"
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    return f"{plural}.{group}" if group else plural


def _ask(api: KubeApi, question: _Question) -> MetricProbe:
    try:
        answer = api.get(question.path, question.query)
    except ApiError as error:
        outcome = {404: NOT_FOUND, 503: UNAVAILABLE, 403: FORBIDDEN}.get(error.status or 0, FAILED)
        return MetricProbe(
            question.api,
            question.metric,
            question.request,
            outcome,
            error.message,
            0,
            question.subject,
        )
    items = answer.get("items") if isinstance(answer, dict) else None
    count = len(items) if isinstance(items, list) else 0
    return MetricProbe(
        question.api,
        question.metric,
        question.request,
        SERVED if count else EMPTY,
        "" if count else "the API answered with no values",
        count,
        question.subject,
    )


def _notes(apis: dict[str, str], probes: dict[tuple[str, str, int], MetricProbe]) -> list[str]:
    notes = []
    for api, outcome in apis.items():
        if outcome in (FORBIDDEN, FAILED):
            notes.append(f"GL901: {_api_detail(api, outcome)}; its metrics were not checked")
    unknown = [
        (key, probe) for key, probe in sorted(probes.items()) if probe.outcome in (SKIPPED, FAILED)
    ]
    for (namespace, name, _), probe in unknown[:10]:
        notes.append(
            f"GL901: metric {probe.metric} of HPA {namespace}/{name} not checked: {probe.detail}"
        )
    if len(unknown) > 10:
        notes.append(f"GL901: {len(unknown) - 10} more metrics not checked")
    return notes
