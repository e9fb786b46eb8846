"""Which prometheus-adapter rules serve which metric names, and who reads them.

The adapter serves a metric name when one of its rules exposes it. Most rules spell out their
series, so their names are known: those go in a dict by name. Rules whose names depend on
the live series (the chart's default rules, ``{__name__=~"^DCGM_.*"}``) are kept apart,
grouped by what decides their names (query, ``name`` block, filters): a repository with a
thousand copies of the chart's defaults has a handful of such groups, and each is asked once
per metric name. Where several directories of one unit carry their own configs, an HPA reads
the nearest that serves its metric (``DirectoryIndex``). Every lookup costs the directory
depth, not the number of configs or rules.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from gpulint.chain.adapter import (
    EXTERNAL,
    AdapterConfig,
    AdapterRule,
    canonical_resource,
    requested_metric_name,
)
from gpulint.chain.scrapelabels import DcgmScrape
from gpulint.input.document import Document
from gpulint.inventory.nearest import DirectoryIndex, consumer_directories, directory_parts
from gpulint.kinds.view import AdapterMetric, KindView


def _api_of(api: str) -> str:
    return EXTERNAL if api == EXTERNAL else "custom"


class _PatternGroup:
    """Pattern rules that expose the same names for the same series."""

    __slots__ = ("_answers", "index", "representative", "rules")

    def __init__(self, representative: AdapterRule) -> None:
        self.representative = representative
        self.rules: list[AdapterRule] = []
        self.index: DirectoryIndex[AdapterRule] | None = None
        self._answers: dict[str, bool] = {}

    def could_expose(self, metric: str) -> bool:
        answer = self._answers.get(metric)
        if answer is None:
            answer = self._answers[metric] = self.representative.could_expose(metric)
        return answer


def _pattern_signature(rule: AdapterRule) -> Any:
    data = rule.data
    if rule.generated:
        return (rule.kind, id(data))
    return (
        rule.kind,
        repr(data.get("seriesQuery")),
        repr(data.get("name")),
        repr(data.get("seriesFilters")),
    )


class _ApiIndex:
    """The rules of one API (custom or external) by the names they expose."""

    def __init__(
        self, configs: list[AdapterConfig], api: str, consumers: set[tuple[str, ...]] | None
    ) -> None:
        self.consumers = consumers
        self.order: dict[int, int] = {}
        by_name: dict[str, list[AdapterRule]] = {}
        groups: dict[Any, _PatternGroup] = {}
        for config in configs:
            for rule in config.rules_for_api(api):
                self.order[id(rule)] = len(self.order)
                names = rule.exposed_names()
                if names is None:
                    signature = _pattern_signature(rule)
                    group = groups.get(signature)
                    if group is None:
                        group = groups[signature] = _PatternGroup(rule)
                    group.rules.append(rule)
                for name in names or ():
                    by_name.setdefault(name, []).append(rule)
        self.by_name = by_name
        self.groups = list(groups.values())
        self._named_index: dict[str, DirectoryIndex[AdapterRule]] = {}

    def _named(self, name: str) -> DirectoryIndex[AdapterRule] | None:
        rules = self.by_name.get(name)
        if not rules:
            return None
        index = self._named_index.get(name)
        if index is None:
            index = self._named_index[name] = DirectoryIndex(rules, _rule_file, self.consumers)
        return index

    def exposing(self, wanted: str, near: Document | None) -> list[AdapterRule]:
        groups = [g for g in self.groups if g.could_expose(wanted)]
        named = self._named(wanted)
        if near is None:
            return self._everywhere(named, groups)
        indexes: list[DirectoryIndex[AdapterRule]] = [named] if named is not None else []
        for group in groups:
            if group.index is None:
                group.index = DirectoryIndex(group.rules, _rule_file, self.consumers)
            indexes.append(group.index)
        return self._nearest(indexes, near)

    def _everywhere(
        self, named: DirectoryIndex[AdapterRule] | None, groups: list[_PatternGroup]
    ) -> list[AdapterRule]:
        """Every rule that can expose the name, in the order of the configs."""
        found = list(named.items) if named is not None else []
        for group in groups:
            found.extend(group.rules)
        if groups and (named is not None or len(groups) > 1):
            found.sort(key=lambda rule: self.order[id(rule)])
        return found

    def _nearest(
        self, indexes: list[DirectoryIndex[AdapterRule]], near: Document
    ) -> list[AdapterRule]:
        """The rules of the configs nearest to ``near`` (the deepest directory that has any)."""
        if sum(len(index) for index in indexes) < 2:
            return [rule for index in indexes for rule in index.items]
        parts = directory_parts(near.file)
        for depth in range(len(parts), -1, -1):
            found = [rule for index in indexes for rule in index.at_or_below(parts[:depth])]
            if found:
                if len(indexes) > 1:
                    found.sort(key=lambda rule: self.order[id(rule)])
                return found
        return []


def _rule_file(rule: AdapterRule) -> str:
    return rule.document.file


class Exposure:
    """The unit's adapter configs, the rules exposing each name, and the HPAs reading them.

    ``by_directory``: the objects come from files of one repository, where the nearest
    config serves an HPA (``DirectoryIndex``); a cluster's objects all read the same one.
    ``readers()`` gives the objects that read the metrics APIs (``KindView.reads_metrics_api``:
    the HPAs), whose files decide which configs each directory sees.
    """

    def __init__(
        self, readers: Callable[[], Sequence[KindView]], by_directory: bool = True
    ) -> None:
        self.metrics_api_readers = readers
        self.by_directory = by_directory
        self.configs: list[AdapterConfig] = []
        self.scrapes: list[DcgmScrape] = []
        self._apis: dict[str, _ApiIndex] = {}
        self._config_index: DirectoryIndex[AdapterConfig] | None = None
        self._scrape_index: DirectoryIndex[DcgmScrape] | None = None
        self._readers: dict[tuple[str, str], dict[int, KindView]] | None = None
        # rule id -> resource asked -> HPA id -> its first metric asking it; and the keys each
        # HPA is under, so that an HPA coming or going (an admission review) costs its own
        # metrics only.
        self._consumers_by_rule: dict[int, dict[str | None, dict[int, Consumer]]] | None = None
        self._keys_of_hpa: dict[int, list[tuple[int, str | None]]] = {}
        # Answers of rules_exposing: several rules ask the same for one HPA.
        self._answers: dict[tuple[str, str, str | None], list[AdapterRule]] = {}

    # --- what comes and goes ----------------------------------------------------------------

    def add_configs(self, configs: list[AdapterConfig]) -> None:
        if configs:
            self.configs.extend(configs)
            self._configs_changed()

    def remove_configs_of(self, owner: Any) -> None:
        kept = [c for c in self.configs if c.owner is not owner and c.document is not owner]
        if len(kept) != len(self.configs):
            self.configs = kept
            self._configs_changed()

    def _configs_changed(self) -> None:
        self._apis.clear()
        self._config_index = None
        self._answers.clear()
        self._consumers_by_rule = None

    def _consumers(self) -> set[tuple[str, ...]] | None:
        if not self.by_directory:
            return None
        return consumer_directories(hpa.manifest.file for hpa in self.metrics_api_readers())

    def add_scrapes(self, scrapes: list[DcgmScrape]) -> None:
        if scrapes:
            self.scrapes.extend(scrapes)
            self._scrape_index = None

    def remove_scrapes_of(self, document: Document) -> None:
        kept = [s for s in self.scrapes if s.document is not document]
        if len(kept) != len(self.scrapes):
            self.scrapes = kept
            self._scrape_index = None

    def view_added(self, view: KindView) -> None:
        if view.reads_metrics_api:
            self._reader_added(view)

    def view_removed(self, view: KindView) -> None:
        if view.reads_metrics_api:
            self._reader_removed(view)

    def _reader_added(self, hpa: KindView) -> None:
        if self._consumers_by_rule is not None:
            self._add_consumers(hpa, self._consumers_by_rule)
        if self.by_directory:
            self._configs_changed()  # which configs each directory sees may change
        if self._readers is not None:
            for key in metrics_read_by(hpa):
                self._readers.setdefault(key, {})[id(hpa)] = hpa

    def _reader_removed(self, hpa: KindView) -> None:
        if self._consumers_by_rule is not None:
            for rule_id, resource in self._keys_of_hpa.pop(id(hpa), ()):
                per_resource = self._consumers_by_rule.get(rule_id, {})
                per_hpa = per_resource.get(resource, {})
                per_hpa.pop(id(hpa), None)
                if not per_hpa:
                    per_resource.pop(resource, None)
        if self.by_directory:
            self._configs_changed()
        if self._readers is not None:
            for key in metrics_read_by(hpa):
                readers = self._readers.get(key, {})
                readers.pop(id(hpa), None)
                if not readers:
                    self._readers.pop(key, None)

    # --- questions --------------------------------------------------------------------------

    def _api(self, api: str) -> _ApiIndex:
        api = _api_of(api)
        index = self._apis.get(api)
        if index is None:
            index = self._apis[api] = _ApiIndex(self.configs, api, self._consumers())
        return index

    def rules_exposing(
        self, metric: str, api: str, near: Document | None = None
    ) -> list[AdapterRule]:
        """Adapter rules that can serve ``metric`` on the custom or external metrics API.

        ``metric`` is the name an HPA writes; External names are matched the way the HPA
        asks for them, lowercased (``adapter.requested_metric_name``). With ``near``, when
        configs in several places expose the metric (one directory per app or environment),
        only the ones nearest to that document's file count.
        """
        wanted = requested_metric_name(metric, api)
        near = near if self.by_directory else None
        key = (wanted, _api_of(api), os.path.dirname(near.file) if near is not None else None)
        found = self._answers.get(key)
        if found is None:
            found = self._answers[key] = self._api(api).exposing(wanted, near)
        return list(found)

    def configs_near(self, document: Document) -> list[AdapterConfig]:
        """The configs that serve an object of ``document`` (every config of a cluster)."""
        if not self.by_directory:
            return self.configs
        if self._config_index is None:
            self._config_index = DirectoryIndex(
                self.configs, lambda c: c.document.file, self._consumers()
            )
        return self._config_index.near(document.file)

    def scrapes_near(self, document: Document) -> list[DcgmScrape]:
        """The dcgm-exporter scrape settings nearest to ``document``."""
        if not self.by_directory:
            return self.scrapes
        if self._scrape_index is None:
            self._scrape_index = DirectoryIndex(self.scrapes, lambda s: s.document.file)
        return self._scrape_index.near(document.file)

    def readers(self) -> dict[tuple[str, str], dict[int, KindView]]:
        if self._readers is None:
            readers: dict[tuple[str, str], dict[int, KindView]] = {}
            for hpa in self.metrics_api_readers():
                for key in metrics_read_by(hpa):
                    readers.setdefault(key, {})[id(hpa)] = hpa
            self._readers = readers
        return self._readers

    def asked_of(self, rule: AdapterRule) -> dict[str | None, Consumer]:
        """The resources the HPA metrics ``rule`` answers (those it is among the nearest
        rules exposing) ask about (``pods``, ``services``; None when it cannot be told),
        each with one consumer that asks it. Costs the number of resources, whatever the
        number of HPAs reading the rule."""
        by_resource = self._by_rule().get(id(rule), {})
        return {
            resource: next(iter(per_hpa.values()))
            for resource, per_hpa in by_resource.items()
            if per_hpa
        }

    def _by_rule(self) -> dict[int, dict[str | None, dict[int, Consumer]]]:
        """Built once from each HPA metric's own lookup (memoised per name and directory), so
        it costs the metrics read, not rules times HPAs; kept up to date as HPAs come and go,
        rebuilt when adapter configs change."""
        if self._consumers_by_rule is None:
            by_rule: dict[int, dict[str | None, dict[int, Consumer]]] = {}
            self._keys_of_hpa = {}
            for hpa in self.metrics_api_readers():
                self._add_consumers(hpa, by_rule)
            self._consumers_by_rule = by_rule
        return self._consumers_by_rule

    def _add_consumers(
        self, hpa: KindView, by_rule: dict[int, dict[str | None, dict[int, Consumer]]]
    ) -> None:
        keys = self._keys_of_hpa.setdefault(id(hpa), [])
        for metric in hpa.adapter_reads():
            if not metric.name:
                continue
            consumer = Consumer(hpa, metric)
            resource = consumer.resource
            for serving in self.rules_exposing(metric.name, metric.api, hpa.manifest):
                per_hpa = by_rule.setdefault(id(serving), {}).setdefault(resource, {})
                if id(hpa) not in per_hpa:
                    keys.append((id(serving), resource))
                    per_hpa[id(hpa)] = consumer


class Consumer(NamedTuple):
    """An HPA metric an adapter rule answers: the object kind it asks about decides which
    of the rule's labels must survive its query."""

    hpa: KindView
    metric: AdapterMetric

    @property
    def resource(self) -> str | None:
        """``pods`` for a Pods metric, the described object's resource for an Object metric
        (``services``), ``namespaces`` for an External one; None when it cannot be told."""
        if self.metric.type == "Pods":
            return "pods"
        if self.metric.type == "External":
            return "namespaces"
        kind = (self.metric.described_object or {}).get("kind")
        return canonical_resource(kind) if isinstance(kind, str) and kind else None


def metrics_read_by(hpa: KindView) -> list[tuple[str, str]]:
    """``(api, name)`` of the custom and external metrics an HPA reads."""
    return list(dict.fromkeys((api, name) for name, api in hpa.adapter_metrics()))
