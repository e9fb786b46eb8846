"""Where findings for an admitted object come from, and what gpulint does with them.

Two sources: the cluster inventory (``gpulint.cluster.cache.ClusterCache``, list+watch caches
kept in memory; the admitted object is laid over them) or, with ``--no-cluster``, the object
on its own. Both answer from memory and stop at a deadline.

With ``--prometheus`` the cluster source also runs the live rules GL801-GL805 from a snapshot
refreshed in the background (``webhook.live``); their findings are warnings at most, since
they describe what the cluster already holds as Prometheus saw it at the last refresh.

``Decider`` turns findings into a verdict. Findings at or above the deny level refuse the
request, except on an UPDATE for findings the object already had before the change (the
object as it was, ``oldObject``, gives the same finding): those are warned about, so that a
problem that is already in the cluster does not block unrelated edits such as an image bump
or the removal of a finalizer.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from gpulint.admission.overlay import FINDINGS_PER_RULE
from gpulint.core.model import Finding, ObjectRef, Severity
from gpulint.engine.config import Settings
from gpulint.engine.registry import Selection, rules_requiring
from gpulint.engine.runner import INTERNAL_ERROR
from gpulint.kinds.classify import EmbeddedParser, parse_embedded
from gpulint.kinds.registry import evaluated_kinds

from .review import (
    ReviewRequest,
    denial_message,
    fit_warnings,
    review_response,
    warning_text,
)

if TYPE_CHECKING:
    from gpulint.admission.embedded import EmbeddedWorker
    from gpulint.cluster.cache import ClusterCache
    from gpulint.cluster.kinds import AdapterConfigMapSelector

    from .live import LiveRefresh

# (API group, kind) of the objects gpulint evaluates (gpulint.kinds.registry); any version of the
# group (an autoscaling/v2beta2 HPA is evaluated, and GL109 says it is no longer served).
EVALUATED_KINDS = evaluated_kinds()


class Evaluator(Protocol):
    """What the server needs from a source of findings."""

    live: LiveRefresh | None  # the live snapshot's refresh, with --prometheus

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def ready(self) -> bool: ...
    def sync_state(self) -> dict[str, str]: ...
    def too_deep_objects(self) -> int: ...
    def try_hold(self) -> bool:
        """Take what an evaluation reads (the cluster cache's lock) without waiting: False
        when another thread holds it. An evaluation on the event loop must not wait for a
        watch thread replacing thousands of objects; it goes to a review thread instead."""
        ...

    def release(self) -> None:
        """Give back what ``try_hold`` took."""
        ...

    def evaluate(
        self,
        obj: dict[str, Any],
        operation: str,
        old: dict[str, Any] | None,
        deadline: float,
        embedded: EmbeddedParser = ...,
    ) -> list[Finding]: ...


class ClusterEvaluator:
    """Findings from the cluster inventory: the admitted object with what it relates to."""

    def __init__(
        self, cache: ClusterCache, selection: Selection, live: LiveRefresh | None = None
    ) -> None:
        self.cache = cache
        self.selection = selection
        self.live = live
        self._live_rules: frozenset[str] = frozenset()
        if live is not None:
            self._live_rules = rules_requiring("live")

    def start(self) -> None:
        self.cache.start()
        if self.live is not None:
            self.live.start()

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
        self.cache.stop()

    def ready(self) -> bool:
        return self.cache.synced()

    def sync_state(self) -> dict[str, str]:
        return self.cache.sync_state()

    def too_deep_objects(self) -> int:
        return self.cache.too_deep_objects

    def try_hold(self) -> bool:
        # An RLock: cache.evaluate takes it again in this thread without waiting.
        return self.cache.lock.acquire(blocking=False)

    def release(self) -> None:
        self.cache.lock.release()

    def evaluate(
        self,
        obj: dict[str, Any],
        operation: str,
        old: dict[str, Any] | None,
        deadline: float,
        embedded: EmbeddedParser = parse_embedded,
    ) -> list[Finding]:
        findings = self.cache.evaluate(obj, operation, old, self.selection, deadline, embedded)
        if not self._live_rules:
            return findings
        return [_as_warning(f) if self._observed(f) else f for f in findings]

    def _observed(self, finding: Finding) -> bool:
        return finding.rule in self._live_rules or finding.settled_by in self._live_rules


def _as_warning(finding: Finding) -> Finding:
    """A live finding never refuses a request: its evidence only matches a rule or an HPA
    metric the cluster already holds unchanged, so it is a problem already there (which
    never blocks a change, see Decider), seen in Prometheus up to a refresh ago. An offline
    finding a live one settled (gpulint.engine.settled) keeps the severity the object alone
    gives it, or a warning if that is less."""
    if finding.input_severity is not None:
        keep = max(finding.input_severity, min(finding.severity, Severity.WARNING))
        return finding._replace(severity=keep)
    if finding.severity > Severity.WARNING:
        return finding._replace(severity=Severity.WARNING)
    return finding


class StandaloneEvaluator:
    """``--no-cluster``: each admitted object on its own; cross-object rules see only it."""

    def __init__(self, settings: Settings, selection: Selection) -> None:
        self.settings = settings
        self.selection = selection
        self.live: LiveRefresh | None = None  # the live check needs the cluster caches

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def ready(self) -> bool:
        return True

    def sync_state(self) -> dict[str, str]:
        return {}

    def too_deep_objects(self) -> int:
        return 0

    def try_hold(self) -> bool:
        return True  # the object on its own: nothing shared to wait for

    def release(self) -> None:
        return None

    def evaluate(
        self,
        obj: dict[str, Any],
        operation: str,
        old: dict[str, Any] | None,
        deadline: float,
        embedded: EmbeddedParser = parse_embedded,
    ) -> list[Finding]:
        from gpulint.cluster.cache import evaluate_alone

        return evaluate_alone(obj, operation, self.settings, self.selection, deadline, embedded)


def skip_reason(
    request: ReviewRequest, adapter_configmaps: AdapterConfigMapSelector | None
) -> str | None:
    """Why a request is allowed without evaluation, or None when gpulint evaluates it."""
    if request.operation in ("DELETE", "CONNECT"):
        return request.operation.lower()
    if request.sub_resource:
        return "subresource"
    group, kind = request.kind.group, request.kind.kind
    obj = request.object or {}
    if (group, kind) not in EVALUATED_KINDS:
        if not (group == "" and kind == "ConfigMap"):
            return "kind"
        if adapter_configmaps is None or not adapter_configmaps.matches(obj):
            return "configmap"
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and metadata.get("deletionTimestamp"):
        # Finalizers are being removed from an object on its way out: never in the way.
        return "deleting"
    return None


def admitted_object(request: ReviewRequest) -> dict[str, Any]:
    """The object as the rules should see it: with its namespace even if the body left it to
    the request (the API server fills it in; a hand-made review may not)."""
    obj = request.object or {}
    metadata = obj.get("metadata")
    if request.namespace and (
        not isinstance(metadata, dict) or not isinstance(metadata.get("namespace"), str)
    ):
        obj = dict(obj)
        metadata = dict(metadata) if isinstance(metadata, dict) else {}
        metadata["namespace"] = request.namespace
        obj["metadata"] = metadata
    return obj


def _finding_key(finding: Finding) -> tuple[str, ObjectRef | None, str]:
    return (finding.rule, finding.object, finding.message)


@dataclass
class Decision:
    verdict: str  # allowed | warned | denied
    response: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    refused: list[Finding] = field(default_factory=list)
    existing: list[Finding] = field(default_factory=list)


class Decider:
    """Findings into a verdict. YAML embedded in the object (an adapter ConfigMap's config) is
    parsed by ``embedded`` (a worker process with limits, see ``gpulint.admission.embedded``)
    when there is one."""

    def __init__(
        self,
        evaluator: Evaluator,
        deny_on: Severity | None,
        embedded: EmbeddedWorker | None = None,
    ) -> None:
        self.evaluator = evaluator
        self.deny_on = deny_on
        self.embedded = embedded

    def refuses(self, finding: Finding) -> bool:
        # GL799 says gpulint failed on one rule: never a reason to refuse (the other rules'
        # findings still are), and never a reason to let the others through either.
        if finding.rule == INTERNAL_ERROR:
            return False
        return self.deny_on is not None and finding.severity >= self.deny_on

    def decide(self, request: ReviewRequest, deadline: float) -> Decision:
        """Evaluate and answer; raises DeadlineExceeded (and anything the evaluation raises)
        for the caller to fail open."""
        obj = admitted_object(request)
        skipped: list[str] = []
        parser = self.embedded.parser(deadline, skipped) if self.embedded else parse_embedded
        findings = self.evaluator.evaluate(
            obj, request.operation, request.old_object, deadline, parser
        )
        refused = [f for f in findings if self.refuses(f)]
        existing: list[Finding] = []
        if refused and request.operation == "UPDATE" and request.old_object is not None:
            refused, existing = self._new_and_existing(
                refused, request.old_object, deadline, parser
            )
        warned = [f for f in findings if not self.refuses(f)]
        warnings = [
            f"gpulint did not read the configuration embedded in {request.describe()} ({why}): "
            "it was judged without it"
            for why in dict.fromkeys(skipped)
        ]
        warnings += [warning_text(f, "already present") for f in existing]
        warnings += [warning_text(f) for f in warned]
        counts = Counter(f.rule for f in findings)
        fitted = fit_warnings(warnings, any(n >= FINDINGS_PER_RULE for n in counts.values()))
        if refused:
            message = denial_message(request.describe(), refused)
            response = review_response(request.uid, False, warnings=fitted, message=message)
            return Decision("denied", response, findings, refused, existing)
        verdict = "warned" if fitted else "allowed"
        return Decision(verdict, review_response(request.uid, True, warnings=fitted), findings)

    def _new_and_existing(
        self,
        refused: list[Finding],
        old_object: dict[str, Any],
        deadline: float,
        parser: EmbeddedParser,
    ) -> tuple[list[Finding], list[Finding]]:
        """An UPDATE's refusing findings split into the new ones and those the object
        already had before it (which only warn)."""
        before = self.evaluator.evaluate(old_object, "UPDATE", old_object, deadline, parser)
        had = {_finding_key(f) for f in before}
        existing = [f for f in refused if _finding_key(f) in had]
        return [f for f in refused if _finding_key(f) not in had], existing


def too_deep_warning(request: ReviewRequest, depth: int) -> str:
    return (
        f"gpulint could not read all of {request.describe()}: parts of it nest deeper than "
        f"{depth} levels; it was judged on the rest"
    )


def fail_open_warning(request: ReviewRequest, reason: str, detail: str = "") -> str:
    what = f"gpulint could not evaluate {request.describe()}"
    if reason == "not-synced":
        why = "its cluster caches have not synced yet"
    elif reason == "deadline":
        why = f"its deadline{f' of {detail}' if detail else ''} passed"
    else:
        why = f"an internal error ({detail})" if detail else "an internal error"
    return f"{what}: {why}; the request was allowed unchecked"
