"""A finding's message as a headline and a detail: its first sentence, and the rest.

Rules write one message per finding; reporters show the headline where room is short (the
text report's first line, an annotation's title, an admission warning) and the detail
under it.
"""

from __future__ import annotations

import re

# Where a sentence may end (a cheap superset of the real ends, which ``_ends_sentence``
# decides), and the characters that open or close a span no sentence ends inside.
_MAYBE_SENTENCE_END = re.compile(r"[.!?](?=\s+(?:[^\sa-z0-9_]|[a-z][a-z0-9]*-[a-z]))")
# A sentence may also open with a component's name, which keeps its lower case
# (``gpu-operator runs ...``, ``dcgm-exporter does not ...``): a hyphenated lower-case word.
_NAME_START = re.compile(r"[a-z][a-z0-9]*-[a-z]")
_SPAN_MARKS = re.compile(r"""[()\[\]{}`"“”‘’']""")
# What a next sentence may start with besides an upper-case letter.
_SENTENCE_STARTS = frozenset("`\"'“‘(")
_QUOTES = {"`": "`", '"': '"', "“": "”", "‘": "’", "'": "'"}
# Abbreviations whose period ends no sentence.
_ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "cf.", "approx.", "incl.", "resp.")


def split_message(message: str) -> tuple[str, str]:
    """A finding's message as (headline, detail): the headline is its first sentence.

    A sentence ends at ``.``, ``!`` or ``?`` followed by whitespace and then an upper-case
    letter, a quote, a backtick, a parenthesis or a hyphenated lower-case name
    (``gpu-operator``); never inside backticks, quotes, brackets
    or parentheses, after an abbreviation (``e.g.``, ``vs.``), or at an ellipsis. Periods
    inside numbers (``0.5``) and file names (``values.yaml``) are not followed by
    whitespace, so they end nothing. A message with no such end is all headline.

    Only the possible ends and the quote and bracket characters before them are looked at
    (the JSON report asks this of every finding).
    """
    marks = _SPAN_MARKS.finditer(message)
    mark = next(marks, None)
    depth = 0
    closer = ""  # the quote or backtick that ends the span the text is in
    size = len(message)
    for end in _MAYBE_SENTENCE_END.finditer(message):
        at = end.start()
        while mark is not None and mark.start() < at:
            char = mark.group()
            where = mark.start()
            if closer:
                # A single quote before a letter is an apostrophe (it's), not the end.
                if char == closer and (
                    char != "'" or where + 1 == size or not message[where + 1].isalnum()
                ):
                    closer = ""
            elif char in _QUOTES:
                # A single quote after a letter is an apostrophe (the GPUs' load).
                if char != "'" or where == 0 or not message[where - 1].isalnum():
                    closer = _QUOTES[char]
            elif char in "([{":
                depth += 1
            elif char in ")]}":
                depth = max(depth - 1, 0)
            mark = next(marks, None)
        if not closer and depth == 0 and _ends_sentence(message, at):
            return message[: at + 1].strip(), message[at + 1 :].strip()
    return message.strip(), ""


def _ends_sentence(message: str, at: int) -> bool:
    """Does the ``.``, ``!`` or ``?`` at ``at`` (followed by whitespace) end a sentence?
    Only the few characters around it are read."""
    if message[at - 1 : at] == ".":
        return False  # an ellipsis
    after = message[at + 1 : at + 41].lstrip()
    following = after[:1]
    if not following or not (
        following.isupper() or following in _SENTENCE_STARTS or _NAME_START.match(after)
    ):
        return False
    before = message[max(0, at - 7) : at + 1].lower()
    return not any(
        before.endswith(word) and not before[: -len(word)][-1:].isalnum() for word in _ABBREVIATIONS
    )


# A first word written in lower case whatever starts the sentence: names of tools and
# components (``gpu-operator``, ``dcgm-exporter``, ``metricsQuery`` never match the plain-word
# test below; these are the plain words that are names).
_LOWERCASE_NAMES = frozenset(("kubectl", "kustomize", "gpulint", "helmfile"))
_PLAIN_WORD = re.compile(r"([a-z]+)(?=[\s,;:)]|$)")


def capitalized(text: str) -> str:
    """``text`` opening a sentence of a message (the splitter ends the headline only before
    one): ``rule rules[0] in ...`` -> ``Rule ...``. A first word that is a name keeps its
    case: ``gpu-operator``, ``dcgm-exporter``, ``metricsQuery``, ``nvidia.com/gpu``, ``kubectl``."""
    word = _PLAIN_WORD.match(text)
    if word is None or word.group(1) in _LOWERCASE_NAMES:
        return text
    return text[:1].upper() + text[1:]


def as_sentence(message: str) -> str:
    """A finding's message as a person reads it: opening with a capital (``capitalized``)
    and ending with a period, unless it ends with ``.``, ``!`` or ``?`` already."""
    message = capitalized(message.strip())
    if message and message[-1] not in ".!?":
        message += "."
    return message
