"""KEDA's prometheus triggers, as a ScaledObject's and a ScaledJob's both carry them
(``gpulint.kinds.keda``, ``gpulint.kinds.scaledjob``): the views build them, rules and the live
check read them.

A ``type: prometheus`` trigger is read as KEDA's prometheus scaler reads its metadata
(kedacore/keda pkg/scalers/prometheus_scaler.go ``prometheusMetadata``, parsed by
pkg/scalers/scalersconfig/typed_config.go): every value is a string, trimmed of spaces, and
an empty one counts as unset; ``threshold`` and ``activationThreshold`` (default 0) are JSON
numbers, ``ignoreNullValues`` (default true) and ``unsafeSsl`` are Go booleans
(strconv.ParseBool), ``customHeaders`` and ``queryParameters`` are ``k=v,k2=v2`` lists,
``timeout`` is a Go duration or a number of milliseconds.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from gpulint.chain.address import PrometheusUrl
from gpulint.input.document import Manifest, Path, as_dict
from gpulint.kinds.scaletarget import TargetRef
from gpulint.kinds.scaling import ScalingRange, replica_count

KEDA_GROUP = "keda.sh"


def keda_range(spec: dict[str, Any], by: str) -> ScalingRange:
    """``minReplicaCount`` (default 0: KEDA itself scales to zero) to ``maxReplicaCount``
    (default 100) (kedacore/keda apis/keda/v1alpha1/scaledobject_types.go, the executor)."""
    minimum = replica_count(spec.get("minReplicaCount"), 0)
    maximum = replica_count(spec.get("maxReplicaCount"), 100)
    path: Path = ("spec", "maxReplicaCount") if "maxReplicaCount" in spec else ("spec",)
    return ScalingRange(minimum, maximum, by, path)


# strconv.ParseBool for booleans, json.Unmarshal for floats, as KEDA's typed config calls
# them: a JSON number has no "+", no leading zero and no bare "." ("0.5", not ".5" or "5.").
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?", re.ASCII)
_GO_DURATION = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h)", re.ASCII)
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# What KEDA waits for an answer when a trigger sets no timeout: KEDA_HTTP_DEFAULT_TIMEOUT,
# 3000 ms unless the operator's environment says otherwise (kedacore/keda cmd/operator/main.go).
KEDA_HTTP_TIMEOUT = 3.0
# Bounds on what a manifest makes gpulint send along with a query.
_MAX_PAIRS = 32
_MAX_PAIR_TEXT = 4096


class TriggerOwner(Protocol):
    """What holds KEDA triggers: a ScaledObject, or a ScaledJob (gpulint.kinds.scaledjob),
    whose prometheus triggers the same scaler reads."""

    manifest: Manifest
    spec: dict[str, Any]
    triggers: list[dict[str, Any]]
    target_ref: TargetRef | None  # None for a ScaledJob: its jobs come from its own template
    # What an inactive trigger does, after "the trigger is never active and ".
    asks_for_none: str
    # The object whose controller makes the ScaledObject (``LLMInferenceService ml/llm``);
    # None for one written as such.
    made_by: str | None

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str | None: ...

    @property
    def triggers_path(self) -> Path:
        """Where the triggers are written in ``manifest`` (``spec.triggers``; elsewhere for
        the ScaledObject a controller makes from another object's settings)."""
        ...

    def scaling_range(self) -> ScalingRange: ...

    def describe_target(self) -> str:
        """What the triggers scale, for messages (``Deployment llm``)."""
        ...

    def on_failing_poll(self) -> str:
        """What one trigger's failing poll does (for messages: "so ...")."""
        ...

    def on_zero(self) -> str:
        """What one trigger that reads 0 does (for messages: "so ...")."""
        ...


class PrometheusTrigger:
    """One ``type: prometheus`` trigger of a ScaledObject or a ScaledJob, as KEDA's prometheus
    scaler reads it.

    Values that KEDA would refuse (a threshold that is not a float, a boolean that is not one)
    read as None; KEDA then reports the trigger as failing to build and never queries.
    """

    __slots__ = ("data", "index", "metadata", "scaled_object")

    def __init__(self, scaled_object: TriggerOwner, index: int, data: dict[str, Any]) -> None:
        self.scaled_object = scaled_object
        self.index = index
        self.data = data
        self.metadata = as_dict(data.get("metadata"))

    def __repr__(self) -> str:
        return f"<PrometheusTrigger {self.scaled_object.name}[{self.index}]>"

    @property
    def manifest(self) -> Manifest:
        return self.scaled_object.manifest

    @property
    def path(self) -> Path:
        return (*self.scaled_object.triggers_path, self.index)

    @property
    def query_path(self) -> Path:
        return (*self.path, "metadata", "query")

    def text(self, key: str) -> str | None:
        """A metadata value as KEDA reads it: a string (YAML numbers and booleans written
        unquoted are taken as their text), trimmed; None when unset or empty."""
        value = self.metadata.get(key)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str | int | float):
            return str(value).strip() or None
        return None

    @property
    def query(self) -> str | None:
        """The query KEDA sends (trimmed: a ``query: |`` block's last newline is not sent)."""
        query = self.metadata.get("query")
        return query.strip() if isinstance(query, str) and query.strip() else None

    @property
    def server_address(self) -> str | None:
        return self.text("serverAddress")

    @property
    def namespace(self) -> str | None:
        return self.text("namespace")

    @property
    def threshold(self) -> float | None:
        return _go_float(self.text("threshold"))

    @property
    def activation_threshold(self) -> float | None:
        text = self.text("activationThreshold")
        return 0.0 if text is None else _go_float(text)

    @property
    def ignore_null_values(self) -> bool | None:
        """Default true: an empty answer reads as 0 (false: the poll fails)."""
        return _go_bool(self.text("ignoreNullValues"), True)

    @property
    def unsafe_ssl(self) -> bool | None:
        return _go_bool(self.text("unsafeSsl"), False)

    @property
    def metric_type(self) -> str:
        """``AverageValue`` unless the trigger says ``Value`` (KEDA's GetMetricTargetType)."""
        kind = self.data.get("metricType")
        return kind if isinstance(kind, str) and kind else "AverageValue"

    @property
    def custom_headers(self) -> list[tuple[str, str]] | None:
        """``customHeaders: X-Scope-OrgID=team-a,X-Other=b``; None when KEDA would refuse it."""
        return _pairs(self.text("customHeaders"))

    @property
    def query_parameters(self) -> list[tuple[str, str]] | None:
        return _pairs(self.text("queryParameters"))

    @property
    def timeout(self) -> float:
        """Seconds KEDA waits for Prometheus: ``timeout`` (a duration or milliseconds), else
        the operator's default."""
        seconds = _go_duration(self.text("timeout"))
        return seconds if seconds is not None and seconds > 0 else KEDA_HTTP_TIMEOUT

    @property
    def timeout_readable(self) -> bool:
        """Is ``timeout`` unset, a duration or milliseconds (else KEDA refuses the trigger)?"""
        text = self.text("timeout")
        return text is None or _go_duration(text) is not None

    def describe(self) -> str:
        """``prometheus trigger 0 of ScaledObject ml/llm`` (or ScaledJob), for messages."""
        name = self.data.get("name")
        named = f" ({name})" if isinstance(name, str) and name else ""
        owner = self.scaled_object
        if owner.made_by is not None:
            return (
                f"prometheus trigger {self.index}{named} of ScaledObject {owner.name} "
                f"(made by {owner.made_by})"
            )
        where = f"{owner.namespace}/" if owner.namespace else ""
        kind = owner.manifest.kind
        return f"prometheus trigger {self.index}{named} of {kind} {where}{owner.name}"


