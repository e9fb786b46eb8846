"""The prometheus-adapter Helm chart's default rules (``rules.default``, true unless set
false), as its templates/configmap.yaml writes them."""

from __future__ import annotations

from typing import Any

# The prometheus-adapter chart's generic rules (rules.default: true), as data.
_CONTAINER_SERIES = '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
_NAMESPACED_SERIES = '{namespace!="",__name__!~"^container_.*"}'
_POD_NS_OVERRIDES = {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
CHART_DEFAULT_RULES: tuple[dict[str, Any], ...] = (
    {
        "seriesQuery": _CONTAINER_SERIES,
        "seriesFilters": [],
        "resources": {"overrides": _POD_NS_OVERRIDES},
        "name": {"matches": "^container_(.*)_seconds_total$", "as": ""},
        "metricsQuery": 'sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[5m])) '
        "by (<<.GroupBy>>)",
    },
    {
        "seriesQuery": _CONTAINER_SERIES,
        "seriesFilters": [{"isNot": "^container_.*_seconds_total$"}],
        "resources": {"overrides": _POD_NS_OVERRIDES},
        "name": {"matches": "^container_(.*)_total$", "as": ""},
        "metricsQuery": 'sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[5m])) '
        "by (<<.GroupBy>>)",
    },
    {
        "seriesQuery": _CONTAINER_SERIES,
        "seriesFilters": [{"isNot": "^container_.*_total$"}],
        "resources": {"overrides": _POD_NS_OVERRIDES},
        "name": {"matches": "^container_(.*)$", "as": ""},
        "metricsQuery": 'sum(<<.Series>>{<<.LabelMatchers>>,container!="POD"}) by (<<.GroupBy>>)',
    },
    {
        "seriesQuery": _NAMESPACED_SERIES,
        "seriesFilters": [{"isNot": ".*_total$"}],
        "resources": {"template": "<<.Resource>>"},
        "name": {"matches": "", "as": ""},
        "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    },
    {
        "seriesQuery": _NAMESPACED_SERIES,
        "seriesFilters": [{"isNot": ".*_seconds_total"}],
        "resources": {"template": "<<.Resource>>"},
        "name": {"matches": "^(.*)_total$", "as": ""},
        "metricsQuery": "sum(rate(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)",
    },
    {
        "seriesQuery": _NAMESPACED_SERIES,
        "seriesFilters": [],
        "resources": {"template": "<<.Resource>>"},
        "name": {"matches": "^(.*)_seconds_total$", "as": ""},
        "metricsQuery": "sum(rate(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)",
    },
)
