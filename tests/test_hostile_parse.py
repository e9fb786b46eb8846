"""Hostile shapes for the YAML and JSON readers: linear time, bounded values, problems with
positions, never a traceback.

Every big input is generated here, at test time. The time budgets are an order of magnitude
above what the linear code takes on a loaded 2-core machine and an order of magnitude below
what the quadratic code it replaces took (20,000 duplicate keys: 12 s; a 300,000-part base-60
scalar: 124 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from gpulint.input.loader import load_file
from gpulint.input.yamlparse import (
    MAX_NUMBER_CHARS,
    OversizedNumber,
    ParsedDocument,
    parse_documents,
    read_json,
)

from .conftest import ROOT, lint_text

T = TypeVar("T")


def _id(value: object) -> str:
    """A short test id for a big parameter."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"int-of-{value.bit_length()}-bits"
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}...{len(text)}-chars"


def _only(data: bytes) -> ParsedDocument:
    (document,) = parse_documents(data)
    return document


def _timed(budget: float, action: Callable[[], T]) -> T:
    started = time.perf_counter()
    result = action()
    elapsed = time.perf_counter() - started
    assert elapsed < budget, f"took {elapsed:.1f} s (budget {budget} s)"
    return result


# --- duplicate keys and positions -----------------------------------------------------------


@pytest.mark.slow
def test_one_hundred_thousand_duplicate_keys_are_found_in_linear_time() -> None:
    count = 100_000
    data = b"".join(b"k%d: first\nk%d: second\n" % (i, i) for i in range(count))
    (document,) = _timed(15, lambda: list(parse_documents(data)))
    assert len(document.duplicates) == count
    last = document.duplicates[-1]
    assert (last.key, last.line, last.column) == (f"k{count - 1}", 2 * count, 1)
    assert (last.first_line, last.first_column) == (2 * count - 1, 1)
    # The later value wins, and its positions replace the first ones.
    assert document.value[f"k{count - 1}"] == "second"
    assert document.value.key_position(f"k{count - 1}") == (2 * count, 1)
    assert document.value.value_position("k0") == (2, 5)


def test_duplicates_between_new_keys_keep_every_position_right() -> None:
    # Duplicates of early keys interleaved with new ones: the key -> index table must follow
    # the keys added after it was built.
    lines = [f"k{i}: {i}" for i in range(40)]
    for i in range(40, 60):
        lines.append(f"k{i - 40}: again{i}")
        lines.append(f"k{i}: {i}")
    (document,) = parse_documents("\n".join(lines).encode())
    mapping = document.value
    assert [(d.key, d.line, d.first_line) for d in document.duplicates] == [
        (f"k{i - 40}", 41 + 2 * (i - 40), i - 39) for i in range(40, 60)
    ]
    for i in range(40, 60):
        assert mapping.key_position(f"k{i}") == (42 + 2 * (i - 40), 1)
        assert mapping.key_position(f"k{i - 40}") == (41 + 2 * (i - 40), 1)
        assert mapping[f"k{i - 40}"] == f"again{i}"
    assert mapping.key_position("k20") == (21, 1)
    assert mapping.key_position("absent") is None


@pytest.mark.slow
def test_positions_of_every_key_of_a_large_mapping_cost_linear_time() -> None:
    count = 200_000
    data = b"".join(b"key-%d: %d\n" % (i, i) for i in range(count))
    mapping = _only(data).value

    def every_position() -> list[tuple[int, int] | None]:
        return [mapping.value_position(f"key-{i}") for i in range(0, count, 7)]

    positions = _timed(10, every_position)
    assert positions[:3] == [(1, 8), (8, 8), (15, 9)]
    # Keys added after the table was built are found too.
    mapping.put("late", 1, 5, 5)
    assert mapping.key_position("late") == (0, 5)


def test_duplicate_keys_in_a_whole_file_report_gl701_with_positions() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dup}\ndata:\n" + "".join(
        f"  key{i}: a\n  key{i}: b\n" for i in range(5_000)
    )
    findings = _timed(30, lambda: lint_text(text, select=["GL701"]))
    assert len(findings) == 5_000
    first = findings[0]
    assert (first.location.line, first.location.column) == (6, 3)


