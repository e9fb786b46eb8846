"""What each loaded document is to gpulint, decided before anything is indexed.

A document is a Kubernetes object (``kind: List`` items are unwrapped), or a configuration
gpulint reads by its content: a prometheus-adapter config (its own file format, or Helm
values of its chart, also nested under ``prometheus-adapter:``), dcgm-exporter and
gpu-operator chart values that say how dcgm-exporter is scraped and placed,
kube-prometheus-stack values (``gpulint.input.chartvalues``), or a helmfile whose releases install
those charts. Objects can carry more
documents: a ConfigMap's data may hold the adapter's config as embedded YAML, parsed here
(with the positions of the file it is written in) so that the inventory never parses YAML.
Anything else is not gpulint's business and is dropped.

``Embedded parsing`` is a parameter: the admission webhook parses what an attacker may have
written in a separate worker with limits (see ``gpulint.admission``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gpulint.chain.adapter import (
    AdapterConfig,
    looks_like_adapter_config,
    looks_like_adapter_values,
)
from gpulint.chain.scrapelabels import DcgmScrape, scrapes_in_manifest, scrapes_in_values
from gpulint.input.chartvalues import ChartValues, chart_values_in, cluster_policy_values
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list
from gpulint.input.gitops import (
    ReleaseFile,
    helmfile_releases,
    is_helmfile,
    is_wrapper,
    wrapped_values,
)
from gpulint.input.loader import LoadProblem
from gpulint.input.yamlparse import DuplicateKey, ParsedDocument, YamlError, parse_documents
from gpulint.kinds.keda import is_scaled_object
from gpulint.kinds.knative import default_class_from_configmap
from gpulint.kinds.kserve import default_mode_from_configmap
from gpulint.kinds.llmisvc import is_llm_inference_service

# (text, line offset, column offset) -> the documents of an embedded YAML text; raises
# YamlError for text that does not parse.
EmbeddedParser = Callable[[str, int, int], list[ParsedDocument]]


def parse_embedded(text: str, line: int, column: int) -> list[ParsedDocument]:
    return list(parse_documents(text, line_offset=line, column_offset=column))


class Classified:
    """One document as the inventory files it: an object (with what it embeds) or a
    configuration document."""

    __slots__ = (
        "adapter_configs",
        "charts",
        "document",
        "duplicates",
        "knative_class",
        "kserve_mode",
        "problems",
        "release_files",
        "scrapes",
    )

    def __init__(self, document: Document) -> None:
        self.document = document
        self.adapter_configs: list[AdapterConfig] = []
        self.scrapes: list[DcgmScrape] = []
        self.charts: list[ChartValues] = []  # kube-prometheus-stack, gpu-operator, dcgm-exporter
        self.release_files: list[ReleaseFile] = []  # values files a helmfile installs
        self.problems: list[LoadProblem] = []  # an embedded config that does not parse
        self.duplicates: list[tuple[Document | None, DuplicateKey]] = []
        self.kserve_mode: str | None = None  # inferenceservice-config's default mode
        self.knative_class: str | None = None  # config-autoscaler's pod-autoscaler-class

    def __repr__(self) -> str:
        return f"Classified({self.document!r})"

    @property
    def manifest(self) -> Manifest | None:
        return self.document if isinstance(self.document, Manifest) else None

    @property
    def relevant(self) -> bool:
        """Is there anything for the inventory in it?"""
        return self.manifest is not None or bool(
            self.adapter_configs or self.scrapes or self.charts or self.release_files
        )


def classify_document(
    document: Document, text: bytes | None = None, embedded: EmbeddedParser = parse_embedded
) -> Iterator[Classified]:
    """What a loaded document holds: objects (List items one by one) or configuration."""
    data = document.data
    if not isinstance(data, dict):
        return
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if isinstance(api_version, str) and isinstance(kind, str):
        items = data.get("items")
        if kind.endswith("List") and isinstance(items, list):
            for item in items:
                if (
                    isinstance(item, dict)
                    and isinstance(item.get("apiVersion"), str)
                    and isinstance(item.get("kind"), str)
                ):
                    manifest = Manifest(
                        item,
                        document.file,
                        document.index,
                        _start_line(item, document.line),
                        document.rendered_from,
                    )
                    manifest.source = document.source
                    yield classify_manifest(manifest, text, embedded)
            return
        manifest = Manifest(
            data, document.file, document.index, document.line, document.rendered_from
        )
        manifest.source = document.source
        yield classify_manifest(manifest, text, embedded)
        return
    found = Classified(document)
    if is_helmfile(data):
        _helmfile(found, document)
        if found.relevant:
            yield found
        return
    if looks_like_adapter_config(data):
        found.adapter_configs.append(AdapterConfig(document, AdapterConfig.CONFIG))
        yield found
        return
    if looks_like_adapter_values(data):
        found.adapter_configs.append(AdapterConfig(document, AdapterConfig.HELM_VALUES))
    else:
        for key in ("prometheus-adapter", "prometheusAdapter"):
            if looks_like_adapter_values(data.get(key)):
                found.adapter_configs.append(
                    AdapterConfig(document, AdapterConfig.HELM_VALUES, (key,))
                )
    found.scrapes.extend(scrapes_in_values(document))
    found.charts.extend(chart_values_in(document))
    if found.relevant:
        yield found


def _helmfile(found: Classified, document: Document) -> None:
    """A helmfile: the charts its releases install with inline values, and the values files
    they list."""
    inline, files = helmfile_releases(document)
    found.release_files.extend(files)
    for values in inline:
        if values.chart == "prometheus-adapter" or looks_like_adapter_values(values.document.data):
            config = AdapterConfig(values.document, AdapterConfig.HELM_VALUES)
            config.release, config.release_namespace = values.release, values.namespace
            found.adapter_configs.append(config)
        for scrape in scrapes_in_values(values.document, values.chart):
            found.scrapes.append(scrape._replace(release=values.release))
        found.charts.extend(
            chart_values_in(
                values.document,
                values.chart,
                values.release,
                values.namespace,
                values.installed_by,
            )
        )


def classify_manifest(
    manifest: Manifest, text: bytes | None = None, embedded: EmbeddedParser = parse_embedded
) -> Classified:
    """An object, with the adapter configs its ConfigMap data embeds and the scrape
    settings it makes."""
    found = Classified(manifest)
    if manifest.kind == "ConfigMap" and manifest.api_version == "v1":
        found.kserve_mode = default_mode_from_configmap(manifest)
        found.knative_class = default_class_from_configmap(manifest)
        _embedded_configs(found, manifest, text, embedded)
    elif is_wrapper(manifest):
        _wrapped_values(found, manifest, text, embedded)
    else:
        found.scrapes.extend(scrapes_in_manifest(manifest))
        if text is not None and is_scaled_object(manifest):
            _trigger_query_starts(manifest, text, ("spec", "triggers"))
        elif text is not None and is_llm_inference_service(manifest):
            # the triggers of the ScaledObjects KServe makes (gpulint.kinds.llmisvc)
            for workload in (("spec",), ("spec", "prefill")):
                _trigger_query_starts(manifest, text, (*workload, "scaling", "keda", "triggers"))
        policy = cluster_policy_values(manifest)
        if policy is not None:
            found.charts.append(policy)
    return found


def _trigger_query_starts(manifest: Manifest, text: bytes, triggers: Path) -> None:
    """Where the text of each block-scalar ``query: |`` of the prometheus triggers at
    ``triggers`` starts: GL402 and the live trigger rules point at the query itself, not at
    its ``|``."""
    for index, trigger in enumerate(as_list(manifest.get(triggers))):
        if not isinstance(as_dict(as_dict(trigger).get("metadata")).get("query"), str):
            continue
        path: Path = (*triggers, index, "metadata", "query")
        written = manifest.location(path, key=False, raw=True)
        line, column = embedded_origin(manifest, path, text)
        if (line + 1, column + 1) != (written.line, written.column):
            if manifest.text_starts is None:
                manifest.text_starts = {}
            manifest.text_starts[path] = (line + 1, column + 1)


def _wrapped_values(
    found: Classified, manifest: Manifest, text: bytes | None, embedded: EmbeddedParser
) -> None:
    """A HelmRelease's or Application's values, read as the values of the chart they are for."""

    def parse_string(value: str, wrapper: Manifest, path: Path) -> Document | None:
        line, column = embedded_origin(wrapper, path, text)
        try:
            parsed = embedded(value, line, column)
        except YamlError as error:
            error.__traceback__ = None  # it holds the parser (see loader._parse_resyncing)
            found.problems.append(
                LoadProblem(
                    wrapper.file,
                    error.line,
                    error.column,
                    f"{wrapper.kind} {wrapper.name} helm values: {error.message}",
                )
            )
            return None
        if not parsed or not isinstance(parsed[0].value, dict):
            return None
        inner = Document(parsed[0].value, wrapper.file, wrapper.index, parsed[0].line)
        if wrapper.source is not None:
            inner.source = wrapper.source.embedded(wrapper, path, line, column)
        found.duplicates.extend((inner, d) for d in parsed[0].duplicates)
        return inner

    for values in wrapped_values(manifest, parse_string):
        data = values.document.data
        chart = values.chart
        if chart == "prometheus-adapter" or looks_like_adapter_values(data):
            config = AdapterConfig(values.document, AdapterConfig.HELM_VALUES)
            config.release, config.release_namespace = values.release, values.namespace
            config.wrapper = manifest
            found.adapter_configs.append(config)
        for scrape in scrapes_in_values(values.document, chart):
            found.scrapes.append(scrape._replace(release=values.release))
        where = f"{manifest.namespace}/" if manifest.namespace else ""
        found.charts.extend(
            chart_values_in(
                values.document,
                chart,
                values.release,
                values.namespace,
                f"{manifest.kind} {where}{manifest.name}",
                manifest,
            )
        )


def _embedded_configs(
    found: Classified, manifest: Manifest, text: bytes | None, embedded: EmbeddedParser
) -> None:
    data = as_dict(manifest.data.get("data"))
    for key, value in data.items():
        if not isinstance(value, str) or not may_hold_adapter_config(value):
            continue
        path: Path = ("data", key)
        line, column = embedded_origin(manifest, path, text)
        try:
            parsed = embedded(value, line, column)
        except YamlError as error:
            error.__traceback__ = None  # it holds the parser (see loader._parse_resyncing)
            found.problems.append(
                LoadProblem(
                    manifest.file,
                    error.line,
                    error.column,
                    f"ConfigMap {manifest.name} key {key}: {error.message}",
                )
            )
            # Still the adapter's config: what it serves is unknown, not absent.
            placeholder = Document({}, manifest.file, manifest.index, line, manifest.rendered_from)
            unreadable = AdapterConfig(placeholder, AdapterConfig.CONFIGMAP, owner=manifest)
            unreadable.unreadable = True
            found.adapter_configs.append(unreadable)
            continue
        for doc in parsed:
            if looks_like_adapter_config(doc.value):
                inner = Document(
                    doc.value, manifest.file, manifest.index, doc.line, manifest.rendered_from
                )
                if manifest.source is not None:
                    inner.source = manifest.source.embedded(manifest, path, line, column)
                found.adapter_configs.append(
                    AdapterConfig(inner, AdapterConfig.CONFIGMAP, owner=manifest)
                )
                found.duplicates.extend((inner, d) for d in doc.duplicates)


def may_hold_adapter_config(value: str) -> bool:
    return "seriesQuery" in value or "resourceRules" in value or "externalRules" in value


def embedded_origin(manifest: Document, path: Path, text: bytes | None) -> tuple[int, int]:
    """(line offset, column offset) of the first line of a string value in its file.

    For a block scalar (``config.yaml: |``) the content starts on the next line, indented;
    gpulint reads that indentation from the file. For other styles the value's own position
    is the best it can do.
    """
    location = manifest.location(path, key=False, raw=True)
    value_line, value_column = location.line, location.column
    if text is not None:
        start = _line_start(text, value_line)
        if start is not None:
            end = text.find(b"\n", start)
            line_text = text[start : len(text) if end < 0 else end]
            indicator = line_text[value_column - 1 : value_column]
            if indicator in (b"|", b">"):
                follow_start = len(text) if end < 0 else end + 1
                follow = value_line
                while follow_start < len(text):
                    follow_end = text.find(b"\n", follow_start)
                    if follow_end < 0:
                        follow_end = len(text)
                    row = text[follow_start:follow_end]
                    stripped = row.lstrip(b" ")
                    if stripped.strip():
                        return follow, len(row) - len(stripped)
                    follow += 1
                    follow_start = follow_end + 1
    return value_line - 1, value_column - 1


_line_index: tuple[bytes | None, list[int]] = (None, [])


def _line_start(text: bytes, line: int) -> int | None:
    """The byte offset where 1-based ``line`` starts. The offsets of the last text asked
    about are kept: a file of many ConfigMaps is indexed once, not once per ConfigMap."""
    global _line_index
    if _line_index[0] is not text:
        starts = [0]
        position = text.find(b"\n")
        while position >= 0:
            starts.append(position + 1)
            position = text.find(b"\n", position + 1)
        _line_index = (text, starts)
    starts = _line_index[1]
    return starts[line - 1] if 0 < line <= len(starts) else None


def _start_line(item: Any, default: int) -> int:
    start = getattr(item, "start", 0)
    return int(start >> 20) if start else default
