"""Just enough PromQL for gpulint: series selectors, metric names in a query, aggregations.

gpulint does not evaluate PromQL. It reads selectors (``DCGM_FI_DEV_GPU_UTIL{pod!=""}``,
``{__name__=~"^container_.*"}``) and finds the metric names and ``sum ... by (...)``
aggregations that rules reason about. Template actions (``<<.Series>>``) are treated as opaque.

Queries come from objects anyone may write (an adapter ConfigMap in any namespace reaches the
webhook's cache), so every analysis here is linear in the query's length: parentheses are
paired in one pass, aggregations are sorted out in one sweep, and names are collected in a
dict. Loops over a query also check the deadline of the evaluation under way
(``analysis_deadline``), so that even a long query cannot hold a review past its own.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import functools
import re
import time
from collections.abc import Iterator
from typing import NamedTuple

from gpulint.core.deadline import DeadlineExceeded

# The deadline (a time.monotonic() value) of the evaluation running in this thread, if any.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "gpulint_promql_deadline", default=None
)
# Steps of a loop between two looks at the clock.
_CHECK_EVERY = 1024


@contextlib.contextmanager
def analysis_deadline(deadline: float | None) -> Iterator[None]:
    """Within this block, query analyses in this thread raise ``DeadlineExceeded`` once
    ``deadline`` has passed."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_analysis_deadline() -> None:
    deadline = _DEADLINE.get()
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlineExceeded("(a PromQL query's analysis)")


_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_OPS = ("=~", "!~", "!=", "=")


class SelectorError(ValueError):
    pass


class Matcher(NamedTuple):
    label: str
    op: str
    value: str

    def matches(self, actual: str | None) -> bool:
        """Prometheus semantics: a missing label is the empty string; regexes are anchored."""
        text = actual or ""
        if self.op == "=":
            return text == self.value
        if self.op == "!=":
            return text != self.value
        pattern = compile_anchored(self.value)
        if pattern is None:
            return True  # an expression gpulint cannot compile: do not judge
        found = pattern.fullmatch(text) is not None
        return found if self.op == "=~" else not found

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.label}{self.op}"{escaped}"'


class Selector(NamedTuple):
    metric: str | None
    matchers: tuple[Matcher, ...]

    def name_matchers(self) -> list[Matcher]:
        found = [m for m in self.matchers if m.label == "__name__"]
        if self.metric:
            found.insert(0, Matcher("__name__", "=", self.metric))
        return found

    def label_matchers(self) -> list[Matcher]:
        return [m for m in self.matchers if m.label != "__name__"]

    def literal_names(self) -> list[str] | None:
        """The metric names this selector can match, when they are spelled out; else None."""
        names: list[str] | None = None
        for matcher in self.name_matchers():
            if matcher.op == "=":
                candidates = [matcher.value]
            elif matcher.op == "=~":
                candidates = literal_alternatives(matcher.value) or []
                if not candidates:
                    continue
            else:
                continue
            names = candidates if names is None else [n for n in names if n in candidates]
        if names is None:
            return None
        return [n for n in names if self.accepts_name(n)]

    def accepts_name(self, name: str) -> bool:
        return all(m.matches(name) for m in self.name_matchers())

    def __str__(self) -> str:
        inner = ",".join(str(m) for m in self.matchers)
        return (
            f"{self.metric or ''}{{{inner}}}" if self.matchers or not self.metric else self.metric
        )


_regex_cache: dict[str, re.Pattern[str] | None] = {}


def compile_anchored(pattern: str) -> re.Pattern[str] | None:
    """Compile an RE2 pattern as Python does (close enough for names and labels)."""
    if pattern not in _regex_cache:
        try:
            _regex_cache[pattern] = re.compile(pattern)
        except re.error:
            _regex_cache[pattern] = None
    return _regex_cache[pattern]


_PLAIN_ALTERNATIVE = re.compile(r"^[a-zA-Z0-9_:]+$")


def literal_alternatives(pattern: str) -> list[str] | None:
    """``"^(a|b)$"`` -> ["a", "b"]; None when the pattern is a real regular expression."""
    body = pattern
    if body.startswith("^"):
        body = body[1:]
    if body.endswith("$") and not body.endswith("\\$"):
        body = body[:-1]
    if body.startswith("(") and body.endswith(")") and body.count("(") == 1:
        body = body[1:-1]
        if body.startswith("?:"):
            body = body[2:]
    parts = body.split("|")
    if all(_PLAIN_ALTERNATIVE.match(p) for p in parts):
        return parts
    return None


