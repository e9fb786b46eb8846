"""deploy/chart: hostile values never write arguments of ``gpulint serve`` the values do not
say. Rendered by the real helm with ``--set-string`` values holding newlines, ``- --x``,
quotes and ``{{``: every value written into an argument is quoted, so that YAML cannot start
a new list item from it, and the ones that must have a shape (durations, shares, names) are
refused by the schema before anything is rendered. A render either fails on the schema or
gives exactly the expected arguments.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from .test_chart import CHART, KUBERNETES_VERSION, NAMESPACE, RELEASE, run_helm

pytestmark = pytest.mark.slow

PROMETHEUS = "http://prometheus.monitoring.svc:9090"
# The arguments of a render with --set prometheus.url=PROMETHEUS and nothing else.
BASE_ARGS = [
    "--tls-cert=/etc/gpulint/tls/tls.crt",
    "--tls-key=/etc/gpulint/tls/tls.key",
    "--port=8443",
    "--deny-on=error",
    "--deadline=2",
    "--shutdown-delay=5",
    "--configmap-namespaces=monitoring,kserve",
    f"--prometheus={PROMETHEUS}",
]
# What an attacker would have a value write: a second --deny-on, of which the last wins.
INJECTED = "- --deny-on=never"
HOSTILE = [
    f"1h\n{INJECTED}",
    f'x" {INJECTED}',
    f"x\n  {INJECTED}\n",
    "x{{ .Release.Name }}",
    "x'\n- '--deny-on=never",
]
# Values whose shape the schema fixes: any of the hostile ones is refused.
SHAPED = [
    "prometheus.lookback",
    "prometheus.minHistory",
    "prometheus.timeout",
    "prometheus.refresh",
    "serve.readTimeout",
    "serve.tlsCheckInterval",
    "serve.maxBodyBytes",
    "serve.maxConnections",
    "serve.namespace",
    "serve.select[0]",
    "serve.ignore[0]",
    "serve.deadline",
    "serve.denyOn",
    "adapter.configMap",
    "adapter.configMapNamespaces[0]",
    "adapter.configMapLabels.team",
    "clientAuth.caKey",
    "clientAuth.commonName",
    "prometheus.url",
]


def _render(tmp_path: Path, *sets: str) -> subprocess.CompletedProcess[str]:
    return run_helm(
        tmp_path,
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--kube-version",
        KUBERNETES_VERSION,
        "--set",
        f"prometheus.url={PROMETHEUS}",
        *(arg for value in sets for arg in ("--set-string", value)),
    )


def _args(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    (deployment,) = [
        d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "Deployment"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args: list[str] = container["args"]
    return args


def test_the_base_render_has_the_expected_arguments(tmp_path: Path) -> None:
    assert _args(_render(tmp_path)) == BASE_ARGS


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("path", SHAPED)
def test_a_hostile_value_of_a_shaped_field_is_refused_by_the_schema(
    tmp_path: Path, path: str, hostile: str
) -> None:
    sets = [f"{path}={hostile}"]
    if path.startswith("clientAuth."):
        sets += ["clientAuth.enabled=true", "clientAuth.caConfigMap=ca"]
    result = _render(tmp_path, *sets)
    assert result.returncode != 0, _args(result)
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr
    assert path.split("[")[0].rsplit(".", 1)[-1] in result.stderr


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_header_value_stays_inside_its_argument(tmp_path: Path, hostile: str) -> None:
    args = _args(_render(tmp_path, f"prometheus.headers.X-Scope-OrgID={hostile}"))
    assert args == [*BASE_ARGS, f"--prometheus-header=X-Scope-OrgID={hostile}"]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_extra_argument_stays_one_argument(tmp_path: Path, hostile: str) -> None:
    args = _args(_render(tmp_path, f"serve.extraArgs[0]={hostile}"))
    assert args == [*BASE_ARGS, hostile]


@pytest.mark.parametrize(
    ("path", "value", "arg"),
    [
        ("prometheus.lookback", "1h30m", "--lookback=1h30m"),
        ("prometheus.lookback", "86400", "--lookback=86400"),
        ("prometheus.minHistory", "50%", "--min-history=50%"),
        ("prometheus.minHistory", "0.5", "--min-history=0.5"),
    ],
)
def test_durations_and_shares_gpulint_reads_are_written_as_given(
    tmp_path: Path, path: str, value: str, arg: str
) -> None:
    assert _args(_render(tmp_path, f"{path}={value}")) == [*BASE_ARGS, arg]


@pytest.mark.parametrize(
    "path", ["prometheus.headersFromSecrets[0].secretName", "priorityClassName"]
)
def test_names_written_into_the_pod_spec_are_refused_when_hostile(
    tmp_path: Path, path: str
) -> None:
    sets = [f"{path}=x\n  command: [sh]"]
    if "headersFromSecrets" in path:
        sets += [
            "prometheus.headersFromSecrets[0].name=Authorization",
            "prometheus.headersFromSecrets[0].secretKey=header",
        ]
    result = _render(tmp_path, *sets)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr
