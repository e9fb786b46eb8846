"""The releases of Kubernetes, KEDA, Knative and KServe the clusters run: what gpulint judges
for.

Several verdicts depend on them: ``minReplicas: 0`` is valid once HPAScaleToZero is on by
default (Kubernetes 1.37), ``behavior.*.tolerance`` takes effect from 1.35, a cpu/memory
trigger without ``metricType`` fails from KEDA 2.18, KServe spells its deployment modes
``Standard``/``Knative`` from 0.16. Each release comes from, in this order: a command-line
option (``--kubernetes-version`` ...), what the API server says in ``--cluster`` mode and in
the webhook (``gpulint.cluster.versions``), ``.gpulint.yaml`` (``kubernetes-version``,
``keda-version``, ``knative-version``, ``kserve.version``), else the newest minor release
of each when this gpulint was made. Reports say once which releases a run judged for and
where each came from.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# A release as users and projects write it: 1.35, v1.35.2, 2.20.1-rc.0, v0.20.0+abc, 1.35+
# (the ``minor`` of a managed cluster's /version: "35+").
RELEASE = re.compile(r"^v?([0-9]{1,4})\.([0-9]{1,4})\+?(\.[0-9]{1,6})?([-+][0-9A-Za-z.-]{0,64})?$")

KUBERNETES, KEDA, KNATIVE, KSERVE = "kubernetes", "keda", "knative", "kserve"
PROJECTS = (KUBERNETES, KEDA, KNATIVE, KSERVE)
NAMES = {KUBERNETES: "Kubernetes", KEDA: "KEDA", KNATIVE: "Knative", KSERVE: "KServe"}
# Where each is set in .gpulint.yaml, and the option that sets it for one run.
SETTINGS = {
    KUBERNETES: "kubernetes-version",
    KEDA: "keda-version",
    KNATIVE: "knative-version",
    KSERVE: "kserve.version",
}
OPTIONS = {project: f"--{project}-version" for project in PROJECTS}

# Where a release was learnt, weakest first.
DEFAULT, CONFIG, CLUSTER, OPTION = "default", "config", "cluster", "option"
SOURCES = (DEFAULT, CONFIG, CLUSTER, OPTION)
_SAID = {
    DEFAULT: "the default",
    CONFIG: ".gpulint.yaml",
    CLUSTER: "read from the cluster",
    OPTION: "the command line",
}


class Release(NamedTuple):
    """A minor release: (1, 35)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def parse_release(text: str) -> Release | None:
    """``v1.35.2`` -> Release(1, 35); None for what is not a release."""
    match = RELEASE.match(text.strip())
    return Release(int(match.group(1)), int(match.group(2))) if match else None


# The newest minor release of each project on 2026-12-07: Kubernetes v1.37 (the HPAScaleToZero
# beta and the configurable tolerance GA ship in it: kubernetes/kubernetes#139648, #140107),
# KEDA v2.20 (kedacore/keda v2.20.2), Knative Serving knative-v1.23.0, KServe v0.20.0.
NEWEST = {
    KUBERNETES: Release(1, 37),
    KEDA: Release(2, 20),
    KNATIVE: Release(1, 23),
    KSERVE: Release(0, 20),
}


class Known(NamedTuple):
    """One project's release and where it came from (``SOURCES``); ``detail`` says more
    about a release read from the cluster (``/version``, the CRD it was read from)."""

    release: Release
    source: str
    detail: str = ""


class Versions:
    """The release of each project a run judges for (``PROJECTS``)."""

    __slots__ = ("_known",)

    def __init__(self, known: dict[str, Known] | None = None) -> None:
        self._known = {project: Known(NEWEST[project], DEFAULT) for project in PROJECTS}
        self._known.update(known or {})

    def __repr__(self) -> str:
        return f"Versions({self.describe()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Versions) and self._known == other._known

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._known.items())))

    def known(self, project: str) -> Known:
        return self._known[project]

    def release(self, project: str) -> Release:
        return self._known[project].release

    @property
    def kubernetes(self) -> Release:
        return self.release(KUBERNETES)

    @property
    def keda(self) -> Release:
        return self.release(KEDA)

    @property
    def knative(self) -> Release:
        return self.release(KNATIVE)

    @property
    def kserve(self) -> Release:
        return self.release(KSERVE)

    def defaulted(self, project: str) -> bool:
        """Is the project's release the default (nobody said which the clusters run)?"""
        return self._known[project].source == DEFAULT

    def with_release(
        self, project: str, release: Release, source: str, detail: str = ""
    ) -> Versions:
        """A copy with ``project`` at ``release``, unless what is known already comes from a
        stronger source (an option beats the cluster, which beats .gpulint.yaml)."""
        current = self._known[project]
        if SOURCES.index(current.source) > SOURCES.index(source):
            return self
        return Versions({**self._known, project: Known(release, source, detail)})

    def named(self, project: str) -> str:
        """``Kubernetes 1.35``."""
        return f"{NAMES[project]} {self.release(project)}"

    def setting_hint(self, project: str) -> str:
        """How the user says which release the clusters run, for messages that depend on it:
        "" when they did; else "(the default: set kubernetes-version in .gpulint.yaml)"."""
        if not self.defaulted(project):
            return ""
        return f"(the default: set {SETTINGS[project]} in .gpulint.yaml)"

    def describe(self) -> str:
        """One line for reports: ``Kubernetes 1.37, KEDA 2.20, Knative 1.23 and KServe 0.20
        (the defaults: set kubernetes-version, ... in .gpulint.yaml)``."""
        parts = []
        for source in (OPTION, CLUSTER, CONFIG):
            projects = [p for p in PROJECTS if self._known[p].source == source]
            if projects:
                named = []
                for project in projects:
                    detail = self._known[project].detail
                    named.append(self.named(project) + (f" ({detail})" if detail else ""))
                parts.append(f"{_and(named)} ({_SAID[source]})")
        defaulted = [p for p in PROJECTS if self.defaulted(p)]
        if defaulted:
            which = "the default" if len(defaulted) == 1 else "the defaults"
            settings = _and([SETTINGS[p] for p in defaulted])
            parts.append(
                f"{_and([self.named(p) for p in defaulted])} ({which}: set {settings} in "
                ".gpulint.yaml)"
            )
        return "; ".join(parts)

    def as_dict(self) -> dict[str, dict[str, str]]:
        """For the JSON report: project -> {version, source[, detail]}."""
        found: dict[str, dict[str, str]] = {}
        for project in PROJECTS:
            known = self._known[project]
            entry = {"version": str(known.release), "source": known.source}
            if known.detail:
                entry["detail"] = known.detail
            found[project] = entry
        return found


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
