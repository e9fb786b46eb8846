"""admission.k8s.io/v1 AdmissionReview: what the API server sends, and what gpulint answers.

Parsing is strict about the envelope (a request gpulint cannot answer by ``uid`` is a 400 with
a message, never a 500) and lenient about the object (the rules cope with odd shapes).
An object nested deeper than ``gpulint.cluster.decoding.MAX_OBJECT_DEPTH`` levels (the API
server passes on up to 10,000) is read with its deeper parts cut (``too_deep``), never
refused as undecodable: the envelope and what the rules read stay whole, so the review is
judged and answered (``webhook.app`` says what happens to such an object).
Numbers are read as the linter reads them (``gpulint.input.yamlparse.read_json``): one that is too
long or too large to hold (a 4,301-digit integer, ``1e400``) stays its text, so that the
rules report it as out of range and the review is still answered.

Answers follow the API server's limits on warnings (k8s.io/apiserver pkg/endpoints/filters
warning.go): the warnings of one request, from every webhook and the API server itself, may
total 4096 runes before the API server starts truncating each to 256 runes and then dropping
them, and a warning with a control character (a newline, a tab) is dropped whole
(k8s.io/apimachinery pkg/util/net NewWarningHeader); admission/v1 AdmissionResponse asks for
120 characters where possible. gpulint keeps inside: one line each, at most
``WARNING_RUNES`` runes, at most ``WARNINGS_TOTAL_RUNES`` in all (half the budget, the rest
left to others), and a warning is cut between words, never inside one.

A finding's warning is ``GL102: <headline> (gpulint explain GL102; docs/rules.md#gl102)``:
the headline (the message's first sentence) says what is wrong; the detail and the fix are
one command away. A refusal (``status.message``, which has no such limit) lists each
finding's whole message and fix.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpulint.cluster.decoding import MAX_OBJECT_DEPTH, has_too_deep, loads_bounded
from gpulint.core.message import split_message
from gpulint.core.model import Finding, Severity
from gpulint.engine.docs import rule_doc_link
from gpulint.input.yamlparse import read_json
from gpulint.report.escape import escape_controls, safe_lines

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
# The object sits three levels down: the review, its request, the object.
REVIEW_DEPTH = MAX_OBJECT_DEPTH + 3
# The first byte of a JSON text that is not an object, and what it is.
_NOT_OBJECTS = {b"[": "array", b'"': "string"}

WARNING_RUNES = 256
WARNINGS_TOTAL_RUNES = 2048
# A headline is cut shorter than this only to keep the pointer to the rule's documentation.
_MIN_HEADLINE_RUNES = 80
# Findings a denial lists in full; the rest are counted.
DENIAL_FINDINGS = 10
# One fix snippet in a denial message, at most.
FIX_CHARS = 1200
# One finding's message, and the subject, in a denial message at most.
MESSAGE_CHARS = 2000


class BadReview(ValueError):
    """A request body gpulint cannot answer as an AdmissionReview (HTTP 400)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason  # a short label for the metrics
        self.message = message


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"


@dataclass(frozen=True, slots=True)
class ReviewRequest:
    """The parts of ``request`` gpulint reads (userInfo and options are not kept)."""

    uid: str
    kind: GroupVersionKind
    operation: str
    namespace: str
    name: str
    sub_resource: str
    dry_run: bool
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    # The object nests deeper than MAX_OBJECT_DEPTH: those parts are TOO_DEEP, not read.
    too_deep: bool = False

    def object_namespace(self) -> str:
        metadata = (self.object or self.old_object or {}).get("metadata")
        namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
        return namespace if isinstance(namespace, str) and namespace else self.namespace

    def object_name(self) -> str:
        if self.name:
            return self.name
        metadata = (self.object or {}).get("metadata")
        if isinstance(metadata, dict):
            for key in ("name", "generateName"):
                value = metadata.get(key)
                if isinstance(value, str) and value:
                    return value
        return ""

    def describe(self) -> str:
        namespace = self.object_namespace()
        where = f"{namespace}/" if namespace else ""
        return f"{self.kind.kind} {where}{self.object_name() or '(unnamed)'}"


