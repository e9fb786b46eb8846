"""A finding's message: its first sentence is the headline, the rest the detail.

Reporters print the headline on a finding's first line (text), as an annotation's title
(GitHub), as the webhook's warning; so the sentence splitter must not end a sentence inside
code, quotes, parentheses, numbers, file names or abbreviations, and every rule's headline
must be short.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpulint.core.message import as_sentence, capitalized, split_message
from gpulint.core.model import Finding, Location, Severity

from .conftest import FIXTURES, lint_paths

HEADLINE_LIMIT = 160


@pytest.mark.parametrize(
    ("message", "headline"),
    [
        ("HPA web scales on CPU. The pods hold 4 GPUs.", "HPA web scales on CPU."),
        ("Is it served? No rule exposes it.", "Is it served?"),
        ("It never scales! Two autoscalers disable each other.", "It never scales!"),
        # A sentence may open with a component's lower-case name; a plain word opens none.
        ("It places nothing. gpu-operator runs it.", "It places nothing."),
        ("It waits 5 s. then it runs.", "It waits 5 s. then it runs."),
        # No sentence end: the whole message.
        (
            "HPA web scales only on cpu, 100% sure: a, b",
            "HPA web scales only on cpu, 100% sure: a, b",
        ),
        ("One sentence that ends here.", "One sentence that ends here."),
        # A colon ends no sentence.
        ("HPA web: no behavior. More.", "HPA web: no behavior."),
        # Numbers, file names and paths.
        ("Target 0.5 is below 1. Use 50.", "Target 0.5 is below 1."),
        ("Set it in values.yaml. It is read.", "Set it in values.yaml."),
        (
            "Read ./charts/values.prod.yaml first. Then more.",
            "Read ./charts/values.prod.yaml first.",
        ),
        ("KServe 0.11. Newer versions too.", "KServe 0.11."),
        # Abbreviations.
        (
            "Use a GPU metric, e.g. DCGM_FI_DEV_GPU_UTIL. More.",
            "Use a GPU metric, e.g. DCGM_FI_DEV_GPU_UTIL.",
        ),
        ("Pods vs. Object metrics differ. More.", "Pods vs. Object metrics differ."),
        ("The adapter, i.e. Prometheus, answers. More.", "The adapter, i.e. Prometheus, answers."),
        # Code, quotes and brackets.
        ("Query `sum(x). Then y` fails. More.", "Query `sum(x). Then y` fails."),
        ('Name "a. B" is odd. More.', 'Name "a. B" is odd.'),
        ("Query 'avg(x). By pod' fails. More.", "Query 'avg(x). By pod' fails."),
        (
            "Rule (see rules.custom[0]. Its query) sums. More.",
            "Rule (see rules.custom[0]. Its query) sums.",
        ),
        ("Matchers [a. B] miss. More.", "Matchers [a. B] miss."),
        ("It is “quoted. Inside” here. More.", "It is “quoted. Inside” here."),
        # Apostrophes are no quotes.
        ("The chart's default rules sum. The pods hold 2 GPUs.", "The chart's default rules sum."),
        ("The GPUs' load is summed. More.", "The GPUs' load is summed."),
        # What follows decides: a lower-case word continues the sentence.
        ("Set minReplicas. maxReplicas too. Then.", "Set minReplicas. maxReplicas too."),
        ("HPA web reads gpu_util. `gpu_util` is not served.", "HPA web reads gpu_util."),
        ("HPA web reads it. (The adapter renames it.)", "HPA web reads it."),
        ("Ellipsis... Then more. Next.", "Ellipsis... Then more."),
        # Messages quoting a suppression comment.
        (
            "`# gpulint: ignore=GL406` on line 30 suppresses nothing. GL406's finding is at 26.",
            "`# gpulint: ignore=GL406` on line 30 suppresses nothing.",
        ),
        ("", ""),
    ],
)
def test_the_headline_is_the_first_sentence(message: str, headline: str) -> None:
    found, detail = split_message(message)
    assert found == headline
    assert detail == message[len(headline) :].strip()


def test_a_finding_has_headline_and_detail() -> None:
    finding = Finding(
        "GL102", "hpa-missing-behavior", Severity.WARNING, "No behavior. Pods start slowly.",
        Location("a.yaml", 1, 1),
    )  # fmt: skip
    assert (finding.headline, finding.detail) == ("No behavior.", "Pods start slowly.")


@given(st.text(alphabet=st.sampled_from(list("aB .!?`'\"()[]{}e.g:\n0")), max_size=80))
def test_headline_and_detail_are_the_message(message: str) -> None:
    headline, detail = split_message(message)
    assert message.strip().startswith(headline)
    assert " ".join(f"{headline} {detail}".split()) == " ".join(message.split())
    assert headline or not message.strip()


def test_long_hostile_messages_cost_linear_time() -> None:
    """Messages quote input; thousands of would-be sentence ends cost each one look."""
    import time

    cases = {
        "HPA web reads gpu_util. Then " + "x. y (`z`) 'w' " * 100_000: "HPA web reads gpu_util.",
        "a" + ". b" * 100_000: None,  # every end is followed by a lower-case word
        "`" + ". B" * 100_000: None,  # every end is inside code that never closes
        "(" * 100_000 + ". B": None,
    }
    for message, headline in cases.items():
        started = time.perf_counter()
        assert split_message(message)[0] == (headline or message.strip())
        assert time.perf_counter() - started < 1.0


def _fail_fixtures() -> list[Path]:
    return sorted(
        path
        for rule_dir in FIXTURES.iterdir()
        if re.fullmatch(r"GL\d{3}", rule_dir.name)
        for path in rule_dir.glob("fail_*")
    )


def test_headlines_are_one_line_and_short() -> None:
    from .tools import helm_command, kustomize_command

    kustomize_command()
    helm_command()
    longest: dict[str, tuple[int, str]] = {}
    seen: set[str] = set()
    multiline: dict[str, str] = {}
    for path in _fail_fixtures():
        for finding in lint_paths(path):
            seen.add(finding.rule)
            if "\n" in finding.headline or "\r" in finding.headline:
                multiline.setdefault(finding.rule, finding.headline)
            size = len(finding.headline)
            if size > longest.get(finding.rule, (0, ""))[0]:
                longest[finding.rule] = (size, finding.headline)
    # Every rule with a failing fixture, GL101 to GL705, is judged here.
    assert {rule_dir.name for rule_dir in FIXTURES.iterdir() if rule_dir.name[:2] == "GL"} <= seen
    assert not multiline, f"headlines over several lines: {multiline}"
    offenders = {rule: text for rule, (size, text) in longest.items() if size > HEADLINE_LIMIT}
    assert not offenders, f"headlines over {HEADLINE_LIMIT} characters: {offenders}"


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("rule rules[0] in ConfigMap a: no `by`", "Rule rules[0] in ConfigMap a: no `by`."),
        ("key 'a' is written twice", "Key 'a' is written twice."),
        ("gpu-operator values v.yaml set it", "gpu-operator values v.yaml set it."),
        (
            "dcgm-exporter does not tolerate the taint.",
            "dcgm-exporter does not tolerate the taint.",
        ),
        ("metricsQuery's sum(...) drops pod", "metricsQuery's sum(...) drops pod."),
        ("kubectl kustomize fails", "kubectl kustomize fails."),
        ('the HPA gets "no metrics"', 'The HPA gets "no metrics".'),
        ("Is it? ", "Is it?"),
    ],
)
def test_a_message_is_made_a_sentence(text: str, sentence: str) -> None:
    assert as_sentence(text) == sentence


def test_every_message_opens_with_a_capital_or_a_name_and_ends_with_a_period() -> None:
    from .tools import helm_command, kustomize_command

    kustomize_command()
    helm_command()
    offenders: dict[str, str] = {}
    for path in _fail_fixtures():
        for finding in lint_paths(path):
            message = finding.message
            opens = (
                message[:1].isupper() or message[:1] in "`\"'" or capitalized(message) == message
            )
            if not opens or message[-1:] not in ".!?":
                offenders.setdefault(finding.rule, message)
    assert not offenders, offenders


def test_a_prometheus_url_is_shown_whole_in_the_headline() -> None:
    # A 42-character URL was cut to 32 characters and shown nowhere whole.
    (finding,) = lint_paths(FIXTURES / "GL603" / "fail_keda_server_address.yaml", select=["GL603"])
    assert "URL http://prometheus-server.monitoring.svc:80 reaches" in finding.headline
