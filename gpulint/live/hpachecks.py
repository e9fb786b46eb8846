"""The live check of the HPA metrics an adapter rule serves: the rendered query for the HPA's
namespace and its target's pods (or described object, or external metric), where the pods
appear in any series when it finds nothing, and the values it returned (GL804, GL805)."""

from __future__ import annotations

import math
from collections.abc import Callable

from gpulint.chain.adapter import CUSTOM, EXTERNAL, AdapterRule, canonical_resource
from gpulint.kinds.hpa import HPA, HpaMetric
from gpulint.live.adapterquery import (
    QueryLabels,
    go_quote,
    mapping_for,
    matches_pattern,
    pod_name_pattern,
    render_query,
)
from gpulint.live.answers import history_span, point_time, point_value, samples_of
from gpulint.live.client import QueryRejected
from gpulint.live.lookups import Lookups
from gpulint.live.options import history_step
from gpulint.live.series import sightings
from gpulint.live.snapshot import (
    POD_LABELS,
    HpaEvidence,
    Sample,
)
from gpulint.metrics.querytemplate import RenderUnsupported, TemplateError

# Pods an HPA query asks for at most (a Deployment at maxReplicas).
_MAX_PODS = 200


class HpaChecks(Lookups):
    """The checks of the HPA metrics the adapter rules serve (step 4)."""

    def _plan_hpas(self, rules: list[AdapterRule]) -> list[HpaEvidence]:
        exposed = {id(r): self.snapshot.rules[r].exposed() for r in rules}
        planned: list[HpaEvidence] = []
        for hpa in self.inventory.hpas:
            for metric in hpa.metrics:
                if not metric.is_custom or not metric.name:
                    continue
                api = EXTERNAL if metric.type == "External" else CUSTOM
                # The HPA lowercases External metric names when it asks for them
                # (kubernetes/kubernetes#72996); the adapter matches names exactly.
                wanted = metric.name.lower() if api == EXTERNAL else metric.name
                for rule in rules:
                    if rule.kind != api:
                        continue
                    series = exposed[id(rule)].get(wanted)
                    if series:
                        planned.append(self._hpa_evidence(hpa, metric, rule, series))
                        break
        return planned

    def _hpa_evidence(
        self, hpa: HPA, metric: HpaMetric, rule: AdapterRule, series: str
    ) -> HpaEvidence:
        target = "the HPA's target"
        if hpa.target_ref is not None:
            resolved = self.inventory.resolve_target(hpa.namespace, hpa.target_ref)
            target = resolved.describe()
        evidence = HpaEvidence(hpa, metric, rule, series, target)
        if metric.type == "Pods" and hpa.target_ref is not None:
            pattern, human = pod_name_pattern(hpa.target_ref.kind, hpa.target_ref.name)
            evidence.pod_pattern, evidence.pod_names = pattern, human
        return evidence

    def _hpa_task(self, evidence: HpaEvidence) -> Callable[[], None]:
        def task() -> None:
            metric = evidence.metric
            if metric.type == "Pods":
                self._check_pods_metric(evidence)
            elif metric.type == "Object":
                self._check_object_metric(evidence)
            else:
                self._check_external_metric(evidence)

        return task

    def _check_pods_metric(self, evidence: HpaEvidence) -> None:
        labels = mapping_for(evidence.rule, "pods")
        evidence.object_label, evidence.namespace_label = (
            labels.object_label,
            labels.namespace_label,
        )
        pattern = evidence.pod_pattern
        if pattern is None:
            evidence.skipped = "the HPA has no scaleTargetRef"
            return
        if labels.object_label is None:
            evidence.skipped = "the rule maps no label to pods"
            return
        pods = self._pods_in_series(evidence, labels, labels.object_label, pattern)
        if pods:
            evidence.objects = pods
            self._run_hpa_query(evidence, labels, pods, pattern)
            if evidence.usable or evidence.error or evidence.skipped:
                return
        self._pods_elsewhere(evidence, labels, labels.object_label, pattern, pods)

    def _pods_in_series(
        self, evidence: HpaEvidence, labels: QueryLabels, object_label: str, pattern: str
    ) -> list[str]:
        """The healthy case: the target's pods among the rule's own series, in the HPA's
        namespace (or the one namespace they are in); sets ``evidence.namespace``."""
        known = self.snapshot.rules[evidence.rule].series
        by_namespace = known.namespaces_of(object_label, labels.namespace_label or "")
        if not labels.namespace_label:
            by_namespace = {"": known.objects_in(object_label, None, "")}
        candidates = {
            namespace: sorted(p for p in pods if matches_pattern(pattern, p))
            for namespace, pods in by_namespace.items()
        }
        namespace = evidence.hpa.namespace
        if namespace is None:
            found = sorted(ns for ns, pods in candidates.items() if pods and ns)
            namespace = found[0] if len(found) == 1 else "default"
        evidence.namespace = namespace
        return candidates.get(namespace if labels.namespace_label else "", [])[:_MAX_PODS]

    def _pods_elsewhere(
        self,
        evidence: HpaEvidence,
        labels: QueryLabels,
        object_label: str,
        pattern: str,
        pods: list[str],
    ) -> None:
        """No value for the pods: where they appear, under any label, in any metric; when
        the rule's series named none, the query run again for the pods found there."""
        pod_labels = list(dict.fromkeys((*POD_LABELS, object_label)))
        matches = [f"{{{label}=~{go_quote(pattern)}}}" for label in pod_labels]
        seen = sightings(self.api.series(matches, self.start, self.now), pod_labels)
        # A series found through exported_pod also carries pod (the exporter's): keep only
        # the labels that hold the target's pods.
        evidence.sightings = [s for s in seen if matches_pattern(pattern, s.pod)]
        if evidence.hpa.namespace is None:
            namespaces = sorted({s.namespace for s in evidence.sightings if s.namespace})
            evidence.namespace = namespaces[0] if len(namespaces) == 1 else "default"
        if not pods:
            # The adapter asks for the pods the cluster has; the series show their names.
            in_namespace = {s.pod for s in evidence.sightings if s.namespace == evidence.namespace}
            pods = sorted(in_namespace)[:_MAX_PODS]
            evidence.objects = pods
            self._run_hpa_query(evidence, labels, pods, pattern)

    def _check_object_metric(self, evidence: HpaEvidence) -> None:
        described = evidence.metric.described_object or {}
        kind, name = described.get("kind"), described.get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            evidence.skipped = "the metric has no describedObject kind and name"
            return
        labels = mapping_for(evidence.rule, canonical_resource(kind))
        evidence.object_label, evidence.namespace_label = (
            labels.object_label,
            labels.namespace_label,
        )
        if labels.object_label is None:
            evidence.skipped = f"the rule maps no label to {canonical_resource(kind)}"
            return
        evidence.namespace = evidence.hpa.namespace or "default"
        evidence.objects = [name]
        self._run_hpa_query(evidence, labels, [name], None)

    def _check_external_metric(self, evidence: HpaEvidence) -> None:
        labels = mapping_for(evidence.rule)
        evidence.namespace_label = labels.namespace_label
        evidence.namespace = evidence.hpa.namespace or "default"
        if labels.namespaced and labels.namespace_label is None:
            # prometheus-adapter: "unable to find label for namespace" on every request.
            evidence.error = (
                "the rule is namespaced but maps no label to namespaces, so the adapter cannot "
                "add the namespace matcher"
            )
            return
        self._run_hpa_query(evidence, labels, [], None)

    def _run_hpa_query(
        self, evidence: HpaEvidence, labels: QueryLabels, objects: list[str], pattern: str | None
    ) -> None:
        selector = evidence.metric.selector
        try:
            evidence.rendered = render_query(
                evidence.rule,
                labels,
                evidence.series_name,
                evidence.namespace,
                objects,
                None if objects else pattern,
                selector,
            )
        except (TemplateError, RenderUnsupported) as error:
            evidence.skipped = f"gpulint cannot render the metricsQuery: {error}"
            return
        try:
            evidence.samples = samples_of(self.api.query(evidence.rendered, self.now))
        except QueryRejected as error:
            evidence.error = str(error)
            return
        evidence.usable = [s for s in evidence.samples if _usable(s, labels, objects, pattern)]
        if not evidence.usable:
            return
        external = evidence.metric.type == "External"
        history = self._hpa_history(evidence, labels, external)  # sets history_span
        current = [s.value for s in evidence.usable]
        if external:
            current = [sum(current)]
        evidence.observed = [v for v in (*history, *current) if math.isfinite(v)]

    def _hpa_history(
        self, evidence: HpaEvidence, labels: QueryLabels, external: bool
    ) -> list[float]:
        """The values the rendered query returned over the look-back window, for the objects
        that gave a usable sample now (summed for an External metric)."""
        expression = f"sum({evidence.rendered})" if external else f"({evidence.rendered})"
        window = self.options.lookback
        step = history_step(window)
        history: list[float] = []
        first = math.nan
        try:
            data = self.api.query(f"{expression}[{int(window)}s:{step}s]", self.now)
        except QueryRejected:
            data = {"result": []}
        wanted = {s.label(labels.object_label) for s in evidence.usable if labels.object_label}
        for item in data.get("result", []):
            if not isinstance(item, dict):
                continue
            metric = item.get("metric") or {}
            if (
                labels.object_label
                and not external
                and metric.get(labels.object_label) not in wanted
            ):
                continue
            for point in item.get("values") or []:
                value = point_value(point)
                history.append(value)
                moment = point_time(point)
                if math.isfinite(value) and not moment >= first:  # also true while first is NaN
                    first = moment
        evidence.history_span = history_span(first, self.now, window, step)
        return history


def _usable(sample: Sample, labels: QueryLabels, objects: list[str], pattern: str | None) -> bool:
    """Can the adapter hand this sample to one of the objects it was asked about?"""
    if labels.object_label is None:
        return True
    value = sample.label(labels.object_label)
    if objects:
        return value in objects
    return bool(value) and pattern is not None and matches_pattern(pattern, value)
