"""The releases a cluster runs, as its API server tells them (``gpulint.engine.versions``).

* Kubernetes: ``GET /version`` (``major``, ``minor``; managed clusters write ``"35+"``, and
  ``gitVersion`` ``v1.35.2-gke.1000``), which every authenticated client may read
  (the ``system:public-info-viewer`` ClusterRole).
* KEDA, Knative and KServe: the version label of their CustomResourceDefinition.
  KEDA's release manifests label every object ``app.kubernetes.io/version`` (kedacore/keda
  Makefile, ``release``: ``kustomize edit add label -f app.kubernetes.io/version:${VERSION}``)
  and its chart labels its CRDs the same way; Knative Serving's CRDs carry
  ``serving.knative.dev/release: v1.23.0`` (knative/serving config/core/300-resources,
  ``devel`` until a release stamps it) and ``app.kubernetes.io/version`` in newer releases.
  Reading a CRD needs ``get`` on ``customresourcedefinitions`` (deploy/ grants it for the
  three CRDs by name).
* Where the label cannot be read (KServe's CRDs carry none), what the cluster serves may
  still bound the release: a cluster that serves ``llminferenceservices.serving.kserve.io``
  runs KServe 0.17 or later (the kind appears in v0.17.0, kserve/kserve
  pkg/apis/serving/v1alpha1/llm_inference_service_types.go), so a KServe older than that is
  not what it runs.

A release given on the command line is kept whatever the cluster says; one read here replaces
the default and ``.gpulint.yaml``'s (``Versions.with_release``). What could not be read is
said in a note, with the release judged for instead.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpulint.cluster.api import ApiError, KubeApi
from gpulint.engine.versions import (
    CLUSTER,
    CONFIG,
    DEFAULT,
    KEDA,
    KNATIVE,
    KSERVE,
    KUBERNETES,
    NAMES,
    OPTION,
    OPTIONS,
    SETTINGS,
    Release,
    Versions,
    parse_release,
)

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
VERSION_LABEL = "app.kubernetes.io/version"
# Short timeouts: these are a few small reads before the real work.
TIMEOUT = (5.0, 10.0)


class ProjectCrd(NamedTuple):
    """The CRD a project's release is read from, and the labels that may carry it."""

    project: str
    name: str
    labels: tuple[str, ...]


PROJECT_CRDS = (
    ProjectCrd(KEDA, "scaledobjects.keda.sh", (VERSION_LABEL,)),
    ProjectCrd(
        KNATIVE, "services.serving.knative.dev", (VERSION_LABEL, "serving.knative.dev/release")
    ),
    ProjectCrd(KSERVE, "inferenceservices.serving.kserve.io", (VERSION_LABEL,)),
)
# What a served CRD says of KServe's release when no label does.
KSERVE_LLM_CRD = "llminferenceservices.serving.kserve.io"
KSERVE_LLM_SINCE = Release(0, 17)


def kubernetes_release(answer: Any) -> Release | None:
    """The minor release of a ``/version`` answer."""
    if not isinstance(answer, dict):
        return None
    major, minor = answer.get("major"), answer.get("minor")
    if isinstance(major, str) and isinstance(minor, str):
        release = parse_release(f"{major}.{minor.rstrip('+')}")
        if release is not None:
            return release
    git = answer.get("gitVersion")
    return parse_release(git) if isinstance(git, str) else None


def crd_release(crd: Any, labels: tuple[str, ...]) -> tuple[Release | None, str]:
    """The release a CRD's labels name, and the label; (None, "") when none does."""
    metadata = crd.get("metadata") if isinstance(crd, dict) else None
    found = metadata.get("labels") if isinstance(metadata, dict) else None
    if not isinstance(found, dict):
        return None, ""
    for label in labels:
        value = found.get(label)
        release = parse_release(value) if isinstance(value, str) else None
        if release is not None:
            return release, label
    return None, ""


def read_versions(api: KubeApi, versions: Versions) -> tuple[Versions, list[str]]:
    """``versions`` with what the cluster says, and a note for each release that could not be
    read. ApiError only when the server cannot be reached at all."""
    notes: list[str] = []
    if versions.known(KUBERNETES).source != OPTION:
        versions = _kubernetes(api, versions, notes)
    for crd in PROJECT_CRDS:
        if versions.known(crd.project).source != OPTION:
            versions = _project(api, crd, versions, notes)
    return versions, notes


def _kubernetes(api: KubeApi, versions: Versions, notes: list[str]) -> Versions:
    try:
        answer = api.get("/version", timeout=TIMEOUT)
    except ApiError as error:
        if error.status is None:
            raise
        answer = None
        notes.append(_unread(versions, KUBERNETES, f"/version answered {error.status}"))
    if answer is not None:
        release = kubernetes_release(answer)
        if release is None:
            notes.append(_unread(versions, KUBERNETES, "/version names no release"))
        else:
            versions = versions.with_release(KUBERNETES, release, CLUSTER, "/version")
    return versions


def _project(api: KubeApi, crd: ProjectCrd, versions: Versions, notes: list[str]) -> Versions:
    try:
        found = api.get(CRD_PATH + crd.name, timeout=TIMEOUT)
    except ApiError as error:
        if error.status is None:
            raise
        if error.status != 404:
            why = f"reading CRD {crd.name} was refused ({error.status})"
            notes.append(_unread(versions, crd.project, why))
        return versions  # 404: not installed, and nothing of it is judged
    release, label = crd_release(found, crd.labels)
    if release is not None:
        return versions.with_release(crd.project, release, CLUSTER, f"CRD {crd.name} {label}")
    # No label (KServe's CRDs carry none): the report's versions line says the release is
    # the default or .gpulint.yaml's; what the cluster serves may still bound it.
    return _kserve_lower_bound(api, versions) if crd.project == KSERVE else versions


def _kserve_lower_bound(api: KubeApi, versions: Versions) -> Versions:
    """A KServe release older than the kinds the cluster serves is raised to the first release
    that has them."""
    if versions.kserve >= KSERVE_LLM_SINCE:
        return versions
    try:
        api.get(CRD_PATH + KSERVE_LLM_CRD, timeout=TIMEOUT)
    except ApiError as error:
        if error.status is None:
            raise
        return versions
    detail = f"at least: it serves {KSERVE_LLM_CRD}"
    return versions.with_release(KSERVE, KSERVE_LLM_SINCE, CLUSTER, detail)


def _unread(versions: Versions, project: str, why: str) -> str:
    source = versions.known(project).source
    said = {
        DEFAULT: f"the default; set {SETTINGS[project]} in .gpulint.yaml or {OPTIONS[project]}",
        CONFIG: f"{SETTINGS[project]} in .gpulint.yaml",
    }.get(source, "")
    judged = f"judged for {versions.named(project)}" + (f" ({said})" if said else "")
    return f"{NAMES[project]}'s release not read from the cluster: {why}; {judged}"
