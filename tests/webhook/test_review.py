"""AdmissionReview parsing and answers: the envelope, the warning budget, the denial text."""

from __future__ import annotations

import json
import unicodedata

import pytest
from gpulint.webhook.review import (
    DENIAL_FINDINGS,
    WARNING_RUNES,
    WARNINGS_TOTAL_RUNES,
    BadReview,
    clip,
    denial_message,
    fit_warnings,
    one_line,
    parse_review,
    review_response,
    rule_warning,
    warning_text,
)
from hypothesis import given
from hypothesis import strategies as st

from gpulint.core.model import Finding, Location, ObjectRef, Severity
from gpulint.engine import docs as ruledocs

from . import objects
from .harness import admission_review


def finding(
    rule: str = "GL101", message: str = "m", fix: str = "", severity: Severity = Severity.ERROR
) -> Finding:
    return Finding(
        rule,
        "name-of-" + rule.lower(),
        severity,
        message,
        Location("admission", 1, 1),
        fix,
        ObjectRef("autoscaling/v2", "HorizontalPodAutoscaler", "ns", "hpa"),
    )


# --- the warning budget ----------------------------------------------------------------------


@given(st.lists(st.text(min_size=0, max_size=600), max_size=60))
def test_warnings_always_fit_the_api_servers_budget(texts: list[str]) -> None:
    fitted = fit_warnings(texts)
    assert sum(len(w) for w in fitted) <= WARNINGS_TOTAL_RUNES
    for warning in fitted:
        assert 0 < len(warning) <= WARNING_RUNES
        assert not any(unicodedata.category(ch) == "Cc" for ch in warning)
        assert "\u2028" not in warning and "\u2029" not in warning
        assert warning == warning.strip()
    unique = list(dict.fromkeys(w for w in (clip(one_line(t), WARNING_RUNES) for t in texts) if w))
    if fitted and fitted[-1].startswith("gpulint: ") and fitted[-1].endswith("lists all"):
        hidden = int(fitted[-1].split()[1])
        assert len(fitted) - 1 + hidden == len(unique)
    else:
        assert len(fitted) == len(unique)


def test_a_warning_is_one_line_clipped_on_a_rune_boundary() -> None:
    text = "GL102: " + "é" * 300 + "\nsecond line\ttab"
    (warning,) = fit_warnings([text])
    assert len(warning) == WARNING_RUNES and warning.endswith("…")
    assert "\n" not in warning
    (short,) = fit_warnings(["GL102: a\nb\tc\x00d"])
    assert short == "GL102: a b c d"


def test_a_long_warning_is_cut_between_words() -> None:
    (warning,) = fit_warnings(["GL102: " + "scale-down " * 40])
    assert warning.endswith("scale-down…") and len(warning) <= WARNING_RUNES


POINTER = " (gpulint explain {rule}; docs/rules.md#{anchor})"


def test_warning_is_the_headline_with_a_pointer_to_the_rule() -> None:
    message = "HPA ml/web has no behavior. Pods take minutes to load a model, so the default..."
    assert warning_text(finding("GL102", message)) == (
        "GL102: HPA ml/web has no behavior." + POINTER.format(rule="GL102", anchor="gl102")
    )
    assert warning_text(finding("GL102", "no behavior\nset")) == (
        "GL102: no behavior set" + POINTER.format(rule="GL102", anchor="gl102")
    )
    # The note comes before the headline, so that cutting it never drops the note.
    assert warning_text(finding("GL101", "cpu"), "already present") == (
        "GL101 (already present): cpu" + POINTER.format(rule="GL101", anchor="gl101")
    )


def test_a_long_headline_is_cut_between_words_and_keeps_the_pointer() -> None:
    headline = "HPA ml/web reads " + " ".join(f"metric_{i}" for i in range(60)) + "."
    warning = rule_warning("GL401", headline + " Detail.", "already present")
    pointer = POINTER.format(rule="GL401", anchor="gl401")
    # Cut between words: at most one word short of the limit.
    assert WARNING_RUNES - len(" metric_00") <= len(warning) <= WARNING_RUNES
    assert warning.startswith("GL401 (already present): HPA ml/web reads metric_0 ")
    assert warning.endswith("…" + pointer)
    cut = warning[len("GL401 (already present): ") : -len(pointer) - 1]
    assert headline.startswith(cut) and headline[len(cut)] == " "


