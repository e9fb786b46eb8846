"""Numbers beyond what Kubernetes holds: each rule that reads one reports it where it is
written ("out of range"), and one such value never hides the findings next to it.

The inputs are generated here, at test time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import pytest

from gpulint.core.quantity import (
    QuantityError,
    QuantityOutOfRange,
    parse_quantity,
    shown_value,
)

from .conftest import ROOT, lint_text

T = TypeVar("T")


def _id(value: object) -> str:
    """A short test id for a big parameter."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"int-of-{value.bit_length()}-bits"
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}...{len(text)}-chars"


def _timed(budget: float, action: Callable[[], T]) -> T:
    started = time.perf_counter()
    result = action()
    elapsed = time.perf_counter() - started
    assert elapsed < budget, f"took {elapsed:.1f} s (budget {budget} s)"
    return result


def _lint_cli(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", "lint", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )


# --- rules on out-of-range numbers ---------------------------------------------------------

HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: h, namespace: n}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: d}}
  minReplicas: {min}
  maxReplicas: {max}
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {{type: Utilization, averageUtilization: {utilization}}}
  - type: Pods
    pods:
      metric: {{name: DCGM_FI_DEV_GPU_UTIL}}
      target: {{type: AverageValue, averageValue: {average}}}
"""


def _hpa(**values: str) -> str:
    fields = {"min": "1", "max": "4", "utilization": "80", "average": '"60"', **values}
    return HPA.format(**fields)


def test_a_hex_min_replicas_of_four_thousand_digits_is_gl108_out_of_range() -> None:
    text = _hpa(min="0x" + "f" * 4_000)
    (finding,) = _timed(10, lambda: lint_text(text, select=["GL108"]))
    assert (finding.location.line, finding.location.column) == (6, 3)
    assert finding.message.startswith(
        "HorizontalPodAutoscaler h: minReplicas is out of range. It is a 32-bit integer, at "
        "most 2147483647, not 0xffffffffffffffffffffffffffffff… (4,002 characters)"
    )
    assert finding.fix == "minReplicas: 1"


def test_replicas_beyond_int32_are_gl108_out_of_range() -> None:
    findings = lint_text(_hpa(min="3000000000", max="99999999999"), select=["GL108"])
    assert [(f.location.line, f.headline, f.detail.split(";")[0]) for f in findings] == [
        (
            6,
            "HorizontalPodAutoscaler h: minReplicas is out of range.",
            "It is a 32-bit integer, at most 2147483647, not 3000000000",
        ),
        (
            7,
            "HorizontalPodAutoscaler h: maxReplicas is out of range.",
            "It is a 32-bit integer, at most 2147483647, not 99999999999",
        ),
    ]


def test_an_average_utilization_of_4301_digits_is_gl107_out_of_range() -> None:
    text = _hpa(utilization="1" * 4_301)
    (finding,) = lint_text(text, select=["GL107"])
    assert (finding.location.line, finding.location.column) == (12, 35)
    assert "averageUtilization 1111" in finding.message
    assert "is out of range: it is a 32-bit integer" in finding.message
    assert finding.fix == "averageUtilization: 80"


@pytest.mark.parametrize("written", ["1e3000000", '"1e1000000"', '"' + "7" * 5_000 + '"'], ids=_id)
def test_an_average_value_beyond_any_quantity_is_gl107_out_of_range(written: str) -> None:
    (finding,) = lint_text(_hpa(average=written), select=["GL107"])
    assert (finding.location.line, finding.location.column) == (16, 36)
    assert "is out of range: a Kubernetes quantity holds at most 2^63-1" in finding.message
    assert len(finding.message) < 400


@pytest.mark.parametrize("written", ['".inf"', ".inf", "1.0e+400", '"5000000000%"'])
def test_odd_utilizations_are_reported_without_a_crash(written: str) -> None:
    (finding,) = lint_text(_hpa(utilization=written), select=["GL107"])
    assert finding.location.line == 12
    assert finding.fix == "averageUtilization: 80"


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: d, namespace: n}}
spec:
  template:
    spec:
      containers:
      - name: half
        resources: {{limits: {{nvidia.com/gpu: "0.5"}}}}
      - name: huge
        resources: {{limits: {{nvidia.com/gpu: {huge}}}}}
"""


