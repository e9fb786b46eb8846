"""prometheus-adapter configuration: rules, the metric names they expose, their label mapping.

Three shapes carry the same rules (kubernetes-sigs/prometheus-adapter v0.12, pkg/config):
* the adapter's own config file: ``rules``, ``externalRules``, ``resourceRules``;
* a ConfigMap whose data holds that file;
* the prometheus-community Helm chart's values: ``rules.custom``, ``rules.external``,
  ``rules.resource`` and ``rules.default`` (true by default: six generic rules that expose
  every series with a ``namespace`` label under its own name, templates/configmap.yaml).

Naming follows pkg/naming/metric_namer.go: ``name.matches`` (default ``.*``) is also an
implicit ``is`` filter; ``as`` defaults to ``$0`` without capture groups and ``$1`` with one;
the exposed name is Go's ``Regexp.Expand`` of ``as`` with the first match in the series name.

The Go behaviour is in ``gosemantics``, the resource mapping in ``resources`` and the chart's
default rules in ``chartrules``; their names are importable from here too.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from gpulint.chain.chartrules import CHART_DEFAULT_RULES
from gpulint.chain.gosemantics import (
    compile_go_regex,
    go_expand,
    go_regex_problem,
    go_truthy,
)
from gpulint.chain.resources import (
    ResourceMapping,
    canonical_resource,
    read_resources,
    render_resource_template,
    singular,
)
from gpulint.core.model import Node, ObjectRef, Related
from gpulint.input.document import Document, Manifest, Path, as_dict, as_list
from gpulint.metrics.promql import Selector, SelectorError, parse_selector

if TYPE_CHECKING:
    from collections.abc import Iterator

CUSTOM, EXTERNAL = "custom", "external"
# The longest metricsQuery gpulint analyses. The adapter's own examples and the charts' rules
# are a few hundred characters; a longer query is not read by the rules (GL404 says so), so
# that one ConfigMap anyone may label as an adapter config cannot make every review that
# meets it slow.
MAX_QUERY_CHARS = 16 * 1024

# Keys the adapter's strict loader (yaml.UnmarshalStrict) accepts, per level.
CONFIG_KEYS = ("rules", "resourceRules", "externalRules")
RULE_KEYS = ("seriesQuery", "seriesFilters", "resources", "name", "metricsQuery")
RESOURCES_KEYS = ("template", "overrides", "namespaced")
OVERRIDE_KEYS = ("group", "resource")
NAME_KEYS = ("matches", "as")
FILTER_KEYS = ("is", "isNot")
RESOURCE_RULES_KEYS = ("cpu", "memory", "window")
RESOURCE_RULE_KEYS = ("containerQuery", "nodeQuery", "resources", "containerLabel")

TEMPLATE_FIELDS = ("Series", "LabelMatchers", "GroupBy", "GroupBySlice", "LabelValuesByName")
# What a Prometheus metric (series) name can be (prometheus docs, "Metric names and labels").
SERIES_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


class AdapterRule:
    """One discovery rule (``rules[]`` or ``externalRules[]``)."""

    __slots__ = (
        "_exposed",
        "_names",
        "_selector",
        "config",
        "data",
        "generated",
        "index",
        "kind",
        "path",
        "selector_error",
    )

    def __init__(
        self,
        config: AdapterConfig,
        kind: str,
        index: int,
        path: Path,
        data: dict[str, Any],
        generated: bool = False,
    ) -> None:
        self.config = config
        self.kind = kind
        self.index = index
        self.path = path
        self.data = data
        self.generated = generated
        self._selector: Selector | None = None
        self._exposed: list[str] | bool | None = False  # False: not computed yet
        self._names: dict[str, str | None] = {}  # series name -> exposed name
        self.selector_error: str | None = None
        query = self.series_query
        if query is not None:
            try:
                self._selector = parse_selector(query)
            except SelectorError as error:
                self.selector_error = str(error)

    def __repr__(self) -> str:
        return f"AdapterRule({self.kind}, {self.index}, {self.series_query!r})"

    @property
    def document(self) -> Document:
        return self.config.document

    @property
    def series_query(self) -> str | None:
        value = self.data.get("seriesQuery")
        return value if isinstance(value, str) else None

    @property
    def metrics_query(self) -> str | None:
        """The metricsQuery, None when it is missing, not a string, or longer than
        ``MAX_QUERY_CHARS`` (``oversized_query``)."""
        value = self.data.get("metricsQuery")
        return value if isinstance(value, str) and len(value) <= MAX_QUERY_CHARS else None

    @property
    def oversized_query(self) -> int | None:
        """The length of a metricsQuery too long to analyse; None for any other."""
        value = self.data.get("metricsQuery")
        return len(value) if isinstance(value, str) and len(value) > MAX_QUERY_CHARS else None

    @property
    def selector(self) -> Selector | None:
        return self._selector

    @property
    def resources(self) -> ResourceMapping:
        return read_resources(self.data.get("resources"))

    @property
    def name_block(self) -> dict[str, Any]:
        return as_dict(self.data.get("name"))

    @property
    def name_matches(self) -> str:
        value = self.name_block.get("matches")
        return value if isinstance(value, str) and value else ".*"

    @property
    def name_as(self) -> str | None:
        """The effective ``as`` template; None when the adapter would refuse the rule."""
        value = self.name_block.get("as")
        if isinstance(value, str) and value:
            return value
        pattern = compile_go_regex(self.name_matches)
        groups = pattern.groups if pattern else 0
        if groups == 0:
            return "$0"
        if groups == 1:
            return "$1"
        return None

    def series_filters(self) -> list[tuple[str, str]]:
        found = []
        for item in as_list(self.data.get("seriesFilters")):
            item = as_dict(item)
            if isinstance(item.get("is"), str):
                found.append(("is", item["is"]))
            elif isinstance(item.get("isNot"), str):
                found.append(("isNot", item["isNot"]))
        return found

    def passes_filters(self, series_name: str) -> bool:
        for op, pattern in self.series_filters():
            compiled = compile_go_regex(pattern)
            if compiled is None:
                continue
            if (compiled.search(series_name) is not None) != (op == "is"):
                return False
        return True

    def name_for_series(self, series_name: str) -> str | None:
        """The API name the adapter gives a series, or None if the rule drops the series."""
        names = self._names
        if series_name not in names:
            names[series_name] = self._name_for_series(series_name)
        return names[series_name]

    def _name_for_series(self, series_name: str) -> str | None:
        if not self.passes_filters(series_name):
            return None
        pattern = compile_go_regex(self.name_matches)
        template = self.name_as
        if pattern is None or template is None:
            return None
        match = pattern.search(series_name)
        if match is None:
            return None
        return go_expand(template, match)

    def series_names(self) -> list[str] | None:
        """Series names spelled out in the seriesQuery (None when it is a pattern)."""
        return self._selector.literal_names() if self._selector else None

    def exposed_names(self) -> list[str] | None:
        """Names this rule exposes, when they can be known without Prometheus."""
        if self._exposed is False:
            self._exposed = self._compute_exposed_names()
        return None if self._exposed is None or self._exposed is True else list(self._exposed)

    def _compute_exposed_names(self) -> list[str] | None:
        names = self.series_names()
        if names is None:
            template = self.name_as
            if template is not None and "$" not in template:
                return [template]
            return None
        exposed = []
        for series in names:
            name = self.name_for_series(series)
            if name and name not in exposed:
                exposed.append(name)
        return exposed

    def could_expose(self, metric: str) -> bool:
        """Could some series this rule discovers be exposed as ``metric``?

        Exact when the series names are spelled out; otherwise the candidate series name is
        rebuilt from ``as``/``matches`` (``$1`` with ``^(.*)_total$`` -> ``<metric>_total``)
        and checked against the query's name matchers. When gpulint cannot tell, it says yes:
        a finding must be certain. Names are case-sensitive, as in the adapter's registries
        (the HPA lowercases External names before asking: see ``requested_metric_name``).
        """
        known = self.exposed_names()
        if known is not None:
            return metric in known
        template = self.name_as
        if template is None:
            return False
        candidate = _series_candidate(self.name_matches, template, metric)
        if candidate is None:
            return True
        if not SERIES_NAME.match(candidate):
            return False  # no Prometheus series can be named so
        if self._selector is not None and not self._selector.accepts_name(candidate):
            return False
        return self.name_for_series(candidate) == metric

    def maps_resource(self, resource: str) -> str | None:
        return self.resources.label_for(resource)

    def location(self, *sub: str | int, key: bool = True) -> Any:
        return self.document.location((*self.path, *sub), key=key)

    def series_for(self, metric: str) -> list[str] | None:
        """Series names this rule exposes as ``metric``; None when only Prometheus can tell."""
        names = self.series_names()
        if names is not None:
            return [s for s in names if self.name_for_series(s) == metric]
        template = self.name_as
        if template is None:
            return []
        candidate = _series_candidate(self.name_matches, template, metric)
        if candidate is None:
            return None
        if not SERIES_NAME.match(candidate):
            return []
        if self._selector is not None and not self._selector.accepts_name(candidate):
            return []
        return [candidate] if self.name_for_series(candidate) == metric else []

    def path_for(self, *sub: str | int) -> Path:
        """Where a finding about ``sub`` goes: the key itself, or for the chart's generated
        default rules (which exist in no file) the values' ``rules.default`` key."""
        return self.path if self.generated else (*self.path, *sub)

    def describe(self) -> str:
        """``rule rules.custom[0] in Helm values values.yaml``, for messages."""
        if self.generated:
            return "the prometheus-adapter chart's default rules (rules.default)"
        relative = self.path[len(self.config.base) :]
        where = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in relative)
        kind = "external rule" if self.kind == EXTERNAL else "rule"
        return f"{kind} {where.lstrip('.')} in {self.config.describe_short()}"

    def related(self, role: str = "adapter rule", key: str | None = None) -> Related:
        """This rule as the other end of a cross-object finding: at ``key``, by default at its
        ``name`` block, or its ``seriesQuery`` when it has none."""
        if key is None:
            key = "name" if "name" in self.data else "seriesQuery"
        ref = self.config.ref or describe_document(self.document)
        document = self.document
        source = document.source
        made_from = source.made_from(document) if source is not None else ()
        path = self.path_for(key)
        start = document.location(())
        node = Node(start.file, start.line, start.column, path)
        return Related(ref, document.location(path), role, made_from, node)