def test_a_published_rules_page_is_linked(monkeypatch: pytest.MonkeyPatch) -> None:
    published = "https://git.example.com/platform/gpulint/blob/main/docs/rules.md"
    monkeypatch.setattr(ruledocs, "rules_doc_url", lambda: published)
    assert warning_text(finding("GL102", "No behavior. More.")) == (
        f"GL102: No behavior. (gpulint explain GL102; {published}#gl102)"
    )
    # A link so long it would leave the headline no room is dropped, the command stays.
    monkeypatch.setattr(ruledocs, "rules_doc_url", lambda: "https://x.example/" + "a" * 200)
    assert warning_text(finding("GL102", "No behavior. More.")) == (
        "GL102: No behavior. (gpulint explain GL102)"
    )


# --- the denial ------------------------------------------------------------------------------


def test_denial_lists_rule_message_and_fix_and_counts_the_rest() -> None:
    findings = [
        finding(f"GL1{i:02d}", f"problem {i}", "spec:\n  maxReplicas: 4") for i in range(12)
    ]
    findings.append(finding("GL102", "a warning", severity=Severity.WARNING))
    message = denial_message("HorizontalPodAutoscaler ns/hpa", findings)
    lines = message.splitlines()
    assert lines[0] == "gpulint refused HorizontalPodAutoscaler ns/hpa (12 errors, 1 warning):"
    assert lines[1:5] == [
        "GL100 name-of-gl100: problem 0",
        "  fix:",
        "    spec:",
        "      maxReplicas: 4",
    ]
    assert message.count("\nGL1") == DENIAL_FINDINGS
    assert f"... and {len(findings) - DENIAL_FINDINGS} more;" in message
    assert lines[-1].startswith("To accept a finding, annotate the object it names")


def test_review_response_shapes() -> None:
    assert review_response("u", True) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": True},
    }
    denied = review_response("u", False, warnings=["GL102: w"], message="no")
    assert denied["response"] == {
        "uid": "u",
        "allowed": False,
        "status": {"code": 403, "reason": "Forbidden", "message": "no"},
        "warnings": ["GL102: w"],
    }


# --- parsing ---------------------------------------------------------------------------------


def test_parse_reads_what_the_api_server_sends() -> None:
    obj = objects.cpu_hpa()
    review = admission_review(obj, "UPDATE", old=obj, uid="abc", dry_run=True)
    request = parse_review(json.dumps(review).encode())
    assert request.uid == "abc"
    assert str(request.kind) == "autoscaling/v2 HorizontalPodAutoscaler"
    assert (request.operation, request.dry_run) == ("UPDATE", True)
    assert request.object == obj and request.old_object == obj
    assert request.describe() == "HorizontalPodAutoscaler llm/llm-server"


def test_the_kind_comes_from_the_object_when_the_request_leaves_it_out() -> None:
    review = admission_review(objects.deployment())
    del review["request"]["kind"]
    request = parse_review(json.dumps(review).encode())
    assert (request.kind.group, request.kind.version, request.kind.kind) == (
        "apps",
        "v1",
        "Deployment",
    )


def test_a_delete_needs_no_object() -> None:
    review = admission_review(None, "DELETE", old=objects.deployment())
    request = parse_review(json.dumps(review).encode())
    assert request.object is None
    assert request.describe() == "Deployment llm/llm-server"


@pytest.mark.parametrize(
    "body",
    [b"\xef\xbb\xbf{}", b"null", b"1e999", b'{"kind": "AdmissionReview"}'],
)
def test_odd_bodies_are_bad_reviews_not_errors(body: bytes) -> None:
    with pytest.raises(BadReview) as raised:
        parse_review(body)
    assert raised.value.message and raised.value.reason
