"""Which YAML and JSON files of a run are input: the one place that decides.

A repository holds more YAML and JSON than Kubernetes manifests: an application's
``package.json`` and ``tsconfig.json`` (with comments, which no YAML parser accepts), CI
workflows, Compose files, documentation configs. Linters of manifests decide differently
what is theirs: kubeconform judges every file it is given and fails the ones with no
``kind`` (users exclude them by file name pattern), kube-linter lets any file that does not
decode pass silently (stackrox/kube-linter#41 asks for a smarter test). gpulint decides by
what a file holds where it can read it, and by its name only where it cannot:

* **by name, before reading** (``not_input_by_name``): gpulint's own configuration and
  baseline, and files whose name or place says which other tool reads them (npm, TypeScript,
  ESLint, editors, dev containers, Renovate, GitHub workflows, Compose, MkDocs, pre-commit,
  Codecov, citation files, JSON Schema and OpenAPI documents ...). None of those tools
  accepts a Kubernetes object, several allow comments that are not JSON, and lockfiles run to
  megabytes: they are skipped unread.
* **by content, after parsing** (``not_input``): a loose file is input when one of its
  documents is a Kubernetes object (string ``apiVersion`` and ``kind``; GitOps objects
  included) or a configuration gpulint reads (a prometheus-adapter config, Helm values of a
  chart gpulint knows, a helmfile installing one: ``gpulint.kinds.classify``). A file that
  holds neither is skipped and listed with the reason; nothing in it could have drawn a
  finding but a duplicate key or an unused suppression in a file no cluster reads.
* **a file that does not parse is input** unless its name said otherwise: its text may be a
  manifest with a typo, and GL702 at its line is what its author needs. Template syntax is
  the loader's own case (skipped with the advice to render it).

Files a kustomization names as resources and files inside a chart never come here: the
renderers read them, and a broken one is GL702 or GL704 there. The files a kustomize
generator reads are data (their text becomes a ConfigMap's or Secret's values); when a
kustomization is linted file by file they are judged as loose files, except that one that
does not parse is judged only when it may hold prometheus-adapter's configuration
(``generator_data_not_input``). Stdin is always input.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpulint.input.loader import LoadedFile

# gpulint's own files: never input, and not worth a line of every report (docs/ci.md: "A baseline
# of today's findings" names the baseline so).
CONFIG_NAMES = (".gpulint.yaml", ".gpulint.yml")
BASELINE_NAME = ".gpulint-baseline.json"
OWN_FILE = "gpulint's own configuration or baseline: not input"

_NOT_INPUT = "not Kubernetes input: "

# Exact file names (compared in lower case) and the tool that reads each.
_NAMES = {
    "package.json": "an npm package manifest",
    "package-lock.json": "an npm lockfile",
    "npm-shrinkwrap.json": "an npm lockfile",
    "pnpm-lock.yaml": "a pnpm lockfile",
    "pnpm-workspace.yaml": "a pnpm workspace",
    ".yarnrc.yml": "Yarn's configuration",
    "bower.json": "a Bower package manifest",
    "composer.json": "a Composer package manifest",
    "lerna.json": "Lerna's configuration",
    "nx.json": "Nx's configuration",
    "turbo.json": "Turborepo's configuration",
    "deno.json": "Deno's configuration",
    "biome.json": "Biome's configuration",
    "babel.config.json": "Babel's configuration",
    ".babelrc.json": "Babel's configuration",
    "renovate.json": "Renovate's configuration",
    ".renovaterc.json": "Renovate's configuration",
    "devcontainer.json": "a dev container configuration",
    ".devcontainer.json": "a dev container configuration",
    "docker-compose.yml": "a Docker Compose file",
    "docker-compose.yaml": "a Docker Compose file",
    "compose.yml": "a Docker Compose file",
    "compose.yaml": "a Docker Compose file",
    "mkdocs.yml": "MkDocs' configuration",
    "mkdocs.yaml": "MkDocs' configuration",
    ".pre-commit-config.yaml": "pre-commit's configuration",
    ".pre-commit-config.yml": "pre-commit's configuration",
    ".pre-commit-hooks.yaml": "pre-commit hook definitions",
    "codecov.yml": "Codecov's configuration",
    "codecov.yaml": "Codecov's configuration",
    ".codecov.yml": "Codecov's configuration",
    ".codecov.yaml": "Codecov's configuration",
    "citation.cff": "a citation file (Citation File Format)",
    ".gitlab-ci.yml": "a GitLab CI pipeline",
    ".travis.yml": "a Travis CI pipeline",
    "appveyor.yml": "an AppVeyor pipeline",
    ".appveyor.yml": "an AppVeyor pipeline",
    "azure-pipelines.yml": "an Azure Pipelines pipeline",
    "bitbucket-pipelines.yml": "a Bitbucket pipeline",
    ".drone.yml": "a Drone pipeline",
    "action.yml": "a GitHub Action's metadata",
    "action.yaml": "a GitHub Action's metadata",
    ".golangci.yml": "golangci-lint's configuration",
    ".golangci.yaml": "golangci-lint's configuration",
    ".goreleaser.yml": "GoReleaser's configuration",
    ".goreleaser.yaml": "GoReleaser's configuration",
    ".yamllint.yml": "yamllint's configuration",
    ".yamllint.yaml": "yamllint's configuration",
    ".markdownlint.json": "markdownlint's configuration",
    ".markdownlint.yaml": "markdownlint's configuration",
    ".markdownlint.yml": "markdownlint's configuration",
    ".readthedocs.yml": "Read the Docs' configuration",
    ".readthedocs.yaml": "Read the Docs' configuration",
    "openapi.json": "an OpenAPI description",
    "openapi.yaml": "an OpenAPI description",
    "openapi.yml": "an OpenAPI description",
    "swagger.json": "an OpenAPI (Swagger) description",
    "swagger.yaml": "an OpenAPI (Swagger) description",
    "swagger.yml": "an OpenAPI (Swagger) description",
}
# Name starts (the name ends in .json or .yaml/.yml), for tools that read several files:
# tsconfig.build.json, .eslintrc.yml, docker-compose.prod.yaml ...
_PREFIXES = (
    ("tsconfig", "a TypeScript configuration"),
    ("jsconfig", "a JavaScript project configuration"),
    (".eslintrc", "ESLint's configuration"),
    (".prettierrc", "Prettier's configuration"),
    (".stylelintrc", "Stylelint's configuration"),
    ("docker-compose.", "a Docker Compose file"),
    ("compose.", "a Docker Compose file"),
)
_SUFFIXES = ((".schema.json", "a JSON Schema"),)
# Directories whose files only editors and dev containers read, at any depth below them.
_TOOL_DIRECTORIES = {
    ".vscode": "an editor's settings (.vscode)",
    ".idea": "an editor's settings (.idea)",
    ".devcontainer": "a dev container configuration",
}
# Under .github: its own files (dependabot.yml, labeler.yml ...) and these directories are
# GitHub's. Deeper directories (.github/e2e/manifests) may hold manifests: judged by content.
_GITHUB_DIRECTORIES = {
    "workflows": "a GitHub Actions workflow",
    "ISSUE_TEMPLATE": "a GitHub issue template",
    "DISCUSSION_TEMPLATE": "a GitHub discussion template",
}


def not_input_by_name(path: str) -> str | None:
    """Why the file at ``path`` is not input, known from its name or place alone; None when
    only its content can tell. ``OWN_FILE`` for gpulint's own files."""
    name = os.path.basename(path)
    if name in CONFIG_NAMES or name == BASELINE_NAME:
        return OWN_FILE
    lowered = name.lower()
    what = _NAMES.get(lowered)
    if what is None and lowered.endswith((".json", ".yaml", ".yml")):
        what = next((w for p, w in _PREFIXES if lowered.startswith(p)), None)
        if what is None:
            what = next((w for s, w in _SUFFIXES if lowered.endswith(s)), None)
    if what is None:
        what = _by_place(path)
    return None if what is None else f"{_NOT_INPUT}{what}"


