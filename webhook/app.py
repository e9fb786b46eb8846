"""The HTTP side: ``POST /validate``, ``/healthz``, ``/readyz``, ``/metrics``.

Never an outage: every AdmissionReview that carries a ``uid`` gets an answer before its
deadline. When gpulint cannot evaluate (caches not synced, deadline passed, an internal
error) the answer is ``allowed: true`` with a warning saying so, counted in
``gpulint_webhook_fail_open_total``. A body gpulint cannot answer is an HTTP 400 with a JSON
message. Nothing answers 500: an error outside any review is a 400 too, logged as an error.
A body is read as its bytes arrive, each part with room among the bodies being read
(``--max-buffered-bytes``, ``webhook.bodies``); one that finds no room within ``--deadline``
(``--read-timeout`` if shorter) is a 429. One that does not start within a second of its
headers, or end by then, is a 400, and the connection closes. The API server treats either as
a failed call and applies the webhook's failurePolicy (``Ignore`` admits the object
unjudged), so each is counted in ``gpulint_webhook_possible_fail_open_total`` by reason and
logged as ``possible-fail-open``: once per reason and minute, with the count since, as are
``bad-request`` lines, so that a flood of such requests cannot flood the log. With
``--client-ca``, a client that presented no certificate is answered 401 before any of its body
is read.

An object nested deeper than gpulint reads (``gpulint.cluster.decoding.MAX_OBJECT_DEPTH``
levels; the API server passes on 10,000) is never a 400, which ``failurePolicy: Ignore`` would
turn into a silent allow: its kind, name and everything a rule reads are shallow, so it is
judged on what was read. A finding that refuses it still refuses it; otherwise it is allowed
with a warning saying what was not read, or refused with ``--deny-undecodable``. Each such
review is counted in ``gpulint_webhook_undecodable_objects_total`` and logged
(``object-too-deep``). Bodies that are not JSON at all stay a 400 (counted in
``gpulint_webhook_invalid_requests_total`` and logged): the API server always sends JSON, so
they come from something else, and no uid can be trusted from them to answer.

A request chooses what it sends, so nothing it sends becomes a metric label: kinds outside
the evaluated ones are counted as ``other``. Its headers must arrive within ``--read-timeout``
(``webhook.connections``).

Where a review is answered depends on what it costs (``review_route``), decided on the event
loop once the body is decoded:

* skipped: an object no rule reads (a DELETE, another kind, a subresource, a ConfigMap that
  is not the adapter's, an object being deleted) is allowed at once, without the engine;
* inline: a review of an evaluated kind whose body is at most ``INLINE_BODY_BYTES``, read
  whole, with nothing to parse in a child process, is evaluated on the event loop, from
  memory (about 0.2 ms for a Deployment or an HPA: bench/webhook_profile.py). A hand-off to a
  thread costs more than that: the loop and the thread then take turns for the GIL, and each
  turn can wait a switch interval (5 ms), which is what put the p99 at 33-45 ms when every
  review went to a thread (bench/RESULTS.md, "Webhook: where the time goes");
* worker: everything else, in one of ``REVIEW_THREADS`` review threads: a large or too-deep
  object, an adapter ConfigMap (its embedded YAML is parsed in a child process with limits,
  ``gpulint.admission.embedded``, which the thread waits for), and a review that would wait
  for the cluster cache's lock (a watch thread replacing a relisted kind holds it). The
  answer never waits for the thread past the deadline (plus ``DEADLINE_GRACE``): it is
  allowed with a warning then, as it is when the thread pool cannot take work.

The deadline is checked before each evaluation and between rules, on either path.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from gpulint.cluster.decoding import MAX_OBJECT_DEPTH
from gpulint.core.deadline import DeadlineExceeded

from .bodies import (
    FIRST_BYTE_TIMEOUT,
    SMALL_BODY_BYTES,
    BodyPool,
    BodyRoom,
    BodyTimeout,
    BodyTooLarge,
    NoRoom,
    read_body,
    small_reserve,
)
from .evaluator import (
    EVALUATED_KINDS,
    Decider,
    Decision,
    Evaluator,
    fail_open_warning,
    skip_reason,
    too_deep_warning,
)
from .logs import JsonLog, Throttled, where_raised
from .metrics import OTHER_KIND, WebhookMetrics
from .options import DEFAULT_READ_TIMEOUT
from .review import (
    BadReview,
    ReviewRequest,
    bad_request_body,
    fit_warnings,
    parse_review,
    review_response,
)

if TYPE_CHECKING:
    from gpulint.admission.embedded import EmbeddedWorker
    from gpulint.cluster.kinds import AdapterConfigMapSelector

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, status: int = 200) -> web.Response:
    try:
        body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:  # a lone surrogate (a uid sent as "\ud800"), kept as its escape
        body = json.dumps(data, separators=(",", ":")).encode()
    return web.Response(body=body, status=status, content_type="application/json")


async def _answer_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send ``response`` and close the connection now, the rest of the request's body
    unread: aiohttp would otherwise linger, reading it for seconds more."""
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    if request.transport is not None:
        request.transport.close()
    return response


