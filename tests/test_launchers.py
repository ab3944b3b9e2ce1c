"""The ready sweeps in launchers/: the barge-in delay sweep runs, collects and plots."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_barge_in_sweep_runs_each_delay_and_plots(tmp_path):
    cmd = [
        sys.executable,
        str(ROOT / "launchers" / "barge_in_sweep.py"),
        "--delays",
        "0.5,2",
        f"out_root={tmp_path / 'out'}",
        "progress=false",
        "benchmark.cases=[fresh_pasta_stop__acknowledge]",
    ]
    proc = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900
    )  # two launches
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / "out/instructfd/reference/barge_in_sweep"
    rows = list(csv.DictReader(open(out / "ias_vs_delay.csv")))
    assert [float(r["delay_s"]) for r in rows] == [0.5, 2.0] and "acknowledge" in rows[0]
    assert (out / "ias_vs_delay.png").stat().st_size > 1000
    # collecting again without running finds the same two run folders
    again = subprocess.run(
        cmd[:2] + ["--no-run"] + cmd[2:], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