def requested_metric_name(metric: str, api: str) -> str:
    """The name an HPA actually asks the metrics API for.

    The HPA's client lowercases External metric names in the request path (client-go puts
    the resource segment through ``strings.ToLower``; kubernetes/kubernetes#72996,
    kubernetes-sigs/custom-metrics-apiserver#95), and prometheus-adapter looks them up
    case-sensitively; custom (Pods/Object) names travel as a subresource, unchanged.
    """
    return metric.lower() if api == EXTERNAL else metric


def _series_candidate(matches: str, template: str, metric: str) -> str | None:
    """The series name that ``matches``/``as`` would turn into ``metric``, for simple patterns."""
    body = matches
    if body.startswith("^"):
        body = body[1:]
    if body.endswith("$") and not body.endswith("\\$"):
        body = body[:-1]
    if template in ("$0", "${0}"):
        return metric
    # ``as`` is text around one reference to the first group (``vllm_${1}``): the metric
    # must carry that text, and what lies between is what the group matched. Go's Expand
    # reads ``$1_total`` as the group named ``1_total`` (regexp.go, Regexp.Expand), so a bare
    # ``$1`` counts only before a character that cannot continue a name.
    reference = re.fullmatch(r"([^$]*)(?:\$1(?![A-Za-z0-9_])|\$\{1\})([^$]*)", template)
    if reference is None:
        return None
    before, after = reference.groups()
    if not metric.startswith(before) or not metric.endswith(after):
        return None
    captured = metric[len(before) : len(metric) - len(after)]
    if not captured:
        return None
    group = re.search(r"\((?!\?)[^()]*\)", body)
    if group is None:
        return None
    rest = body[: group.start()] + "\0" + body[group.end() :]
    rest = rest.replace("\\.", ".").replace("\\_", "_")
    if re.search(r"[\\^$.|?*+()\[\]{}]", rest):
        return None
    return rest.replace("\0", captured)