def _read_string(text: str, pos: int) -> tuple[str, int]:
    quote = text[pos]
    if quote not in "\"'`":
        raise SelectorError(f"expected a quoted label value at offset {pos}")
    pos += 1
    out: list[str] = []
    while pos < len(text):
        char = text[pos]
        if char == quote:
            return "".join(out), pos + 1
        if char == "\\" and quote != "`" and pos + 1 < len(text):
            nxt = text[pos + 1]
            out.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}.get(nxt, "\\" + nxt))
            pos += 2
            continue
        out.append(char)
        pos += 1
    raise SelectorError("unterminated string in label matcher")


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def parse_selector(text: str) -> Selector:
    """Parse a series selector such as a prometheus-adapter ``seriesQuery``."""
    pos = _skip_space(text, 0)
    metric = None
    match = _IDENT.match(text, pos)
    if match:
        metric = match.group(0)
        pos = _skip_space(text, match.end())
    matchers: list[Matcher] = []
    if pos < len(text) and text[pos] == "{":
        pos = _skip_space(text, pos + 1)
        while pos < len(text) and text[pos] != "}":
            label = _LABEL.match(text, pos)
            if not label:
                raise SelectorError(f"expected a label name at offset {pos} in {text!r}")
            pos = _skip_space(text, label.end())
            op = next((o for o in _OPS if text.startswith(o, pos)), None)
            if op is None:
                raise SelectorError(f"expected =, !=, =~ or !~ after {label.group(0)!r}")
            pos = _skip_space(text, pos + len(op))
            value, pos = _read_string(text, pos)
            matchers.append(Matcher(label.group(0), op, value))
            pos = _skip_space(text, pos)
            if pos < len(text) and text[pos] == ",":
                pos = _skip_space(text, pos + 1)
        if pos >= len(text):
            raise SelectorError(f"missing closing brace in {text!r}")
        pos = _skip_space(text, pos + 1)
    if pos != len(text):
        raise SelectorError(f"unexpected text {text[pos:]!r} after the selector")
    if metric is None and not matchers:
        raise SelectorError("empty series selector")
    if metric is None and all(m.matches("") for m in matchers):
        # Prometheus: "vector selector must contain at least one non-empty matcher".
        raise SelectorError(
            f"{text!r} has no matcher that excludes the empty string; Prometheus rejects it"
        )
    return Selector(metric, tuple(matchers))