def parse_review(body: bytes) -> ReviewRequest:
    """The request of an AdmissionReview body; raises BadReview with a message that says what
    is wrong."""
    review, cut = _read_body(body)
    request = _request_of(review)
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid.strip():
        raise BadReview("no-uid", "request.uid is missing or empty; the answer must carry it")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise BadReview(
            "bad-operation",
            f"request.operation is {_shown(operation)}; expected one of {', '.join(OPERATIONS)}",
        )
    obj = request.get("object")
    old = request.get("oldObject")
    for field_name, value in (("object", obj), ("oldObject", old)):
        if value is not None and not isinstance(value, dict):
            raise BadReview(
                "bad-object",
                f"request.{field_name} is a JSON {_json_type(value)}; expected an object",
            )
    if operation in ("CREATE", "UPDATE") and obj is None:
        raise BadReview("bad-object", f"request.object is missing for a {operation}")
    gvk = _kind_of(request, obj if obj is not None else old)
    return ReviewRequest(
        uid=uid,
        kind=gvk,
        operation=operation,
        namespace=_string(request.get("namespace")),
        name=_string(request.get("name")),
        sub_resource=_string(request.get("subResource")),
        dry_run=request.get("dryRun") is True,
        object=obj,
        old_object=old,
        too_deep=cut and obj is not None and has_too_deep(obj),
    )


def _read_body(body: bytes) -> tuple[Any, bool]:
    """The JSON of the body, read to ``REVIEW_DEPTH`` levels, and whether deeper parts were
    cut; raises BadReview for a body that is no JSON object."""
    if not body.strip():
        raise BadReview("empty", "the request body is empty; expected an AdmissionReview")
    first = body.lstrip(b" \t\r\n")[:1]
    if first != b"{" and first in _NOT_OBJECTS:
        # Said without reading the rest: however long or deep, it is no review.
        raise BadReview(
            "not-review",
            f"the request body is a JSON {_NOT_OBJECTS[first]}; expected an AdmissionReview object",
        )
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadReview(
            "not-json", f"the request body is not UTF-8 JSON (byte {error.start})"
        ) from None
    try:
        return loads_bounded(body, REVIEW_DEPTH, lambda data: read_json(data.decode()))
    except json.JSONDecodeError as error:
        raise BadReview(
            "not-json",
            f"the request body is not JSON: {error.msg} at line {error.lineno} "
            f"column {error.colno}",
        ) from None
    except ValueError as error:  # NaN or Infinity, which JSON does not have
        raise BadReview("not-json", f"the request body is not JSON: {error}") from None
    except RecursionError:
        raise BadReview("not-json", "the request body nests JSON too deeply") from None


def _request_of(review: Any) -> dict[str, Any]:
    """The ``request`` of an AdmissionReview v1 object; raises BadReview for anything else."""
    if not isinstance(review, dict):
        raise BadReview(
            "not-review",
            f"the request body is a JSON {_json_type(review)}; expected an AdmissionReview object",
        )
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if kind != KIND:
        raise BadReview(
            "wrong-kind",
            f"kind is {_shown(kind)}; expected {KIND}",
        )
    if api_version != API_VERSION:
        raise BadReview(
            "wrong-api-version",
            f"apiVersion is {_shown(api_version)}; gpulint answers {API_VERSION} only "
            "(set admissionReviewVersions: [v1] in the ValidatingWebhookConfiguration)",
        )
    request = review.get("request")
    if request is None:
        raise BadReview("no-request", "the AdmissionReview has no request")
    if not isinstance(request, dict):
        raise BadReview(
            "no-request", f"request is a JSON {_json_type(request)}; expected an object"
        )
    return request


def _kind_of(request: Mapping[str, Any], obj: Mapping[str, Any] | None) -> GroupVersionKind:
    kind = request.get("kind")
    if isinstance(kind, dict):
        group, version, name = kind.get("group", ""), kind.get("version"), kind.get("kind")
        if isinstance(group, str) and isinstance(version, str) and isinstance(name, str) and name:
            return GroupVersionKind(group, version, name)
        raise BadReview(
            "bad-kind", "request.kind needs string group, version and kind (kind not empty)"
        )
    if kind is not None:
        raise BadReview(
            "bad-kind", f"request.kind is a JSON {_json_type(kind)}; expected an object"
        )
    # request.kind is required in v1; an object that says what it is will do.
    if obj is not None:
        api_version, name = obj.get("apiVersion"), obj.get("kind")
        if isinstance(api_version, str) and isinstance(name, str) and api_version and name:
            group, _, version = api_version.rpartition("/")
            return GroupVersionKind(group, version, name)
    raise BadReview("bad-kind", "request.kind is missing and the object does not name its kind")


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return "object"


def _shown(value: Any) -> str:
    if value is None:
        return "missing"
    if isinstance(value, dict | list):
        return f"a JSON {_json_type(value)}"  # however large or deep
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 60 else text[:57] + "..."