class AdapterConfig:
    """One prometheus-adapter configuration, whatever shape it was written in."""

    CONFIG, HELM_VALUES, CONFIGMAP = "config file", "Helm values", "ConfigMap"

    def __init__(
        self,
        document: Document,
        form: str,
        base: Path = (),
        owner: Any = None,
    ) -> None:
        self.document = document
        self.form = form
        self.base = base
        self.owner = owner  # the ConfigMap Manifest for the ConfigMap form
        self.rules: list[AdapterRule] = []
        self.external_rules: list[AdapterRule] = []
        self.default_rules_enabled = False
        self.existing_configmap: str | None = None
        self.prometheus_url: str | None = None
        # The Helm release, when a GitOps wrapper (HelmRelease, Application) installs it.
        self.release: str | None = None
        self.release_namespace: str | None = None
        self.wrapper: Manifest | None = None  # that HelmRelease or Application
        # A ConfigMap that holds a config gpulint could not parse: its rules are unknown, so
        # nothing read through it can be judged (GL702 reports the syntax error).
        self.unreadable = False
        root = as_dict(document.get(base)) if base else as_dict(document.data)
        if form == self.HELM_VALUES:
            self._read_helm_values(root)
        else:
            self._read_rules(root.get("rules"), (*base, "rules"), CUSTOM, self.rules)
            self._read_rules(
                root.get("externalRules"), (*base, "externalRules"), EXTERNAL, self.external_rules
            )

    def _read_rules(self, items: Any, path: Path, kind: str, into: list[AdapterRule]) -> None:
        for index, item in enumerate(as_list(items)):
            if isinstance(item, dict):
                into.append(AdapterRule(self, kind, index, (*path, index), item))

    def _read_helm_values(self, values: dict[str, Any]) -> None:
        rules = as_dict(values.get("rules"))
        base = (*self.base, "rules")
        self._read_rules(rules.get("custom"), (*base, "custom"), CUSTOM, self.rules)
        self._read_rules(rules.get("external"), (*base, "external"), EXTERNAL, self.external_rules)
        existing = rules.get("existing")
        self.existing_configmap = existing if isinstance(existing, str) and existing else None
        # A missing key keeps the chart's ``default: true``; ``default:`` (null) deletes the
        # chart's value in Helm's merge, and the template's ``if`` then sees nil.
        default = rules.get("default", True)
        self.default_rules_enabled = go_truthy(default) and not self.existing_configmap
        if self.default_rules_enabled:
            anchor: Path = (*base, "default") if "default" in rules else base
            for index, data in enumerate(CHART_DEFAULT_RULES):
                rule = AdapterRule(self, CUSTOM, index, anchor, data, generated=True)
                self.rules.append(rule)
        prometheus = as_dict(values.get("prometheus"))
        url = prometheus.get("url")
        if isinstance(url, str):
            port = prometheus.get("port")
            self.prometheus_url = f"{url}:{port}" if port and ":" not in url[8:] else url

    def all_rules(self) -> Iterator[AdapterRule]:
        yield from self.rules
        yield from self.external_rules

    def rules_for_api(self, api: str) -> list[AdapterRule]:
        return self.external_rules if api == EXTERNAL else self.rules

    @property
    def complete(self) -> bool:
        """False when the real rules live elsewhere (Helm ``rules.existing``) or could not
        be read."""
        return self.existing_configmap is None and not self.unreadable

    def describe(self) -> str:
        if self.owner is not None:
            return f"ConfigMap {self.owner.name}"
        if self.wrapper is not None:
            return f"the values of {self.wrapper.kind} {self.wrapper.name}"
        return f"{self.form} {self.document.file}"

    def describe_short(self) -> str:
        """Like ``describe`` with the file's base name (its full path is in the location)."""
        if self.owner is not None or self.wrapper is not None:
            return self.describe()
        return f"{self.form} {os.path.basename(self.document.file)}"

    @property
    def ref(self) -> ObjectRef | None:
        """The Kubernetes object that holds the config (a ConfigMap, a HelmRelease or
        Application), if any."""
        if isinstance(self.owner, Manifest):
            return self.owner.ref
        return self.wrapper.ref if self.wrapper is not None else None