def _client_names(request: web.Request, names: bool) -> tuple[str, ...] | None:
    """None when the client presented no certificate; else, with ``names``, the commonNames
    of its subject (an empty tuple without). With --client-ca, TLS asks for a certificate and
    refuses the handshake of a client whose certificate its CAs did not issue, so one
    presented is one verified."""
    transport = request.transport
    tls = transport.get_extra_info("ssl_object") if transport is not None else None
    if tls is None or tls.getpeercert(binary_form=True) is None:
        return None
    if not names:
        return ()
    subject = tls.getpeercert().get("subject", ())
    return tuple(value for part in subject for key, value in part if key == "commonName")


def _status(status: int, reason: str, message: str) -> web.Response:
    body = bad_request_body(message)
    body.update(code=status, reason=reason)
    return _json(body, status)


# The kinds counted by name in the metrics: what gpulint evaluates (a ConfigMap when it holds
# the adapter config); anything else a request names is "other".
_COUNTED_KINDS = frozenset({*EVALUATED_KINDS, ("", "ConfigMap")})
# Evaluations run side by side at most (they share the cluster cache's lock); a review waits
# for its answer this much past its deadline before gpulint answers without one.
REVIEW_THREADS = 2
DEADLINE_GRACE = 0.25
# The largest body evaluated on the event loop. bench/webhook_load.py's reviews are 1.7 KB
# on average; the API server's carry managedFields and, on an UPDATE, the old object too, a
# few times that. What an evaluation costs grows with what the object holds (containers,
# metrics, annotations), so a body past this bound goes to a thread.
INLINE_BODY_BYTES = 64 * 1024

SKIPPED, INLINE, WORKER = "skipped", "inline", "worker"


def review_route(
    review: ReviewRequest,
    body_bytes: int,
    adapter_configmaps: AdapterConfigMapSelector | None,
) -> tuple[str, str | None]:
    """Where a review is answered (``SKIPPED``, ``INLINE`` or ``WORKER``), and for a
    skipped one why (``skip_reason``). Between inline and worker only the size of the
    body, the depth the decoder found and the kind decide, and both paths evaluate the same
    way: a crafted object can move a review to a thread, never past the engine."""
    skipped = skip_reason(review, adapter_configmaps)
    if skipped is not None:
        return SKIPPED, skipped
    if body_bytes > INLINE_BODY_BYTES or review.too_deep:
        return WORKER, None
    if (review.kind.group, review.kind.kind) not in EVALUATED_KINDS:
        return WORKER, None  # an adapter ConfigMap: its embedded YAML goes to a child process
    return INLINE, None


