"""Every printed fix of every failing fixture, applied, lints clean: it removes its finding
without making another.

For each finding of each ``tests/fixtures/<ID>/fail_*`` fixture, a copy of the fixture gets
that one fix, and the copy is linted again; a finding of a rule on an object that the
original did not have fails the test. A fix is applied as a user would apply it:

* a fix with edits (``--fix``'s plan) by its edits: the printed text says what they do
  (tests/test_fixes.py checks that each value they write is in it);
* a YAML mapping at the path of the object the finding names, merged there (mappings key by
  key, anything else replaced): at the node of the finding's path whose next step is one of
  its keys, else at the deepest node of the path that holds one, else at the finding's node;
  a YAML list stands for the item of the deepest list on the path (one item) or for that
  list (several); a fix headed by a comment that names another object (``# on Knative
  Service llm:``, ``# keep ScaledObject vllm ...``), or one that deletes the finding's own
  object, goes to the object it says it changes (``Finding.writes``), at its top;
* a part after a ``---`` headed ``# on <Kind> <name>:`` is merged into that object; any other
  is a new object, added to the finding's file; what follows a ``# or`` line is an
  alternative, not applied;
* the objects the fix deletes (``Finding.deletes``) are deleted.

A finding whose fix points at another finding's (``the fix of GL201 on ...``) is fixed by
that one. Fixes that are advice in words, not YAML, are listed in ``PROSE`` with why no
mechanical form fits them; a prose fix not listed fails the test.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpulint.adoption.edits import (
    Delete,
    DeleteDocument,
    Edit,
    FixPlan,
    Insert,
    Op,
    Set,
    Sources,
    apply,
    resolve,
)
from gpulint.chain.adapter import describe_document
from gpulint.core.model import Finding
from gpulint.engine.config import Settings
from gpulint.engine.result import Result
from gpulint.engine.runner import inventory_from_paths
from gpulint.input.document import Document, dig, plain_data
from gpulint.input.document import Path as DataPath

from .conftest import lint_result
from .test_rule_fixtures import _cases, _settings

# Fixes that are advice a person carries out: (rule, how the fix begins; "" for every fix of
# the rule) and why no YAML at a path of the object can say it.
PROSE = {
    ("GL701", ""): "a duplicate key: which of the two blocks holds the value meant is the "
    "author's choice",
    ("GL702", ""): "a syntax error: the file does not parse, so it has no object to put a "
    "snippet in",
    ("GL703", ""): "an unused suppression: the fix takes a word out of a comment or an "
    "annotation's value",
    ("GL704", ""): "kustomize fails: the fix is in the kustomization or the files it names, "
    "which are not objects",
    ("GL705", ""): "the renderer cannot run here: the fix is in how the input is rendered",
    ("GL305", "delete scaleMetric"): "KServe's autoScaling.metrics holds a metric of a shape "
    "of its own (a resource or an external query): which one is meant the deleted field "
    "does not say",
    ("GL501", "delete nvidia.com/gpu from resources.limits if"): "two remedies, by whether "
    "the container needs a GPU at all: only its author knows",
    ("GL604", "# delete dcgm.nodeSelector"): "the remedy is a label on the nodes "
    "(kubectl label node), which no manifest of the input holds",
    ("GL409", "# read the workload's own GPUs"): "the metric to read per pod is one the "
    "adapter does not serve yet: the fix names a rule to add, not a name to paste",
    ("GL405", "rewrite "): "a regular expression RE2 cannot compile (a look-ahead): what it "
    "was meant to match is the author's to say",
    ("GL409", "# scale shared-GPU replicas"): "replicas sharing a GPU scale on their own "
    "load, a metric of the application's (requests waiting) that only its author can name",
    ("GL116", "# delete the Resource metric"): "a resource no metrics API serves: what to scale "
    "on instead is a metric the workload exports, which only its author can name (deleting "
    "the only metric would leave the API server's default, CPU 80%)",
}

POINTER = "the fix of "


def _prose(finding: Finding) -> bool:
    return any(rule == finding.rule and finding.fix.startswith(start) for rule, start in PROSE)


def _fixtures() -> list[tuple[str, Path]]:
    """The failing fixtures a plain lint reads (those that need kustomize or Helm to render
    are GL704's and GL705's, whose fixes are all prose)."""
    found = []
    for rule, path in _cases("fail_"):
        names = {p.name for p in path.rglob("*")} if path.is_dir() else set()
        rendered = names & {"kustomization.yaml", "kustomization.yml", "Kustomization"}
        if rendered or "Chart.yaml" in names:
            assert (rule, "") in PROSE, f"{path} needs a renderer: its fixes are not applied"
            continue
        found.append((rule, path))
    return found


def _key(finding: Finding) -> tuple[str, Any]:
    """A finding's rule and object, whatever API version the object is written in (a fix
    may change it)."""
    ref = finding.object
    return (finding.rule, (ref.kind, ref.namespace, ref.name) if ref is not None else None)


@pytest.mark.parametrize(("rule", "path"), _fixtures(), ids=lambda v: str(v)[-60:])
def test_every_printed_fix_lints_clean(rule: str, path: Path, tmp_path: Path) -> None:
    settings = _settings(path) or Settings()
    before = lint_result(path, settings=settings)
    assert before.findings, f"{path} finds nothing"
    documents = _documents(path, settings)
    known = {_key(f) for f in before.findings}
    for number, finding in enumerate(before.findings):
        assert finding.fix, f"{finding.rule} at {finding.location} has no fix"
        if finding.fix.startswith(POINTER) or _prose(finding):
            continue
        fixed = tmp_path / f"fix{number}" / path.name
        fixed.parent.mkdir()
        if path.is_dir():
            shutil.copytree(path, fixed)
        _apply(finding, before, documents, path, fixed)
        if not fixed.exists():
            shutil.copy(path, fixed)
        after = lint_result(fixed, settings=settings)
        new = [f for f in after.findings if _key(f) not in known]
        assert not new, (
            f"the fix of {finding.rule} at {finding.location}:\n{finding.fix}\n"
            "makes:\n" + "\n".join(f"{f.location}: {f.rule} {f.message}" for f in new)
        )


def test_prose_fixes_are_listed_with_a_reason_and_stay_few() -> None:
    assert len(PROSE) <= 12
    assert all(len(reason) > 40 for reason in PROSE.values())


def _documents(path: Path, settings: Settings) -> list[Document]:
    """Every document a finding can be about: the objects, and the values and adapter
    configurations read out of them (a HelmRelease's values, a ConfigMap's rules)."""
    inventory = inventory_from_paths([str(path)], settings)
    found = list(inventory.documents)
    found += [chart.document for chart in inventory.charts]
    found += [config.document for config in inventory.adapter_configs]
    return list({id(d): d for d in found}.values())


def _apply(
    finding: Finding, result: Result, documents: list[Document], base: Path, to: Path
) -> None:
    """Write the files ``finding``'s fix changes into the copy at ``to`` (``base`` is the
    fixture linted)."""
    edits = result.edits_of(finding)
    added = ""
    if edits is None:
        plan = _text_plan(finding, documents)
        added = _new_documents(finding.fix)
        edits = []
        for file in dict.fromkeys(op.document.file for op in plan.ops):
            ops = tuple(op for op in plan.ops if op.document.file == file)
            placed = resolve(FixPlan("unsafe", ops), result.sources)
            # Edits are placed only where the text around them stays as it is (not inside
            # a flow mapping, say): the file is written anew instead.
            edits.extend(placed if placed is not None else [_rewritten(ops, result.sources)])
    by_file: dict[str, list[Edit]] = {}
    for edit in edits:
        by_file.setdefault(edit.file, []).append(edit)
    if added:
        by_file.setdefault(finding.location.file, [])
    for file, file_edits in by_file.items():
        lines = result.sources.lines(file)
        assert lines is not None, file
        text = apply(lines, file_edits)
        if file == finding.location.file and added:
            text = text.rstrip("\n") + "\n---\n" + added
        target = to / Path(file).resolve().relative_to(base) if base.is_dir() else to
        target.write_text(text)


def _text_plan(finding: Finding, documents: list[Document]) -> FixPlan:
    """The printed fix as edits."""
    ops: list[Op] = []
    deleted = set(finding.deletes)
    for document in documents:
        if describe_document(document) in deleted:
            ops.append(DeleteDocument(document))
    first, *rest = _parts(finding.fix)
    snippet = _loaded(first)
    if not isinstance(snippet, dict | list):
        assert deleted, f"{finding.rule}: its fix is prose; list it in PROSE:\n{finding.fix}"
    else:
        found = _target(finding, documents)
        if found is not None:  # None: the object it is for is not in the input
            target, path = found
            if isinstance(snippet, dict):
                ops.extend(_merged(target, _anchor(target, path, snippet), snippet))
            else:
                ops.append(_list_set(target, path, snippet))
    for part in rest:
        addressed = _addressed(part, finding, documents)
        if addressed is not None:
            loaded = _loaded(part)
            assert isinstance(loaded, dict), part
            ops.extend(_merged(addressed, (), loaded))
    return FixPlan("unsafe", tuple(ops))


def _parts(fix: str) -> list[str]:
    """The fix's documents, each up to its first ``# or`` alternative."""
    parts = re.split(r"(?m)^---\s*$", fix)
    return [re.split(r"(?m)^# or\b", part, maxsplit=1)[0] for part in parts]