def looks_like_adapter_config(data: Any) -> bool:
    """The adapter's own config format: rules/externalRules/resourceRules at the top."""
    if not isinstance(data, dict) or "apiVersion" in data or "kind" in data:
        return False
    keys = [k for k in CONFIG_KEYS if k in data]
    if not keys:
        return False
    for key in ("rules", "externalRules"):
        items = data.get(key)
        if isinstance(items, list) and any(
            isinstance(i, dict) and ("seriesQuery" in i or "metricsQuery" in i) for i in items
        ):
            return True
    return isinstance(data.get("resourceRules"), dict)


def looks_like_adapter_values(data: Any) -> bool:
    """prometheus-adapter chart values: a ``rules`` mapping with custom/external/default/..."""
    if not isinstance(data, dict) or "apiVersion" in data or "kind" in data:
        return False
    rules = data.get("rules")
    if not isinstance(rules, dict):
        return False
    return any(key in rules for key in ("custom", "external", "default", "resource", "existing"))


def describe_document(document: Document) -> ObjectRef:
    """The object a document is, or a stand-in naming what kind of file it is (the adapter's
    own configuration format and Helm values are files, not objects, and findings name them
    by that)."""
    if isinstance(document, Manifest):
        return document.ref
    data = document.data
    if looks_like_adapter_config(data):
        kind = "PrometheusAdapterConfig"
    elif looks_like_adapter_values(data) or isinstance(data, dict):
        kind = "HelmValues"
    else:
        kind = "Document"
    name = document.file.rsplit("/", 1)[-1]
    return ObjectRef("", kind, None, name)


__all__ = [
    "CHART_DEFAULT_RULES",
    "CONFIG_KEYS",
    "CUSTOM",
    "EXTERNAL",
    "FILTER_KEYS",
    "MAX_QUERY_CHARS",
    "NAME_KEYS",
    "OVERRIDE_KEYS",
    "RESOURCES_KEYS",
    "RESOURCE_RULES_KEYS",
    "RESOURCE_RULE_KEYS",
    "RULE_KEYS",
    "SERIES_NAME",
    "TEMPLATE_FIELDS",
    "AdapterConfig",
    "AdapterRule",
    "ResourceMapping",
    "canonical_resource",
    "compile_go_regex",
    "describe_document",
    "go_expand",
    "go_regex_problem",
    "go_truthy",
    "looks_like_adapter_config",
    "looks_like_adapter_values",
    "read_resources",
    "render_resource_template",
    "requested_metric_name",
    "singular",
]
