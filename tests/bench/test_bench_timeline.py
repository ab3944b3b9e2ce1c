"""The bench's timeline section: today's timeline drawing beside the matplotlib one it replaced,
both drawn in one child process on the same sessions. Structure only, no timing thresholds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from PIL import Image


@pytest.mark.slow
def test_quick_timeline_section_measures_both_drawings_side_by_side(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "fdeval.bench", "--quick", "--only", "timeline", "--out", "out"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sec = json.loads((tmp_path / "out" / "bench.json").read_text())["timeline"]
    raw = sec["raw"]
    assert (
        sec["sessions"] == raw["sessions"] == 16 and raw["rounds"] == 1
    )  # 8 Instruct-FD cases, 8 TACT episodes
    assert (
        len(raw["cpu_s"]["before"]) == len(raw["cpu_s"]["after"]) == len(raw["run_of_draw"]) == 16
    )
    assert all(x > 0 for side in raw["cpu_s"].values() for x in side)
    assert [r["what"].rsplit(", ", 1)[1] for r in sec["rows"]] == [
        "instructfd (8 sessions)",
        "tact (8 sessions)",
        "all (16 sessions)",
    ]
    for r in sec["rows"]:
        assert r["baseline"] == "matplotlib drawing (before issue 28)" and r["unit"] == "CPU-s"
        assert r["ratio"] == pytest.approx(r["value"] / r["baseline_value"])
    assert sec["cpu_s_per_session"] == sec["rows"][-1]["value"]
    drawn = tmp_path / "out" / "work" / "timeline" / "drawn"
    for side in ("before", "after"):
        pngs = sorted((drawn / side).rglob("*.png"))
        assert len(pngs) == 16
        with Image.open(pngs[0]) as im:
            assert im.size == (1440, 630)
    assert "## timeline" in (tmp_path / "out" / "bench.md").read_text()