# --- answers ---------------------------------------------------------------------------------


def review_response(
    uid: str,
    allowed: bool,
    *,
    warnings: Sequence[str] = (),
    message: str = "",
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": message}
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def bad_request_body(message: str) -> dict[str, Any]:
    """A Kubernetes Status, the shape the API server logs for a failed webhook call."""
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "reason": "BadRequest",
        "code": 400,
        "message": message,
    }


def one_line(text: str) -> str:
    """Text a Warning header accepts: no control characters (they drop the warning)."""
    cleaned = "".join(
        " " if unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029" else ch for ch in text
    )
    return " ".join(cleaned.split())


def clip(text: str, limit: int) -> str:
    """``text`` within ``limit`` runes: cut at the last space that keeps most of it, so that
    no word is cut in half, and marked with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit * 2 // 3:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def warning_text(finding: Finding, note: str = "") -> str:
    """The warning of a finding (``rule_warning``)."""
    return rule_warning(finding.rule, finding.message, note)


def rule_warning(rule: str, message: str, note: str = "") -> str:
    """``GL102: <headline> (gpulint explain GL102; <docs link>)``, or ``GL101 (note): ...``,
    within ``WARNING_RUNES``: the headline is cut (between words) before the label or the
    pointer is, and the note comes before it so that cutting never drops it."""
    label = f"{rule} ({note})" if note else rule
    headline = one_line(split_message(message)[0])
    pointer = f" (gpulint explain {rule}; {one_line(rule_doc_link(rule))})"
    if WARNING_RUNES - len(label) - 2 - len(pointer) < _MIN_HEADLINE_RUNES:
        pointer = f" (gpulint explain {rule})"
    room = WARNING_RUNES - len(label) - 2 - len(pointer)
    return f"{label}: {clip(headline, room)}{pointer}"


def fit_warnings(texts: Iterable[str], uncounted: bool = False) -> list[str]:
    """Warnings within the API server's budget: each one line and clipped, duplicates dropped
    (the API server drops them too), and a last line counting what did not fit
    (``uncounted``: some findings were not even counted, so it says "or more")."""
    unique: list[str] = []
    seen: set[str] = set()
    for text in texts:
        line = clip(one_line(text), WARNING_RUNES)
        if line and line not in seen:
            seen.add(line)
            unique.append(line)
    kept: list[str] = []
    used = 0
    for index, line in enumerate(unique):
        left = len(unique) - index
        tail = _more(left - 1, uncounted) if left > 1 or uncounted else ""
        if used + len(line) + len(tail) <= WARNINGS_TOTAL_RUNES:
            kept.append(line)
            used += len(line)
            continue
        kept.append(_more(left, uncounted))
        break
    else:
        if uncounted and unique:
            kept.append(_more(0, uncounted))
    return kept


def _more(count: int, uncounted: bool = False) -> str:
    if uncounted:
        shown = f"{count} or more findings" if count else "more findings"
    else:
        shown = f"{count} more finding{'s' * (count != 1)}"
    return f"gpulint: {shown} not shown; `gpulint lint` on the manifests lists all"


def denial_message(subject: str, findings: Sequence[Finding]) -> str:
    """The status message of a refusal: each finding's rule, message and fix, with the
    control characters of the object (its name, its values) shown as escapes, since kubectl
    prints the message on the terminal of whoever applied it."""
    errors = sum(1 for f in findings if f.severity == Severity.ERROR)
    others = len(findings) - errors
    counts = []
    if errors:
        counts.append(f"{errors} error{'s' if errors != 1 else ''}")
    if others:
        counts.append(f"{others} warning{'s' if others != 1 else ''}")
    shown = clip(escape_controls(subject), MESSAGE_CHARS)
    lines = [f"gpulint refused {shown} ({', '.join(counts)}):"]
    for finding in findings[:DENIAL_FINDINGS]:
        message = clip(escape_controls(finding.message), MESSAGE_CHARS)
        lines.append(f"{finding.rule} {finding.name}: {message}")
        fix = finding.fix.strip("\n")
        if fix:
            fix = clip(fix, FIX_CHARS)
            lines.append("  fix:")
            lines.extend(f"    {line}" for line in safe_lines(fix))
    hidden = len(findings) - DENIAL_FINDINGS
    if hidden > 0:
        lines.append(f"... and {hidden} more; `gpulint lint` on the manifests lists all")
    lines.append(
        "To accept a finding, annotate the object it names: "
        'metadata.annotations: {gpulint.dev/ignore: "GLnnn"}'
    )
    return "\n".join(lines)
