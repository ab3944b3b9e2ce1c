"""The generated Instruct-FD sets from the command line, as a user runs them (subprocess)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers.launching import run_launch


def launch(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return run_launch([f"out_root={tmp / 'outputs'}", "progress=false", *args], tmp, timeout_s=900)


def test_generate_stage_writes_a_sample_set(tmp_path: Path) -> None:
    proc = launch(
        tmp_path,
        "benchmark.size=sample",
        "benchmark.conversations_per_scenario=1",
        "stage=generate",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = list((tmp_path / "outputs" / "instructfd" / "_data").iterdir())
    assert len(data) == 1 and data[0].name.startswith("sample-n1-g")
    report = json.loads((data[0] / "generation_report.json").read_text())
    assert report["counts"]["instructed_cases"] == 38 and report["counts"]["baselines"] == 29
    assert report["size"] == "sample" and report["persona_source"] == "shipped pool"
    log = proc.stdout + proc.stderr
    assert "instructed cases" in log and "67 cases" in log


def test_bad_persona_file_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "people.jsonl"
    bad.write_text('{"name": "Ann Lee", "age": 40}\n{"name": "Bo Ray", "age": "forty"}\n')
    proc = launch(
        tmp_path, "benchmark.size=full", f"benchmark.persona_file={bad}", "stage=generate"
    )
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert err == [
        f"fdeval: error: benchmark.persona_file: {bad}: line 2: field 'age': expected a whole number "
        f"of years, got 'forty'"
    ]