# --- numbers YAML reads --------------------------------------------------------------------


def test_a_three_megabyte_base_60_scalar_stays_text() -> None:
    text = "1" + ":59" * 300_000
    value = _timed(10, lambda: _only(f"v: {text}\n".encode()).value["v"])
    assert isinstance(value, OversizedNumber) and value == text
    # Short base-60 numbers are still read as YAML 1.1 does.
    assert _only(b"v: 1:30\nf: 1:30.5\n").value == {"v": 90, "f": 90.5}


@pytest.mark.parametrize(
    "text",
    [
        "1" * 4_301,  # Python's int-to-str limit is 4,300 digits
        "0x" + "f" * 4_000,  # a hex int whose decimal form has 4,817 digits
        "0b" + "1" * 200,
        "0" + "7" * 200,  # YAML 1.1 octal
        "-" + "9" * (MAX_NUMBER_CHARS + 1),
        "1." + "0" * 200,
        "1.0e+400",  # beyond float64: kubectl's YAML reader keeps it a string too
        "-1.5e+309",
    ],
    ids=_id,
)
def test_numbers_gpulint_cannot_hold_stay_their_text(text: str) -> None:
    tag = "!!float" if "." in text else "!!int"
    value = _only(f"v: {text}\nt: {tag} {text}\n".encode()).value
    for read in (value["v"], value["t"]):
        assert isinstance(read, OversizedNumber), type(read)
        assert read == text
        assert str(read) == text and json.loads(json.dumps(read)) == text


def test_numbers_up_to_the_bound_are_numbers() -> None:
    longest = "9" * MAX_NUMBER_CHARS
    value = _only(f"a: {longest}\nb: 0x{'f' * 98}\nc: .inf\nd: 1.5e+300\n".encode()).value
    assert value["a"] == int(longest) and str(value["a"]) == longest
    assert value["b"] == 16**98 - 1
    assert value["c"] == float("inf")
    assert value["d"] == 1.5e300


def test_json_numbers_follow_the_same_bounds() -> None:
    body = '{"big": %s, "huge": 1e400, "small": 12, "f": 0.5}' % ("7" * 4_301)
    value = read_json(body)
    assert isinstance(value["big"], OversizedNumber) and len(value["big"]) == 4_301
    assert value["huge"] == OversizedNumber("1e400")
    assert value["small"] == 12 and value["f"] == 0.5
    for constant in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(ValueError, match="not a JSON value"):
            read_json(f'{{"a": {constant}}}')


# --- deep nesting --------------------------------------------------------------------------


def _lint_cli(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )


@pytest.mark.parametrize(
    "body",
    [
        "[" * 2_000 + "]" * 2_000,
        # A tab makes libyaml refuse it first, so that the JSON reader gets it.
        '{"a":\t' + "[" * 2_000 + "]" * 2_000 + "}",
        '{"kind":\t"x", "deep": ' + '[{"a": ' * 1_500 + "1" + "}]" * 1_500 + "}",
    ],
    ids=["array", "tab-then-array", "tab-then-objects"],
)
def test_json_nested_thousands_deep_is_gl702_not_a_traceback(tmp_path: Path, body: str) -> None:
    path = tmp_path / "deep.json"
    path.write_text(body)
    result = _lint_cli(path)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stderr
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["rule"] == "GL702"
    assert os.path.abspath(finding["file"]) == str(path) and finding["line"] >= 1


def test_json_the_yaml_reader_refuses_is_read_without_recursion() -> None:
    # 900 levels: within what Python's JSON reader takes; the positionless copy must not
    # recurse on top of it.
    deep = "[" * 900 + "1" + "]" * 900
    text = '{"apiVersion":\t"v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": %s}'
    loaded = load_file("deep.json", (text % deep).encode())
    assert not loaded.problems
    (document,) = loaded.documents
    node = document.data["data"]
    for _ in range(900):
        (node,) = node
    assert node == 1
