"""The edit engine (adoption.edits): operations on parsed nodes placed as text edits that keep
everything else of the file byte for byte, and refused rather than guessed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpulint.adoption import edits
from gpulint.adoption.edits import Sources, apply, plan_edits, resolve
from gpulint.input.document import Document
from gpulint.input.loader import load_file


def _document(tmp_path: Path, text: str, index: int = 0, name: str = "a.yaml") -> Document:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return load_file(str(path)).documents[index]


def _fixed(document: Document, *ops: edits.Op) -> str | None:
    sources = Sources()
    placed = resolve(edits.safe(*ops), sources)
    if placed is None:
        return None
    lines = sources.lines(document.file)
    assert lines is not None
    return apply(lines, placed)


def test_replace_keeps_comments_and_quoting_around_the_value(tmp_path: Path) -> None:
    text = 'apiVersion: autoscaling/v2beta2   # old\nkind: X\nvalue: "70"  # per pod\n'
    doc = _document(tmp_path, text)
    assert _fixed(doc, edits.Replace(doc, ("apiVersion",), "autoscaling/v2")) == (
        'apiVersion: autoscaling/v2   # old\nkind: X\nvalue: "70"  # per pod\n'
    )
    assert _fixed(doc, edits.Replace(doc, ("value",), '"7"')) == text.replace('"70"', '"7"')


def test_replace_inside_a_flow_mapping(tmp_path: Path) -> None:
    doc = _document(tmp_path, "target: {type: Value, averageValue: '70'}\n")
    assert _fixed(doc, edits.Replace(doc, ("target", "type"), "AverageValue")) == (
        "target: {type: AverageValue, averageValue: '70'}\n"
    )


def test_a_value_that_is_not_what_was_read_is_not_replaced(tmp_path: Path) -> None:
    doc = _document(tmp_path, "a: 1\n")
    Path(doc.file).write_text("a: 2\n")  # changed since it was read
    assert _fixed(doc, edits.Replace(doc, ("a",), "3")) is None


def test_replacement_text_must_be_yaml(tmp_path: Path) -> None:
    doc = _document(tmp_path, "a: 1\n")
    assert _fixed(doc, edits.Replace(doc, ("a",), "{unclosed")) is None


def test_rename_quotes_keys_yaml_would_read_otherwise(tmp_path: Path) -> None:
    doc = _document(tmp_path, "overrides:\n  pod: {resource: pod}\n")
    renamed = _fixed(doc, edits.Rename(doc, ("overrides", "pod"), "exported_pod"))
    assert renamed == "overrides:\n  exported_pod: {resource: pod}\n"
    quoted = _fixed(doc, edits.Rename(doc, ("overrides", "pod"), "on"))
    assert quoted is not None and yaml.safe_load(quoted) == {
        "overrides": {"on": {"resource": "pod"}}
    }


def test_deleting_every_entry_of_a_mapping_deletes_the_mapping(tmp_path: Path) -> None:
    text = "metadata:\n  name: x\n  annotations:\n    a: '1'   # one\n    b: '2'\nspec: {}\n"
    doc = _document(tmp_path, text)
    both = _fixed(
        doc,
        edits.Delete(doc, ("metadata", "annotations", "a")),
        edits.Delete(doc, ("metadata", "annotations", "b")),
    )
    assert both == "metadata:\n  name: x\nspec: {}\n"
    one = _fixed(doc, edits.Delete(doc, ("metadata", "annotations", "b")))
    assert one == "metadata:\n  name: x\n  annotations:\n    a: '1'   # one\nspec: {}\n"


def test_insert_into_a_mapping_and_its_missing_parents(tmp_path: Path) -> None:
    text = "spec:\n  # the target\n  maxReplicas: 4\nstatus: {}\n"
    doc = _document(tmp_path, text)
    inserted = _fixed(
        doc, edits.Insert(doc, ("spec", "behavior", "scaleDown"), edits.entries(window=300))
    )
    assert inserted == (
        "spec:\n  # the target\n  maxReplicas: 4\n  behavior:\n    scaleDown:\n"
        "      window: 300\nstatus: {}\n"
    )


def test_insert_at_the_end_of_a_file_without_a_newline(tmp_path: Path) -> None:
    doc = _document(tmp_path, "spec:\n  maxReplicas: 4")
    assert _fixed(doc, edits.Insert(doc, ("spec",), edits.entries(minReplicas=1))) == (
        "spec:\n  maxReplicas: 4\n  minReplicas: 1"
    )


def test_insert_block_text_keeps_its_comments(tmp_path: Path) -> None:
    doc = _document(tmp_path, "spec:\n  maxReplicas: 4\n")
    block = "behavior:\n  scaleUp:   # up\n    stabilizationWindowSeconds: 0\n"
    assert _fixed(doc, edits.Insert(doc, ("spec",), block)) == (
        "spec:\n  maxReplicas: 4\n  behavior:\n    scaleUp:   # up\n"
        "      stabilizationWindowSeconds: 0\n"
    )


def test_insert_into_an_item_of_a_list(tmp_path: Path) -> None:
    doc = _document(tmp_path, "rules:\n  custom:\n    - seriesQuery: x\n      metricsQuery: y\n")
    inserted = _fixed(doc, edits.Insert(doc, ("rules", "custom", 0), edits.entries(name="n")))
    assert inserted is not None
    assert yaml.safe_load(inserted) == {
        "rules": {"custom": [{"seriesQuery": "x", "metricsQuery": "y", "name": "n"}]}
    }


def test_insert_of_a_key_already_there_is_refused(tmp_path: Path) -> None:
    doc = _document(tmp_path, "spec:\n  maxReplicas: 4\n")
    assert _fixed(doc, edits.Insert(doc, ("spec",), edits.entries(maxReplicas=8))) is None


def test_insert_into_an_empty_flow_mapping(tmp_path: Path) -> None:
    doc = _document(tmp_path, "metadata:\n  annotations: {}\n")
    inserted = _fixed(doc, edits.Insert(doc, ("metadata", "annotations"), edits.entries(a="1")))
    assert inserted is not None and yaml.safe_load(inserted) == {
        "metadata": {"annotations": {"a": "1"}}
    }


def test_delete_document_keeps_the_others(tmp_path: Path) -> None:
    text = "a: 1\n---\n# the second\nb: 2\n---\nc: 3\n"
    doc = _document(tmp_path, text, index=1)
    remaining = _fixed(doc, edits.DeleteDocument(doc))
    assert remaining is not None
    assert [d for d in yaml.safe_load_all(remaining) if d] == [{"a": 1}, {"c": 3}]


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_the_files_line_endings_are_kept(tmp_path: Path, ending: str) -> None:
    doc = _document(tmp_path, "spec:\n  maxReplicas: 4\n".replace("\n", ending))
    inserted = _fixed(doc, edits.Insert(doc, ("spec",), edits.entries(minReplicas=1)))
    assert inserted == "spec:\n  maxReplicas: 4\n  minReplicas: 1\n".replace("\n", ending)
    block = edits.Insert(doc, ("spec", "behavior"), edits.entries(scaleDown={"a": [1, 2]}))
    nested = _fixed(doc, block)
    assert nested is not None and "\n" not in nested.replace(ending, "")


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_an_insertion_at_the_end_of_a_file_without_a_last_line_break(
    tmp_path: Path, ending: str
) -> None:
    doc = _document(tmp_path, "a: 1" + ending + "spec:" + ending + "  maxReplicas: 4")
    inserted = _fixed(doc, edits.Insert(doc, ("spec",), edits.entries(minReplicas=1)))
    expected = "a: 1\nspec:\n  maxReplicas: 4\n  minReplicas: 1".replace("\n", ending)
    assert inserted == expected


def test_a_plan_is_all_or_nothing(tmp_path: Path) -> None:
    doc = _document(tmp_path, "a: 1\nb: 2\n")
    plan = edits.safe(edits.Replace(doc, ("a",), "3"), edits.Replace(doc, ("missing",), "4"))
    assert resolve(plan, Sources()) is None


def test_rendered_output_gets_no_edits(tmp_path: Path) -> None:
    text = "---\n# Source: chart/templates/hpa.yaml\nspec:\n  maxReplicas: 4\n"
    doc = _document(tmp_path, text)
    assert doc.rendered_from is not None
    assert _fixed(doc, edits.Insert(doc, ("spec",), edits.entries(minReplicas=1))) is None
    assert _fixed(doc, edits.Replace(doc, ("spec", "maxReplicas"), "8")) is None


class _Finding:
    def __init__(self, plan: edits.FixPlan) -> None:
        self.plan = plan


def test_overlapping_fixes_wait_for_the_next_round(tmp_path: Path) -> None:
    doc = _document(tmp_path, "spec:\n  maxReplicas: 4\n")
    first = _Finding(edits.safe(edits.Insert(doc, ("spec",), edits.entries(minReplicas=1))))
    second = _Finding(edits.safe(edits.Insert(doc, ("spec",), edits.entries(behavior={}))))
    unsafe = _Finding(edits.unsafe(edits.Replace(doc, ("spec", "maxReplicas"), "8")))
    round_one = plan_edits([first, second, unsafe], Sources())
    assert round_one.fixed == [first] and round_one.waiting == 1 and round_one.plans == 1
    with_unsafe = plan_edits([unsafe], Sources(), unsafe_too=True)
    assert with_unsafe.after[doc.file] == "spec:\n  maxReplicas: 8\n"


def test_files_a_fix_may_not_write_are_refused(tmp_path: Path) -> None:
    doc = _document(tmp_path, "a: 1\n")
    finding = _Finding(edits.safe(edits.Replace(doc, ("a",), "2")))
    result = plan_edits([finding], Sources(), writable=lambda file: False)
    assert result.after == {} and result.refused == [doc.file]


@pytest.mark.parametrize(
    "key", ["on", "yes", "No", "null", "1", "1e5", "~", "a: b", "#x", "- x", "true"]
)
def test_keys_are_written_so_yaml_reads_them_back(key: str) -> None:
    from gpulint.adoption.yamlspans import key_text

    assert yaml.safe_load(f"{key_text(key)}: 0") == {key: 0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # an indentless list under its key, a comment on its last item
            "spec:\n  metrics:\n  - {type: Pods}   # first\n  behavior: {}\n",
            "spec:\n  metrics:\n  - {type: Pods}   # first\n  - type: External\n  behavior: {}\n",
        ),
        (  # items indented under the key, the last one spanning lines; no final newline
            "metrics:\n    - type: Pods\n      pods: {a: 1}",
            "metrics:\n    - type: Pods\n      pods: {a: 1}\n    - type: External",
        ),
    ],
)
def test_extend_appends_items_as_the_list_writes_them(
    tmp_path: Path, text: str, expected: str
) -> None:
    doc = _document(tmp_path, text)
    path = ("spec", "metrics") if text.startswith("spec") else ("metrics",)
    assert _fixed(doc, edits.Extend(doc, path, ({"type": "External"},))) == expected


def test_extend_refuses_a_flow_list(tmp_path: Path) -> None:
    doc = _document(tmp_path, "metrics: [{type: Pods}]\n")
    assert _fixed(doc, edits.Extend(doc, ("metrics",), ({"type": "External"},))) is None


def test_a_list_extended_and_an_entry_added_at_the_end_of_a_file_join(tmp_path: Path) -> None:
    """Both insert where the file ends (without a newline): one plan, one insertion, in the
    order the plan gives."""
    doc = _document(tmp_path, "spec:\n  metrics:\n  - type: Pods   # kept")
    fixed = _fixed(
        doc,
        edits.Extend(doc, ("spec", "metrics"), ({"type": "External"},)),
        edits.Insert(doc, ("spec",), (("behavior", {"scaleUp": {"selectPolicy": "Min"}}),)),
    )
    assert fixed == (
        "spec:\n  metrics:\n  - type: Pods   # kept\n  - type: External\n"
        "  behavior:\n    scaleUp:\n      selectPolicy: Min"
    )
