"""The replay's pictures: well-formed SVG, Markdown with a text summary and the pictures as
files, and an HTML page that a real browser (Debian's chromium, headless) lays out with every
series drawn."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

from gpulint.engine.config import Settings
from gpulint.inventory import Inventory
from gpulint.replay.model import History, ReplayMetric, ReplaySpec
from gpulint.replay.render import (
    Pictures,
    render_html,
    render_markdown,
    render_svg,
    series_summary,
)
from gpulint.replay.report import Replayed, replay_one

pytestmark = pytest.mark.slow

START = 1_768_435_200.0  # 2026-01-15T00:00:00Z


def spike_replay() -> Replayed:
    """Two hours of 1 pod's worth with a burst of 6 every 20 minutes, on 8 observed pods."""
    metric = ReplayMetric("gpu_utilization", "Pods", "AverageValue", 20.0, "q", cap=100.0)
    spec = ReplaySpec(
        "HorizontalPodAutoscaler",
        "ml",
        "spikes",
        "Deployment",
        "spikes",
        1,
        8,
        None,
        (metric,),
        180.0,
        "test",
        1,
    )
    times = [START + 15 * i for i in range(481)]
    values: list[float | None] = [
        15.0 if i * 15 >= 600 and (i * 15 - 600) % 1200 < 120 else 2.5 for i in range(481)
    ]
    history = History(times, [values], [[8] * 481], [8] * 481)
    return replay_one(spec, history, Inventory(Settings()), compare_fix=True)


def test_svg_is_well_formed_with_each_series() -> None:
    svg = render_svg(spike_replay())
    root = ET.fromstring(svg)
    names = {
        line.get("data-series"): line.get("points", "")
        for line in root.iter("{http://www.w3.org/2000/svg}polyline")
    }
    assert set(names) == {"observed", "simulated", "fixed", "metric", "replayed-metric"}
    assert all(len(points.split()) > 2 for points in names.values())


def test_markdown_sums_each_replay_up_in_text_and_writes_its_picture_to_a_file(
    tmp_path: Path,
) -> None:
    """No picture inline (about 95 KB each as a data URI; a job summary holds 1 MiB): a
    few lines of bars per autoscaler, and the SVG in the --pictures directory, shown from
    --pictures-url when given."""
    replays = [spike_replay() for _ in range(10)]
    out = io.StringIO()
    render_markdown(replays, START, START + 7200, 15, out)
    text = out.getvalue()
    assert "data:" not in text and "<svg" not in text and "![" not in text
    # ten autoscalers in well under 1 MiB (each about 1.6 KB, the fix's verdict and behavior
    # included)
    assert len(text.encode()) < 20_000
    assert text.count("| flaps (reversed within 10 min) |") == 10
    summary = text.split("```\n", 2)[1]
    lines = summary.splitlines()
    assert lines[0] == "replicas, 2026-01-15T00:00 .. 2026-01-15T02:00 (0 to 8):"
    observed, replayed, fixed = (line.split() for line in lines[1:4])
    assert observed == ["observed", "\u2588" * 48, "8"]  # 8 pods throughout, at the top
    assert replayed[0] == "replayed" and len(set(replayed[1])) > 1 and fixed[0] == "with"
    assert lines[4] == "gpu_utilization (target 20):" and lines[5].endswith("2.5..15")

    pictures = Pictures(str(tmp_path / "pictures"), "https://ci.example/run/7/")
    out = io.StringIO()
    render_markdown(replays[:2], START, START + 7200, 15, out, pictures)
    text = out.getvalue()
    files = sorted(p.name for p in (tmp_path / "pictures").iterdir())
    assert files == [
        "HorizontalPodAutoscaler-ml-spikes-2.svg",
        "HorizontalPodAutoscaler-ml-spikes.svg",
    ]
    for name in files:
        ET.fromstring((tmp_path / "pictures" / name).read_text())
        assert f"(https://ci.example/run/7/{name})" in text
    named = Pictures(str(tmp_path / "named"))
    out = io.StringIO()
    render_markdown(replays[:1], START, START + 7200, 15, out, named)
    assert "Picture: " in out.getvalue() and "![" not in out.getvalue()
    assert (tmp_path / "named" / "HorizontalPodAutoscaler-ml-spikes.svg").is_file()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# In the page copy only: report each polyline's laid-out box and length into the title.
PROBE = (
    "<script>document.title = JSON.stringify([...document.querySelectorAll('polyline')]"
    ".map(p => { const b = p.getBBox(); return [p.dataset.series, b.x, b.width, b.height,"
    " p.getTotalLength()]; }));</script>"
)


def chromium(*args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_html_renders_every_series_in_a_browser(tmp_path: Path) -> None:
    if CHROMIUM is None:
        # CI installs it (.ci/run); elsewhere the test is skipped, never silently under CI.
        missing = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    page = io.StringIO()
    render_html([spike_replay()], START, START + 7200, 15, page)
    html = page.getvalue()
    assert "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )  # offline: no script, nothing fetched
    probed = tmp_path / "probed.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"))
    dom = chromium("--dump-dom", probed.as_uri())
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title is not None
    boxes = {
        name: (x, width, height, length)
        for name, x, width, height, length in json.loads(title.group(1))
    }
    assert set(boxes) == {"observed", "simulated", "fixed", "metric", "replayed-metric"}
    for name, (x, width, _height, length) in boxes.items():
        assert x >= 50 and width > 700 and length > 700, name  # across the whole time axis
    assert boxes["simulated"][2] > 50 and boxes["metric"][2] > 50  # they move

    shot = tmp_path / "page.png"
    plain = tmp_path / "page.html"
    plain.write_text(html)
    chromium(f"--screenshot={shot}", "--window-size=900,700", plain.as_uri())
    width, height, pixels = read_png(shot.read_bytes())
    counts = {"simulated": 0, "metric": 0}
    for y in range(height):
        for x in range(width):
            r, g, b = pixels[y][x]
            if abs(r - 0x1F) < 40 and abs(g - 0x6F) < 40 and abs(b - 0xD1) < 40:
                counts["simulated"] += 1
            if abs(r - 0xE0) < 40 and abs(g - 0x7B) < 40 and b < 60:
                counts["metric"] += 1
    assert counts["simulated"] > 500 and counts["metric"] > 500, counts


