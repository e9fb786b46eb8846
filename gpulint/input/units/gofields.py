"""Field names as the Go tools match them: kustomizations and Chart.yaml read as kustomize
and Helm read them.

kustomize decodes a kustomization into Go structs (api/types/kustomization.go
``Kustomization.Unmarshal``: sigs.k8s.io/yaml's ``YAMLToJSON``, then encoding/json with
``DisallowUnknownFields``), its builtin plugins their configurations (``yaml.Unmarshal``,
unknown fields ignored), and Helm its Chart.yaml (pkg/chart/loader: sigs.k8s.io/yaml
``Unmarshal`` into ``chart.Metadata``). encoding/json matches an object key to a struct
field first exactly and then case-insensitively (decode.go ``object``: ``byExactName``, then
``byFoldedName[foldName(key)]``), so ``HelmCharts:`` or ``Resources:`` is honoured as
``helmCharts`` or ``resources``, a spelling every check that reads ``resources`` would miss.

The fold (encoding/json fold.go, Go 1.21 and later; older Go's ``equalFoldRight`` agrees on
ASCII names): an ASCII letter is upper-cased, any other rune replaced by the smallest rune of
its simple case-folding orbit (``unicode.SimpleFold``). The field names here are ASCII, and
only two runes outside ASCII fold into ASCII: U+017F LATIN SMALL LETTER LONG S (to ``S``) and
U+212A KELVIN SIGN (to ``K``); every other one folds to a rune outside ASCII and matches no
field. kubectl kustomize v5.5.0 (Go 1.23) builds ``Resources:``, ``resources`` spelled with
U+017F for its first ``s`` and ``kind`` spelled with U+212A as those fields, and refuses
``nameprefix`` spelled with a dotless i (U+0131) as an unknown field.

The structs below are kustomize's at v5.5.0 (api/types: kustomization.go, helmchartargs.go,
patch.go, selector.go, kvpairsources.go, generatorargs.go, replacement.go, image.go, labels.go,
replica.go, sortoptions.go, generatoroptions.go, objectmeta.go) and Helm 3's
(pkg/chart/metadata.go, dependency.go).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from gpulint.input.document import Path

# U+017F and U+212A: the runes outside ASCII whose case-folding orbit holds an ASCII letter.
_FOLDED_TO_ASCII = {"\u017f": "S", "\u212a": "K"}


def fold(name: str) -> str:
    """``name`` as encoding/json's ``foldName`` folds it, for matching ASCII field names."""
    return "".join(
        (c.upper() if "a" <= c <= "z" else c) if c < "\x80" else _FOLDED_TO_ASCII.get(c, c)
        for c in name
    )


class Struct:
    """A Go struct's JSON field names, and the structs some of them hold (a field holding a
    list of structs is described by the struct of its items)."""

    def __init__(self, *fields: str, **nested: Struct) -> None:
        self.fields = frozenset(fields) | frozenset(nested)
        self.nested = nested
        self.by_fold = {fold(f): f for f in self.fields}


class Misspelled(NamedTuple):
    """A key a Go tool takes for a field it does not spell exactly."""

    path: Path  # of the key, in the document's data
    key: str  # as written
    field: str  # the field Go matches it to