def _by_place(path: str) -> str | None:
    parent_path = os.path.dirname(os.path.normpath(path))
    parent = os.path.basename(parent_path)
    grandparent = os.path.basename(os.path.dirname(parent_path))
    for directory in (parent, grandparent):
        if directory in _TOOL_DIRECTORIES:
            return _TOOL_DIRECTORIES[directory]
    if parent == ".github":
        return "GitHub's configuration (.github)"
    if grandparent == ".github" and parent in _GITHUB_DIRECTORIES:
        return _GITHUB_DIRECTORIES[parent]
    return None


def not_input(loaded: LoadedFile) -> str | None:
    """Why a loaded loose file is not input, from what it holds; None when it is (it holds
    an object or a configuration gpulint reads, or it does not parse, or the loader already
    said why it was skipped). ``OWN_FILE`` for a gpulint baseline under any name."""
    if loaded.problems or loaded.skipped_reason or not loaded.documents:
        return None
    from gpulint.kinds.classify import classify_document

    configurations = []
    for document in loaded.documents:
        data = document.data
        if not isinstance(data, dict):
            continue
        if isinstance(data.get("apiVersion"), str) and isinstance(data.get("kind"), str):
            return None
        configurations.append(document)
    if len(configurations) == 1 and _is_baseline(configurations[0].data):
        return OWN_FILE
    for document in configurations:
        if next(classify_document(document), None) is not None:
            return None
    return (
        f"{_NOT_INPUT}it holds no object (apiVersion and kind), no prometheus-adapter "
        "config and no Helm values of a chart gpulint reads"
    )


def _is_baseline(data: dict[str, Any]) -> bool:
    """A baseline ``--write-baseline`` wrote (``gpulint.adoption.baseline``), whatever its
    name."""
    return data.get("tool") == "gpulint" and isinstance(data.get("entries"), list)


# The fields of a kustomization whose files become a ConfigMap's or Secret's data
# (kustomize: api/types/generatorargs.go, kv.go: ``files``, ``envs``, ``env``).
GENERATOR_FIELDS = frozenset({"configMapGenerator", "secretGenerator"})
_ADAPTER_KEYS = (b"seriesQuery", b"resourceRules", b"externalRules")


def generator_data_not_input(loaded: LoadedFile) -> bool:
    """Is a file a kustomize generator reads not input, as a loose file would not be, or
    because it does not parse and cannot be prometheus-adapter's configuration (an ``.env``
    file, a JSON file with comments)? Such a file is dropped without a word: the generator
    made it data, and the kustomization's own finding says it was linted file by file."""
    if not_input_by_name(loaded.path) is not None:
        return True
    if loaded.problems:
        text = loaded.text or b""
        return not any(key in text for key in _ADAPTER_KEYS)
    return not_input(loaded) is not None