_KEYWORDS = {
    "sum",
    "avg",
    "min",
    "max",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "group",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "rate",
    "irate",
    "increase",
    "delta",
    "idelta",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "sum_over_time",
    "count_over_time",
    "last_over_time",
    "quantile_over_time",
    "histogram_quantile",
    "label_replace",
    "label_join",
    "abs",
    "ceil",
    "floor",
    "round",
    "clamp",
    "clamp_max",
    "clamp_min",
    "vector",
    "scalar",
    "time",
    "deriv",
    "predict_linear",
    "absent",
    "absent_over_time",
    "changes",
    "resets",
    "sort",
    "sort_desc",
    "sqrt",
    "exp",
    "ln",
    "log2",
    "log10",
    "timestamp",
    "present_over_time",
    "stddev_over_time",
    "stdvar_over_time",
    "inf",
    "nan",
    "atan2",
    "limitk",
    "limit_ratio",
}
_TEMPLATE_ACTION = re.compile(r"<<.*?>>", re.DOTALL)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_NAME_IN_QUERY = re.compile(r"(?<![a-zA-Z0-9_:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![a-zA-Z0-9_:(])")
_FUNCTION_CALL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*\(")
_DURATION_LIKE = re.compile(r"\d+[smhdwy]?")


def _metric_names_in_query(query: str) -> list[str]:
    """Metric names written literally in a PromQL query (not functions, keywords or labels)."""
    text = _TEMPLATE_ACTION.sub(" ", query)
    names: list[str] = []
    for match in re.finditer(r'__name__\s*=\s*"([^"]+)"', text):
        names.append(match.group(1))
    text = _STRING.sub('""', text)
    text = _BRACES.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    found = dict.fromkeys(names)
    for index, match in enumerate(_NAME_IN_QUERY.finditer(text)):
        if index % _CHECK_EVERY == 0:
            check_analysis_deadline()
        name = match.group(1)
        if name.lower() in _KEYWORDS or _DURATION_LIKE.fullmatch(name):
            continue
        found.setdefault(name)
    return list(found)


_SELECTOR_START = re.compile(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{")


def selectors_in_query(query: str, limit: int = 8) -> list[Selector]:
    """The series selectors written in a query (``DCGM_FI_DEV_GPU_UTIL{pod=~"a-.*"}``), in
    order, up to ``limit``; a selector gpulint cannot parse is left out. The braces of
    ``by (...)`` grouping and of template actions are not selectors."""
    text = _mask_strings(_TEMPLATE_ACTION.sub(lambda m: " " * len(m.group(0)), query))
    found: list[Selector] = []
    close = -1
    for index, match in enumerate(_SELECTOR_START.finditer(text)):
        if index % _CHECK_EVERY == 0:
            check_analysis_deadline()
        name = match.group(1)
        if name and name.lower() in _KEYWORDS:
            continue
        if match.start() < close:
            continue  # inside the braces of the last one: a selector does not nest
        close = text.find("}", match.end())
        if close < 0:
            break
        try:
            selector = parse_selector(query[match.start() : close + 1])
        except SelectorError:
            continue
        found.append(selector)
        if len(found) >= limit:
            break
    return found


_NUMBER = re.compile(
    r"(?<![\w:.])(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?:ms|[smhdwy])?"
)
_LETTER = re.compile(r"[a-zA-Z_:]")


def reads_no_series(query: str) -> bool:
    """Does a query certainly read no series (``vector(1)``, ``time() % 3600``, ``70``)?

    True only when, strings aside, nothing but numbers, operators, parentheses and function
    calls is left: a selector, a metric name, a keyword or a template action answers False,
    since gpulint cannot tell what it reads."""
    if _TEMPLATE_ACTION.search(query):
        return False
    text = _STRING.sub('""', query)
    if "{" in text or "[" in text or not text.strip():
        return False
    text = _FUNCTION_CALL.sub("(", text)
    text = _NUMBER.sub(" ", text)
    return _LETTER.search(text) is None


class Aggregation(NamedTuple):
    operator: str
    grouping: str | None  # "by" or "without"
    labels: tuple[str, ...]


_AGGREGATION = re.compile(
    r"\b(sum|avg|max|min|count|topk|bottomk|quantile|group|stddev|stdvar)\s*"
    r"(?:(by|without)\s*\(([^)]*)\)\s*)?\("
)
_TRAILING_GROUPING = re.compile(r"\s*(by|without)\s*\(([^)]*)\)")


def _outer_aggregations(query: str) -> list[Aggregation]:
    """Aggregations in a query, with their grouping clause whether written before or after."""
    found = []
    parens = _Parentheses(query)
    for index, match in enumerate(_AGGREGATION.finditer(query)):
        if index % _CHECK_EVERY == 0:
            check_analysis_deadline()
        operator, grouping, labels = match.group(1), match.group(2), match.group(3)
        if grouping is None:
            end = parens.closing(match.end() - 1)
            if end is not None:
                trailing = _TRAILING_GROUPING.match(query, end + 1)
                if trailing:
                    grouping, labels = trailing.group(1), trailing.group(2)
        label_list = tuple(s.strip() for s in (labels or "").split(",") if s.strip())
        found.append(Aggregation(operator, grouping, label_list))
    return found


class _Parentheses:
    """The parentheses of a text, paired in one pass: where each one that opens closes, and
    how many are open (opened minus closed) before any offset."""

    def __init__(self, text: str) -> None:
        self.closes: dict[int, int] = {}
        self.offsets: list[int] = []
        self.depths: list[int] = []  # opened minus closed up to and including offsets[i]
        opened: list[int] = []
        depth = 0
        for index, match in enumerate(_PARENTHESIS.finditer(text)):
            if index % _CHECK_EVERY == 0:
                check_analysis_deadline()
            at = match.start()
            if text[at] == "(":
                opened.append(at)
                depth += 1
            else:
                if opened:
                    self.closes[opened.pop()] = at
                depth -= 1
            self.offsets.append(at)
            self.depths.append(depth)

    def closing(self, open_at: int) -> int | None:
        """Where the parenthesis that opens at ``open_at`` closes; None when it does not."""
        return self.closes.get(open_at)

    def depth_at(self, offset: int) -> int:
        """Parentheses opened minus closed before ``offset``."""
        before = bisect.bisect_left(self.offsets, offset)
        return self.depths[before - 1] if before else 0


_PARENTHESIS = re.compile(r"[()]")


class PlacedAggregation(NamedTuple):
    """An aggregation with where it sits in the query."""

    aggregation: Aggregation
    start: int
    end: int  # after its argument list and any grouping clause written after it
    depth: int  # parentheses open around it; 0 is the query's top level


def _mask_strings(query: str) -> str:
    """The query with string contents blanked, offsets unchanged (parentheses in label values
    must not count)."""
    return _STRING.sub(
        lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1], query
    )


def _placed_aggregations(query: str) -> list[PlacedAggregation]:
    """Every aggregation of a query, in order, with its span and nesting depth."""
    text = _mask_strings(query)
    found = []
    parens = _Parentheses(text)
    for index, match in enumerate(_AGGREGATION.finditer(text)):
        if index % _CHECK_EVERY == 0:
            check_analysis_deadline()
        operator, grouping, labels = match.group(1), match.group(2), match.group(3)
        end = match.end()
        close = parens.closing(match.end() - 1)
        if close is not None:
            end = close + 1
            if grouping is None:
                trailing = _TRAILING_GROUPING.match(text, end)
                if trailing:
                    grouping, labels = trailing.group(1), trailing.group(2)
                    end = trailing.end()
        label_list = tuple(s.strip() for s in (labels or "").split(",") if s.strip())
        depth = parens.depth_at(match.start())
        found.append(
            PlacedAggregation(
                Aggregation(operator, grouping, label_list), match.start(), end, depth
            )
        )
    return found


def outermost_aggregations(query: str) -> list[PlacedAggregation]:
    """Aggregations not nested inside another aggregation: the ones whose grouping decides
    which labels the result keeps (``histogram_quantile(0.9, sum(...) by (le, pod))`` counts)."""
    return list(_cached_outermost(query))


@functools.lru_cache(maxsize=4096)
def _cached_outermost(query: str) -> tuple[PlacedAggregation, ...]:
    # Aggregations come in order of start (no two start at one offset): one is inside
    # another exactly when it starts before the furthest end of those before it.
    outermost: list[PlacedAggregation] = []
    reach = -1
    for placed in placed_aggregations(query):
        if placed.start >= reach:
            outermost.append(placed)
        reach = max(reach, placed.end)
    return tuple(outermost)


@functools.lru_cache(maxsize=4096)
def top_level_text(query: str) -> str:
    """What a query says outside any parentheses, brackets or braces: its operators and the
    names of its outermost calls (``sum(...) by (...) / count(...)`` -> ``sum by / count``)."""
    text = _mask_strings(query)
    out: list[str] = []
    depth = 0
    for index, char in enumerate(text):
        if index % _CHECK_EVERY == 0:
            check_analysis_deadline()
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(char)
    return "".join(out)


# Rules ask the same questions about the same few queries once per HPA: answer each once.


@functools.lru_cache(maxsize=4096)
def _cached_names(query: str) -> tuple[str, ...]:
    return tuple(_metric_names_in_query(query))


def metric_names_in_query(query: str) -> list[str]:
    """Metric names written literally in a PromQL query (not functions, keywords or labels)."""
    return list(_cached_names(query))


@functools.lru_cache(maxsize=4096)
def _cached_outer(query: str) -> tuple[Aggregation, ...]:
    return tuple(_outer_aggregations(query))


def outer_aggregations(query: str) -> list[Aggregation]:
    """Aggregations in a query, with their grouping clause whether written before or after."""
    return list(_cached_outer(query))


@functools.lru_cache(maxsize=4096)
def _cached_placed(query: str) -> tuple[PlacedAggregation, ...]:
    return tuple(_placed_aggregations(query))


def placed_aggregations(query: str) -> list[PlacedAggregation]:
    """Aggregations with their offsets and nesting depth (see ``_placed_aggregations``)."""
    return list(_cached_placed(query))


def mention(name: str) -> re.Pattern[str]:
    """A pattern for ``name`` used as a whole metric name in a query: not a part of a longer
    name (``DCGM_FI_DEV_GPU_UTIL`` is not mentioned by ``DCGM_FI_DEV_GPU_UTIL_TOTAL``, and
    ``job:x`` not by ``x``). Metric names are made of word characters and colons."""
    return re.compile(rf"(?<![\w:]){re.escape(name)}(?![\w:])")


def mentions(query: str, name: str) -> bool:
    return mention(name).search(query) is not None