def _go_float(text: str | None) -> float | None:
    if text is None or not _JSON_NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if value == value and abs(value) != float("inf") else None


def _go_bool(text: str | None, default: bool) -> bool | None:
    if text is None:
        return default
    if text in _GO_TRUE:
        return True
    return False if text in _GO_FALSE else None


def _go_duration(text: str | None) -> float | None:
    """time.ParseDuration, else a number of milliseconds (typed_config.go)."""
    if not text:
        return None
    if text.isascii() and text.isdigit() and len(text) <= 12:
        return int(text) / 1000
    position, seconds = 0, 0.0
    for match in _GO_DURATION.finditer(text):
        if match.start() != position:
            return None
        number = match.group(0).rstrip("nsuµmh")
        seconds += float(number) * _DURATION_UNITS[match.group(0)[len(number) :]]
        position = match.end()
    return seconds if position == len(text) and position else None


def _pairs(text: str | None) -> list[tuple[str, str]] | None:
    """``k=v,k2=v2`` as KEDA splits it: each element exactly one ``=``, spaces trimmed."""
    if text is None or not text.strip():
        return []
    if len(text) > _MAX_PAIRS * _MAX_PAIR_TEXT:
        return None
    found = []
    for element in text.split(","):
        parts = element.strip().split("=")
        if len(parts) != 2:
            return None
        found.append((parts[0].strip(), parts[1].strip()))
    return found if len(found) <= _MAX_PAIRS else None


def trigger_urls(
    triggers: list[PrometheusTrigger], manifest: Manifest, owner: str
) -> list[PrometheusUrl]:
    """``serverAddress`` of prometheus triggers, at their paths in ``manifest`` (KEDA's
    operator dials it, so a bare host name resolves in KEDA's namespace); ``owner`` names
    them (``ScaledJob train``)."""
    found = []
    for trigger in triggers:
        address = trigger.server_address
        if address:
            found.append(
                PrometheusUrl(
                    address,
                    manifest,
                    (*trigger.path, "metadata", "serverAddress"),
                    "keda",
                    f"{owner} trigger {trigger.index}",
                    None,
                    manifest,
                )
            )
    return found