def misspelled(data: Any, struct: Struct) -> Iterator[Misspelled]:
    """Every key of ``data`` (decoded into ``struct``) that Go matches to a field without
    being its exact name, at any depth the structs describe; a loop over a stack."""
    stack: list[tuple[Any, Struct, Path]] = [(data, struct, ())]
    while stack:
        node, shape, path = stack.pop()
        if isinstance(node, list):
            stack.extend((item, shape, (*path, i)) for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if not isinstance(key, str):
                continue
            field = key if key in shape.fields else shape.by_fold.get(fold(key))
            if field is None:
                continue
            if field != key:
                yield Misspelled((*path, key), key, field)
            inner = shape.nested.get(field)
            if inner is not None:
                stack.append((value, inner, (*path, key)))


def unknown(data: Any, struct: Struct) -> list[tuple[Path, str]]:
    """The top-level keys of ``data`` that match no field of ``struct``, even folded."""
    if not isinstance(data, dict):
        return []
    return [
        ((key,), key)
        for key in data
        if not isinstance(key, str)
        or (key not in struct.fields and fold(key) not in struct.by_fold)
    ]


_SELECTOR = Struct(
    "group", "version", "kind", "name", "namespace", "annotationSelector", "labelSelector"
)
_PATCH = Struct("path", "patch", "options", target=_SELECTOR)
_FIELD_OPTIONS = Struct("delimiter", "index", "encoding", "create")
_GENERATOR_OPTIONS = Struct("labels", "annotations", "disableNameSuffixHash", "immutable")
_GENERATOR_FIELDS = ("namespace", "name", "behavior", "literals", "files", "envs", "env")
HELM_GLOBALS_FIELDS = ("chartHome", "configHome")
HELM_CHART_FIELDS = (
    "name",
    "version",
    "repo",
    "releaseName",
    "namespace",
    "additionalValuesFiles",
    "valuesFile",
    "valuesInline",
    "valuesMerge",
    "includeCRDs",
    "skipHooks",
    "apiVersions",
    "kubeVersion",
    "nameTemplate",
    "skipTests",
    "debug",
)

KUSTOMIZATION = Struct(
    "apiVersion",
    "kind",
    "openapi",  # a map: its keys are matched exactly
    "namePrefix",
    "nameSuffix",
    "namespace",
    "commonLabels",
    "commonAnnotations",
    "patchesStrategicMerge",
    "vars",
    "resources",
    "components",
    "crds",
    "bases",
    "configurations",
    "generators",
    "transformers",
    "validators",
    "buildMetadata",
    metadata=Struct("name", "namespace", "labels", "annotations"),
    labels=Struct("pairs", "includeSelectors", "includeTemplates", "fields"),
    patchesJson6902=_PATCH,
    patches=_PATCH,
    images=Struct("name", "newName", "tagSuffix", "newTag", "digest"),
    imageTags=Struct("name", "newName", "tagSuffix", "newTag", "digest"),
    replacements=Struct(
        "path",
        source=Struct(
            "group", "version", "kind", "name", "namespace", "fieldPath", options=_FIELD_OPTIONS
        ),
        targets=Struct("fieldPaths", select=_SELECTOR, reject=_SELECTOR, options=_FIELD_OPTIONS),
    ),
    replicas=Struct("name", "count"),
    sortOptions=Struct("order", legacySortOptions=Struct("orderFirst", "orderLast")),
    configMapGenerator=Struct(*_GENERATOR_FIELDS, options=_GENERATOR_OPTIONS),
    secretGenerator=Struct(*_GENERATOR_FIELDS, "type", options=_GENERATOR_OPTIONS),
    generatorOptions=_GENERATOR_OPTIONS,
    helmGlobals=Struct(*HELM_GLOBALS_FIELDS),
    helmCharts=Struct(*HELM_CHART_FIELDS),
    # Deprecated, and still converted into helmCharts and helmGlobals (api/types
    # kustomization.go ``FixKustomization``, helmchartargs.go ``SplitHelmParameters``).
    helmChartInflationGenerator=Struct(
        "chartName",
        "chartVersion",
        "chartRepoUrl",
        "chartHome",
        "chartRepoName",
        "helmBin",
        "helmHome",
        "values",
        "valuesLocal",
        "valuesMerge",
        "releaseName",
        "releaseNamespace",
        "extraArgs",
    ),
)

# A HelmChartInflationGenerator configuration among generators: or transformers: (api/internal/
# builtins/HelmChartInflationGenerator.go: HelmGlobals and HelmChart inline, yaml.Unmarshal).
HELM_GENERATOR = Struct(
    "apiVersion",
    "kind",
    *HELM_GLOBALS_FIELDS,
    *HELM_CHART_FIELDS,
    metadata=Struct("name", "namespace", "labels", "annotations"),
)

_DEPENDENCY = Struct(
    "name", "version", "repository", "condition", "tags", "enabled", "import-values", "alias"
)
CHART = Struct(
    "name",
    "home",
    "sources",
    "version",
    "description",
    "keywords",
    "icon",
    "apiVersion",
    "condition",
    "tags",
    "appVersion",
    "deprecated",
    "annotations",
    "kubeVersion",
    "type",
    maintainers=Struct("name", "email", "url"),
    dependencies=_DEPENDENCY,
)
REQUIREMENTS = Struct(dependencies=_DEPENDENCY)  # a v1 chart's requirements.yaml
