"""The IAS figure is drawn only when what it shows changed: its PNG carries a digest of its data
(`fdeval-key`), read back only from a file whose every chunk checks out."""

from __future__ import annotations

import subprocess
import sys

from fdeval.benchmarks.instructfd.reporting.figure import figure_key, png_key, write_ias_figure

ROWS = [
    {"instruction": "acknowledge", "ias": 0.5, "ias_ci_low": 0.2, "ias_ci_high": 0.8, "n": 4},
    {"instruction": "listen", "ias": 1.0, "ias_ci_low": None, "ias_ci_high": None, "n": 2},
]


def test_same_data_is_not_drawn_again_and_a_damaged_or_changed_one_is(tmp_path):
    png = tmp_path / "ias.png"
    series = [("reference", ROWS)]
    assert write_ias_figure(series, png, "t") is True
    assert png_key(png) == figure_key(series, "t")
    stamp = png.stat().st_mtime_ns
    assert write_ias_figure(series, png, "t") is False and png.stat().st_mtime_ns == stamp
    good = png.read_bytes()
    png.write_bytes(good[: len(good) // 2])  # truncated: no key, drawn again
    assert (
        png_key(png) is None
        and write_ias_figure(series, png, "t") is True
        and png.read_bytes() == good
    )
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF  # one byte inside the image data: its chunk's CRC fails
    png.write_bytes(bytes(flipped))
    assert (
        png_key(png) is None
        and write_ias_figure(series, png, "t") is True
        and png.read_bytes() == good
    )
    changed = [("reference", [{**ROWS[0], "ias": 0.75}, ROWS[1]])]
    assert write_ias_figure(changed, png, "t") is True and png_key(png) == figure_key(
        changed, "t"
    ) != png_key(tmp_path)


def test_a_launch_that_loads_the_benchmark_imports_no_matplotlib():
    """Loading Instruct-FD (every launch of it does) costs no matplotlib: it is imported where a
    figure or a timeline is drawn."""
    code = (
        "import sys, fdeval.benchmarks.instructfd.benchmark, fdeval.report.timeline; "
        "print('matplotlib' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr[-2000:]