def read_png(data: bytes) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """Chromium's screenshot (8-bit RGB or RGBA, not interlaced) as rows of pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, chunks, header = 8, b"", b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks += body
        offset += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6)
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(chunks)
    stride = width * channels
    rows: list[list[tuple[int, int, int]]] = []
    previous = bytearray(stride)
    position = 0
    for _ in range(height):
        kind = raw[position]
        line = bytearray(raw[position + 1 : position + 1 + stride])
        position += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + predictor) & 0xFF
        rows.append([tuple(line[x * channels : x * channels + 3]) for x in range(width)])  # type: ignore[misc]
        previous = line
    return width, height, rows


def test_json_written_piece_by_piece_is_the_contract() -> None:
    """render_json formats the series rows itself; the document is what replay_json
    describes, value for value."""
    from gpulint.replay.render import render_json, replay_json

    replayed = spike_replay()
    out = io.StringIO()
    render_json([replayed, replayed], START, START + 7200, 15, out)
    document = json.loads(out.getvalue())
    expected = json.loads(json.dumps(replay_json(replayed)))
    assert document["replays"] == [expected, expected]
    assert document["range"] == {
        "start": "2026-01-15T00:00:00Z",
        "end": "2026-01-15T02:00:00Z",
        "step_s": 15,
    }


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--pictures", "p"], "--pictures and --pictures-url go with --format markdown"),
        (["--format", "markdown", "--pictures-url", "https://x"], "needs --pictures DIR"),
        (
            ["--format", "markdown", "--pictures", "p", "--pictures-url", "javascript:x"],
            "--pictures-url must be an http(s) URL",
        ),
    ],
)
def test_pictures_options_are_checked_before_any_query(
    options: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpulint.cli import main

    assert main(["replay", "--prometheus", "http://127.0.0.1:9", *options]) == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("form", ["text", "json", "html", "markdown"])
def test_every_format_says_why_an_autoscaler_is_not_replayed(form: str) -> None:
    """One line, the same words in every format (each escaping it its own way)."""
    from gpulint.replay.model import Skipped
    from gpulint.replay.render import render_text

    left = Skipped("ScaledObject", "ml", "web", "lint says it does not scale as written (GL103 x)")
    line = "ScaledObject ml/web not replayed: lint says it does not scale as written (GL103 x)"
    out = io.StringIO()
    if form == "json":
        from gpulint.replay.render import render_json

        render_json([], START, START + 60, 15, out, [left])
        assert json.loads(out.getvalue())["not_replayed"] == [
            {"kind": "ScaledObject", "namespace": "ml", "name": "web", "reason": left.reason}
        ]
        return
    writer = {"text": render_text, "html": render_html, "markdown": render_markdown}[form]
    writer([], START, START + 60, 15, out, skipped=[left])
    shown = {"text": f"{line}\n", "html": f"<p>{line}</p>", "markdown": f"- {line}\n"}[form]
    assert shown in out.getvalue()


def test_an_average_value_panel_draws_the_metric_per_pod() -> None:
    """A KEDA trigger (External, AverageValue 5): the controller compares the query's total
    over the replicas with 5 per pod, so the panel draws the total over the observed replicas
    (84 on 12 pods is 7 a pod, the axis tops at 7.7), not the total against a threshold 17
    times smaller."""
    metric = ReplayMetric("s0-prometheus", "External", "AverageValue", 5.0, "q")
    spec = ReplaySpec(
        "ScaledObject", "ml", "llm", "Deployment", "llm", 1, 20, None,
        (metric,), 60.0, "test", 1,
    )  # fmt: skip
    times = [START + 15 * i for i in range(41)]
    totals: list[float | None] = [84.0 if 10 <= i < 30 else 12.0 for i in range(41)]
    history = History(times, [totals], [[]], [12] * 41)
    replayed = replay_one(spec, history, Inventory(Settings()))
    svg = render_svg(replayed)
    marks = re.findall(r'text-anchor="end">([0-9.e+]+)</text>', svg)
    assert "7.7" in marks and "92.4" not in marks
    assert "s0-prometheus per pod against its target" in svg
    summary = series_summary(replayed)
    assert "s0-prometheus per pod (target 5):" in summary
    assert summary.rstrip().endswith("1..7")
    # the replayed pods' line: the total over the replicas before each sync
    ticks = replayed.run.ticks
    before = [12] + [t.replicas for t in ticks[:-1]]
    assert [t.value for t in ticks] == [
        total / pods for total, pods in zip(totals, before, strict=True) if total is not None
    ]
    assert len({t.replicas for t in ticks}) > 1  # the replicas it divides by change