def _loaded(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


_ADDRESSED = re.compile(r"\s*# on (\S+) ([^\s:]+)")


def _addressed(part: str, finding: Finding, documents: list[Document]) -> Document | None:
    """The object of the input a part of the fix is headed for (``# on Kind name:``)."""
    match = _ADDRESSED.match(part)
    if match is None:
        return None
    kind, name = match.groups()
    refs = [r for r in finding.writes if r.kind == kind and r.name == name]
    assert refs, f"{finding.rule}: its fix changes {kind} {name} but does not say so (writes)"
    return _document(documents, refs[0], None, ())


def _new_documents(fix: str) -> str:
    """The objects a fix adds after its first document, as text."""
    added = [part.strip("\n") + "\n" for part in _parts(fix)[1:] if part.strip()]
    return "---\n".join(part for part in added if _ADDRESSED.match(part) is None)


def _target(finding: Finding, documents: list[Document]) -> tuple[Document, DataPath] | None:
    """The document the snippet goes to, and the path it starts from: the finding's own
    object at its path; or, when the fix deletes that object or names another in its
    heading comment, the one it changes, at the top (None when that one is not in the
    input)."""
    heading = finding.fix.lstrip().startswith("#")
    others = [ref for ref in finding.writes if ref != finding.object]
    own_deleted = finding.object in finding.deletes
    if (heading or own_deleted) and len(others) == 1:
        return _document(documents, others[0], None, ()), ()
    if own_deleted:
        assert not others, f"{finding.rule}: which object its fix changes is not said"
        return None
    own = _document(documents, finding.object, finding.location.file, finding.path)
    return own, finding.path


def _document(documents: list[Document], ref: Any, file: str | None, path: DataPath) -> Document:
    candidates = [
        d for d in documents if describe_document(d) == ref and (file is None or d.file == file)
    ]
    with_path = [d for d in candidates if dig(d.data, path) is not None]
    found = with_path or candidates
    assert found, f"no document {ref} in {file}"
    return found[0]


def _anchor(document: Document, path: DataPath, snippet: dict[str, Any]) -> DataPath:
    keys = set(snippet)
    for depth in range(len(path) - 1, -1, -1):
        node = dig(document.data, path[:depth]) if depth else document.data
        if isinstance(node, dict) and path[depth] in keys:
            return path[:depth]
    deepest: DataPath | None = None
    for depth in range(len(path), -1, -1):
        node = dig(document.data, path[:depth]) if depth else document.data
        if not isinstance(node, dict):
            continue
        if keys & set(node):
            return path[:depth]
        if deepest is None:
            deepest = path[:depth]
    return deepest or ()


def _merged(document: Document, at: DataPath, snippet: dict[str, Any]) -> list[Op]:
    node = dig(document.data, at) if at else document.data
    ops: list[Op] = []
    added: list[tuple[str, Any]] = []
    for key, value in snippet.items():
        if isinstance(node, dict) and key in node:
            inner = node[key]
            if isinstance(value, dict) and isinstance(inner, dict) and inner:
                ops.extend(_merged(document, (*at, key), value))
            else:
                ops.append(Set(document, (*at, key), value))
        else:
            added.append((key, value))
    if added:
        ops.append(Insert(document, at, tuple(added)))
    return ops


def _list_set(document: Document, path: DataPath, items: list[Any]) -> Op:
    """A list snippet for the deepest list on the path: one item stands for the item the
    path goes through, several for the whole list."""
    for depth in range(len(path), 0, -1):
        node = dig(document.data, path[:depth])
        if isinstance(node, list):
            new = plain_data(node)
            index = path[depth] if depth < len(path) else None
            if len(items) == 1 and isinstance(index, int):
                new[index] = items[0]
            else:
                new = items
            return Set(document, path[:depth], new)
    # No list yet (the node is written in another shape): the list takes the place of the
    # deepest keyed node on the path.
    keyed = max((d for d in range(1, len(path) + 1) if isinstance(path[d - 1], str)), default=0)
    assert keyed, f"no place on {path} for {items}"
    return Set(document, path[:keyed], items)


def _rewritten(ops: tuple[Op, ...], sources: Sources) -> Edit:
    """The operations applied to the plain data of their file's documents, the file dumped
    anew (its comments are lost: none is needed once the copy is linted)."""
    file = ops[0].document.file
    lines = sources.lines(file)
    assert lines is not None, file
    loaded = list(yaml.safe_load_all("".join(lines)))
    for op in ops:
        index = op.document.index
        data = loaded[index] if index < len(loaded) else None
        assert isinstance(data, dict) and data.get("kind") == op.document.get(("kind",)), op
        if isinstance(op, DeleteDocument):
            loaded[index] = None
            continue
        parent: Any = data
        for step in op.path if isinstance(op, Insert) else op.path[:-1]:
            parent = parent.setdefault(step, {}) if isinstance(parent, dict) else parent[step]
        if isinstance(op, Insert):
            assert isinstance(op.entries, tuple), op
            parent.update(dict(op.entries))
        elif isinstance(op, Delete):
            del parent[op.path[-1]]
        else:
            assert isinstance(op, Set), op
            parent[op.path[-1]] = op.value
    text = yaml.safe_dump_all([d for d in loaded if d is not None], sort_keys=False)
    return Edit(file, (1, 1), (len(lines) + 1, 1), text)