def metric_kind(review: ReviewRequest) -> str:
    """The ``kind`` label of a review: from a fixed set, whatever the request says."""
    key = (review.kind.group, review.kind.kind)
    return review.kind.kind if key in _COUNTED_KINDS else OTHER_KIND


class WebhookApp:
    def __init__(
        self,
        evaluator: Evaluator,
        *,
        deny_on: str,
        deadline: float,
        max_body_bytes: int,
        adapter_configmaps: AdapterConfigMapSelector | None,
        log: JsonLog,
        metrics: WebhookMetrics,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        embedded: EmbeddedWorker | None = None,
        deny_undecodable: bool = False,
        max_buffered_bytes: int | None = None,
        client_certificates: bool = False,
        client_name: str | None = None,
    ) -> None:
        from gpulint.core.model import Severity

        self.evaluator = evaluator
        self.decider = Decider(
            evaluator, None if deny_on == "never" else Severity.parse(deny_on), embedded
        )
        # The reviews that are not cheap are evaluated here, off the event loop: /healthz,
        # /metrics and the reading of other requests never wait for them, and their answer
        # never waits past its deadline (the evaluation stops at the next rule; the answer
        # goes first).
        self._reviews = ThreadPoolExecutor(REVIEW_THREADS, thread_name_prefix="gpulint-review")
        self.deadline = deadline
        self.max_body_bytes = max_body_bytes
        self.read_timeout = read_timeout
        self.adapter_configmaps = adapter_configmaps
        self.log = log
        # Lines about requests anyone can send, one per reason and minute at most.
        self._bad_request_log = Throttled(log, "bad-request")
        self._possible_fail_open_log = Throttled(log, "possible-fail-open")
        self.metrics = metrics
        self.shutting_down = False
        self.deny_undecodable = deny_undecodable
        # --client-ca: /validate answers only clients that presented a certificate (TLS has
        # verified it against the CAs by then; webhook.tls).
        self.client_certificates = client_certificates
        # --client-cn: and only the one whose subject has this commonName (as Gatekeeper's
        # --client-cn-name, whose default is kube-apiserver).
        self.client_name = client_name
        # Made on the event loop at the first request (asyncio.Condition binds to it).
        self._pool_bytes = max_buffered_bytes or 8 * max_body_bytes
        self._pool: BodyPool | None = None
        metrics.body_pool_bytes.set_function(lambda: self._pool.used if self._pool else 0)
        metrics.watch_cache(evaluator.ready, evaluator.sync_state)
        metrics.watch_too_deep(evaluator.too_deep_objects)
        if evaluator.live is not None:
            evaluator.live.on_refresh = metrics.watch_live(evaluator.live.current)

    def application(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body_bytes, middlewares=[self._errors])
        app.router.add_post("/validate", self.validate)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics_page)
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """aiohttp's own refusals (404, 405, 413) as JSON Status bodies, and an error outside
        any review as a 400: nothing becomes a 500."""
        try:
            return await handler(request)
        except web.HTTPException as error:
            if error.status < 400:
                raise
            status = 400 if error.status == 413 else error.status
            return _status(status, error.reason.replace(" ", ""), error.reason)
        except Exception as error:
            self.metrics.invalid.labels("internal").inc()
            self.log.error(
                "request-error",
                path=request.path,
                error=type(error).__name__,
                at=where_raised(error),
            )
            response = _status(
                400, "BadRequest", f"gpulint could not answer this request ({type(error).__name__})"
            )
            response.force_close()
            return response

    # --- probes and metrics ----------------------------------------------------------------

    async def healthz(self, request: web.Request) -> web.Response:
        return _json({"ok": True})

    async def readyz(self, request: web.Request) -> web.Response:
        if self.shutting_down:
            return _json({"ready": False, "reason": "shutting down"}, 503)
        try:
            ready, caches = self.evaluator.ready(), self.evaluator.sync_state()
        except Exception as error:
            self.log.error("readiness-error", error=type(error).__name__, at=where_raised(error))
            return _json({"ready": False, "reason": "the cache could not report its state"}, 503)
        if not ready:
            return _json({"ready": False, "reason": "caches not synced", "caches": caches}, 503)
        body: dict[str, Any] = {"ready": True, "caches": caches}
        if self.evaluator.live is not None:
            # For the operator's eyes only: Prometheus never decides readiness, so that an
            # outage of it does not take the webhook out of its Service.
            body["prometheus"] = self.evaluator.live.describe()
        return _json(body)

    async def metrics_page(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.metrics.exposition(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    # --- /validate -------------------------------------------------------------------------

    async def validate(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        self.metrics.in_flight.inc()
        try:
            return await self._validate(request, started)
        finally:
            self.metrics.in_flight.dec()

    def _bad_request(self, reason: str, message: str, *, close: bool = False) -> web.Response:
        self.metrics.invalid.labels(reason).inc()
        self._bad_request_log(reason, reason=reason, message=message)
        response = _json(bad_request_body(message), 400)
        if close:  # the rest of the body is not read: the connection cannot carry another
            response.force_close()
        return response

    async def _validate(self, request: web.Request, started: float) -> web.Response:
        if self.client_certificates:
            names = _client_names(request, self.client_name is not None)
            if names is None:
                return await self._unauthenticated(request)
            if self.client_name is not None and self.client_name not in names:
                return await self._forbidden(request, names)
        length = request.content_length
        if length is not None and length > self.max_body_bytes:
            return self._bad_request(
                "too-large",
                f"the request body is {length} bytes, over the limit of {self.max_body_bytes} "
                "(--max-body-bytes)",
            )
        if self._pool is None:
            self._pool = BodyPool(
                self._pool_bytes, small_reserve(self._pool_bytes, self.max_body_bytes)
            )
        small = length is not None and length <= SMALL_BODY_BYTES
        async with self._pool.room(small) as room:
            return await self._read_and_answer(request, room, started)

    async def _unauthenticated(self, request: web.Request) -> web.Response:
        """/validate without a client certificate while --client-ca is set: 401, before any
        of the body is read, and the connection closes."""
        self.metrics.invalid.labels("unauthenticated").inc()
        message = (
            "this webhook answers only clients with a certificate issued by its --client-ca: "
            "the API server presents one when its AdmissionConfiguration names it"
        )
        self._bad_request_log("unauthenticated", reason="unauthenticated", message=message)
        return await _answer_and_close(request, _status(401, "Unauthorized", message))

    async def _forbidden(self, request: web.Request, names: tuple[str, ...]) -> web.Response:
        """/validate with a client certificate for another name than --client-cn: 403,
        before any of the body is read, and the connection closes."""
        self.metrics.invalid.labels("forbidden").inc()
        shown = ", ".join(f"CN={name}" for name in names) or "no commonName"
        message = (
            f"this webhook answers only the client certificate of CN={self.client_name} "
            f"(--client-cn), not one of {shown}"
        )
        self._bad_request_log("forbidden", reason="forbidden", message=message)
        return await _answer_and_close(request, _status(403, "Forbidden", message))

    def _possible_fail_open(
        self, reason: str, status: int, message: str, request: web.Request
    ) -> None:
        """A request to /validate answered with an error it may have been a review for: the
        API server applies the webhook's failurePolicy to it, and Ignore admits the object
        unjudged."""
        self.metrics.possible_fail_open.labels(reason).inc()
        self._possible_fail_open_log(
            reason,
            reason=reason,
            status=status,
            message=message,
            client=request.remote,
        )

    async def _busy(self, request: web.Request, waited: float) -> web.Response:
        """No room in the body pool in time: 429, and the connection closes (the rest of its
        body is not read)."""
        self.metrics.invalid.labels("busy").inc()
        message = (
            f"request bodies of {self._pool_bytes} bytes are being read or answered "
            f"(--max-buffered-bytes) and no room came free within {waited:g} s, the time a "
            "body has to arrive (--deadline, at least a second, or --read-timeout if shorter)"
        )
        self._possible_fail_open("busy", 429, message, request)
        return await _answer_and_close(request, _status(429, "TooManyRequests", message))

    async def _too_slow(
        self, request: web.Request, error: BodyTimeout, within: float
    ) -> web.Response:
        """A body that did not start or end in time: 400, answered and closed at once."""
        if error.part == "first-byte":
            reason = "no-body"
            message = (
                f"no byte of the request body arrived within {error.seconds:g} s of its headers"
            )
        else:
            reason = "slow-body"
            flag = "--read-timeout" if within == self.read_timeout else "--deadline"
            message = f"the request body did not arrive within {within:g} s ({flag})"
        self.metrics.slow_requests.labels("body").inc()
        self.metrics.invalid.labels("slow").inc()
        self._possible_fail_open(reason, 400, message, request)
        return await _answer_and_close(request, _json(bad_request_body(message), 400))

    async def _read_and_answer(
        self, request: web.Request, room: BodyRoom, started: float
    ) -> web.Response:
        # Past the deadline an answer is of no use: the API server stops waiting soon after.
        # A body still has the time its first byte has, so that a very short --deadline
        # fails the review open as usual instead of refusing its body.
        within = min(self.read_timeout, max(self.deadline, FIRST_BYTE_TIMEOUT))
        try:
            body = await read_body(request, room, limit=self.max_body_bytes, within=within)
        except BodyTimeout as error:
            return await self._too_slow(request, error, within)
        except NoRoom:
            return await self._busy(request, within)
        except BodyTooLarge:
            return self._bad_request(
                "too-large",
                f"the request body is over the limit of {self.max_body_bytes} bytes "
                "(--max-body-bytes)",
                close=True,
            )
        except (RequestPayloadError, HttpProcessingError) as error:
            # A Content-Encoding that does not decode, a body cut short.
            reason = " ".join(str(getattr(error, "message", "") or error).split())
            return self._bad_request("unreadable", f"the request body cannot be read: {reason}")
        except ConnectionError:
            # The client went away mid-body; nobody reads this answer.
            return self._bad_request("unreadable", "the connection closed before the body ended")
        try:
            review = parse_review(body)
        except BadReview as error:
            return self._bad_request(error.reason, error.message)
        route, skipped = review_route(review, len(body), self.adapter_configmaps)
        if skipped is not None:
            self.metrics.routes.labels(SKIPPED).inc()
            return self._respond(
                review, started, "skipped", review_response(review.uid, True), skipped
            )
        if route == INLINE:
            try:
                held = self.evaluator.try_hold()
            except Exception as error:
                return self._fail_open(review, started, "error", error)
            if held:
                try:
                    self.metrics.routes.labels(INLINE).inc()
                    return self._answer(review, started)
                finally:
                    self.evaluator.release()
        self.metrics.routes.labels(WORKER).inc()
        return await self._in_worker(review, started)

    async def _in_worker(self, review: ReviewRequest, started: float) -> web.Response:
        loop = asyncio.get_running_loop()
        remaining = started + self.deadline - time.monotonic()
        try:
            return await asyncio.wait_for(
                loop.run_in_executor(self._reviews, self._answer, review, started),
                timeout=max(remaining, 0.0) + DEADLINE_GRACE,
            )
        except TimeoutError:
            return self._fail_open(review, started, "deadline")
        except Exception as error:  # the last line of defence: answer, and say why
            return self._fail_open(review, started, "error", error)

    def close(self) -> None:
        """Stop the review threads (evaluations under way finish on their own)."""
        self._reviews.shutdown(wait=False, cancel_futures=True)

    def _answer(self, review: ReviewRequest, started: float) -> web.Response:
        """Evaluate a review gpulint does not skip and answer it, on whichever path."""
        try:
            if not self.evaluator.ready():
                return self._fail_open(review, started, "not-synced")
            deadline = started + self.deadline
            if time.monotonic() >= deadline:
                raise DeadlineExceeded("(before the first)")
            decision = self.decider.decide(review, deadline)
            if review.too_deep:
                decision = self._too_deep(review, decision)
        except DeadlineExceeded:
            return self._fail_open(review, started, "deadline")
        except Exception as error:
            return self._fail_open(review, started, "error", error)
        return self._decided(review, started, decision)

    def _too_deep(self, review: ReviewRequest, decision: Decision) -> Decision:
        """An object with parts nested too deeply to read, judged on the rest: a refusal
        stands; otherwise it is allowed with a warning, or refused with --deny-undecodable.
        Counted and logged either way."""
        warning = too_deep_warning(review, MAX_OBJECT_DEPTH)
        response = decision.response["response"]
        if decision.verdict != "denied" and self.deny_undecodable:
            message = f"{warning}; gpulint serve --deny-undecodable refuses such objects"
            response = review_response(review.uid, False, message=message)["response"]
            decision = Decision(
                "denied", {**decision.response, "response": response}, decision.findings
            )
        else:
            response["warnings"] = fit_warnings([warning, *response.get("warnings", [])])
            if decision.verdict == "allowed":
                decision.verdict = "warned"
        self.metrics.undecodable.labels("too-deep", decision.verdict).inc()
        self.log.warning(
            "object-too-deep",
            uid=review.uid,
            kind=str(review.kind),
            namespace=review.object_namespace() or None,
            name=review.object_name() or None,
            verdict=decision.verdict,
            message=warning,
        )
        return decision

    def _decided(self, review: ReviewRequest, started: float, decision: Decision) -> web.Response:
        for finding in decision.findings:
            self.metrics.findings.labels(finding.rule, str(finding.severity)).inc()
        return self._respond(
            review,
            started,
            decision.verdict,
            decision.response,
            rules=sorted({f.rule for f in decision.findings}),
            refused=sorted({f.rule for f in decision.refused}) or None,
            existing=sorted({f.rule for f in decision.existing}) or None,
        )

    def _fail_open(
        self,
        review: ReviewRequest,
        started: float,
        reason: str,
        error: BaseException | None = None,
    ) -> web.Response:
        detail = ""
        if reason == "deadline":
            detail = f"{self.deadline:g} s"
        elif error is not None:
            detail = type(error).__name__
        self.metrics.fail_open.labels(reason).inc()
        if review.too_deep:
            self.metrics.undecodable.labels("too-deep", "fail-open").inc()
        warning = fail_open_warning(review, reason, detail)
        response = review_response(review.uid, True, warnings=fit_warnings([warning]))
        extra: dict[str, Any] = {}
        if error is not None:
            extra = {"error": type(error).__name__, "at": where_raised(error)}
        return self._respond(review, started, "fail-open", response, reason, **extra)

    def _respond(
        self,
        review: ReviewRequest,
        started: float,
        verdict: str,
        response: dict[str, Any],
        reason: str | None = None,
        **fields: Any,
    ) -> web.Response:
        elapsed = time.monotonic() - started
        self.metrics.requests.labels(metric_kind(review), review.operation, verdict).inc()
        self.metrics.latency.labels(verdict).observe(elapsed)
        level = "error" if fields.get("error") else "info"
        self.log.emit(
            "decision",
            level,
            uid=review.uid,
            kind=str(review.kind),
            namespace=review.object_namespace() or None,
            name=review.object_name() or None,
            operation=review.operation,
            dryRun=review.dry_run or None,
            verdict=verdict,
            reason=reason,
            ms=round(elapsed * 1000, 3),
            **fields,
        )
        return _json(response)
