"""Which values files a chart is rendered with: the ones its authors render it with.

Many charts do not render with ``values.yaml`` alone: it leaves out what every install sets
(``.Values.secrets.token`` on a map that is not there is a nil pointer), and the authors test
the chart with other files. gpulint renders a chart with, in this order:

* the files ``.gpulint.yaml`` names for it (``chart-values:``, a chart directory glob relative
  to the configuration -> values files relative to the chart), as one unit;
* else each of chart-testing's ``ci/*-values.yaml`` (``ct lint`` renders a chart that has them
  once per file, and not with ``values.yaml`` alone: chart-testing's README, "Linting and
  installing charts"), one unit per file named after it;
* else ``values.yaml``; when that does not render, the sample or per-environment values files
  beside Chart.yaml (``values_sample.yaml``, ``values-prod.yaml`` ...) are tried in turn, and
  the first that renders is used, with a note saying so.

``--helm-values`` files are given after these to every chart of the run.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass

from gpulint.core.paths import display_path

CI_DIRECTORY = "ci"
_CI_VALUES = re.compile(r".+-values\.ya?ml")
# Files beside Chart.yaml that hold values for an install: values_sample.yaml,
# values-prod.yaml, values.dev.yaml, sample-values.yaml, prod_values.yaml.
_BESIDE = re.compile(r"(?:values[-_.].+|.+[-_]values)\.ya?ml")
_FIRST = re.compile(r"sample|example|default|test|ci|dev", re.IGNORECASE)
# Renders tried with files beside Chart.yaml when values.yaml alone does not render.
MAX_BESIDE = 3


@dataclass(frozen=True)
class ChartValues:
    """The values files (paths as the run spells them) one unit renders its chart with, and
    where they were found: ``config`` (``.gpulint.yaml``) or ``ci`` (chart-testing)."""

    files: tuple[str, ...]
    found_in: str

    def shown(self, chart: str) -> str:
        return ", ".join(_relative(file, chart) for file in self.files)


def chosen_values(chart: str, patterns: dict[str, list[str]], base: str) -> list[ChartValues]:
    """The values each unit of ``chart`` is rendered with: one entry per unit, none when
    the chart is rendered with ``values.yaml`` (and, if it fails, the files beside it).
    ``patterns`` is ``chart-values:`` of the configuration, whose directory is ``base``."""
    relative = os.path.relpath(os.path.abspath(chart), os.path.abspath(base)).replace(os.sep, "/")
    for pattern, files in patterns.items():
        if fnmatch.fnmatchcase(relative, pattern.strip("/").removeprefix("./") or "."):
            return [ChartValues(tuple(os.path.join(chart, f) for f in files), "config")]
    return [ChartValues((file,), "ci") for file in ci_values(chart)]


def ci_values(chart: str) -> list[str]:
    """chart-testing's values files of ``chart``: ``ci/*-values.yaml``, sorted."""
    directory = os.path.join(chart, CI_DIRECTORY)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [
        os.path.join(directory, name)
        for name in names
        if _CI_VALUES.fullmatch(name) and os.path.isfile(os.path.join(directory, name))
    ]


def beside_values(chart: str) -> list[str]:
    """Sample and per-environment values files beside Chart.yaml, the ones named like a
    sample or a test environment first, at most ``MAX_BESIDE``."""
    try:
        names = sorted(os.listdir(chart))
    except OSError:
        return []
    found = [
        name
        for name in names
        if _BESIDE.fullmatch(name)
        and name != "values.yaml"
        and os.path.isfile(os.path.join(chart, name))
    ]
    found.sort(key=lambda name: (_FIRST.search(name) is None, name))
    return [os.path.join(chart, name) for name in found[:MAX_BESIDE]]


def unit_name(chart: str, values: ChartValues) -> str:
    """A unit rendered with chart-testing's or the configuration's values is named after
    them: ``charts/server (ci/gpu-values.yaml)``."""
    return f"{display_path(chart)} ({values.shown(chart)})"


def _relative(file: str, chart: str) -> str:
    relative = os.path.relpath(file, chart)
    return relative.replace(os.sep, "/") if not relative.startswith("..") else display_path(file)
