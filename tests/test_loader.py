"""The loader: positions, documents, Lists, JSON, broken input that must not end the run."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from gpulint.input.document import position_of
from gpulint.input.loader import InputError, load_file
from gpulint.input.units.walk import walk
from gpulint.input.yamlparse import (
    MAX_EXPANDED_NODES,
    YamlError,
    YMap,
    parse_documents,
    rebuilt_map,
    unpack,
)
from gpulint.inventory import Inventory

from .conftest import lint_paths, lint_text, rules_of

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: web
        image: web
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_positions_of_keys_items_and_values() -> None:
    (doc,) = parse_documents(DEPLOYMENT)
    assert position_of(doc.value, ("metadata", "name")) == (4, 3)
    assert position_of(doc.value, ("metadata", "name"), key=False) == (4, 9)
    assert position_of(doc.value, ("spec", "template", "spec", "containers", 0)) == (9, 9)
    assert position_of(
        doc.value,
        ("spec", "template", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
    ) == (11, 30)
    # A path past what exists stops at the deepest node that exists.
    assert position_of(doc.value, ("spec", "replicas")) == (5, 1)


def test_positions_of_nested_duplicated_and_merged_keys() -> None:
    (doc,) = parse_documents(
        "base: &b {x: 1, y: 2}\nitem:\n  <<: *b\n  y: 3\n  list: [a, {k: v}]\n  y: 4\nafter: 1\n"
    )
    item = doc.value["item"]
    assert unpack(item.start) == (3, 3)
    assert unpack(doc.value["base"].start) == (1, 7)
    # A key written twice is placed where it was written last.
    assert item.key_position("y") == (6, 3)
    # Merged keys are placed at what they were merged from.
    assert item.key_position("x") == (1, 11)
    assert position_of(doc.value, ("item", "list", 1, "k")) == (5, 14)
    assert doc.value.key_position("after") == (7, 1)
    assert doc.duplicates[0].line == 6


def test_positions_survive_pickling() -> None:
    (doc,) = parse_documents(DEPLOYMENT)
    copy = pickle.loads(pickle.dumps(doc.value))
    assert copy == doc.value
    path = ("spec", "template", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu")
    assert position_of(copy, path) == position_of(doc.value, path) == (11, 30)
    assert copy.start == doc.value.start


def test_rebuilt_and_trimmed_mappings_keep_their_positions() -> None:
    (doc,) = parse_documents("a: 1\nb: 2\nc: 3\nd: 4\n")
    mapping = doc.value
    kept = rebuilt_map(mapping, [("C", 3, 2), ("a", 1, 0)])
    assert kept == {"C": 3, "a": 1}
    assert kept.key_position("C") == (3, 1)
    assert kept.value_position("a") == (1, 4)
    # Positions stop at the first entry the source has none for.
    partial = rebuilt_map(mapping, [("b", 2, 1), ("new", 0, 9), ("d", 4, 3)])
    assert partial.key_position("b") == (2, 1)
    assert partial.key_position("new") is None and partial.key_position("d") is None
    assert rebuilt_map({"x": 1}, [("x", 1, 0)]).key_position("x") is None
    mapping.discard("b")
    assert list(mapping) == ["a", "c", "d"]
    assert mapping.key_position("c") == (3, 1) and mapping.key_position("d") == (4, 1)
    mapping.discard("missing")
    mapping.put("e", 5, 42 << 20 | 1, 42 << 20 | 4)
    assert mapping.value_position("e") == (42, 4)
    with pytest.raises(ValueError):
        mapping.put("e", 6, 0, 0)
    assert YMap().start == 0


def test_scalars_resolve_like_yaml_1_1() -> None:
    (doc,) = parse_documents(
        'a: 1\nb: "1"\nc: yes\nd: ~\ne: 1.5\nf: 0x10\ng: 2024-01-01\nh: !!str 5\ni: !Ref x\n'
    )
    assert doc.value == {
        "a": 1,
        "b": "1",
        "c": True,
        "d": None,
        "e": 1.5,
        "f": 16,
        "g": "2024-01-01",
        "h": "5",
        "i": "x",
    }


def test_merge_keys_and_aliases() -> None:
    (doc,) = parse_documents("base: &b {x: 1, y: 2}\nitem:\n  <<: *b\n  y: 3\n")
    assert doc.value["item"] == {"y": 3, "x": 1}


def test_recursive_alias_is_an_error_not_a_hang() -> None:
    with pytest.raises(YamlError, match="recursive alias"):
        list(parse_documents("a: &a [1, *a]\n"))


def test_alias_bomb_is_refused_quickly() -> None:
    levels = ["a: &a [" + ",".join(['"lol"'] * 10) + "]"]
    for i in range(1, 9):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        levels.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]")
    with pytest.raises(YamlError, match=f"{MAX_EXPANDED_NODES:,}"):
        list(parse_documents("\n".join(levels) + "\n"))


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    text = "[" * 100_000 + "]" * 100_000
    findings = lint_text(text, name="deep.yaml")
    assert rules_of(findings) == ["GL702"]


def test_broken_document_does_not_hide_the_next_one() -> None:
    text = (
        DEPLOYMENT
        + "---\nkind: [oops\n---\n"
        + DEPLOYMENT.replace("web", "api")
        + (
            "---\napiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\n"
            "metadata: {name: api}\n"
            "spec:\n  scaleTargetRef: {kind: Deployment, name: api, apiVersion: apps/v1}\n"
            "  maxReplicas: 2\n"
        )
    )
    findings = lint_text(text, select=["GL101", "GL7"])
    assert rules_of(findings) == ["GL702", "GL101"]
    assert findings[0].location.line == 14
    assert findings[1].location.line == 30


def test_kind_list_items_are_objects() -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n- "
        + DEPLOYMENT.replace("\n", "\n  ").rstrip()
        + "\n- apiVersion: autoscaling/v1\n  kind: HorizontalPodAutoscaler\n"
        "  metadata: {name: web}\n  spec:\n    scaleTargetRef: {kind: Deployment, name: web}\n"
        "    maxReplicas: 2\n"
    )
    findings = lint_text(text, select=["GL101", "GL7"])
    assert rules_of(findings) == ["GL101"]
    assert findings[0].location.line == 18


def test_json_manifests(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text('{\n\t"apiVersion": "v1", "kind": "List", "items": []\n}\n')
    assert lint_paths(path) == []
    path.write_text(
        '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, '
        '"data": {"a": "b\\/c"}}'
    )
    assert lint_paths(path) == []


def test_non_kubernetes_yaml_is_skipped_silently(tmp_path: Path) -> None:
    (tmp_path / "ci.yml").write_text("on: [push]\njobs: {test: {runs-on: ubuntu-latest}}\n")
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: x\nversion: 0.1.0\n")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    assert lint_paths(tmp_path) == []


def test_invalid_utf8_is_gl702(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n")
    assert rules_of(lint_paths(path)) == ["GL702"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_gl702(tmp_path: Path) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text(DEPLOYMENT)
    path.chmod(0)
    assert rules_of(lint_paths(tmp_path)) == ["GL702"]


def test_walk_finds_yaml_and_json_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("x: 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yml").write_text("x: 1\n")
    (tmp_path / "sub" / "c.json").write_text("{}")
    (tmp_path / "sub" / "d.txt").write_text("x")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "e.yaml").write_text("x: 1\n")
    found = [Path(p).name for p in walk(str(tmp_path)).files]
    assert found == ["a.yaml", "b.yml", "c.json"]
    with pytest.raises(InputError):
        walk(str(tmp_path / "nope"))


def test_helm_source_comments_are_attached_to_documents() -> None:
    loaded = load_file(
        "x",
        b"---\n# Source: c/templates/a.yaml\nkind: A\n---\n# Source: c/templates/b.yaml\nkind: B\n",
    )
    assert [d.rendered_from for d in loaded.documents] == [
        "c/templates/a.yaml",
        "c/templates/b.yaml",
    ]


def test_embedded_adapter_config_positions_are_real_file_positions() -> None:
    text = (
        b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: adapter}\ndata:\n"
        b"  config.yaml: |\n    rules:\n    - seriesQuery: 'up'\n"
        b"      metricsQuery: 'x'\n"
    )
    inventory = Inventory()
    inventory.add_file(load_file("cm.yaml", text))
    (config,) = inventory.adapter_configs
    (rule,) = config.rules
    location = rule.location("metricsQuery")
    assert (location.file, location.line, location.column) == ("cm.yaml", 8, 7)