@pytest.mark.parametrize("huge", ['"1e3000000"', "1e1000000", '"9Ei"', "1" * 4_301], ids=_id)
def test_a_huge_gpu_count_in_one_container_does_not_hide_a_fraction_in_another(
    huge: str,
) -> None:
    findings = lint_text(DEPLOYMENT.format(huge=huge), select=["GL501"])
    assert [(f.location.line, f.location.column) for f in findings] == [(9, 30), (11, 30)]
    half, out = findings
    assert half.headline.endswith("limits nvidia.com/gpu is not a whole number.")
    assert half.detail.startswith("Its value '0.5' is not a whole number")
    assert out.headline.endswith("limits nvidia.com/gpu is out of range.")
    assert "is out of range: a Kubernetes quantity holds at most 2^63-1" in out.detail
    assert out.fix.startswith("nvidia.com/gpu: 1 ")


# --- quantities ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", "1"),
        ("500m", "0.5"),
        ("1.5Gi", "1610612736"),
        ("1E", "1000000000000000000"),
        ("1E3", "1000"),
        ("2e-2", "0.02"),
        ("0.1n", "0.000000001"),  # rounded up to nano, as ParseQuantity does
        ("1e-3000000", "0.000000001"),
        ("-1e-12", "-0.000000001"),
        ("9223372036854775807", "9223372036854775807"),
        ("7Ei", "8070450532247928832"),
        ("0." + "0" * 100_000 + "1", "0.000000001"),
        ("1" * 100_000 + "e-99990", "1111111111.111111112"),
        ("000", "0"),
    ],
    ids=_id,
)
def test_quantities_are_read_as_kubernetes_reads_them(text: str, value: str) -> None:
    quantity = _timed(1, lambda: parse_quantity(text))
    assert quantity.value == Decimal(value)


@pytest.mark.parametrize(
    "value",
    [
        "9223372036854775808",
        "9Ei",
        "1e3000000",
        "1e1000000",
        "1e99999999999999",
        "1" * 4_301,
        "1" * 1_000_000,
        2**63,
        10**5_000,
        1e300,
    ],
    ids=_id,
)
def test_quantities_beyond_two_to_the_63_are_out_of_range_at_once(value: object) -> None:
    started = time.perf_counter()
    with pytest.raises(QuantityOutOfRange) as raised:
        parse_quantity(value)
    assert time.perf_counter() - started < 1
    assert "is out of range: a Kubernetes quantity holds at most 2^63-1" in str(raised.value)
    assert len(str(raised.value)) < 200


def test_a_malformed_quantity_message_stays_short() -> None:
    with pytest.raises(QuantityError) as raised:
        parse_quantity("x" * 1_000_000)
    assert not isinstance(raised.value, QuantityOutOfRange)
    assert "(1,000,000 characters)" in str(raised.value) and len(str(raised.value)) < 200
    assert shown_value(10**5_000) == "an integer of 16,610 bits"


def test_a_json_file_with_a_huge_number_reads_it_as_text(tmp_path: Path) -> None:
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "h", "namespace": "n"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
            "minReplicas": 1,
            "maxReplicas": "MAX",
        },
    }
    # A tab for the JSON reader, and an integer Python cannot even print.
    text = json.dumps(hpa).replace('"MAX"', "9" * 4_301).replace(": ", ":\t")
    path = tmp_path / "hpa.json"
    path.write_text(text)
    result = _lint_cli(path)
    assert "Traceback" not in result.stderr, result.stderr
    findings = json.loads(result.stdout)["findings"]
    (gl108,) = [f for f in findings if f["rule"] == "GL108"]
    assert "not 9999" in gl108["message"] and "(4,301 characters)" in gl108["message"]
    assert "out of range" in gl108["message"]
    assert len(gl108["message"]) < 300
